"""``privfed ledger show``: spent and remaining (ε, δ) per owner and the releases, read without
writing (issue 11, item 3); what each recipient (data user, coordinator) received (walkthrough 4, M4)."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3

import pytest

from privfed.common.errors import ConfigError
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Budget, Debit, Ledger, Recipient, RowsUnused, read_accounts
from privfed.common.ledger_file import RowsStanding
from privfed.common.ledger_records import used_up
from privfed.deploy.cli import main
from privfed.owner.policy import OwnerPolicy


@pytest.fixture
def ledger_file(tmp_path):
    path = tmp_path / "node.sqlite"
    with Ledger(path, epsilon_budget=2.0, delta_budget=1e-5) as ledger:
        ledger.debit_many(
            [
                Debit("n.o0", 0.5, 0.0, "ncc-features", "r1-a"),
                Debit("n.o0", 0.25, 1e-6, "dp-pca", "r2-a"),
                Debit("n.o0", 0.0, 0.0, "clear-labels", "r1-a#labels", nonprivate=True),
                Debit("n.o1", 2.0, 0.0, "lr-model", "r1-b"),
            ]
        )
    return path


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_accounts_match_what_the_ledger_itself_reports(ledger_file):
    accounts = {a.owner_id: a for a in read_accounts(ledger_file)}
    with Ledger(ledger_file, epsilon_budget=2.0, delta_budget=1e-5) as ledger:
        for owner in ("n.o0", "n.o1"):
            assert accounts[owner].spent == ledger.spent(owner)
            assert accounts[owner].remaining == ledger.remaining(owner)
            assert list(accounts[owner].releases) == ledger.history(owner)
    assert accounts["n.o0"].spent.epsilon == pytest.approx(0.75)
    assert accounts["n.o0"].remaining.epsilon == pytest.approx(1.25) and accounts["n.o0"].nonprivate == 1
    assert accounts["n.o1"].remaining.epsilon == 0.0


def test_reading_changes_nothing_in_the_file(ledger_file):
    before = _digest(ledger_file)
    read_accounts(ledger_file)
    assert main(["ledger", "show", "--ledger", str(ledger_file)]) == 0
    assert _digest(ledger_file) == before


def test_an_infinite_budget_leaves_infinite_epsilon(tmp_path):
    path = tmp_path / "inf.sqlite"
    with Ledger(path, epsilon_budget=math.inf) as ledger:
        ledger.debit_many([Debit("n.o0", 3.0, 0.0, "lr-model", "r1")])
    (account,) = read_accounts(path)
    assert account.remaining.epsilon == math.inf


def test_the_table_shows_spent_remaining_and_every_release(ledger_file, capsys):
    assert main(["ledger", "show", "--ledger", str(ledger_file)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("n.o0 "))
    assert row.split()[1:7] == ["2", "0.75", "1.25", "1e-05", "1e-06", "9e-06"]
    for release in ("r1-a", "r2-a", "r1-a#labels", "r1-b"):
        assert f"release {release}" in out
    assert "NON-PRIVATE" in out


def test_json_output_for_one_owner(ledger_file, capsys):
    assert main(["ledger", "show", "--ledger", str(ledger_file), "--owner", "n.o1", "--json"]) == 0
    (owner,) = json.loads(capsys.readouterr().out)
    assert owner["owner_id"] == "n.o1" and owner["remaining"]["epsilon"] == 0
    assert [r["purpose"] for r in owner["releases"]] == ["lr-model"]


@pytest.mark.parametrize("make", ["missing", "not-sqlite", "empty-sqlite"])
def test_a_file_that_is_not_a_ledger_is_one_line_exit_2(tmp_path, capsys, make):
    path = tmp_path / "x.sqlite"
    if make == "not-sqlite":
        path.write_text("owner,epsilon\n")
    elif make == "empty-sqlite":
        import sqlite3

        sqlite3.connect(path).close()
    with pytest.raises(ConfigError):
        read_accounts(path)
    assert main(["ledger", "show", "--ledger", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("privfed ledger show: error: ledger ")
    if make == "missing":
        assert not path.exists()  # read-only: nothing was created
        assert "x.sqlite: no such file" in err[0], err  # not SQLite's "unable to open database file" (walkthrough 11)


ALICE = Recipient("alice", "coordinator (at 10.0.0.5:50051)")
BOB = Recipient("bob", "coordinator (at 10.0.0.5:50051)")


@pytest.fixture
def recipients_file(tmp_path):
    """Alice's two jobs, Bob's one, and a release of no job with no recipient recorded."""
    path = tmp_path / "node.sqlite"
    with Ledger(path, epsilon_budget=4.0) as ledger:
        ledger.debit_many(
            [
                Debit("n.o0", 0.5, 0.0, "ncc-features", "r1", job="job-1", recipient=ALICE),
                Debit("n.o1", 0.5, 0.0, "ncc-features", "r2", job="job-1", recipient=ALICE),
                Debit("n.o0", 1.0, 0.0, "lr-model", "r3", job="job-2", recipient=BOB),
                Debit("n.o0", 0.25, 0.0, "lr-model", "r4", job="job-3", recipient=ALICE),
                Debit("n.o1", 0.1, 0.0, "lr-model", "r5"),
            ]
        )
    return path


def _section(out: str, title: str) -> list[list[str]]:
    """The rows of the table under the line starting with ``title``, split on runs of 2+ spaces."""
    lines = out.split("\n\n" + title, 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    return [[c for c in line.strip().split("  ") if c] for line in lines]


def test_the_table_totals_what_each_recipient_received(recipients_file, capsys):
    assert main(["ledger", "show", "--ledger", str(recipients_file)]) == 0
    out = capsys.readouterr().out
    coordinator = "coordinator (at 10.0.0.5:50051)"
    header, *rows = [[c.strip() for c in row] for row in _section(out, "by recipient")]
    assert header == ["data user", "coordinator", "jobs", "owners", "releases", "eps per owner", "delta per owner"]
    assert rows == [  # alice: n.o0 received 0.5 + 0.25 in two jobs, the most one owner released to her
        ["alice", coordinator, "2", "2", "3", "0.75", "0"],
        ["bob", coordinator, "1", "1", "1", "1", "0"],
        ["-", "-", "1", "1", "1", "0.1", "0"],
    ]
    assert f"release r3  to bob via {coordinator}" in out
    assert "release r5  to - via -" in out


def test_json_totals_each_owners_releases_by_recipient(recipients_file, capsys):
    assert main(["ledger", "show", "--ledger", str(recipients_file), "--owner", "n.o0", "--json"]) == 0
    (owner,) = json.loads(capsys.readouterr().out)
    assert [(g["data_user"], g["jobs"], g["releases"], g["epsilon"]) for g in owner["by_recipient"]] == [
        ("alice", ["job-1", "job-3"], 2, 0.75),
        ("bob", ["job-2"], 1, 1.0),
    ]
    assert [(r["release_id"], r["data_user"], r["coordinator"]) for r in owner["releases"]] == [
        ("r1", "alice", ALICE.coordinator),
        ("r3", "bob", BOB.coordinator),
        ("r4", "alice", ALICE.coordinator),
    ]


def test_a_version_4_file_is_shown_unchanged_with_its_recipients_unknown(recipients_file, capsys):
    import sqlite3

    conn = sqlite3.connect(recipients_file)  # the file as schema version 4 left it: no recipient columns
    conn.executescript(
        "ALTER TABLE releases DROP COLUMN data_user; ALTER TABLE releases DROP COLUMN coordinator; "
        "PRAGMA user_version = 4;"
    )
    conn.close()
    before = _digest(recipients_file)
    assert main(["ledger", "show", "--ledger", str(recipients_file)]) == 0
    out = capsys.readouterr().out
    assert _digest(recipients_file) == before  # read-only: not migrated
    assert [row[:2] for row in _section(out, "by recipient")[1:]] == [["-", "-"]]
    assert "release r3  to - via -" in out


def test_a_backup_beside_the_running_node_holds_every_release_and_refuses_to_overwrite(tmp_path, capsys):
    """Walkthrough 5: a `cp` of a ledger beside its node missed the releases still in the write-ahead log (0.6 ε
    of an owner's debits; a young ledger's every table), and a node restarted on such a copy could spend that
    budget again. `privfed ledger backup` copies one consistent snapshot, the log included."""
    path, copy = tmp_path / "node.sqlite", tmp_path / "backup.sqlite"
    with Ledger(path, epsilon_budget=2.0) as ledger:  # open, as a running node holds it: nothing checkpointed
        ledger.debit_many([Debit(f"n.o{i}", 0.25, 0.0, "ncc-features", f"r{i}") for i in range(3)])
        assert (tmp_path / "node.sqlite-wal").stat().st_size > 0  # the releases are in the log
        assert main(["ledger", "backup", "--ledger", str(path), "--out", str(copy)]) == 0
    assert capsys.readouterr().out.strip() == f"ledger {path}: 3 release(s) copied to {copy}"
    assert read_accounts(copy) == read_accounts(path)
    assert copy.stat().st_mode & 0o777 == 0o600
    assert main(["ledger", "backup", "--ledger", str(path), "--out", str(copy)]) == 2
    assert "exists; a backup is written to a new file only" in capsys.readouterr().err


POLICY_TOML = "max_epsilon_per_job = 2.0\nmax_epsilon_per_day = 1.2\nmax_epsilon_total = 3.0\n"


@pytest.fixture
def aged_ledger(ledger_file):
    """The ledger above with n.o0's first release made two days ago: it counts in the total, not the day's."""
    with sqlite3.connect(ledger_file) as conn:
        conn.execute("UPDATE releases SET ts = datetime('now', '-2 days') WHERE release_id = 'r1-a'")
    return ledger_file


def test_with_its_policy_the_table_says_what_a_new_job_may_still_ask_of_each_owner(aged_ledger, tmp_path, capsys):
    """Walkthrough 5, F10: an operator whose node runs with --policy could not see how much a job may still ask
    before the policy declines it. n.o0 spent 0.25 today and 0.75 in all; n.o1 spent 2 today, past the day's 1.2."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY_TOML)
    assert main(["ledger", "show", "--ledger", str(aged_ledger), "--policy", str(policy)]) == 0
    out = capsys.readouterr().out
    assert f"before its policy ({policy}) declines it" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith("n.o")}
    assert rows["n.o0"][-6:] == ["2", "0.95", "2.25", "0.95", "0.95", "-"], out  # no rows bound: none kept out
    assert rows["n.o1"][-6:] == ["2", "0", "1", "0", "0", "-"], out
    assert main(["ledger", "show", "--ledger", str(aged_ledger), "--policy", str(policy), "--json"]) == 0
    shown = {o["owner_id"]: o["policy"] for o in json.loads(capsys.readouterr().out)}
    assert shown["n.o0"] == {
        "epsilon_per_job": 2.0,
        "epsilon_day_left": 0.95,
        "epsilon_total_left": 2.25,
        "epsilon_policy_allows": 0.95,
        "epsilon_a_job_may_spend": 0.95,
        "rows": None,
    }
    assert shown["n.o1"]["epsilon_policy_allows"] == shown["n.o1"]["epsilon_a_job_may_spend"] == 0.0


