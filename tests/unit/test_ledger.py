"""Owner-side privacy ledger (privfed.common.ledger; STYLE rule 7)."""

import hashlib
import logging
import math
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from privfed.common.errors import BudgetExceeded, ConfigError, ConfigTypeError, LocalProtocolError
from privfed.common.ledger import SCHEMA_VERSION, Budget, Debit, Ledger, Recipient, RowsUnused, read_accounts


@pytest.fixture
def path(tmp_path):
    return tmp_path / "ledger.sqlite"


@pytest.fixture
def ledger(path):
    with Ledger(path, epsilon_budget=1.0, delta_budget=1e-5) as led:
        yield led


# ---------------------------------------------------------------- Budget
def test_budget_joint_order():
    a, b = Budget(0.5, 1e-6), Budget(1.0, 1e-5)
    assert a <= b and a < b and b >= a and b > a
    # incomparable pairs: neither is <= the other
    c, d = Budget(0.5, 1e-4), Budget(1.0, 1e-6)
    assert not (c <= d) and not (d <= c) and not (c < d) and not (c > d)
    assert Budget(1.0, 0.0) <= Budget(1.0, 0.0) and not (Budget(1.0) < Budget(1.0))


def test_budget_add_and_inf():
    assert Budget(0.25, 1e-6) + Budget(0.5, 2e-6) == Budget(0.75, 3e-6)
    assert Budget(math.inf) + Budget(1.0) == Budget(math.inf)
    assert Budget(5.0) <= Budget(math.inf) and not (Budget(math.inf) <= Budget(5.0))


@pytest.mark.parametrize(
    "eps, delta", [(-0.1, 0.0), (math.nan, 0.0), (1.0, math.inf), (1.0, -1e-9), ("1", 0.0), (True, 0.0)]
)
def test_budget_invalid(eps, delta):
    with pytest.raises(ConfigError):
        Budget(eps, delta)


# ---------------------------------------------------------------- check / debit
def test_debit_and_spent(ledger):
    ledger.debit("o1", 0.25, 1e-6, purpose="round-1", release_id="r1")
    ledger.debit("o1", 0.5, purpose="round-2", release_id="r2")
    assert ledger.spent("o1") == Budget(0.75, 1e-6)
    assert ledger.remaining("o1") == Budget(0.25, 1e-5 - 1e-6)
    assert ledger.budget("o1") == Budget(1.0, 1e-5)
    assert ledger.spent("o2") == Budget(0.0, 0.0) and ledger.remaining("o2") == Budget(1.0, 1e-5)
    hist = ledger.history("o1")
    assert [h["release_id"] for h in hist] == ["r1", "r2"]
    assert [h["purpose"] for h in hist] == ["round-1", "round-2"]
    assert hist[0]["epsilon"] == 0.25 and hist[0]["delta"] == 1e-6
    assert all(isinstance(h["ts"], str) and len(h["ts"]) == 19 for h in hist)
    assert ledger.has_released("o1", "round-2") and not ledger.has_released("o1", "round-3")
    assert not ledger.has_released("o2", "round-1")


def test_refused_before_overspend_records_nothing(ledger):
    ledger.debit("o1", 0.75, purpose="a", release_id="r1")
    ledger.check("o1", 0.25)  # exactly the remainder fits
    with pytest.raises(BudgetExceeded) as info:
        ledger.check("o1", 0.3)
    msg = str(info.value)
    assert "'o1'" in msg and "0.3" in msg and "0.75" in msg and "epsilon=1" in msg
    with pytest.raises(BudgetExceeded):
        ledger.debit("o1", 0.3, purpose="b", release_id="r2")
    assert ledger.spent("o1") == Budget(0.75)
    assert [h["release_id"] for h in ledger.history("o1")] == ["r1"]
    assert not ledger.has_released("o1", "b")


def test_delta_alone_can_refuse(ledger):
    with pytest.raises(BudgetExceeded):
        ledger.debit("o1", 0.1, 2e-5, purpose="a", release_id="r1")
    assert ledger.history("o1") == []


def test_tolerance_decimal_splits(tmp_path):
    with Ledger(tmp_path / "a.sqlite", epsilon_budget=1.0) as led:
        for i in range(10):
            led.debit("o", 0.1, purpose="p", release_id=f"r{i}")
        with pytest.raises(BudgetExceeded):
            led.check("o", 1e-9)
    with Ledger(tmp_path / "b.sqlite", epsilon_budget=0.3) as led:
        for i in range(3):  # 0.1 + 0.1 + 0.1 rounds above 0.3 in plain double arithmetic
            led.debit("o", 0.1, purpose="p", release_id=f"r{i}")
        assert led.remaining("o").epsilon == pytest.approx(0.0, abs=1e-15)


