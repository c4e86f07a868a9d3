"""Issue 20, finding 1 ("Floating point"): a hostile coordinator reads features off which outputs the
owner's float sampler can reach (Mironov, CCS 2012).

Real certificates, a real ``privfed owner`` process with ``--rng secure`` holding five one-row owners
with three integer features in the schema's own bounds [0, 16]. The coordinator sends Laplace and PM
share tasks at the smallest ε the owner accepts and, for every report, replays the owner's sampler:
for each candidate feature value it bisects over the sampler's uniform for a draw that lands exactly
on the observed report. A candidate from which the report is unreachable is ruled out, whatever ε says.

Before the fix (commit dacd6b2, 53-bit uniforms, a fixed 2^-20 grid, no clamp, no ε floor): at
ε = 5.1e-11 per Laplace task all 15 features were pinned exactly after 5 tasks per owner
(5.1e-10 ε debited per owner, labels' k-RR included); at ε = 2.8e-12 per PM task, 5 of 15 after 30.
After it, ε below the floor (1e-5) is refused before any debit, and at the floor no candidate is
ever ruled out: every value in [0, 16] can produce every report. HM (``--mechanism hm``) is at the
floor Duchi's two public atoms alone; its PM branch above ``eps*`` is checked in process
(``test_float_mechanisms.py``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hostile import kind, ledger_history, ncc_task, refusal_code, spent_epsilon

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.mechanisms import EPSILON_FLOOR, make_mechanism
from privfed.common.mechanisms.duchi import duchi_constant
from privfed.common.mechanisms.laplace import laplace_from_uniform
from privfed.common.mechanisms.piecewise import hm_alpha, pm_from_uniform
from privfed.common.mechanisms.snapping import cell_probabilities
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


def reachable(name: str, eps: float, t: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """For each (candidate t, observed report) pair: can the owner's sampler produce that report?

    The attacker replays the release the owner runs (the same functions, fed every double as the
    uniform): :func:`cell_probabilities` bisects over the uniform's bit patterns for the draws that
    land on the report, and the report is reachable iff they have positive probability."""
    mech = make_mechanism(name, epsilon=eps, d=D)
    t = np.asarray(t, dtype=np.float64)
    observed = np.asarray(observed, dtype=np.float64)
    if name == "hm":  # Duchi's two atoms (each with probability > 0 from every t), else HM's PM branch
        atom = serde.reports_from_proto(serde.reports_to_proto(np.array([mech.scale * duchi_constant(eps)])))[0]
        if np.all(np.abs(observed) == atom):
            return np.ones(t.shape, dtype=bool)
        assert hm_alpha(mech.attribute_epsilon) > 0, "a report off Duchi's atoms from HM's Duchi branch alone"
    if name == "laplace":

        def release(u, sign):
            return laplace_from_uniform(t, u.copy(), sign * mech.scale, grid=mech.output_grid)

    else:

        def release(u, sign):
            return pm_from_uniform(t, u.copy(), sign, mech.attribute_epsilon, mech.output_grid, mech.scale)

    return cell_probabilities(release, observed) > 0


def attack(coordinator, node, name: str, eps: float) -> tuple[list[int], list[int], float]:
    """ROUNDS share tasks per owner; after each round, how many (owner, feature) pairs are pinned down,
    how many candidates are left per (owner, feature), and the ε the owners' ledgers recorded."""
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
                if name in ("pm", "hm") and report[j] == 0.0:
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
    return pinned, [int(a.sum()) for a in alive.values()], spent


def _bounds_pb():
    return serde.bounds_to_proto(BOUNDS)


@pytest.mark.parametrize("name", ["laplace", "pm", "hm"])
def test_replaying_the_sampler_rules_out_no_candidate(coordinator, owners, name):
    node = owners("owner-0", X, Y, rng="secure", lo=LO, hi=HI, classes=2)
    eps = smallest_accepted(name, D)
    assert eps == pytest.approx(EPSILON_FLOOR, rel=0.01), "the public floor is the smallest epsilon a mechanism takes"
    below = ncc_task(f"{name}-below", node.owner_ids[0], d=D, epsilon=EPSILON_FLOOR / 2, label_epsilon=EPSILON_FLOOR)
    refused = coordinator.run([below])[below.task_id]
    assert kind(refused) == "refusal" and refusal_code(refused) == "invalid_task", refused
    assert spent_epsilon(ledger_history(node.ledger, node.owner_ids[0], node.budget)) == 0.0

    pinned, candidates, spent = attack(coordinator, node, name, EPSILON_FLOOR)
    print(
        f"\n{name}: eps per task {EPSILON_FLOOR:g}; (owner, feature) pairs pinned after each round {pinned} "
        f"of {N_OWNERS * D}; fewest candidates left {min(candidates)} of {CANDIDATES.size}; total debited {spent:.3g}"
    )
    assert pinned[-1] == 0, f"{pinned[-1]} of {N_OWNERS * D} features recovered exactly at {spent:.3g} total epsilon"
    assert min(candidates) == CANDIDATES.size, "a report was unreachable from some feature value: the support leaks"
    assert spent == pytest.approx(ROUNDS * N_OWNERS * 2 * EPSILON_FLOOR)  # every release debited (features + label)
