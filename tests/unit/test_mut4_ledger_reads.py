"""Mutation round 4 (the ledger's read paths: common/ledger_releases.py, ledger_queries.py, ledger_file.py's
``read_accounts``): exact checks of what a read returns.

``Ledger.spent_by_holdings(..., other_than=job)`` is what an owner policy reads for each group of rows on every task
(``privfed.owner.policy.rows_kept_out``: the day and total limits count the other jobs' releases of every id that
held the rows). Its fast path takes the job's releases back out of each (id, run) pair's running sum; no test had
the job already hold releases of those pairs (a job's second task), nor a non-finite release in it, so mutants that
doubled the running sum, added the job's releases instead of removing them, or sent an infinite release through
the running sum (``inf - inf``) passed. Now each answer is checked, bit for bit, against ``fsum`` of exactly the
releases it names (each id's, then their sum, as the running sums add them), and the SQL path (``since`` given)
that sums them independently against one ``fsum``.

``read_accounts`` (``ledger show``): what is left per component (the id's own record or its most-spent row), the
rows' standing, and the columns each older schema version has were not pinned down; now they are, exactly.
"""

from __future__ import annotations

import math
import sqlite3

import pytest

from privfed.common.errors import BudgetExceeded
from privfed.common.ledger import Budget, Debit, Ledger, Recipient, read_accounts
from privfed.common.ledger_releases import read_row_spending
from privfed.deploy.cli import main

KEYS = [bytes([i]) * 32 for i in range(3)]
ALICE = Recipient("alice", "coordinator (at 10.0.0.5:50051)")


def same(a: float, b: float) -> bool:
    return a.hex() == b.hex()


@pytest.fixture
def moved_rows(tmp_path):
    """Run 1: n.a holds the rows and releases in jobs j1 (twice), j2, bypass (an infinite and a finite one) and none;
    run 2: the rows moved to n.b, which releases in j1 and j3. Returns the path and every release as
    (owner id, job, epsilon, delta)."""
    path = tmp_path / "node.sqlite"
    first = [
        ("n.a", "j1", 0.5, 1e-7),
        ("n.a", "j1", 0.125, 0.0),
        ("n.a", "j2", 0.3, 2e-7),
        ("n.a", "bypass", math.inf, 0.0),
        ("n.a", "bypass", 0.0625, 1e-8),
        ("n.a", "", 0.1, 0.0),
    ]
    second = [("n.b", "j1", 0.25, 3e-7), ("n.b", "j3", 0.7, 0.0), ("n.b", "j1", 2.0**-20, 1e-9)]
    for run, releases in enumerate((first, second)):
        with Ledger(path, epsilon_budget=math.inf, delta_budget=1.0) as ledger:
            owner = releases[0][0]
            ledger.bind_rows(owner, KEYS)
            ledger.debit_many([Debit(o, e, d, "p", f"r{run}.{i}", job=j) for i, (o, j, e, d) in enumerate(releases)])
    with Ledger(path, epsilon_budget=math.inf, delta_budget=1.0) as ledger:
        ledger.bind_rows("n.b", KEYS)  # run 3: n.b holds the rows again, nothing released yet in this run
    return path, first + second


def expected(releases, owners, *, job=None, other_than=None, per_id=False) -> Budget:
    """``fsum`` of the releases named; ``per_id``: each id's ``fsum``, then their ``fsum`` (the running sums' way:
    each id's (each (id, run) pair's) sum is exact, the sum over them rounds once more)."""
    parts = [
        [(e, d) for o, j, e, d in releases if o == owner and (job is None or j == job) and j != other_than]
        for owner in sorted(owners)
    ]
    if not per_id:
        parts = [[x for part in parts for x in part]]
    sums = [(math.fsum(e for e, _ in part), math.fsum(d for _, d in part)) for part in parts]
    return Budget(math.fsum(e for e, _ in sums), math.fsum(d for _, d in sums))


@pytest.mark.parametrize("other_than", ["j1", "j2", "j3", "bypass", "", "nothing"])
def test_what_rows_spent_on_other_jobs_is_the_fsum_of_exactly_those_releases(moved_rows, other_than):
    path, releases = moved_rows
    with Ledger(path, epsilon_budget=math.inf, delta_budget=1.0) as ledger:
        ledger.bind_rows("n.b", KEYS)
        groups = ledger.row_holder_groups("n.b")
        assert list(groups.values()) == [(0, 1, 2)]
        (holdings,) = groups
        assert {h for h, _ in holdings} == {"n.a", "n.b"}
        each = expected(releases, {"n.a", "n.b"}, other_than=other_than, per_id=True)  # one pair per id here
        fast = ledger.spent_by_holdings("n.b", holdings, other_than=other_than)  # running sums less the job
        by_id = ledger.spent_on(["n.a", "n.b"], other_than=other_than)  # the ids' whole records, the same releases
        for got in (fast, by_id):
            assert same(got.epsilon, each.epsilon) and same(got.delta, each.delta), (other_than, got, each)
        own = tuple(p for p in holdings if p[0] == "n.b")  # without n.a's infinite release: a finite epsilon
        got, want = (
            ledger.spent_by_holdings("n.b", own, other_than=other_than),
            expected(releases, {"n.b"}, other_than=other_than),
        )
        assert math.isfinite(want.epsilon) and same(got.epsilon, want.epsilon) and same(got.delta, want.delta)
        once = expected(releases, {"n.a", "n.b"}, other_than=other_than)
        slow = ledger.spent_by_holdings("n.b", holdings, other_than=other_than, since="-1 day")  # SQL, one fsum
        assert same(slow.epsilon, once.epsilon) and same(slow.delta, once.delta), (other_than, slow, once)
        for job in ("j1", "bypass"):
            got = ledger.spent_by_holdings("n.b", holdings, job=job)
            want_job = expected(releases, {"n.a", "n.b"}, job=job)  # read by SQL, one fsum
            assert same(got.epsilon, want_job.epsilon) and same(got.delta, want_job.delta), (job, got, want_job)


