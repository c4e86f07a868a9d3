"""Audit 10: the ledger's work for an answer follows the row count's public cell, not the count.

The ledger keeps an account per row an owner holds (README, "Budgets follow the rows"), and every debit adds
the release to each of them: a Python sum per row and an ``INSERT ... ON CONFLICT`` per row in the debit's
transaction, ~6 us a row (``bench/ledger.py``). The fits work on the row count's public cell
(:mod:`privfed.common.work_rows`, ``test_timing_row_count.py``), but the debit worked on the count itself: a
coordinator timing one answer told an owner of 600 rows from one of 1000 (one cell, ``(512, 1024]``) by ~2.3 ms
of CPU in the debit alone (3.8 against 6.1 ms), and an owner of no rows from one of one row (one statement
less: the first cell, ``test_differential_zero_rows.py``). At a node with a policy the earlier holders' lookup
(``Ledger.row_holders``) reads one key per row as well.

Checked without clocks, on real owner cores and a real ledger file: every SQL statement an answer runs
(SQLite's trace, one line per ``executemany`` row; literals elided, the length of each ``IN`` list kept) and
every per-account sum of the debit are the same for owners of 300, 270 and 257 rows, and for owners of 0 and
1 row, with and without a policy. Positive control: with the accounts bound to the rows alone (the old
binding), the same traces differ.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from privfed.common import ledger_debit, ledger_rows
from privfed.common.bounds import Bounds
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Ledger
from privfed.common.tasks import LrShareTask, Refusal, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner
from privfed.owner.policy import OwnerPolicy

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

D, K = 3, 2
BOUNDS = Bounds.of(0.0, 1.0, D)
OWNER = "node-0.o00000"
SAME_CELL = (300, 270, 257)  # (256, 512]
FIRST_CELL = (0, 1)
POLICY = OwnerPolicy(max_epsilon_per_job=50.0, max_epsilon_per_day=80.0, max_epsilon_total=90.0)
JOB = JobInfo("job-1", "", "lr", 50.0, 1.0, "")


def _normalised(statement: str) -> str:
    """A statement with its literals elided; the length of a list of them stays."""
    statement = re.sub(r"'(?:[^']|'')*'", "S", statement)
    return re.sub(r"\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\b", "N", statement)


def _work(tmp_path, n: int, policy: bool, monkeypatch, work_rows: int | None = None) -> tuple[list[str], int]:
    """The ledger's statements and the debit's per-account sums for an owner of ``n`` rows' second answer
    (the first records the owner as its rows' holder, once per process, as every owner's first does);
    ``work_rows``: the node's declared row count (``privfed owner --work-rows``)."""
    rng = np.random.Generator(np.random.PCG64(n))
    X, y = rng.uniform(0, 1, (n, D)), rng.integers(0, K, n)
    owner = LocalOwner(
        OWNER, X, y, np.random.Generator(np.random.PCG64(1)), K, BOUNDS, row_keys=tuple(row_digests(X, y))
    )
    ledger = Ledger(tmp_path / f"ledger-{n}-{policy}.sqlite", epsilon_budget=100.0, delta_budget=1.0)
    core = OwnerCore([owner], ledger, owner_policy=POLICY if policy else None, work_rows=work_rows)
    spec = LrShareTask("pm", 0.5, 1.0, 1.0, K, BOUNDS)
    core.answer([Task("t0", OWNER, "round-0", spec)], job=JOB)
    sums = 0
    real_add = ledger_debit.add_rounding_up

    def add(*args):
        nonlocal sums
        sums += 1
        return real_add(*args)

    seen: list[str] = []
    with monkeypatch.context() as m:
        m.setattr(ledger_debit, "add_rounding_up", add)
        ledger._db().set_trace_callback(lambda s: seen.append(_normalised(s)))
        (result,) = core.answer([Task("t1", OWNER, "round-1", spec)], job=JOB).results
        ledger._db().set_trace_callback(None)
    ledger.close()
    assert not isinstance(result.payload, Refusal), result.payload
    return seen, sums


@pytest.mark.parametrize("policy", [False, True], ids=["no-policy", "policy"])
@pytest.mark.parametrize("cell", [SAME_CELL, FIRST_CELL], ids=["257-512", "0-1"])
def test_the_ledger_does_the_same_work_for_every_count_of_a_cell(tmp_path, monkeypatch, cell, policy):
    work = [_work(tmp_path, n, policy, monkeypatch) for n in cell]
    statements, sums = work[0]
    assert any("INTO accounts" in s for s in statements), statements
    assert all(w == work[0] for w in work[1:]), [(len(s), c) for s, c in work]
    assert sums >= 2 * max(cell)  # an (ε, δ) sum per account, and at least one account per row
    if policy:
        assert any("FROM holders" in s for s in statements), statements


@pytest.mark.parametrize("policy", [False, True], ids=["no-policy", "policy"])
def test_a_declared_row_count_makes_the_same_work_for_every_cell(tmp_path, monkeypatch, policy):
    """Under ``--work-rows 1024`` owners of 0, 300 and 600 rows (three cells) run the same statements and sums:
    1024 accounts each, pad accounts beside their rows (``tests/adversary/test_declared_rows.py``)."""
    work = [_work(tmp_path, n, policy, monkeypatch, work_rows=1024) for n in (0, 300, 600)]
    assert all(w == work[0] for w in work[1:]), [(len(s), c) for s, c in work]
    assert work[0][1] == 2 * 1024  # an (ε, δ) sum per account


def test_positive_control_accounts_bound_to_the_rows_alone_show_the_count(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger_rows, "work_rows", lambda n: n)
    (a, sums_a), (b, sums_b) = (_work(tmp_path, n, True, monkeypatch) for n in (300, 270))
    assert sum("INTO accounts" in s for s in a) - sum("INTO accounts" in s for s in b) == 30
    assert sums_a - sums_b == 60