def test_inf_epsilon_only_with_inf_budget(tmp_path):
    with Ledger(tmp_path / "fin.sqlite", epsilon_budget=1e6) as led:
        with pytest.raises(BudgetExceeded):
            led.debit("o", math.inf, purpose="nonprivate", release_id="r")
        assert led.history("o") == []
    with Ledger(tmp_path / "inf.sqlite", epsilon_budget=math.inf) as led:
        led.debit("o", math.inf, purpose="nonprivate", release_id="r1")
        led.debit("o", 3.0, purpose="more", release_id="r2")
        assert led.spent("o").epsilon == math.inf
        assert led.remaining("o").epsilon == math.inf
        assert led.history("o")[0]["epsilon"] == math.inf
    with Ledger(tmp_path / "inf.sqlite", epsilon_budget=math.inf) as led:  # reopen reads inf back
        assert led.budget("o") == Budget(math.inf)


def test_zero_budget_refuses_everything_positive(tmp_path):
    with Ledger(tmp_path / "z.sqlite", epsilon_budget=0.0) as led:
        led.debit("o", 0.0, purpose="public", release_id="r0")
        with pytest.raises(BudgetExceeded):
            led.check("o", 1e-300)


def test_duplicate_release_id(ledger):
    ledger.debit("o1", 0.25, purpose="a", release_id="r1")
    with pytest.raises(LocalProtocolError, match="already released"):
        ledger.debit("o1", 0.25, purpose="a", release_id="r1")
    assert ledger.spent("o1") == Budget(0.25)
    ledger.debit("o2", 0.25, purpose="a", release_id="r1")  # release ids are per owner
    assert ledger.spent("o2") == Budget(0.25)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(epsilon=-1.0),
        dict(epsilon=math.nan),
        dict(delta=-1e-9),
        dict(delta=1.5),
        dict(delta=math.inf),
        dict(purpose=""),
        dict(release_id=""),
        dict(release_id=3),
        dict(owner_id=""),
        dict(owner_id=None),
    ],
)
def test_debit_invalid_arguments(ledger, kwargs):
    args = dict(owner_id="o", epsilon=0.1, delta=0.0, purpose="p", release_id="r")
    args.update(kwargs)
    with pytest.raises(ConfigError):
        ledger.debit(args.pop("owner_id"), args.pop("epsilon"), args.pop("delta"), **args)
    assert ledger.history("o") == []


@pytest.mark.parametrize("eps, delta", [(-1.0, 0.0), (1.0, 2.0), (math.nan, 0.0), (None, 0.0)])
def test_invalid_ledger_budget(path, eps, delta):
    with pytest.raises(ConfigError):
        Ledger(path, epsilon_budget=eps, delta_budget=delta)


def test_invalid_values_name_the_parameter_and_wrong_types_are_type_errors(path):
    """The shared checkers (common/validation): a TypeError for a wrong type, the range in the message."""
    with pytest.raises(ConfigTypeError, match="^epsilon_budget must be a real number"):
        Ledger(path, epsilon_budget="1")
    with pytest.raises(ConfigError, match=r"^delta_budget is a probability and must be in \[0, 1\], got 2"):
        Ledger(path, epsilon_budget=1.0, delta_budget=2)
    with pytest.raises(ConfigError, match=r"^epsilon must be >= 0 \(or inf\), got -1"):
        Debit("o", -1, 0.0, "p", "r")
    with pytest.raises(ConfigError, match="^delta must be finite and >= 0, got inf"):
        Budget(1.0, math.inf)
    assert Debit("o", math.inf, 0.0, "p", "r").epsilon == math.inf


# ---------------------------------------------------------------- batches
def test_batch_with_one_refused(ledger):
    ledger.debit("o3", 0.9, purpose="earlier", release_id="x")
    entries = [Debit(f"o{i}", 0.5, 0.0, "round-1", "r1") for i in range(6)]
    entries.append(Debit("o1", 0.5, 0.0, "round-2", "r2"))  # second entry of o1 fits exactly
    entries.append(Debit("o1", 0.5, 0.0, "round-3", "r3"))  # third does not
    entries.append(Debit("o2", 0.1, 0.0, "round-1", "r1"))  # duplicate inside the batch
    results = ledger.debit_many(entries)
    assert len(results) == len(entries)
    assert isinstance(results[3], BudgetExceeded) and "'o3'" in str(results[3])
    assert isinstance(results[7], BudgetExceeded)
    assert isinstance(results[8], LocalProtocolError)
    assert all(r is None for i, r in enumerate(results) if i not in (3, 7, 8))
    assert ledger.spent("o1") == Budget(1.0)
    assert ledger.spent("o3") == Budget(0.9)
    assert ledger.spent("o2") == Budget(0.5)
    assert [ledger.spent(f"o{i}").epsilon for i in (0, 4, 5)] == [0.5, 0.5, 0.5]


