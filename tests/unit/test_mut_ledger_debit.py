"""Gaps mutation testing found in the ledger's debit (privfed.common.ledger_debit): a row account's δ check and
sum, and a COMMIT that reached the file before it raised. Each is an overspend the other tests did not notice."""

import sqlite3

import pytest

from privfed.common.errors import BudgetExceeded
from privfed.common.ledger import Budget, Ledger, RowsUnused

ROWS = [bytes([i]) * 32 for i in range(2)]


def test_a_row_account_takes_delta_up_to_its_budget_and_never_past_it(tmp_path):
    """Three ids hold row 0 in turn, each asking δ = 4e-6 of 1e-5 (ε is plentiful): each id's own record affords it;
    the row takes the first two (8e-6) and is left out of the third (it would reach 1.2e-5)."""
    with Ledger(tmp_path / "l.sqlite", epsilon_budget=10.0, delta_budget=1e-5) as led:
        for i, expected in enumerate([None, None, (0,)]):
            owner = f"n{i}.o0"
            led.bind_rows(owner, ROWS[:1])
            out = led.debit(owner, 0.1, 4e-6, purpose="p", release_id="r")
            assert out == (None if expected is None else RowsUnused(owner, "r", expected))
            assert led.rows_spent(owner).delta == pytest.approx(4e-6 * min(i + 1, 2), rel=1e-9)
            assert led.spent(owner) == Budget(0.1, 4e-6)  # the id's own record took it either way


def test_a_commit_that_reached_the_file_and_then_raised_is_counted_by_the_next_debit(tmp_path, monkeypatch):
    """A COMMIT may fail after its write reached the file (an fsync error after the WAL write): the ledger must read
    the file again, not keep its earlier record, or the next debit overspends (0.5 + 0.4 + 0.5 of 1.0)."""
    with Ledger(tmp_path / "l.sqlite", epsilon_budget=1.0) as led:
        led.debit("n.o", 0.5, purpose="p", release_id="t1")
        real = led._conn

        class CommitThenFail:
            def __getattr__(self, name):
                return getattr(real, name)

            def execute(self, sql, *args):
                result = real.execute(sql, *args)
                if sql == "COMMIT":
                    raise sqlite3.OperationalError("disk I/O error")
                return result

        monkeypatch.setattr(led, "_conn", CommitThenFail())
        with pytest.raises(sqlite3.OperationalError):
            led.debit("n.o", 0.4, purpose="p", release_id="t2")
        monkeypatch.setattr(led, "_conn", real)
        assert led.spent("n.o") == Budget(0.9)
        with pytest.raises(BudgetExceeded):
            led.debit("n.o", 0.5, purpose="p", release_id="t3")