def test_a_job_asking_what_ledger_show_gives_is_taken_and_a_little_more_is_declined(aged_ledger, tmp_path, capsys):
    """The display reads the numbers the node's policy judges by: the same query on the same file."""
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(POLICY_TOML)
    policy = OwnerPolicy.read(policy_file)
    assert main(["ledger", "show", "--ledger", str(aged_ledger), "--policy", str(policy_file), "--json"]) == 0
    may_ask = {o["owner_id"]: o["policy"]["epsilon_policy_allows"] for o in json.loads(capsys.readouterr().out)}
    with Ledger(aged_ledger, epsilon_budget=2.0, delta_budget=1e-5) as ledger:
        for owner, eps in may_ask.items():
            if eps > 0:
                assert policy.declines(_job(eps), ledger, owner) is None, (owner, eps)
            assert policy.declines(_job(eps + 0.01), ledger, owner) == "epsilon_per_day", (owner, eps)
    assert may_ask == {"n.o0": pytest.approx(0.95), "n.o1": 0.0}


def _job(epsilon: float) -> JobInfo:
    return JobInfo("new-job", "alice", "ncc", epsilon, 0.0, "0" * 64)


def test_a_policy_file_that_cannot_be_read_is_one_line_exit_2(ledger_file, tmp_path, capsys):
    bad = tmp_path / "policy.toml"
    bad.write_text("max_epsilon_per_dya = 1\n")
    assert main(["ledger", "show", "--ledger", str(ledger_file), "--policy", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown key(s) max_epsilon_per_dya" in err and "Traceback" not in err


def test_what_a_job_may_spend_is_bounded_by_the_budget_left_as_well(ledger_file, tmp_path, capsys):
    """The policy may allow more than the owner's budget has left (the demo's ledgers: budget spent, policy room
    left): the last column says what a job can actually spend."""
    policy = tmp_path / "policy.toml"
    policy.write_text("max_epsilon_per_job = 2.0\nmax_epsilon_total = 30.0\n")
    assert main(["ledger", "show", "--ledger", str(ledger_file), "--policy", str(policy), "--json"]) == 0
    shown = {o["owner_id"]: o["policy"] for o in json.loads(capsys.readouterr().out)}
    assert shown["n.o0"]["epsilon_policy_allows"] == 2.0 and shown["n.o0"]["epsilon_a_job_may_spend"] == 1.25
    assert shown["n.o0"]["epsilon_day_left"] is None  # no day limit: infinite, JSON null
    assert shown["n.o1"]["epsilon_policy_allows"] == 2.0 and shown["n.o1"]["epsilon_a_job_may_spend"] == 0.0


ROWS = [b"row-0", b"row-1", b"row-2"]


@pytest.fixture
def resharded_file(tmp_path):
    """Walkthrough 6, W6-16: n.a held three rows and spent the budget on them; the node restarted with other
    shards, n.b holds the same three rows and a new one and spent 1 of its own; n.c never had rows bound."""
    path = tmp_path / "node.sqlite"
    with Ledger(path, epsilon_budget=5.0, delta_budget=1e-5) as ledger:
        ledger.bind_rows("n.a", ROWS)
        outcomes = ledger.debit_many([Debit("n.a", 2.5, 5e-6, "lr-model", f"a{i}") for i in range(2)])
        assert outcomes == [None, None]  # both taken by every row: the rows are spent
    with Ledger(path, epsilon_budget=5.0, delta_budget=1e-5) as ledger:  # the restart, another --shards
        ledger.bind_rows("n.b", [*ROWS, b"row-3"])
        ledger.bind_rows("n.c", [])
        (outcome,) = ledger.debit_many([Debit("n.b", 1.0, 1e-6, "lr-model", "b0")])
        assert outcome == RowsUnused("n.b", "b0", (0, 1, 2))  # made from row-3 alone
        ledger.debit_many([Debit("n.c", 0.5, 0.0, "lr-model", "c0")])
    return path


def test_an_ids_rows_spent_under_an_earlier_id_leave_it_what_they_left(resharded_file):
    accounts = {a.owner_id: a for a in read_accounts(resharded_file)}
    b = accounts["n.b"]
    assert b.id_remaining == Budget(4.0, 9e-6)  # its own record: one release of 1
    assert b.rows == RowsStanding(count=4, spent=3, least_remaining=Budget(0.0, 0.0))  # no pad account counted
    assert b.remaining == Budget(0.0, 0.0)
    assert accounts["n.a"].rows == RowsStanding(count=3, spent=3, least_remaining=Budget(0.0, 0.0))
    assert accounts["n.c"].rows is None and accounts["n.c"].remaining == accounts["n.c"].id_remaining == Budget(
        4.5, 1e-5
    )


def test_a_row_is_spent_when_it_has_no_more_left_than_the_budget_tests_rounding():
    assert used_up(5.0, 5.0) and used_up(5.0 * (1 - 1e-13), 5.0) and used_up(6.0, 5.0)  # 6: a budget lowered since
    assert not used_up(5.0 * (1 - 1e-11), 5.0) and not used_up(0.0, 5.0)
    assert used_up(0.0, 0.0) and not used_up(math.inf, math.inf)  # an infinite budget affords any epsilon


def test_the_table_shows_the_rows_left_and_how_many_are_spent(resharded_file, capsys):
    assert main(["ledger", "show", "--ledger", str(resharded_file)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("owner "))
    header, *rows = [[c.strip() for c in line.split("  ") if c.strip()] for line in lines[at : at + 4]]
    assert header == [
        "owner",
        "eps budget",
        "eps spent",
        "eps left",
        "delta budget",
        "delta spent",
        "delta left",
        "rows spent",
        "releases",
    ]
    assert {r[0]: r[1:] for r in rows} == {
        "n.a": ["5", "5", "0", "1e-05", "1e-05", "0", "3 of 3", "2"],
        "n.b": ["5", "1", "0", "1e-05", "1e-06", "0", "3 of 4", "1"],
        "n.c": ["5", "0.5", "4.5", "1e-05", "0", "1e-05", "-", "1"],
    }
    assert lines[at + 4].startswith("where eps or delta left is below budget - spent, the id's rows spent that budget")


def test_json_gives_the_rows_left_as_remaining_and_the_ids_own_apart(resharded_file, capsys):
    assert main(["ledger", "show", "--ledger", str(resharded_file), "--json"]) == 0
    shown = {o["owner_id"]: o for o in json.loads(capsys.readouterr().out)}
    assert shown["n.b"]["remaining"] == {"epsilon": 0.0, "delta": 0.0}
    assert shown["n.b"]["id_remaining"] == {"epsilon": 4.0, "delta": 9e-06}
    assert shown["n.b"]["rows"] == {"count": 4, "spent": 3, "least_remaining": {"epsilon": 0.0, "delta": 0.0}}
    assert shown["n.c"]["rows"] is None
    assert shown["n.c"]["remaining"] == shown["n.c"]["id_remaining"] == {"epsilon": 4.5, "delta": 1e-05}


def test_a_job_may_spend_no_more_than_the_rows_left(resharded_file, tmp_path, capsys):
    policy = tmp_path / "policy.toml"
    policy.write_text("max_epsilon_per_job = 2.0\n")
    assert main(["ledger", "show", "--ledger", str(resharded_file), "--policy", str(policy), "--json"]) == 0
    shown = {o["owner_id"]: o["policy"] for o in json.loads(capsys.readouterr().out)}
    assert shown["n.b"]["epsilon_policy_allows"] == 2.0 and shown["n.b"]["epsilon_a_job_may_spend"] == 0.0
    assert shown["n.c"]["epsilon_a_job_may_spend"] == 2.0


def test_without_rows_below_an_ids_record_there_is_no_footnote(ledger_file, capsys):
    assert main(["ledger", "show", "--ledger", str(ledger_file)]) == 0
    assert "below budget - spent" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "version, drop",
    [
        (5, "DROP TABLE holders;"),  # written before table holders, which kept version 5
        (
            2,  # no row accounts yet, nor the job and recipient columns
            "DROP TABLE holders; DROP TABLE accounts; DROP TABLE meta; DROP INDEX releases_job; "
            "ALTER TABLE releases DROP COLUMN job; ALTER TABLE releases DROP COLUMN data_user; "
            "ALTER TABLE releases DROP COLUMN coordinator;",
        ),
    ],
)
def test_a_file_without_row_accounts_is_shown_with_the_ids_own_record(resharded_file, capsys, version, drop):
    conn = sqlite3.connect(resharded_file)
    conn.executescript(drop + f"PRAGMA user_version = {version};")
    conn.close()
    before = _digest(resharded_file)
    assert main(["ledger", "show", "--ledger", str(resharded_file), "--json"]) == 0
    assert _digest(resharded_file) == before  # read-only: not migrated
    shown = {o["owner_id"]: o for o in json.loads(capsys.readouterr().out)}
    assert shown["n.b"]["rows"] is None and shown["n.b"]["remaining"] == {"epsilon": 4.0, "delta": 9e-06}
