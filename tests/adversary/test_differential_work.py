"""Audit 6 in process: real owner cores answer ``differential.py``'s cases for two owners of different rows
in one row cell, and the no-clock work trace (every call into the project and numpy's Python layer) must be
the same; a kept learner the coordinator chose must not show in a boosted share's work; the pairwise-mask
secure sum's messages must be alike for every owner."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
from differential import (
    BUDGET,
    CASE_IDS,
    CASES,
    XA,
    XB,
    YA,
    YB,
    anonymous,
    boost,
    kept_history,
    skeleton,
    work_trace,
)

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import at_round
from privfed.common.tasks import BoostShareTask
from privfed.proto import serde

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process


@pytest.mark.parametrize(("kind", "case"), CASE_IDS, ids=[f"{k}/{c}" for k, c in CASE_IDS])
def test_two_owners_make_the_samework_trace(kind, case):
    """The technique of test_timing_row_count.py made generic: the calls an owner's answer makes, in order, are
    the same for owner A's rows and owner B's (a fresh spec each, after a warm-up answer that fills the
    module caches: a cache keyed by anything private would show as a miss for one and a hit for the other)."""
    make = CASES[kind][case]
    work_trace(XB[::-1], YB[::-1], make("run-1"))
    (ta, pa), (tb, pb_) = work_trace(XA, YA, make("run-1")), work_trace(XB, YB, make("run-1"))
    assert ta and type(pa) is type(pb_), (pa, pb_)
    assert ta == tb, next((i, a, b) for i, (a, b) in enumerate(zip(ta + [None], tb + [None])) if a != b)


@pytest.mark.parametrize("base", ["lr", "ncc", "stump"])
def test_a_kept_learner_the_coordinator_chose_does_not_show_in_the_work(base):
    """The coordinator keeps a learner of its choice at the largest weight SAMME gives, and asks two one-row
    owners for a boosted share: one whose row the learner misclassifies (its weight saturates high), one whose
    row it classifies right. Their work traces must be the same: else one timing tells whether ``learner(x) !=
    y``, the α = 709 attack of test_refusals_never_depend_on_data.py in time instead of refusals. (The LR fit's
    Newton steps followed ``C`` and not the weights: 22 steps against 12 before the fix.)"""
    spec = BoostShareTask(boost(base, "run-1", n_bins=4), at_round(kept_history(base), 1))
    missed, right = (np.array([[0.0, 0.0]]), np.array([0])), (np.array([[0.9, 0.1]]), np.array([1]))
    work_trace(*right, spec)
    (ta, pa), (tb, pb_) = work_trace(*missed, spec), work_trace(*right, spec)
    assert type(pa) is type(pb_) and ta, (pa, pb_)
    assert ta == tb, next((i, a, b) for i, (a, b) in enumerate(zip(ta + [None], tb + [None])) if a != b)


def _public_sizes(spec) -> tuple[int, ...]:
    """The sizes a secure-sum step's answer follows, all in the task (the coordinator's graph): the neighbours
    whose adverts it carries, the participants and key shares of a masked input, the survivors and dropped."""
    request = getattr(spec, "request", None) or getattr(spec, "secagg", None)
    if request is None:
        return ()
    values = (getattr(request, f.name) for f in dataclasses.fields(request))
    return tuple(len(v) for v in values if isinstance(v, tuple))


def test_every_owner_sends_the_same_pairwise_mask_messages_whatever_its_rows():
    """A boosting run summed by pairwise masks (``secure_sum="secagg"``) over the in-process transport: real owner
    cores and ledgers on two nodes, owners of 7 and 8 rows (one cell) and different rows. Every owner's answer to
    each step (key advert, sealed key shares, masked input, unmasking reply) and its share has the same skeleton
    as every other owner's, owner ids read alike (the sealed shares' lengths, the masked vector's length)."""
    from privfed.common.datasets import load_builtin
    from privfed.common.errors import RoundFailed
    from privfed.deploy.inprocess import InProcessTransport
    from privfed.server.strategies.boosting import BoostingStrategy

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from owner_nodes import owners_over_nodes

    ds = load_builtin("synthetic", n_samples=60, seed=5)
    owners = owners_over_nodes(ds, n_owners=8, n_nodes=2)
    assert {o.n_rows for o in owners} == {7, 8}
    transport = InProcessTransport.with_ledgers(owners, epsilon_budget=BUDGET, secure_sum="secagg")
    ids = sorted(transport.owners)
    answers: dict[tuple[str, str], dict[str, list]] = {}
    fold_tasks = transport.fold_tasks

    def recording(tasks, fold, timeout=None):
        kinds = {task.task_id: (type(task.spec).__name__, _public_sizes(task.spec)) for task in tasks}

        def record(results):
            for r in results:
                proto = serde.result_to_proto(r)
                public = [(w, *(anonymous(v, r.task_id, ids) for v in rest)) for w, *rest in skeleton(proto)]
                answers.setdefault((*kinds[r.task_id], proto.WhichOneof("kind")), {})[r.owner_id] = public
            fold(results)

        return fold_tasks(tasks, record, timeout)

    transport.fold_tasks = recording
    params = BoostingParams(epsilon=2.0, n_classes=2, bounds=ds.bounds, n_rounds=1, n_bins=4, max_owner_rows=40)
    try:
        BoostingStrategy(params, np.random.Generator(np.random.PCG64(11))).run(ids, transport)
    except RoundFailed:  # 60 rows at eps 2: the noisy error may be no better than chance; the messages were sent
        pass
    steps = {(k, r) for k, _, r in answers}
    assert {
        ("SecAggKeysTask", "key_advert"),
        ("SecAggKeysTask", "key_shares"),
        ("SecAggUnmaskTask", "unmask_reply"),
    } <= steps
    assert {("BoostEvaluateTask", "masked_input"), ("BoostShareTask", "boost_share")} <= steps, steps
    # The run id, hence the neighbour graph, is fresh each run, so an owner's neighbour count (its key for the
    # comparison) may be its own: every step must still compare two owners' answers somewhere.
    compared = {(k, r) for (k, _, r), by_owner in answers.items() if len(by_owner) >= 2}
    assert compared == steps, sorted(steps - compared)
    for step, by_owner in answers.items():
        first = next(iter(by_owner.values()))
        assert all(s == first for s in by_owner.values()), (
            step,
            [s for s in by_owner.values() if s != first][0],
            first,
        )