def test_batch_many_owners_one_transaction(ledger):
    n = 3000  # more owners than one IN (...) chunk
    results = ledger.debit_many([Debit(f"owner-{i}", 0.5, 0.0, "p", "r") for i in range(n)])
    assert results == [None] * n
    again = ledger.debit_many([Debit(f"owner-{i}", 0.5 if i % 2 else 0.75, 0.0, "q", "s") for i in range(n)])
    assert [r is None for r in again] == [i % 2 == 1 for i in range(n)]
    assert ledger.spent("owner-2999") == Budget(1.0) and ledger.spent("owner-0") == Budget(0.5)


def test_batch_rejects_non_debit_without_writing(ledger):
    with pytest.raises(ConfigError):
        ledger.debit_many([Debit("o", 0.1, 0.0, "p", "r"), ("o", 0.1, 0.0, "p", "r2")])
    assert ledger.history("o") == []
    assert ledger.debit_many([]) == []


# ---------------------------------------------------------------- persistence
def test_restart_keeps_spent_and_refuses(path):
    with Ledger(path, epsilon_budget=1.0) as led:
        led.debit("o1", 0.8, purpose="a", release_id="r1")
    with Ledger(path, epsilon_budget=1.0) as led:
        assert led.spent("o1") == Budget(0.8)
        with pytest.raises(BudgetExceeded):
            led.debit("o1", 0.5, purpose="b", release_id="r2")
        with pytest.raises(LocalProtocolError):
            led.debit("o1", 0.1, purpose="a", release_id="r1")


def test_reopen_with_other_budget_is_refused(path):
    with Ledger(path, epsilon_budget=1.0, delta_budget=1e-6) as led:
        led.debit("o1", 0.8, purpose="a", release_id="r1")
    with pytest.raises(ConfigError) as info:
        Ledger(path, epsilon_budget=5.0, delta_budget=1e-6)
    msg = str(info.value)
    assert "'o1'" in msg and "epsilon=1" in msg and "epsilon_budget=5" in msg
    # walkthrough 4, M6: it advised "use a new ledger file", which resets every row's account to zero
    assert "new ledger" not in msg and "raising a stored budget is refused" in msg, msg
    assert "--epsilon-budget 1 --delta-budget 1e-06" in msg and "privfed ledger show" in msg, msg
    with pytest.raises(ConfigError, match="raising a stored budget is refused"):
        Ledger(path, epsilon_budget=1.0, delta_budget=1e-5)
    with Ledger(path, epsilon_budget=1.0, delta_budget=1e-6) as led:  # the stored values still open it
        assert led.remaining("o1").epsilon == pytest.approx(0.2)


def test_reopen_with_a_lower_budget_lowers_it_for_good(path, caplog):
    """Lowering a budget tightens privacy, so it is done (walkthrough 4, M6): the file records the lower budget,
    the owner and its rows are held to it, and the old (higher) budget is then a raise, refused."""
    with Ledger(path, epsilon_budget=8.0) as led:
        led.bind_rows("o1", [hashlib.sha256(b"row-a").digest()])
        led.debit("o1", 1.5, purpose="a", release_id="r1")
    with caplog.at_level(logging.WARNING, logger="privfed.ledger"), Ledger(path, epsilon_budget=2.0) as led:
        assert led.budget("o1") == Budget(2.0)
        assert led.remaining("o1").epsilon == pytest.approx(0.5)
        with pytest.raises(BudgetExceeded):
            led.debit("o1", 1.0, purpose="a", release_id="r2")
        # the same row under a new id: its account is held to 2 too
        led.bind_rows("o2", [hashlib.sha256(b"row-a").digest()])
        assert isinstance(led.debit("o2", 1.0, purpose="a", release_id="r3"), RowsUnused)  # the row left out
    assert "lowered to" in caplog.text
    with pytest.raises(ConfigError, match="raising a stored budget is refused"):
        Ledger(path, epsilon_budget=8.0)
    assert [a.budget for a in read_accounts(path)] == [Budget(2.0), Budget(2.0)]


