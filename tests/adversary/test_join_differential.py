"""Audit 25: the accept round (``join``) is answered from the announcement, the policy and the owner id's ledger
totals alone, whatever the rows and whoever held them before, and it changes nothing.

A hostile coordinator sends ``join`` tasks under many announcements (well formed, malformed on the wire, past
every policy limit, another data user, another schema, an unknown task, a job already spent, none at all) to
owners that share one id and one id-level history (what the coordinator asked of the id) but hold different
rows: 3 rows, none, 7 others, and rows of which one (or all) an earlier id held and spent past the policy's day
and total limits (a re-sharded file: ``common/ledger_rows.py``, ``rows_kept_out`` in ``owner/policy.py``). The
policy's per-row rule applies at release time only; a join must not show it. For each announcement, compared
across the owners, with no clock:

* the answer's wire bytes (an acceptance or a refusal: code and text);
* every SQL statement the ledger runs for it (SQLite's trace, literals and ``IN`` lists elided);
* every call into the project's code and numpy's Python layer (``differential.traced_answer``'s profile).

And a join changes nothing: the ledger file's dump is the same before and after a storm of joins (many job ids,
the same one again, duplicated task ids), and the release made after it is byte for byte the release of a twin
core that was never asked to join (same seed: no draw, no debit, no cache a join filled or emptied).

The positive controls make the join read the rows' holders (the release-time rule) or the row count, and the
comparisons then fail.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from differential import BOUNDS, K, traced_answer

from privfed.common.ledger import Debit, Ledger
from privfed.common.tasks import JoinTask, LrShareTask, Task
from privfed.owner import core as owner_core
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner
from privfed.owner.policy import OwnerPolicy
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde
from privfed.proto.jobwire import job_info_from_proto

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

OWNER = "node-1.o00000"
OLD = ("old-0.o00000", "old-1.o00000", "old-2.o00000")
SCHEMA = "ab" * 32
D = 2
BUDGET = 100.0

ROWS = {
    "three": (np.array([[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]]), np.array([0, 0, 0])),
    "none": (np.zeros((0, D)), np.zeros(0, dtype=np.int64)),
    "seven": (np.linspace(0.05, 0.95, 14).reshape(7, D), np.array([1, 0, 1, 1, 0, 1, 0])),
    "one-held": (np.array([[0.05, 0.95], [0.2, 0.8], [0.7, 0.3], [0.9, 0.9]]), np.array([1, 0, 1, 1])),
    "all-held": (np.array([[0.05, 0.95], [0.2, 0.8], [0.7, 0.3], [0.9, 0.9]]), np.array([1, 0, 1, 1])),
}
#: How many of each owner's first rows earlier ids held, and how many ids held them (each spent past every limit).
HELD = {"one-held": (1, 1), "all-held": (4, 3)}

POLICIES = {
    "none": None,
    "limits": OwnerPolicy(
        max_epsilon_per_job=2.5, max_delta_per_job=1e-5, max_epsilon_per_day=3.3, max_epsilon_total=3.2
    ),
    "strict": OwnerPolicy(
        tasks=("lr", "ncc"),
        max_epsilon_per_job=2.0,
        max_delta_per_job=1e-5,
        max_epsilon_per_day=3.0,
        max_epsilon_total=5.0,
        data_users=("alice",),
        schema_sha256=SCHEMA,
    ),
}

#: The job the owners' id released in before the joins (the same releases for every owner: the coordinator's).
SPENT_JOB = pb.JobInfo(job_id="job-a", data_user="alice", task="lr", epsilon=1.0, delta=0.0, schema_sha256=SCHEMA)


def _job(**kw) -> pb.JobInfo:
    fields = {"job_id": "job-b", "data_user": "alice", "task": "lr", "epsilon": 1.0, "delta": 0.0,
              "schema_sha256": SCHEMA} | kw  # fmt: skip
    return pb.JobInfo(**fields)


#: Hostile announcements, as the wire carries them (None: no announcement). A malformed one reaches the core as
#: none, as a node decodes it (``OwnerNode._take_job``).
ANNOUNCEMENTS: dict[str, pb.JobInfo | None] = {
    "ok": _job(),
    "at-the-job-limit": _job(epsilon=2.0),
    "just-over-the-job-limit": _job(epsilon=2.0000001),
    "over-the-day-limit": _job(epsilon=2.4),
    "over-the-total-limit": _job(epsilon=2.3),
    "zero": _job(epsilon=0.0),
    "huge": _job(epsilon=1e308),
    "infinite": _job(epsilon=math.inf),
    "delta-over": _job(delta=1e-3),
    "delta-one": _job(delta=1.0),
    "unknown-task": _job(task="xyz"),
    "no-task": _job(task=""),
    "other-task": _job(task="nb"),
    "other-data-user": _job(data_user="mallory"),
    "no-data-user": _job(data_user=""),
    "other-schema": _job(schema_sha256="cd" * 32),
    "no-schema": _job(schema_sha256=""),
    "the-spent-job": SPENT_JOB,
    "the-spent-job-again-larger": _job(job_id="job-a", epsilon=2.5),
    "the-held-rows-job": _job(job_id="old-job"),
    "malformed-negative": _job(epsilon=-1.0),
    "malformed-nan": _job(epsilon=math.nan),
    "malformed-no-id": _job(job_id=""),
    "malformed-long-id": _job(job_id="x" * 300),
    "malformed-delta": _job(delta=2.0),
    "none": None,
}


def _decoded(message: pb.JobInfo | None):
    try:
        return job_info_from_proto(message, True) if message is not None else None
    except Exception:  # noqa: BLE001 - a malformed announcement: the node answers as for none
        return None


def _normalised(statement: str) -> str:
    statement = re.sub(r"'(?:[^']|'')*'", "S", statement)
    statement = re.sub(r"\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\b", "N", statement)
    return re.sub(r"\((?:[SN], ?)*[SN]\)", "(list)", statement)


def _core(rows: str, policy: OwnerPolicy | None, seed: int = 7) -> OwnerCore:
    """``OWNER`` over ``ROWS[rows]``; the ids of ``HELD[rows]`` held its first rows before and spent past every
    limit of every policy here, today, in a job of their own (``old-job``). Then the id itself releases 1.0 in
    ``job-a`` (the coordinator's doing, the same for every owner)."""
    X, y = ROWS[rows]
    keys = tuple(row_digests(X, y))
    ledger = Ledger(":memory:", epsilon_budget=BUDGET, delta_budget=1e-3)
    n_held, n_ids = HELD.get(rows, (0, 0))
    for old in OLD[:n_ids]:
        ledger.bind_rows(old, keys[:n_held])
        ledger.debit_many([Debit(old, 10.0, 0.0, "lr", f"{old}-spent#0", job="old-job")])
    owner = LocalOwner(OWNER, X, y, np.random.Generator(np.random.PCG64(seed)), K, BOUNDS, row_keys=keys)
    core = OwnerCore([owner], ledger, owner_policy=policy)
    spec = LrShareTask("pm", 1.0, 1.0, 1.0, K, BOUNDS)
    (result,) = core.answer([Task("pre-0", OWNER, "round-0", spec)], job=_decoded(SPENT_JOB)).results
    assert serde.result_to_proto(result).WhichOneof("kind") != "refusal", result
    return core


def _wire(result) -> bytes:
    return serde.result_to_proto(result).SerializeToString()


def _join(core: OwnerCore, announcement: str, task_id: str = "join-0", owner_id: str = OWNER) -> bytes:
    (result,) = core.answer(
        [Task(task_id, owner_id, "accept", JoinTask())], job=_decoded(ANNOUNCEMENTS[announcement])
    ).results
    return _wire(result)


def _observed(rows: str, policy: str, announcement: str) -> tuple[bytes, list[str], list[tuple[str, str]]]:
    """The join's answer, the ledger's statements and the calls made, for a core over ``rows``."""
    core = _core(rows, POLICIES[policy])
    statements: list[str] = []
    calls: list[tuple[str, str]] = []
    core.ledger._db().set_trace_callback(lambda s: statements.append(_normalised(s)))
    result = traced_answer(
        _JoinAt(core, ANNOUNCEMENTS[announcement]), OWNER, JoinTask(), lambda w, f: calls.append((w, f.f_code.co_name))
    )
    core.ledger._db().set_trace_callback(None)
    return _wire(result), statements, calls


class _JoinAt:
    """``core`` answering under an announcement (``traced_answer`` calls ``answer(tasks)``)."""

    def __init__(self, core: OwnerCore, announcement: pb.JobInfo | None) -> None:
        self._core, self._job = core, _decoded(announcement)

    def answer(self, tasks):
        return self._core.answer(tasks, job=self._job)


def _first_difference(a: list, b: list) -> tuple:
    return next((i, x, y) for i, (x, y) in enumerate(zip(a + [None], b + [None])) if x != y)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_owners_of_any_rows_answer_every_join_alike(policy):
    """For every hostile announcement, the five owners' answers, ledger statements and calls are the same."""
    for announcement in ANNOUNCEMENTS:
        _join(_core("seven", POLICIES[policy]), announcement)  # a warm-up: module caches filled before any trace
        seen = {rows: _observed(rows, policy, announcement) for rows in ROWS}
        (wire, statements, calls) = seen["three"]
        for rows, (w, s, c) in seen.items():
            assert w == wire, (announcement, rows, pb.Result.FromString(w), pb.Result.FromString(wire))
            assert s == statements, (announcement, rows, _first_difference(s, statements))
            assert c == calls, (announcement, rows, _first_difference(c, calls))


def test_the_join_answers_follow_the_announcement_and_the_policy():
    """The announcements do exercise every answer (a differential over one answer would prove little): the
    policies decline by each of their rules, and accept where nothing is passed."""
    said = {
        (policy, a): pb.Result.FromString(_join(_core("three", POLICIES[policy]), a))
        for policy in POLICIES
        for a in ANNOUNCEMENTS
    }
    details = {r.refusal.message for r in said.values() if r.WhichOneof("kind") == "refusal"}
    for rule in ("unannounced", "task", "data_user", "schema", "epsilon_per_job", "delta_per_job",
                 "epsilon_per_day", "epsilon_total"):  # fmt: skip
        assert any(f"rule {rule})" in d for d in details), (rule, details)
    assert any("not part of a job announced as 'xyz'" in d for d in details), details
    assert said[("limits", "ok")].WhichOneof("kind") == "join_accepted"
    assert said[("none", "none")].WhichOneof("kind") == "join_accepted"
    # the id's own spending is what a join counts: the rows' earlier holders spent past every limit in old-job
    assert pb.Result.FromString(_join(_core("all-held", POLICIES["limits"]), "ok")).WhichOneof("kind") == (
        "join_accepted"
    )


def _dump(core: OwnerCore) -> list[str]:
    return list(core.ledger._db().iterdump())


def _storm(core: OwnerCore) -> None:
    """Joins under every announcement, the same job again and again, many job ids, a batch of repeated and foreign
    task ids."""
    for i, announcement in enumerate(ANNOUNCEMENTS):
        for j in range(3):
            _join(core, announcement, task_id=f"join-{i}-{j}")
    for i in range(50):
        core.answer([Task(f"many-{i}", OWNER, "accept", JoinTask())], job=_decoded(_job(job_id=f"job-{i}")))
    batch = [Task("dup", OWNER, "accept", JoinTask())] * 3 + [Task("foreign", "node-2.o00000", "accept", JoinTask())]
    core.answer(batch, job=_decoded(_job()))


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("rows", ["three", "one-held"])
def test_joins_change_no_ledger_state_and_no_later_release(policy, rows):
    """A storm of joins leaves the ledger file as it was, and the release made next (in the job joined and in
    another) is the bytes a twin core never asked to join makes: nothing drawn, debited, cached or counted."""
    stormed, twin = _core(rows, POLICIES[policy]), _core(rows, POLICIES[policy])
    before = _dump(stormed)  # each ledger salts its row digests: compared with itself
    _storm(stormed)
    assert _dump(stormed) == before
    spec = LrShareTask("pm", 1.0, 1.0, 1.0, K, BOUNDS)
    for i, job in enumerate((_job(), _job(job_id="job-a"), _job(job_id="job-c", epsilon=2.0))):
        got = [
            _wire(c.answer([Task(f"after-{i}", OWNER, "round-1", spec)], job=_decoded(job)).results[0])
            for c in (stormed, twin)
        ]
        assert got[0] == got[1], (i, pb.Result.FromString(got[0]), pb.Result.FromString(got[1]))
    assert _entries(stormed) == _entries(twin)


def _entries(core: OwnerCore) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "ts"} for e in core.ledger.history(OWNER)]