def test_release_count_counts_every_release_of_every_owner(moved_rows):
    """``release_count`` sets where a restarted node's seeded noise stream starts (``privfed.owner.main``): a count
    that stood still would draw the noise of earlier releases again. No unit test read it."""
    path, releases = moved_rows
    with Ledger(path, epsilon_budget=math.inf, delta_budget=1.0) as ledger:
        assert ledger.release_count() == len(releases) == 9
        ledger.debit_many([Debit("n.c", 0.0, 0.0, "labels", "c0", nonprivate=True)])
        assert ledger.release_count() == 10
        assert ledger.nonprivate_count("n.c") == 1 and ledger.nonprivate_count("n.a") == 0
        last = ledger.last_release()
        assert last is not None and last[0] == 10 and last[2] == ""


def test_row_spending_reads_each_rows_holders_and_nothing_from_a_file_before_schema_6(moved_rows):
    """``read_row_spending`` (``ledger show --policy``'s rows kept out) reads the rows of the id's last run (its first
    run's, or another id's last run, passed), and counts, as the node's policy does, the id's
    own releases of before schema 6 (run 0): counting its run 1 instead passed. And it is documented empty for a file
    older than schema 6, whose holdings name no run: reading schema 5 files as 6 passed (``version < 5``)."""
    path, releases = moved_rows
    with Ledger(path, epsilon_budget=math.inf, delta_budget=1.0) as ledger:
        ledger.bind_rows("n.b", KEYS[:2])  # a last run with two of the three rows: what the count reads
        ledger.debit_many([Debit("n.b", 0.01, 4e-9, "p", "r4.0", job="j4")])  # (holders are recorded by a debit)
    releases = [*releases, ("n.b", "j4", 0.01, 4e-9)]
    groups = read_row_spending(path, ["n.a", "n.b"])
    assert groups["n.a"] != [] and len(groups["n.b"]) == 1
    ((count, day, total),) = groups["n.b"]
    want = expected(releases, {"n.a", "n.b"})
    assert count == 2 and day == total
    assert same(total.epsilon, want.epsilon) and same(total.delta, want.delta), (total, want)
    conn = sqlite3.connect(path)  # n.b's first release as a file migrated from before schema 6 records it: run 0
    conn.execute("UPDATE releases SET run = 0 WHERE release_id = 'r1.0'")
    conn.commit()
    ((count, day, total),) = read_row_spending(path, ["n.b"])["n.b"]  # still counted: the id's own, of run 0
    assert same(total.delta, want.delta), (total, want)
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()
    assert read_row_spending(path, ["n.a", "n.b"]) == {"n.a": [], "n.b": []}