def test_debit_survives_kill_right_after_return(path):
    script = textwrap.dedent(
        f"""
        import os
        from privfed.common.ledger import Ledger
        led = Ledger({str(path)!r}, epsilon_budget=1.0)
        led.debit("o1", 0.75, purpose="round-1", release_id="r1")
        os._exit(0)  # no close, no cleanup: like kill -9 after the debit returned
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    with Ledger(path, epsilon_budget=1.0) as led:
        assert led.spent("o1") == Budget(0.75)
        assert [h["release_id"] for h in led.history("o1")] == ["r1"]
        with pytest.raises(BudgetExceeded):
            led.check("o1", 0.5)


def test_wal_mode(path, ledger):
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_foreign_file_is_config_error(tmp_path):
    bad = tmp_path / "notadb.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ConfigError, match="notadb"):
        Ledger(bad, epsilon_budget=1.0)
    with pytest.raises(ConfigError):
        Ledger(tmp_path / "missing-dir" / "l.sqlite", epsilon_budget=1.0)


def test_closed_ledger_refuses(path):
    led = Ledger(path, epsilon_budget=1.0)
    led.close()
    led.close()
    with pytest.raises(LocalProtocolError):
        led.debit("o", 0.1, purpose="p", release_id="r")


# --- non-private entries (issue 9, contract 6) and the schema migration -----------------------


def test_nonprivate_entry_is_recorded_apart_from_epsilon(tmp_path):
    with Ledger(tmp_path / "l.sqlite", epsilon_budget=1.0) as led:
        led.debit("o", 1.0, purpose="ncc-features", release_id="t#0")
        led.debit("o", 0.0, purpose="clear-labels", release_id="t#clear-labels", nonprivate=True)
        assert led.spent("o") == Budget(1.0, 0.0)  # the budget is full ...
        assert led.nonprivate_count("o") == 1  # ... and the clear labels are on the record
        assert [(h["purpose"], h["nonprivate"]) for h in led.history("o")] == [
            ("ncc-features", False),
            ("clear-labels", True),
        ]
        assert led.has_release_id("o", "t#clear-labels") and not led.has_release_id("o", "t#1")


@pytest.mark.parametrize("eps,delta", [(0.5, 0.0), (0.0, 1e-6), (math.inf, 0.0)])
def test_nonprivate_entry_with_a_budget_is_rejected(eps, delta):
    with pytest.raises(ConfigError, match="counted apart"):
        Debit("o", eps, delta, "clear-labels", "r", nonprivate=True)


def test_version_1_ledger_is_migrated_in_place(tmp_path):
    path = tmp_path / "v1.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE owners (owner_id TEXT PRIMARY KEY, epsilon_budget REAL NOT NULL, delta_budget REAL NOT NULL,
                             created TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP);
        CREATE TABLE releases (seq INTEGER PRIMARY KEY, owner_id TEXT NOT NULL REFERENCES owners(owner_id),
                               release_id TEXT NOT NULL, purpose TEXT NOT NULL, epsilon REAL NOT NULL,
                               delta REAL NOT NULL, ts TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
                               UNIQUE (owner_id, release_id));
        INSERT INTO owners (owner_id, epsilon_budget, delta_budget) VALUES ('o', 2.0, 0.0);
        INSERT INTO releases (owner_id, release_id, purpose, epsilon, delta) VALUES ('o', 'r1', 'lr-model', 0.5, 0.0);
        PRAGMA user_version = 1;
    """)
    conn.close()
    with Ledger(path, epsilon_budget=2.0) as led:
        assert [(h["release_id"], h["nonprivate"]) for h in led.history("o")] == [("r1", False)]
        led.debit("o", 0.0, purpose="clear-labels", release_id="r2", nonprivate=True)
        assert led.spent("o").epsilon == 0.5 and led.nonprivate_count("o") == 1
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    with Ledger(path, epsilon_budget=2.0) as led:  # reopening a migrated file is a no-op
        assert led.nonprivate_count("o") == 1


def test_a_ledger_of_a_newer_privfed_is_refused_as_one(tmp_path):
    """Walkthrough 9, W9-5: the older privfed called an upgraded ledger "not a privfed ledger"."""
    path = tmp_path / "v9.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 9")
    conn.close()
    for open_it in (lambda: Ledger(path, epsilon_budget=1.0), lambda: read_accounts(path)):
        with pytest.raises(ConfigError, match="written by a newer privfed \\(schema version 9; this one reads 1 to"):
            open_it()


# ----------------------------------------------------------------------------- budgets follow the rows
ROWS = [bytes([i]) * 32 for i in range(4)]  # row digests (privfed.owner.data.row_digests)