def test_a_join_accepted_under_one_announcement_grants_nothing_under_another():
    """The owner keeps no record of what it accepted: a job's tasks are judged by the announcement they come with.
    A coordinator that has a job accepted at ε 1 and then sends its releases announced at ε 2.4 (past the day's
    limit), or under the same id for another data user, is refused as if it had never joined."""
    core = _core("three", POLICIES["strict"])
    assert pb.Result.FromString(_join(core, "ok")).WhichOneof("kind") == "join_accepted"
    spec = LrShareTask("pm", 1.0, 1.0, 1.0, K, BOUNDS)
    for i, (announcement, rule) in enumerate(
        [(_job(epsilon=2.4), "epsilon_per_job"), (_job(data_user="mallory"), "data_user"), (None, "unannounced")]
    ):
        (result,) = core.answer([Task(f"r{i}", OWNER, "round-1", spec)], job=_decoded(announcement)).results
        message = serde.result_to_proto(result)
        assert message.WhichOneof("kind") == "refusal" and f"rule {rule})" in message.refusal.message, message


# ---------------------------------------------------------------- positive controls (a join that reads the rows)


def _check_job_reading_the_holders(self, kind, job, owner_id):
    """``_check_job`` as a join must never be: it asks the release-time rule (the rows' holders) too."""
    original_check_job(self, kind, job, owner_id)
    if job is not None and self.owner_policy is not None:
        if owner_core.rows_kept_out(self.owner_policy, job, self.ledger, owner_id, []):
            raise owner_core.Refused("policy", "the job is declined by the owner's policy (rule epsilon_per_day)")