def test_ledger_show_remaining_is_the_least_of_the_ids_and_its_rows_per_component(tmp_path):
    """``OwnerAccount.remaining`` (``ledger show``'s "eps left" and "delta left") is the least of what the id's own
    record leaves and what its most-spent row leaves, per component. Mutants doubling either side passed: no test
    had an id whose own record binds (it released before it held rows), nor rows spent unequally (the most-spent row
    read as the least-spent passed, and a count of used-up rows read as "any"). n.w's rows were spent by n.y before
    (its rows bind); n.x released before it held fresh rows (its own record binds); n.u holds two rows n.v used up
    and a fresh one."""
    path = tmp_path / "node.sqlite"
    fresh = [bytes([9]) * 32, bytes([8]) * 32]
    full = [bytes([7]) * 32, bytes([6]) * 32]  # two rows n.v spends to the budget
    with Ledger(path, epsilon_budget=2.0, delta_budget=1e-5) as ledger:
        ledger.bind_rows("n.y", KEYS)
        ledger.bind_rows("n.v", full)
        ledger.debit_many(
            [Debit("n.y", 1.0, 6e-6, "p", "y0"), Debit("n.x", 0.5, 4e-6, "p", "x0"), Debit("n.v", 2.0, 0.0, "p", "v0")]
        )
    with Ledger(path, epsilon_budget=2.0, delta_budget=1e-5) as ledger:
        ledger.bind_rows("n.w", KEYS)
        ledger.bind_rows("n.x", fresh)
        ledger.bind_rows("n.u", [*full, bytes([5]) * 32])  # two used-up rows and a fresh one
        ledger.debit_many(
            [
                Debit("n.w", 0.25, 1e-6, "p", "w0"),
                Debit("n.x", 0.25, 1e-6, "p", "x1"),
                Debit("n.u", 0.1, 1e-6, "p", "u0"),
            ]
        )
    accounts = {a.owner_id: a for a in read_accounts(path)}
    w, x, u = accounts["n.w"], accounts["n.x"], accounts["n.u"]

    def near(b: Budget, epsilon: float, delta: float) -> bool:
        return b.epsilon == pytest.approx(epsilon, rel=1e-12) and b.delta == pytest.approx(delta, rel=1e-9)

    assert near(w.id_remaining, 1.75, 9e-6) and near(x.id_remaining, 1.25, 5e-6)
    assert w.rows is not None and (w.rows.count, w.rows.spent) == (3, 0)
    assert near(w.rows.least_remaining, 0.75, 3e-6)
    assert x.rows is not None and near(x.rows.least_remaining, 1.75, 9e-6)
    assert near(w.remaining, 0.75, 3e-6), w.remaining  # the rows bind, both components
    assert near(x.remaining, 1.25, 5e-6), x.remaining  # the id's own record binds, both components
    # n.u: "rows spent" counts its used-up rows (both), and its most-spent row per component binds: (2.0, 0) and the
    # fresh row's (0.1, 1e-6), which the release took (the used-up rows sat it out)
    assert u.rows is not None and (u.rows.count, u.rows.spent) == (3, 2)
    assert near(u.rows.least_remaining, 0.0, 9e-6) and near(u.remaining, 0.0, 9e-6), u.rows


def _as_version(path, version: int) -> None:
    """The file as schema ``version`` left it: without the columns later versions added (and their indexes)."""
    drops = {5: [], 4: ["data_user", "coordinator"]}
    drops[3] = drops[2] = [*drops[4], "job"]
    drops[1] = [*drops[2], "nonprivate"]
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX IF EXISTS releases_job")
    for column in drops[version]:
        conn.execute(f"ALTER TABLE releases DROP COLUMN {column}")
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_an_older_file_is_read_with_the_columns_its_version_has(tmp_path, version):
    """``read_accounts`` reads the non-private flag from schema 2, the job from schema 4 and the recipient from schema 5
    on (``ledger show`` of a file an older node left): reading them from one version later passed (a v2 file's
    non-private release shown as private, a v4 file's jobs and a v5 file's recipients as none), and from one version
    earlier too (a column that is not there)."""
    path = tmp_path / "node.sqlite"
    with Ledger(path, epsilon_budget=2.0) as ledger:
        ledger.debit_many(
            [
                Debit("n.o0", 0.5, 0.0, "p", "r1", job="job-1", recipient=ALICE),
                Debit("n.o0", 0.0, 0.0, "labels", "r1#labels", nonprivate=True, job="job-1", recipient=ALICE),
            ]
        )
    _as_version(path, version)
    (account,) = read_accounts(path)
    assert account.spent == Budget(0.5, 0.0) and len(account.releases) == 2
    assert account.nonprivate == (1 if version >= 2 else 0)
    assert [r["job"] for r in account.releases] == (["job-1"] * 2 if version >= 4 else ["", ""])
    whom = ("alice", "coordinator (at 10.0.0.5:50051)") if version >= 5 else ("", "")
    assert [(r["data_user"], r["coordinator"]) for r in account.releases] == [whom] * 2


def test_check_reads_the_delta_asked(tmp_path):
    """``Ledger.check`` judges ``spent + (epsilon, delta)`` against the budget: a request of exactly the delta left
    passes, a little more is refused (checking twice the delta passed every test: a refusal stricter than the
    debit's, of a release the budget affords)."""
    with Ledger(tmp_path / "node.sqlite", epsilon_budget=2.0, delta_budget=1e-5) as ledger:
        ledger.debit("n.a", 0.5, 4e-6, purpose="p", release_id="a0")
        ledger.check("n.a", 1.5, 6e-6)  # exactly what is left
        with pytest.raises(BudgetExceeded):
            ledger.check("n.a", 0.1, 6.5e-6)


def test_ledger_show_policy_table_says_a_job_may_spend_the_least_of_the_policy_and_the_budget(tmp_path, capsys):
    """``ledger show --policy``'s table: "a job may spend" is the least of what the policy allows and the budget left.
    The JSON had a test where the budget binds; the table had none (dropping the ``min`` there passed)."""
    path, policy = tmp_path / "node.sqlite", tmp_path / "policy.toml"
    with Ledger(path, epsilon_budget=2.0) as ledger:
        ledger.debit("n.o0", 0.75, 0.0, purpose="p", release_id="r0")
    policy.write_text("max_epsilon_per_job = 2.0\nmax_epsilon_per_day = 3.0\nmax_epsilon_total = 5.0\n")
    assert main(["ledger", "show", "--ledger", str(path), "--policy", str(policy)]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("n.o0")]
    assert rows[-1][1:] == ["2", "2.25", "4.25", "2", "1.25", "-"], out  # per job, day, total, allows, may spend