def test_a_row_keeps_its_spent_budget_under_any_owner_id_and_partition(path):
    """Issue 20, finding 4, with the filter: owner o0 holding rows 0 and 1 spends 1.5 of 2; after a restart
    with another partition (o5 holds rows 1 and 2) and under another node name (n2.o0 holds row 0), a new
    id's own record decides refusals (a refusal by its rows would tell that a row was spent before), and a
    row that cannot afford a release keeps its account and is left out of it (RowsUnused: the release is made
    from the other rows, audit 16), so no row passes its budget; a row no owner spent on starts at zero."""
    with Ledger(path, epsilon_budget=2.0) as led:
        led.bind_rows("n.o0", ROWS[:2])
        assert led.debit("n.o0", 1.5, purpose="p", release_id="r1") is None
    with Ledger(path, epsilon_budget=2.0) as led:  # restarted, re-sharded and renamed
        led.bind_rows("n.o5", ROWS[1:3])
        led.bind_rows("n2.o0", ROWS[:1])
        led.bind_rows("n2.o1", ROWS[3:])
        assert led.rows_spent("n.o5").epsilon == 1.5 and led.rows_spent("n2.o0").epsilon == 1.5
        assert led.rows_spent("n2.o1").epsilon == 0.0 and led.spent("n.o5").epsilon == 0.0
        assert led.debit("n.o5", 0.6, purpose="p", release_id="r2") == RowsUnused("n.o5", "r2", (0,))  # row 1 out
        assert led.spent("n.o5").epsilon == 0.6 and led.rows_spent("n.o5").epsilon == 1.5  # row 2 took it: 0.6
        assert led.debit("n.o5", 0.5, purpose="p", release_id="r3") is None  # rows 1 and 2 now at 2.0 and 1.1
        assert led.rows_spent("n2.o0").epsilon == 1.5  # row 0 was not in n.o5
        led.bind_rows("n3.o0", ROWS[2:])
        assert math.isclose(led.rows_spent("n3.o0").epsilon, 1.1)
        with pytest.raises(BudgetExceeded):  # the id's own budget refuses: 1.1 spent, 1.0 asked
            led.debit("n.o5", 1.0, purpose="p", release_id="r4")
        assert [h["release_id"] for h in led.history("n.o5")] == ["r2", "r3"]  # the record stays per owner id


def test_the_ids_that_debited_with_an_owners_rows_are_its_row_holders_and_only_they(path):
    """An owner policy counts the releases of the earlier ids of an owner's rows
    (``Ledger.row_holders``): n.o0 debited with rows 0 and 1; after a restart, n.o5 (rows 1, 2) and
    n2.o0 (row 0) name it, n2.o1 (row 3) names nobody, and an id that never debited is named by nobody;
    a release its rows could not afford names its id too (the rows spent nothing on it)."""
    with Ledger(path, epsilon_budget=2.0) as led:
        led.bind_rows("n.o0", ROWS[:2])
        led.bind_rows("n.o1", ROWS[2:3])
        led.debit("n.o0", 1.5, purpose="p", release_id="r1")
        assert led.row_holders("n.o0") == ()
    with Ledger(path, epsilon_budget=2.0) as led:
        led.bind_rows("n.o5", ROWS[1:3])
        led.bind_rows("n2.o0", ROWS[:1])
        led.bind_rows("n2.o1", ROWS[3:])
        assert led.row_holders("n.o5") == ("n.o0",) and led.row_holders("n2.o0") == ("n.o0",)
        assert led.row_holders("n2.o1") == () and led.row_holders("unbound") == ()
        assert led.debit("n.o5", 1.0, purpose="p", release_id="r2") == RowsUnused("n.o5", "r2", (0,))  # row 1 out
        led.debit("n2.o0", 0.5, purpose="p", release_id="r3")
        led.bind_rows("n3.o0", ROWS[:2])
        assert led.row_holders("n3.o0") == ("n.o0", "n.o5", "n2.o0")


def test_a_batch_debit_checks_and_adds_every_account_of_each_owner(ledger):
    ledger.bind_rows("a", ROWS[:2])
    ledger.bind_rows("b", ROWS[2:])
    out = ledger.debit_many(
        [Debit("a", 0.5, 0.0, "p", "r1"), Debit("b", 0.5, 0.0, "p", "r1"), Debit("a", 0.6, 0.0, "p", "r2")]
    )
    assert out[:2] == [None, None] and isinstance(out[2], BudgetExceeded)
    ledger.bind_rows("c", [ROWS[0], ROWS[3]])
    assert ledger.rows_spent("c").epsilon == 0.5 and ledger.spent("c").epsilon == 0.0
    out = ledger.debit_many([Debit("c", 0.25, 0.0, "p", "r1"), Debit("c", 0.5, 0.0, "p", "r2")])
    assert out == [None, RowsUnused("c", "r2", (0, 1))]  # rows 0 and 3 at 0.75: neither takes 0.5 more
    assert ledger.rows_spent("c").epsilon == 0.75 and ledger.spent("c").epsilon == 0.75


