"""A ledger's debit and standings read cost the same however long the owner's history is (issue 27),
with the semantics they had: a reused release id is refused after 10^4 releases, another connection's
or process's writes are seen, a batch that fails before COMMIT leaves the cache as it was (one whose
COMMIT fails drops it), a standing's ids are those recorded when it was read, and what a ledger keeps
of an owner in memory does not grow with its history.

Work is counted, never timed: SQLite virtual-machine instructions (``set_progress_handler`` called
at every instruction) and the Python memory a call allocates at its peak (``tracemalloc``), which a
copy of the history (a list of its ε, a set of its ids) would make grow with it."""

import sqlite3
import statistics
import subprocess
import sys
import textwrap
import tracemalloc

import pytest

from privfed.common.errors import BudgetExceeded, LocalProtocolError
from privfed.common.ledger import Budget, Debit, Ledger

LONG = 10_000


def with_history(ledger: Ledger, owner: str, n: int) -> None:
    ledger.debit_many([Debit(owner, 1e-6, 0.0, "p", f"h{i}") for i in range(n)])


def work(ledger: Ledger, call) -> tuple[int, int]:
    """(SQLite instructions, peak Python bytes allocated) of ``call()``."""
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn = ledger._db()
    conn.set_progress_handler(tick, 1)
    tracemalloc.start()
    try:
        call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        conn.set_progress_handler(None, 1)
    return steps, peak


def steady_work(tmp_path, history: int, op: str) -> tuple[int, int]:
    """Median work of 5 ``op`` calls on an owner with ``history`` releases, after its first read."""
    with Ledger(tmp_path / f"l{history}{op}.sqlite", epsilon_budget=1e9) as ledger:
        with_history(ledger, "n.a", history)
        ledger.standings(["n.a"])
        counts = []
        for c in range(5):
            if op == "debit":
                entry = [Debit("n.a", 1e-6, 0.0, "p", f"t{c}")]
                counts.append(work(ledger, lambda: ledger.debit_many(entry)))
            else:
                counts.append(work(ledger, lambda: ledger.standings(["n.a"])))
        return int(statistics.median(s for s, _ in counts)), int(statistics.median(m for _, m in counts))


@pytest.mark.parametrize("op", ["debit", "read"])
def test_a_debit_and_a_read_do_the_same_work_at_10_and_at_10_thousand_releases(tmp_path, op):
    short_steps, short_bytes = steady_work(tmp_path, 10, op)
    long_steps, long_bytes = steady_work(tmp_path, LONG, op)
    assert long_steps == short_steps  # the same statements over the same number of rows
    # a copy of 10^4 floats or ids would allocate >= 80 kB; the calls allocate a few kB either way
    assert long_bytes < short_bytes + 4096, (short_bytes, long_bytes)