def _check_job_reading_the_row_count(self, kind, job, owner_id):
    original_check_job(self, kind, job, owner_id)
    if self.owners[owner_id].n_rows == 0:
        raise owner_core.Refused("policy", "the job is declined by the owner's policy (rule task)")


original_check_job = OwnerCore._check_job


@pytest.mark.parametrize("broken", [_check_job_reading_the_holders, _check_job_reading_the_row_count])
def test_positive_control_a_join_that_reads_the_rows_is_caught(monkeypatch, broken):
    monkeypatch.setattr(OwnerCore, "_check_job", broken)
    with pytest.raises(AssertionError):
        test_owners_of_any_rows_answer_every_join_alike("limits")


def test_positive_control_a_join_that_only_looks_at_the_holders_is_caught_by_the_work(monkeypatch):
    """A join that reads the rows' holders and drops what it read: the same answers, other work."""

    def looks(self, kind, job, owner_id):
        original_check_job(self, kind, job, owner_id)
        if self.ledger.row_holders(owner_id):
            self.ledger.spent_on(self.ledger.row_holders(owner_id), job="x")

    monkeypatch.setattr(OwnerCore, "_check_job", looks)
    with pytest.raises(AssertionError, match="FROM|spent_on|row_holder"):
        test_owners_of_any_rows_answer_every_join_alike("none")


def test_positive_control_a_join_that_draws_or_debits_is_caught(monkeypatch):
    original_join = OwnerCore._join

    def draws(self, task, kind, job):
        self.owners[task.owner_id].rng.random()
        return original_join(self, task, kind, job)

    monkeypatch.setattr(OwnerCore, "_join", draws)
    with pytest.raises(AssertionError):
        test_joins_change_no_ledger_state_and_no_later_release("none", "three")