def test_standings_of_a_batch_are_what_each_owner_reads_alone(ledger):
    """Issue 27: a node reads a batch's records at once; they must be spent, budget and release ids
    as the per-owner queries give them (rows bound, owners never seen, a debit over the budget)."""
    ledger.bind_rows("a", ROWS[:2])
    ledger.bind_rows("c", [ROWS[1], ROWS[3]])
    ledger.debit_many(
        [Debit("a", 0.5, 0.0, "p", "r1"), Debit("b", 0.25, 1e-6, "p", "r2"), Debit("b", 0.25, 0, "p", "r3")]
    )
    owners = ["a", "b", "c", "never"]
    standings = ledger.standings(owners + ["a"])
    assert list(standings) == owners
    for o in owners:
        s = standings[o]
        assert (s.spent, s.budget) == (ledger.spent(o), ledger.budget(o))
        assert s.release_ids == {r for r in ("r1", "r2", "r3") if ledger.has_release_id(o, r)}
    assert standings["c"].spent.epsilon == 0.0 and ledger.rows_spent("c").epsilon == 0.5  # row 1, spent by a
    ledger.check("c", 0.6, standing=standings["c"])  # c's id decides a refusal: its rows only what they read


def test_row_accounts_are_salted_per_file(tmp_path):
    keys = []
    for name in ("a.sqlite", "b.sqlite"):
        with Ledger(tmp_path / name, epsilon_budget=1.0) as led:
            led.bind_rows("o", ROWS[:1])
            keys.append(led.accounts("o")[0])
            assert ROWS[0].hex() not in keys[-1]
    assert keys[0] != keys[1] and all(k.startswith("row:") for k in keys)


def test_a_version_2_ledger_keeps_each_owners_spent_budget_when_migrated(tmp_path):
    path = tmp_path / "v2.sqlite"
    with Ledger(path, epsilon_budget=2.0) as led:
        led.debit("o", 0.75, purpose="p", release_id="r1")
    conn = sqlite3.connect(path)
    conn.executescript("DROP TABLE accounts; DROP TABLE meta; DROP TABLE schema_decisions; PRAGMA user_version = 2;")
    conn.close()
    with Ledger(path, epsilon_budget=2.0) as led:
        led.bind_rows("o", ROWS[:1])
        assert led.spent("o").epsilon == 0.75
        with pytest.raises(BudgetExceeded):
            led.debit("o", 1.5, purpose="p", release_id="r2")


def test_schema_decisions_are_recorded_and_the_latest_read_back(path):
    with Ledger(path, epsilon_budget=1.0) as led:
        assert led.schema_decision() is None
        led.record_schema("abc", False)
        led.record_schema("def", True)
    with Ledger(path, epsilon_budget=1.0) as led:
        assert led.schema_decision() == ("def", True)


def test_a_debit_another_connection_committed_is_seen_by_the_next_check_and_debit(path):
    # Issue 27: a ledger keeps what it read of an owner's record instead of reading its whole
    # history per debit; a write by another connection (another Ledger on the file) must drop it.
    with Ledger(path, epsilon_budget=1.0) as a, Ledger(path, epsilon_budget=1.0) as b:
        a.bind_rows("n.o", [b"r0", b"r1"])
        b.bind_rows("n.o", [b"r0", b"r1"])
        a.debit("n.o", 0.5, purpose="p", release_id="t1")
        assert a.spent("n.o") == Budget(0.5)  # a's cache now holds the owner's record
        b.debit("n.o", 0.4, purpose="p", release_id="t2")
        assert a.spent("n.o") == Budget(0.9) and a.standings(["n.o"])["n.o"].release_ids == {"t1", "t2"}
        with pytest.raises(BudgetExceeded):
            a.check("n.o", 0.2)
        (error,) = a.debit_many([Debit("n.o", 0.2, 0.0, "p", "t3")])
        assert isinstance(error, BudgetExceeded)
        with pytest.raises(LocalProtocolError, match="already released"):
            a.debit("n.o", 0.05, purpose="p", release_id="t2")  # b's release id, not in a's earlier read
        a.debit("n.o", 0.1, purpose="p", release_id="t4")
        # 1.0 on its id (fsum); its row's account adds each debit rounded up, at most an ulp a debit above
        assert 1.0 <= b.spent("n.o").epsilon <= 1.0 + 3 * 2.0**-52  # three debits
        assert [r["release_id"] for r in b.history("n.o")] == ["t1", "t2", "t4"]


