"""An answer reads the ledger alike whether or not earlier ids held the owner's rows: at a node with a policy
(owner/policy.py, ``rows_kept_out``), and in the first answer after a node starts (``Ledger.load_row_accounts``).

That the rows were held before (another ``--shards`` or ``--name`` of the same file) is what the ledger's
row accounts keep from the coordinator: no refusal says it, and the answer's time must not either. The
rows' limit checks returned early when no earlier id held them, and read each holder's spending in a
statement of its own: one timing of a whole answer told rows held by 4 earlier ids apart at ~0.75
accuracy (``bench/timing_paths.py``, ``ledger/policy-answer``).

Checked without clocks: every SQL statement the ledger runs for an answer (SQLite's trace, literals and
the length of ``IN`` lists elided) is the same for rows held by no, one or three earlier ids; a positive
control puts the early exit back.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Debit, Ledger
from privfed.common.tasks import LrShareTask, Refusal, Task
from privfed.owner import core as owner_core
from privfed.owner import policy as owner_policy
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner
from privfed.owner.policy import OwnerPolicy

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

D, ROWS = 3, 20
BOUNDS = Bounds.of(0.0, 1.0, D)
OWNER = "node-9.o00000"
POLICY = OwnerPolicy(max_epsilon_per_job=50.0, max_epsilon_per_day=80.0, max_epsilon_total=90.0)
JOB = JobInfo("job-1", "", "lr", 50.0, 1.0, "")


def _normalised(statement: str) -> str:
    """A statement with its literals, and the length of its ``IN`` lists (of values, or of (id, run) pairs),
    elided."""
    statement = re.sub(r"'(?:[^']|'')*'", "S", statement)
    statement = re.sub(r"\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\b", "N", statement)
    statement = re.sub(r"\((?:[SN], ?)*[SN]\)", "(list)", statement)
    return re.sub(r"\(list\)(?:, ?\(list\))+", "(list)", statement)


def _core(earlier: int) -> OwnerCore:
    """An owner whose rows ``earlier`` ids held before, each of which spent a little in this job and another."""
    rng = np.random.Generator(np.random.PCG64(3))
    X, y = rng.uniform(0, 1, (ROWS, D)), rng.integers(0, 2, ROWS)
    keys = row_digests(X, y)
    ledger = Ledger(":memory:", epsilon_budget=100.0, delta_budget=1.0)
    for i in range(earlier):
        old = f"node-{i}.o00000"
        ledger.bind_rows(old, keys)
        ledger.debit_many([Debit(old, 0.5, 0.0, "lr", f"{old}-a#0", job="job-1")])
        ledger.debit_many([Debit(old, 0.5, 0.0, "lr", f"{old}-b#0", job="job-0")])
    owner = LocalOwner(OWNER, X, y, np.random.Generator(np.random.PCG64(4)), 2, BOUNDS, row_keys=tuple(keys))
    return OwnerCore([owner], ledger, owner_policy=POLICY)


def _statements(earlier: int) -> list[str]:
    """The ledger's statements for the second answer of a job (the first reads each id's history once)."""
    core = _core(earlier)
    spec = LrShareTask("pm", 0.5, 1.0, 1.0, 2, BOUNDS)
    core.answer([Task("t0", OWNER, "round-0", spec)], job=JOB)
    seen: list[str] = []
    core.ledger._db().set_trace_callback(lambda s: seen.append(_normalised(s)))
    (result,) = core.answer([Task("t1", OWNER, "round-1", spec)], job=JOB).results
    core.ledger._db().set_trace_callback(None)
    assert not isinstance(result.payload, Refusal), result.payload
    return seen


def test_an_answer_reads_the_ledger_alike_whoever_held_the_rows_before():
    fresh, once, thrice = (_statements(n) for n in (0, 1, 3))
    assert fresh == once == thrice
    assert any("FROM holders" in s for s in fresh) and any("job = S" in s for s in fresh)


def _early_exit(policy, job, ledger, owner_id, debits):
    """The rows' check as it was: nothing more to check when no other id held the rows, and one
    reading per id (all the rows kept out, or none, as before audit 16)."""
    holders = ledger.row_holders(owner_id)
    if not holders:
        return frozenset()
    ids = (owner_id, *holders)

    def spent(**which):
        parts = [ledger.spent_on(o, **which) for o in ids]
        return type(parts[0])(math.fsum(p.epsilon for p in parts), math.fsum(p.delta for p in parts))

    held = tuple((h, run) for ids in ledger.row_holder_groups(owner_id) for h, run in ids)
    over = (
        owner_policy.exceeds_announcement(job, ledger, owner_id, debits, holdings=held)
        or policy.over_limit(job, spent) is not None
    )
    return frozenset(range(ROWS)) if over else frozenset()


@pytest.mark.parametrize("earlier", [1, 3])
def test_positive_control_the_early_exit_reads_the_ledger_otherwise(monkeypatch, earlier):
    monkeypatch.setattr(owner_core, "rows_kept_out", _early_exit)
    assert _statements(0) != _statements(earlier)


def _first_answer(tmp_path, earlier: int, policy: OwnerPolicy | None = None) -> list[str]:
    """The ledger's statements for the first answer of a node started on a ledger file in which ``earlier``
    ids held the owner's rows (an earlier process), each with releases of its own; ``policy``: the node's."""
    path = tmp_path / f"ledger-{earlier}-{policy is not None}.sqlite"
    rng = np.random.Generator(np.random.PCG64(3))
    X, y = rng.uniform(0, 1, (ROWS, D)), rng.integers(0, 2, ROWS)
    keys = row_digests(X, y)
    with Ledger(path, epsilon_budget=100.0, delta_budget=1.0) as before:
        for i in range(earlier):
            before.bind_rows(f"node-{i}.o00000", keys)
            for j in range(3):
                before.debit_many([Debit(f"node-{i}.o00000", 0.5, 0.0, "lr", f"e{i}-{j}#0", job="job-0")])
    ledger = Ledger(path, epsilon_budget=100.0, delta_budget=1.0)
    owner = LocalOwner(OWNER, X, y, np.random.Generator(np.random.PCG64(4)), 2, BOUNDS, row_keys=tuple(keys))
    core = OwnerCore([owner], ledger, owner_policy=policy)
    seen: list[str] = []
    ledger._db().set_trace_callback(lambda s: seen.append(_normalised(s)))
    spec = LrShareTask("pm", 0.5, 1.0, 1.0, 2, BOUNDS)
    (result,) = core.answer([Task("t0", OWNER, "round-0", spec)], job=JOB if policy else None).results
    ledger.close()
    assert not isinstance(result.payload, Refusal), result.payload
    return seen


def test_the_first_answer_after_a_start_reads_no_row_account(tmp_path):
    """The node reads its rows' accounts when it starts (``Ledger.load_row_accounts``), so its first answer
    reads none, whether an earlier id made them (an index hit per row) or they are new (a miss): one timing
    of that debit told them apart at 0.98 accuracy (``bench/timing_paths.py``, ``ledger/first-debit``)."""
    traces = [_first_answer(tmp_path, n) for n in (0, 1)]
    assert traces[0] == traces[1]
    assert not [s for s in traces[0] if "accounts AS a" in s or "FROM accounts" in s], traces[0]


def test_positive_control_without_the_start_up_read_the_first_answer_reads_the_accounts(tmp_path, monkeypatch):
    monkeypatch.setattr(Ledger, "load_row_accounts", lambda self: None)
    assert [s for s in _first_answer(tmp_path, 1) if "accounts AS a" in s]


#: The statement that reads an id's whole record into the ledger's cache (``RecordCache.read``).
RECORD_READ = "SELECT owner_id, epsilon, delta, run FROM releases WHERE owner_id IN (list)"


def test_the_first_answer_at_a_node_with_a_policy_reads_no_earlier_holders_record(tmp_path):
    """A policy counts the releases of the ids that held the rows before (``rows_kept_out``). The node reads
    their records when it starts (``Ledger.load_owner_records``), as its own: before, the first answer read the
    holders' in one more statement than an owner whose rows nobody held, so its time told the two apart."""
    traces = [_first_answer(tmp_path, n, POLICY) for n in (0, 1, 3)]
    assert traces[0] == traces[1] == traces[2]
    assert RECORD_READ not in traces[0], traces[0]
    assert any("job = S" in s for s in traces[0])  # the policy's checks ran


def test_positive_control_without_the_start_up_read_the_first_answer_reads_the_holders(tmp_path, monkeypatch):
    monkeypatch.setattr(Ledger, "load_owner_records", lambda self: None)
    fresh, held = (_first_answer(tmp_path, n, POLICY) for n in (0, 1))
    assert fresh != held
    assert held.count(RECORD_READ) == fresh.count(RECORD_READ) + 1
