"""Audit 33: an owner's keyed secure-sum sessions do the same work and send the same sizes whatever its data.

A boosting evaluation is the one release that goes through a keyed session: the ring (hops sealed to the ring
neighbours) or the pairwise masks (step 0 a signed mask key, step 1 Shamir shares sealed to the neighbours,
step 2 the masked release, step 3 the unmasking shares). What a hostile coordinator may learn of an owner there is
its noised, debited pair (and, for the pairwise masks, less). So nothing else it sees may depend on the owner's
rows: not which tasks it answers or refuses, not the messages' number, order or sizes, and not the work each step
takes (timing), counted here with no clock as every call into the project's code and numpy's Python layer, with
the shapes of the arrays it is given (``sys.setprofile``, as ``test_differential_row_work.py``).

Two worlds run the same sessions through the real owner cores, the relay and the coordinator's secure-sum
machines (``InProcessTransport``; session ids made the same in both, so the neighbour graph is): node ``owner-0``
hosts the target and one other owner, node ``owner-1`` three more. Only the target's rows differ between the
worlds: ``differential.py``'s owner A (3 rows on the corners and centre, one label, every row misclassified by the
kept learner, its weight saturated) against owner B (4 rows inside the box, both labels): one row cell; and, every
node under ``--work-rows 64``, owner A against an owner of 40 rows (cells 4 and 64: the cell is no public fact
then). Everything ``owner-0``'s core does in either world is recorded per answer (a batch of tasks, or one relayed
envelope) and the records must be equal but for the released values (``differential.RELEASED``)."""

from __future__ import annotations

import gc
import itertools
import secrets
import sys

import numpy as np
import pytest
from differential import BOUNDS, BUDGET, XA, XB, YA, YB, K, _traced, boost, kept_history, skeleton

from privfed.common.boosting.wire import at_round
from privfed.common.errors import RoundFailed
from privfed.common.ledger import Ledger
from privfed.common.secagg.ring import Inbound
from privfed.common.tasks import BoostEvaluateTask
from privfed.deploy.inprocess import InProcessTransport
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner
from privfed.proto import serde

#: No clock, no child process, no socket: run with the in-process suites.
pytestmark = pytest.mark.in_process

TARGET = "owner-0.o00000"
COHOSTED = "owner-0.o00001"
OTHERS = ("owner-1.o00000", "owner-1.o00001", "owner-1.o00002")
#: The other owners' rows: the same in both worlds.
_RNG = np.random.default_rng(33)
OTHER_ROWS = {o: (_RNG.uniform(0.0, 1.0, (4, 2)), _RNG.integers(0, K, 4)) for o in (COHOSTED, *OTHERS)}


def _owner(owner_id: str, X: np.ndarray, y: np.ndarray, seed: int) -> LocalOwner:
    rng = np.random.Generator(np.random.PCG64(seed))
    return LocalOwner(owner_id, X, y, rng, K, BOUNDS, row_keys=tuple(row_digests(X, y)))


#: The padding's entry points, given the ``n`` rows to copy into their public cell (``test_differential_row_work.py``
#: holds every other call to the cell): their shapes are left out here.
PADDING = {("common/work_rows.py", "cell_rows"), ("common/work_rows.py", "pad_rows")}


def _shapes(where: str, frame) -> tuple:
    """The shapes of the arrays a call is given, by argument name, in order."""
    if (where, frame.f_code.co_name) in PADDING:
        return ("padding",)
    return tuple(
        (name, value.shape, value.dtype.str) for name, value in frame.f_locals.items() if isinstance(value, np.ndarray)
    )


def _envelope(data: bytes) -> tuple:
    env = Inbound.from_bytes(data)
    return (env.sender, env.recipient, env.kind.value, env.seq, len(env.ciphertext), len(data))


class _Recorder:
    """Wraps a core's ``answer``: for each answer, the tasks it was given (kind, owner), the calls it made with their
    arrays' shapes, the results' skeletons and the envelopes it sent (header and lengths)."""

    def __init__(self, core) -> None:
        self.answers: list[dict] = []
        self._answer = core.answer
        core.answer = self

    def __call__(self, items, **kw):
        calls: list[tuple] = []

        def profile(frame, event, arg):
            if event == "call" and (where := _traced(frame.f_code.co_filename)) is not None:
                calls.append((where, frame.f_code.co_name, _shapes(where, frame)))

        gc.collect()
        gc.disable()
        sys.setprofile(profile)
        try:
            answer = self._answer(items, **kw)
        finally:
            sys.setprofile(None)
            gc.enable()
        self.answers.append(
            {
                "tasks": [(type(t.spec).__name__, t.owner_id) for t in items],
                "calls": calls,
                "results": [(r.owner_id, skeleton(serde.result_to_proto(r))) for r in answer.results],
                "envelopes": [_envelope(out.to_bytes()) for out in answer.outbound],
            }
        )
        return answer