def test_a_debit_that_does_not_commit_leaves_the_kept_record_as_the_file_has_it(path, monkeypatch):
    with Ledger(path, epsilon_budget=1.0) as led:
        led.debit("n.o", 0.5, purpose="p", release_id="t1")
        real = led._conn
        assert real is not None

        class FailingCommit:  # the COMMIT fails after the rows were written in the transaction
            def __getattr__(self, name):
                return getattr(real, name)

            def execute(self, sql, *args):
                if sql == "COMMIT":
                    raise sqlite3.OperationalError("disk I/O error")
                return real.execute(sql, *args)

        monkeypatch.setattr(led, "_conn", FailingCommit())
        with pytest.raises(sqlite3.OperationalError):
            led.debit("n.o", 0.4, purpose="p", release_id="t2")
        monkeypatch.setattr(led, "_conn", real)
        assert led.spent("n.o") == Budget(0.5) and led.standings(["n.o"])["n.o"].release_ids == {"t1"}
        led.debit("n.o", 0.5, purpose="p", release_id="t2")  # t2 was never released: it may be now


# The ``releases`` table of schema version 4, as ``privfed.common.ledger_file`` created it before version 5.
V4_RELEASES = """
    CREATE TABLE releases (
        seq        INTEGER PRIMARY KEY,
        owner_id   TEXT NOT NULL REFERENCES owners(owner_id),
        release_id TEXT NOT NULL,
        purpose    TEXT NOT NULL,
        epsilon    REAL NOT NULL,
        delta      REAL NOT NULL,
        ts         TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
        nonprivate INTEGER NOT NULL DEFAULT 0,
        job        TEXT NOT NULL DEFAULT '',
        UNIQUE (owner_id, release_id)
    );
    CREATE INDEX releases_purpose ON releases (owner_id, purpose);
    CREATE INDEX releases_job ON releases (owner_id, job);
    CREATE INDEX releases_ts ON releases (owner_id, ts);
"""


