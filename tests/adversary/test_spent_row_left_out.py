"""A row that cannot afford a release is left out of it, alone (audit 16).

Budgets follow the rows (DESIGN, release discipline 5): a row spent under an earlier id (a refreshed data file,
a re-shard, a rename) keeps its account, and an owner policy counts what every id that held the row released.
Until audit 16 one such row kept *every* row of its owner out: the owner answered its kind's fallback, the
release of no rows. For a release private at the row level (a DP-PCA share and its count, a padded NCC share,
an SVM or LR share of many rows) that moved the answer from the rows' release to no rows' on one row's history:
a hostile coordinator that had spent an old file's rows told a refreshed file holding one of them from one
holding a new row at advantage 0.94 from one release at a debited ε = 0.2, where 0.10 is allowed (64-row owners,
over real owner processes too; the policy's path 0.97).

Now each row is judged by its own account (an individual privacy filter, Feldman and Zrnic, NeurIPS 2021): the
release is made from the rows that can afford it. So, exactly, an owner of a spent row and four others answers
what an owner of the four alone answers: same generator, same bytes on the wire, for every case of every kind
the differential harness drives (``differential.CASES``). Both answer through a real :class:`OwnerCore` and the
wire's encoding. The positive control puts the old whole-owner fallback back, and the bytes then differ.
"""

from __future__ import annotations

import numpy as np
import pytest
from differential import BOUNDS, BUDGET, CASE_IDS, CASES, K

from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Debit, Ledger
from privfed.common.tasks import LrShareTask, NccShareTask, PcaShareTask, Task
from privfed.owner import compute as owner_compute
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner
from privfed.owner.policy import OwnerPolicy
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

SPENT_X, SPENT_Y = np.array([[0.05, 0.95]]), np.array([1])  # the old file's row
ROWS_X = np.array([[0.2, 0.8], [0.7, 0.3], [0.5, 0.1], [0.9, 0.9]])
ROWS_Y = np.array([0, 1, 0, 1])
OWNER = "node-1.o00000"


def _core(X, y, history: list[Debit], seed: int, policy: OwnerPolicy | None = None) -> OwnerCore:
    """A fresh id over rows ``X``, ``y`` on a ledger where ``history`` was debited by an earlier id that held the
    old file's row (``SPENT_X``)."""
    ledger = Ledger(":memory:", epsilon_budget=BUDGET, delta_budget=1e-3)
    if history:
        ledger.bind_rows("old-0.o00000", row_digests(SPENT_X, SPENT_Y))
        ledger.debit_many(history)
    keys = tuple(row_digests(X, y))
    owner = LocalOwner(OWNER, X, y, np.random.Generator(np.random.PCG64(seed)), K, BOUNDS, row_keys=keys)
    return OwnerCore([owner], ledger, owner_policy=policy)


def _answer(core: OwnerCore, spec, job: JobInfo | None = None) -> bytes:
    task = Task("t0", OWNER, "run-1", spec)
    wire, refused = serde.task_or_refusal(pb.Task.FromString(serde.task_to_proto(task).SerializeToString()))
    assert refused is None
    (result,) = core.answer([wire], job=job).results
    return serde.result_to_proto(result).SerializeToString()


def _both(spec, history: list[Debit], seed: int, **kw) -> tuple[bytes, bytes]:
    """The answers of an owner of the spent row and the four rows, and of an owner of the four rows alone."""
    with_spent = _core(np.vstack([SPENT_X, ROWS_X]), np.concatenate([SPENT_Y, ROWS_Y]), history, seed, kw.get("policy"))
    alone = _core(ROWS_X, ROWS_Y, [], seed, kw.get("policy"))
    return _answer(with_spent, spec, kw.get("job")), _answer(alone, spec, kw.get("job"))


SPENT = [Debit("old-0.o00000", BUDGET, 0.0, "earlier", "earlier#0")]  # the old row's whole budget


@pytest.mark.parametrize("kind, case", CASE_IDS, ids=[f"{k}-{c}" for k, c in CASE_IDS])
def test_an_owner_of_a_spent_row_answers_what_its_other_rows_alone_answer(kind, case):
    spec = CASES[kind][case]("run-1")
    for seed in (3, 4):
        with_spent, alone = _both(spec, SPENT, seed)
        assert with_spent == alone, (kind, case, seed)


POLICY = OwnerPolicy(max_epsilon_total=10.0)
EARLIER_JOB = JobInfo("job-1", "", "lr", 9.0, 0.0, "")
JOB = JobInfo("job-2", "", "feddpdr", 2.0, 1e-3, "")


@pytest.mark.parametrize(
    "spec",
    [
        PcaShareTask(1.0, 1e-5, 1, BOUNDS, 0.5, "ball"),
        NccShareTask("pm", 1.0, "rr", 0.5, K, BOUNDS),
        LrShareTask("pm", 1.0, 1.0, 1.0, K, BOUNDS),
    ],
    ids=["pca", "ncc-rr", "lr"],
)
def test_a_policy_keeps_out_only_the_row_whose_holders_reach_its_limit(spec):
    """The old row's id spent 9 of the policy's total 10 in another job; this job announces 2: the policy takes
    the job for the new id and keeps that row out of it, and only that row (it summed every holder of any row)."""
    history = [Debit("old-0.o00000", 9.0, 0.0, "earlier", "earlier#0", job=EARLIER_JOB.job_id)]
    for seed in (3, 4):
        with_spent, alone = _both(spec, history, seed, policy=POLICY, job=JOB)
        assert with_spent == alone


def test_the_comparison_catches_the_old_whole_owner_fallback(monkeypatch):
    """Positive control: with one spent row sending the fallback for every row (as before audit 16), the owner of
    the spent row answers otherwise than the owner of the other rows."""

    def whole_owner(kind, task, owner, rows_out):
        if rows_out:
            return owner_compute.fallback_release(kind, task, owner)
        return owner_compute.compute_release(kind, task, owner)

    monkeypatch.setattr("privfed.owner.core.release_from", whole_owner)
    spec = PcaShareTask(1.0, 1e-5, 1, BOUNDS, 0.5, "ball")
    with_spent, alone = _both(spec, SPENT, 3)
    assert with_spent != alone


def test_the_left_out_row_keeps_its_account_and_the_others_are_charged():
    core = _core(np.vstack([SPENT_X, ROWS_X]), np.concatenate([SPENT_Y, ROWS_Y]), SPENT, 3)
    _answer(core, PcaShareTask(1.0, 1e-5, 1, BOUNDS, 0.5, "ball"))
    ledger = core.ledger
    ledger.bind_rows("reader.old", row_digests(SPENT_X, SPENT_Y))
    ledger.bind_rows("reader.new", row_digests(ROWS_X, ROWS_Y))
    assert ledger.rows_spent("reader.old").epsilon == BUDGET  # not a bit more
    assert ledger.rows_spent("reader.new").epsilon == pytest.approx(1.5)  # the subspace's 1.0 and the count's 0.5