def _world(
    target_rows, protocol: str, ring: tuple[str, ...], monkeypatch, work_rows: int | None = None
) -> tuple[list[dict], object]:
    """One world's run of the sums (module docstring): owner-0's answers, and the sum's outcome (``work_rows``: every
    node's ``privfed owner --work-rows``)."""
    ids = itertools.count()
    # the same session and run ids in both worlds (the pairwise-mask graph is drawn from them); the masks, nonces
    # and keys stay random (secrets.token_bytes), values the trace does not hold
    monkeypatch.setattr(secrets, "token_hex", lambda n=32: f"{next(ids):0{2 * n}x}")
    owners = [_owner(TARGET, *target_rows, seed=1)]
    owners += [_owner(o, X, y, seed=2 + i) for i, (o, (X, y)) in enumerate(OTHER_ROWS.items())]
    ledgers = {n: Ledger(":memory:", epsilon_budget=BUDGET, delta_budget=1e-3) for n in ("owner-0", "owner-1")}
    transport = InProcessTransport(owners, ledgers, secure_sum=protocol, work_rows=work_rows)
    recorder = _Recorder(transport.cores["owner-0"])
    config = boost("stump", "run-33", n_bins=4)
    history = at_round(kept_history(), 1)
    learner = history.kept[0].learner
    bound = config.releases.contribution_bound
    transport.prepare_secure_sums([ring, ring], max_abs=bound, protocol=protocol)  # keyed for two sums
    try:
        outcome = transport.secure_sum(
            ring,
            lambda spec: BoostEvaluateTask(config, history, learner, spec),
            max_abs=bound,
            round_id="ring1",
            protocol=protocol,
        ).record
        summary = (outcome.protocol, sorted(outcome.summed), outcome.attempts, outcome.dropped, outcome.refused)
    except RoundFailed as exc:
        summary = ("failed", str(exc))
    return recorder.answers, summary


def _released_fields_only(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b), ([x["tasks"] for x in a], [x["tasks"] for x in b])
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        for part in ("tasks", "results", "envelopes"):
            assert x[part] == y[part], (i, part, x["tasks"])
        if x["calls"] != y["calls"]:
            at = next(j for j, (c, d) in enumerate(zip(x["calls"] + [None], y["calls"] + [None])) if c != d)
            pytest.fail(
                f"answer {i} ({x['tasks']}): call {at} differs: {x['calls'][at : at + 3]} / {y['calls'][at : at + 3]}"
            )


RINGS = {
    "ring-leader": ("ring", (TARGET, *OTHERS, COHOSTED)),
    "ring-member": ("ring", (OTHERS[0], COHOSTED, TARGET, *OTHERS[1:])),
    "ring-last": ("ring", (*OTHERS, COHOSTED, TARGET)),
    "secagg": ("secagg", (TARGET, COHOSTED, *OTHERS)),
}


#: Under ``--work-rows`` the row cell is no longer public: owners of 3 and 40 rows (cells 4 and 64) must look alike.
_WIDE = np.random.default_rng(34)
X40, Y40 = _WIDE.uniform(0.0, 1.0, (40, 2)), _WIDE.integers(0, K, 40)
TARGETS = {None: ((XA, YA), (XB, YB)), 64: ((XA, YA), (X40, Y40))}


@pytest.mark.parametrize("work_rows", sorted(TARGETS, key=str), ids=lambda w: f"work-rows-{w}")
@pytest.mark.parametrize("case", sorted(RINGS))
def test_a_keyed_session_does_the_same_work_whatever_the_owners_rows(case, work_rows, monkeypatch):
    protocol, ring = RINGS[case]
    a, b = TARGETS[work_rows]
    _world((XB[::-1], YB[::-1]), protocol, ring, monkeypatch, work_rows)  # warm-up: module caches, lazy imports
    answers_a, outcome_a = _world(a, protocol, ring, monkeypatch, work_rows)
    answers_b, outcome_b = _world(b, protocol, ring, monkeypatch, work_rows)
    assert outcome_a[0] == protocol and outcome_a == outcome_b, (outcome_a, outcome_b)
    kinds = {k for x in answers_a for k, _ in x["tasks"]}
    expected = (
        {"BoostEvaluateTask", "RingMessageTask"}
        if protocol == "ring"
        else {
            "SecAggKeysTask",
            "BoostEvaluateTask",
            "SecAggUnmaskTask",
        }
    )
    assert expected <= kinds, kinds  # every step of the session reached the target's node
    assert any(x["calls"] for x in answers_a)
    _released_fields_only(answers_a, answers_b)