def test_the_record_a_ledger_keeps_of_an_owner_does_not_grow_with_its_history(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger(path, epsilon_budget=1e9) as ledger:
        with_history(ledger, "n.short", 10)
        with_history(ledger, "n.long", LONG)
    kept = []
    for owner in ("n.short", "n.long"):
        with Ledger(path, epsilon_budget=1e9) as ledger:
            tracemalloc.start()
            ledger.standings([owner])  # the start-up read: O(the history) once, then kept
            kept.append(tracemalloc.get_traced_memory()[0])
            tracemalloc.stop()
    assert kept[1] < kept[0] + 1024, kept  # 10^4 ids or floats would keep >= 80 kB


def test_a_release_id_is_refused_again_after_ten_thousand_releases(tmp_path):
    with Ledger(tmp_path / "l.sqlite", epsilon_budget=1.0) as ledger:
        with_history(ledger, "n.a", LONG)
        before = ledger.spent("n.a")
        results = ledger.debit_many(
            [Debit("n.a", 1e-6, 0.0, "p", "h0"), Debit("n.a", 1e-6, 0.0, "p", f"h{LONG - 1}")]
            + [Debit("n.a", 1e-6, 0.0, "p", "new"), Debit("n.a", 1e-6, 0.0, "p", "new")]
        )
        assert [type(r) for r in results] == [LocalProtocolError, LocalProtocolError, type(None), LocalProtocolError]
        assert ledger.spent("n.a").epsilon > before.epsilon and len(ledger.history("n.a")) == LONG + 1
        standing = ledger.standings(["n.a"])["n.a"]
        assert "h0" in standing.release_ids and "new" in standing.release_ids and len(standing.release_ids) == LONG + 1


def test_a_standing_keeps_the_ids_of_its_moment_as_the_owner_releases_more(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger(path, epsilon_budget=1.0) as ledger, Ledger(path, epsilon_budget=1.0) as other:
        ledger.debit("n.a", 0.1, purpose="p", release_id="r1")
        early = ledger.standings(["n.a"])["n.a"]
        ledger.debit("n.a", 0.1, purpose="p", release_id="r2")
        other.debit("n.a", 0.1, purpose="p", release_id="r3")  # the first ledger reads the owner again
        late = ledger.standings(["n.a"])["n.a"]
        assert early.release_ids == {"r1"} and "r2" not in early.release_ids and len(early.release_ids) == 1
        assert late.release_ids == {"r1", "r2", "r3"} and sorted(late.release_ids) == ["r1", "r2", "r3"]
        assert early.spent == Budget(0.1) and late.spent.epsilon == pytest.approx(0.3)


def test_what_a_second_ledger_on_the_file_writes_is_seen_by_the_first(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger(path, epsilon_budget=1.0) as a, Ledger(path, epsilon_budget=1.0) as b:
        with_history(a, "n.a", 100)
        assert a.standings(["n.a"])["n.a"].spent.epsilon == pytest.approx(1e-4)  # a's cache holds the owner
        b.debit("n.a", 0.9, purpose="p", release_id="from-b")
        seen = a.standings(["n.a"])["n.a"]
        assert "from-b" in seen.release_ids and seen.spent.epsilon == pytest.approx(0.9001)
        (dup, over) = a.debit_many([Debit("n.a", 0.01, 0.0, "p", "from-b"), Debit("n.a", 0.2, 0.0, "p", "x")])
        assert isinstance(dup, LocalProtocolError) and isinstance(over, BudgetExceeded)


def test_what_another_process_writes_is_seen_by_an_open_ledger(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger(path, epsilon_budget=1.0) as ledger:
        ledger.debit("n.a", 0.5, purpose="p", release_id="here")
        assert ledger.spent("n.a") == Budget(0.5)
        code = f"""
            from privfed.common.ledger import Ledger
            with Ledger({str(path)!r}, epsilon_budget=1.0) as ledger:
                ledger.debit("n.a", 0.5, purpose="p", release_id="there")
        """
        subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, timeout=60)
        assert ledger.spent("n.a") == Budget(1.0) and "there" in ledger.standings(["n.a"])["n.a"].release_ids
        with pytest.raises(BudgetExceeded):
            ledger.debit("n.a", 0.01, purpose="p", release_id="more")


def test_a_batch_that_fails_before_commit_leaves_the_cache_as_it_was(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger(path, epsilon_budget=1.0) as ledger:
        ledger.bind_rows("n.a", [b"row-1"])
        ledger.debit("n.a", 0.25, purpose="p", release_id="r1")
        with sqlite3.connect(path) as admin:  # a real SQLite failure inside the batch's transaction
            admin.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON releases WHEN NEW.release_id = 'boom' "
                "BEGIN SELECT RAISE(ABORT, 'no space left'); END"
            )
        before = ledger.standings(["n.a"])["n.a"]  # read again: another connection wrote the file
        with pytest.raises(sqlite3.IntegrityError, match="no space left"):
            ledger.debit_many([Debit("n.a", 0.5, 0.0, "p", "r2"), Debit("n.a", 0.1, 0.0, "p", "boom")])
        statements: list[str] = []
        ledger._db().set_trace_callback(statements.append)
        after = ledger.standings(["n.a"])["n.a"]
        ledger._db().set_trace_callback(None)
        assert not any("FROM releases WHERE owner_id IN" in s for s in statements)  # the cache, as it was
        assert after == before and after.spent == Budget(0.25) and "r2" not in after.release_ids
        assert ledger.debit_many([Debit("n.a", 0.75, 0.0, "p", "r2")]) == [None]  # nothing of r2 was kept
    with Ledger(path, epsilon_budget=1.0) as again:
        assert again.spent("n.a") == Budget(1.0) and [r["release_id"] for r in again.history("n.a")] == ["r1", "r2"]


def test_a_commit_that_fails_drops_the_cache_and_records_nothing(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger(path, epsilon_budget=1.0) as ledger:
        ledger.debit("n.a", 0.25, purpose="p", release_id="r1")
        with sqlite3.connect(path) as admin:  # a deferred foreign key: checked, and failing, at COMMIT
            admin.executescript(
                "CREATE TABLE parent (id TEXT PRIMARY KEY);"
                "CREATE TABLE child (id TEXT REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);"
                "CREATE TRIGGER late AFTER INSERT ON releases WHEN NEW.release_id = 'late' "
                "BEGIN INSERT INTO child VALUES ('nobody'); END;"
            )
        ledger.standings(["n.a"])  # the cache holds the owner again
        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
            ledger.debit_many([Debit("n.a", 0.5, 0.0, "p", "late")])
        statements: list[str] = []
        ledger._db().set_trace_callback(statements.append)
        standing = ledger.standings(["n.a"])["n.a"]
        ledger._db().set_trace_callback(None)
        assert any("FROM releases WHERE owner_id IN" in s for s in statements)  # read again from the file
        assert standing.spent == Budget(0.25) and "late" not in standing.release_ids and len(standing.release_ids) == 1