def _version_4_file(path):
    """A version-4 ledger made with that version's CREATE statements: two owners, three releases."""
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE owners (owner_id TEXT PRIMARY KEY, epsilon_budget REAL NOT NULL, delta_budget REAL NOT NULL,
                             created TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP);
        CREATE TABLE accounts (key TEXT PRIMARY KEY, epsilon REAL NOT NULL, delta REAL NOT NULL);
        CREATE TABLE holders (row_key TEXT NOT NULL, owner_id TEXT NOT NULL, PRIMARY KEY (row_key, owner_id))
            WITHOUT ROWID;
        CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE schema_decisions (seq INTEGER PRIMARY KEY, digest TEXT NOT NULL, accepted INTEGER NOT NULL,
                                       ts TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP);
        INSERT INTO meta (name, value) VALUES ('row_salt', '00112233445566778899aabbccddeeff');
        INSERT INTO owners (owner_id, epsilon_budget, delta_budget) VALUES ('n.o0', 2.0, 1e-5), ('n.o1', 2.0, 1e-5);
        """
        + V4_RELEASES
        + """
        INSERT INTO releases (owner_id, release_id, purpose, epsilon, delta, ts, nonprivate, job) VALUES
            ('n.o0', 'r1', 'ncc-features', 0.5, 0.0, '2026-01-02 03:04:05', 0, 'job-1'),
            ('n.o0', 'r1#labels', 'clear-labels', 0.0, 0.0, '2026-01-02 03:04:05', 1, 'job-1'),
            ('n.o1', 'r2', 'dp-pca', 0.25, 1e-6, '2026-01-03 00:00:00', 0, '');
        PRAGMA user_version = 4;
        """
    )
    conn.close()


def _releases(path):
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT * FROM releases ORDER BY seq").fetchall()
    finally:
        conn.close()


def test_a_version_4_ledger_keeps_every_release_and_records_recipients_from_then_on(tmp_path, caplog):
    path = tmp_path / "v4.sqlite"
    _version_4_file(path)
    before = _releases(path)
    assert [a.owner_id for a in read_accounts(path)] == ["n.o0", "n.o1"]  # the read-only audit reads version 4
    assert {r["data_user"] for a in read_accounts(path) for r in a.releases} == {""}
    with caplog.at_level(logging.WARNING, logger="privfed.ledger"), Ledger(path, epsilon_budget=2.0, delta_budget=1e-5):
        pass  # the upgrade says so, once (walkthrough 9, W9-5: it said nothing, and the older privfed refused the file)
    assert [r.getMessage() for r in caplog.records if "upgraded" in r.getMessage()] == [
        f"ledger {path}: upgraded from schema version 4 to {SCHEMA_VERSION}, every release kept; a privfed older than "
        "this one can no longer open it (to go back, restore the copy `privfed ledger backup` made before the upgrade)"
    ]
    with Ledger(path, epsilon_budget=2.0, delta_budget=1e-5) as led:
        # every old row kept as it was, with '' (unknown) as its recipient and run 0 (before schema 6)
        assert _releases(path) == [row + ("", "", 0) for row in before]
        assert led.spent("n.o0") == Budget(0.5, 0.0) and led.spent("n.o1") == Budget(0.25, 1e-6)
        assert led.nonprivate_count("n.o0") == 1
        with pytest.raises(LocalProtocolError, match="already released"):  # the old ids are still on record
            led.debit("n.o0", 0.1, purpose="ncc-features", release_id="r1")
        to = Recipient(data_user="alice", coordinator="coordinator (127.0.0.1:50051)")
        led.debit_many([Debit("n.o0", 0.25, 0.0, "lr-model", "r3", job="job-2", recipient=to)])
        history = led.history("n.o0")
    assert [(h["release_id"], h["job"], h["data_user"], h["coordinator"]) for h in history] == [
        ("r1", "job-1", "", ""),
        ("r1#labels", "job-1", "", ""),
        ("r3", "job-2", "alice", "coordinator (127.0.0.1:50051)"),
    ]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    conn.close()
    with Ledger(path, epsilon_budget=2.0, delta_budget=1e-5) as led:  # reopening a migrated file changes nothing
        assert led.history("n.o0") == history and led.spent("n.o0") == Budget(0.75, 0.0)
    assert list(read_accounts(path)[0].releases) == history


def test_a_recipient_is_text_and_a_debit_takes_only_a_recipient():
    with pytest.raises(ConfigError, match="recipient data_user must be text"):
        Recipient(data_user=None)
    with pytest.raises(ConfigError, match="recipient must be a Recipient"):
        Debit("o", 0.1, 0.0, "p", "r", recipient="alice")
    assert Debit("o", 0.1, 0.0, "p", "r").recipient == Recipient("", "")


def test_a_file_with_bytes_but_no_ledger_is_refused_not_made_a_new_ledger(tmp_path):
    """Walkthrough 7, W7-4: a plain cp of a running node's ledger is its first page alone (every release is in the
    write-ahead log it did not copy), schema version 0; a node started on the copy made it a new ledger, and every
    owner, and every row's account, had its budget again with no word."""
    import shutil
    import sqlite3

    from privfed.common.errors import ConfigError

    live = Ledger(tmp_path / "live.sqlite", epsilon_budget=2.0)
    try:
        live.debit("n.o00000", 1.5, purpose="p", release_id="r0")
        copy = tmp_path / "copy.sqlite"
        shutil.copyfile(tmp_path / "live.sqlite", copy)  # the node still runs: its releases are in live.sqlite-wal
    finally:
        live.close()
    with sqlite3.connect(copy) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (0,)  # what the copy is
    with pytest.raises(ConfigError, match=r"copy.sqlite is a file that holds no privfed ledger \(schema version 0\)"):
        Ledger(copy, epsilon_budget=2.0)
    with sqlite3.connect(copy) as db:
        assert db.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)  # left as it was: no tables
    other = tmp_path / "other.sqlite"  # any other program's database
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    with pytest.raises(ConfigError, match="holds no privfed ledger"):
        Ledger(other, epsilon_budget=2.0)
    (tmp_path / "empty.sqlite").touch()  # a file of 0 bytes is a new ledger, as a missing one is
    with Ledger(tmp_path / "empty.sqlite", epsilon_budget=2.0) as fresh:
        fresh.debit("n.o00000", 1.5, purpose="p", release_id="r0")
    with Ledger(tmp_path / "empty.sqlite", epsilon_budget=2.0) as again:  # and opens again, its release kept
        assert again.spent("n.o00000").epsilon == 1.5


def test_a_node_says_at_its_start_how_many_releases_its_ledger_holds_and_the_last(tmp_path, caplog):
    """Walkthrough 7, W7-5: a ledger put back from an older backup forgets the releases since, handing their budget
    back, and nothing at the node's start said what the ledger held."""
    from privfed.owner.main import _say_what_the_ledger_holds

    caplog.set_level(logging.INFO, logger="privfed.owner")
    with Ledger(tmp_path / "l.sqlite", epsilon_budget=2.0) as ledger:
        _say_what_the_ledger_holds(ledger)
        ledger.debit_many([Debit("n.o00000", 0.5, 0.0, purpose="p", release_id=f"r{i}", job="j-7") for i in range(3)])
        _say_what_the_ledger_holds(ledger)
    first, second = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ledger ")]
    assert first.endswith("l.sqlite: no release recorded yet"), first
    assert (
        "l.sqlite: 3 release(s) recorded, the last at 20" in second and "UTC for job j-7 (a ledger put back" in second
    )
