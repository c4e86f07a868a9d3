"""Issue 20, finding 1 ("Floating point"): a hostile coordinator reads features off which outputs the
owner's float sampler can reach (Mironov, CCS 2012).

Real certificates, a real ``privfed owner`` process with ``--rng secure`` holding five one-row owners
with integer features in the schema's own bounds [0, 16]. The coordinator sends Laplace and PM share
tasks at the smallest ε the owner accepts and, for every report, replays the owner's sampler: for each
candidate feature value it bisects over the sampler's uniform for an input that lands exactly on the
observed report. A candidate from which the report is unreachable is ruled out, whatever ε says.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hostile import kind, ledger_history, ncc_task, spent_epsilon

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.mechanisms import make_mechanism
from privfed.proto import serde

D = 3
N_OWNERS = 5
LO, HI = 0.0, 16.0
CANDIDATES = np.arange(17.0)  # the integer values the schema's bounds allow
ROUNDS = 10
_rng = np.random.default_rng(20)
X = _rng.integers(0, 17, size=(N_OWNERS, D)).astype(float)
Y = _rng.integers(0, 2, size=N_OWNERS)
BOUNDS = Bounds(np.full(D, LO), np.full(D, HI))


def smallest_accepted(name: str, d: int) -> float:
    """The smallest ε (within 1 %) for which the owner's own code builds the mechanism: public behaviour."""
    lo, hi = -320.0, 2.0  # log10 epsilon
    while hi - lo > 0.004:
        mid = (lo + hi) / 2
        try:
            make_mechanism(name, epsilon=10.0**mid, d=d)
            hi = mid
        except ConfigError:
            lo = mid
    return 10.0**hi


def _first(f, lo, hi, increasing):
    """Vectorised bisection over integer indices: the first i in [lo, hi) with f(i) true (hi if none);
    ``f`` is monotone in i (false then true)."""
    lo, hi = np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64)
    while np.any(lo < hi):
        mid = lo + (hi - lo) // 2
        ok = f(mid)
        lo, hi = np.where(ok | (lo >= hi), lo, mid + 1), np.where(ok & (lo < hi), mid, hi)
    return lo


def reachable(name: str, eps: float, t: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """For each (candidate t, observed report) pair: can the owner's sampler produce it?"""
    mech = make_mechanism(name, epsilon=eps, d=D)
    hit = np.zeros(np.broadcast(t, observed).shape, dtype=bool)
    t, observed = np.broadcast_arrays(t, observed)
    for release, lo, hi in _releases(mech):
        for flag in (False, True):
            out = lambda i, f=flag: release(t, i, f)  # noqa: E731
            increasing = out(np.full(t.shape, hi - 1))[0] >= out(np.full(t.shape, lo))[0]
            first = _first(
                lambda i: (out(i) >= observed) if increasing else (out(i) <= observed),
                np.full(t.shape, lo),
                np.full(t.shape, hi),
                increasing,
            )
            hit |= (first < hi) & (out(np.minimum(first, hi - 1)) == observed)
    return hit


def _releases(mech):
    """The sampler of today's code as a function of its uniform index: (release(t, index, flag), lo, hi)."""
    from privfed.common.mechanisms.piecewise import pm_from_uniform

    if mech.__class__.__name__ == "LaplaceMechanism":

        def laplace(t, mag, negative):
            v = np.log(mag.astype(np.float64) * 2.0**-53) * mech.scale
            v = np.copysign(v, -1.0 if negative else 1.0)
            v = v + t
            return np.rint(v * 2.0**20) * 2.0**-20

        return [(laplace, 1, 2**53 + 1)]

    def pm(t, k, _flag):
        return pm_from_uniform(t, k.astype(np.float64) * 2.0**-53, mech.attribute_epsilon, mech.scale)

    return [(pm, 0, 2**53)]


def attack(coordinator, node, name: str, eps: float) -> tuple[list[int], float]:
    """ROUNDS share tasks per owner; after each round, how many (owner, feature) pairs are pinned down."""
    owner_ids = node.owner_ids
    truth = node.rows()
    alive = {(o, j): np.ones(CANDIDATES.size, dtype=bool) for o in owner_ids for j in range(D)}
    t_candidates = BOUNDS.to_unit(np.repeat(CANDIDATES[:, None], D, axis=1))
    pinned = []
    for r in range(ROUNDS):
        tasks = [
            ncc_task(f"{name}-{r}-{i}", o, d=D, epsilon=eps, label_epsilon=eps, mechanism=name, bounds=_bounds_pb())
            for i, o in enumerate(owner_ids)
        ]
        results = coordinator.run(tasks)
        for task in tasks:
            result = results.get(task.task_id)
            assert kind(result) == "ncc_share", f"{name} at eps={eps:.3g} was not answered: {result}"
            report = serde.reports_from_proto(result.ncc_share.reports)[0]
            for j in range(D):
                if name == "pm" and report[j] == 0.0:
                    continue  # Algorithm 4 reports one coordinate per row
                ok = reachable(name, eps, t_candidates[:, j], np.full(CANDIDATES.size, report[j]))
                alive[(task.owner_id, j)] &= ok
        pinned.append(
            sum(
                int(alive[(o, j)].sum() == 1 and CANDIDATES[alive[(o, j)]][0] == truth[o][0][j])
                for o in owner_ids
                for j in range(D)
            )
        )
        for o in owner_ids:
            for j in range(D):
                assert alive[(o, j)][int(truth[o][0][j])], "the true value was ruled out: the replay is wrong"
    spent = math.fsum(spent_epsilon(ledger_history(node.ledger, o, node.budget)) for o in owner_ids)
    return pinned, spent


def _bounds_pb():
    return serde.bounds_to_proto(BOUNDS)


@pytest.mark.parametrize("name", ["laplace", "pm"])
def test_replaying_the_sampler_rules_out_no_candidate(coordinator, owners, name):
    node = owners("owner-0", X, Y, rng="secure", lo=LO, hi=HI, classes=2)
    eps = smallest_accepted(name, D) * 1.02
    pinned, spent = attack(coordinator, node, name, eps)
    print(
        f"\n{name}: eps per task {eps:.3g}; (owner, feature) pairs pinned after each round {pinned} "
        f"of {N_OWNERS * D}; total debited {spent:.3g}"
    )
    assert pinned[-1] == 0, f"{pinned[-1]} of {N_OWNERS * D} features recovered exactly at {spent:.3g} total epsilon"
