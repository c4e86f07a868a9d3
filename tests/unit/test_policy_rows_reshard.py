"""An owner policy's limits count, for each row, what that row spent, also after its data file changed and its
rows were dealt to other owner ids (walkthrough 8, W8-5).

A node's rows are dealt to its owner ids by ``partition(n_rows, n_owners, seed)``, so removing a few rows at the
top of its file and appending others moves nearly every row to another id. Until W8-5 the policy counted, for a
row, every release of every id that ever held it: the row's old id's and its new id's, about twice what the row
spent, and a day or total limit kept most rows out of every later release though their own accounts could pay.

The test drives the policy's path of an owner node (``OwnerPolicy.declines`` for the id, ``rows_kept_out`` for its
rows, ``Ledger.debit_many``) over three runs of a node whose file changes between them, with the day window moved
on by ageing the recorded releases, and keeps its own record of what every row really took (each debit's outcome
names the rows left out of it). It checks, job by job:

(a) a row that can pay the job under every limit by what it spent itself (and was not left out of an earlier
    release of the run, which the policy may count) is not kept out;
(b) no row ever spends past the policy's per-job, day or total limit, nor past its budget, and every row that
    cannot pay is kept out.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass, field

import numpy as np
import pytest

from privfed.common.datasets import partition
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Debit, Ledger, RowsUnused
from privfed.deploy.cli import main
from privfed.owner.data import row_digests
from privfed.owner.policy import OwnerPolicy, rows_kept_out

TOL = 1e-9
N_OWNERS = 4
BUDGET = 20.0
POLICY = OwnerPolicy(max_epsilon_per_job=2.0, max_epsilon_per_day=5.0, max_epsilon_total=16.0)


@dataclass
class Row:
    """What one row (by content) really took: (job, epsilon, day) per release, day counted as the test ages them."""

    takes: list[tuple[str, float, int]] = field(default_factory=list)

    def total(self) -> float:
        return math.fsum(e for _, e, _ in self.takes)

    def in_day(self, today: int) -> float:
        return math.fsum(e for _, e, d in self.takes if d == today)

    def in_job(self, job: str) -> float:
        return math.fsum(e for j, e, _ in self.takes if j == job)


class Node:
    """A node's policy path over one ledger file, run after run, with the test's own record of each row."""

    def __init__(self, path, seed: int) -> None:
        self.path, self.seed, self.today = path, seed, 0
        self.rows: dict[bytes, Row] = {}
        self.ledger: Ledger | None = None
        self.kept_out_counts: list[tuple[int, int]] = []

    def start(self, X: np.ndarray, name: str = "node", n_owners: int = N_OWNERS) -> None:
        """(Re)start on the file ``X``: a new run, its rows dealt to the ids by ``partition``."""
        if self.ledger is not None:
            self.ledger.close()
        self.ledger = Ledger(self.path, epsilon_budget=BUDGET)
        y = np.zeros(len(X), dtype=np.int64)
        digests = row_digests(X, y)
        self.held: dict[str, list[bytes]] = {}
        for i, idx in enumerate(partition(len(X), n_owners, seed=self.seed)):
            owner = f"{name}.o{i}"
            keys = [digests[j] for j in idx]
            self.ledger.bind_rows(owner, keys)
            self.held[owner] = keys
            for k in keys:
                self.rows.setdefault(k, Row())
        self.left_out_this_run: set[bytes] = set()

    def next_day(self) -> None:
        """Move every recorded release out of the day window (25 hours back), and the test's clock with it."""
        assert self.ledger is not None
        conn = sqlite3.connect(self.path)
        conn.execute("UPDATE releases SET ts = datetime(ts, '-25 hours')")
        conn.commit()
        conn.close()
        self.today += 1

    def job(self, job_id: str, epsilon: float) -> None:
        assert self.ledger is not None
        ledger, job = self.ledger, JobInfo(job_id, "alice", "ncc", epsilon, 0.0, "ab" * 32)
        kept, asked = 0, 0
        for owner, keys in self.held.items():
            rule = POLICY.declines(job, ledger, owner)
            if rule is not None:  # the id's own record: nothing released, nothing to check of the rows
                continue
            debit = Debit(owner, epsilon, 0.0, "p", f"{job_id}-r", job=job_id)
            out = rows_kept_out(POLICY, job, ledger, owner, [debit])
            for i, k in enumerate(keys):
                row = self.rows[k]
                can_pay = (
                    row.in_job(job_id) + epsilon <= job.epsilon + TOL
                    and row.in_day(self.today) + epsilon <= POLICY.max_epsilon_per_day + TOL
                    and row.total() + epsilon <= POLICY.max_epsilon_total + TOL
                    and row.total() + epsilon <= BUDGET + TOL
                )
                if can_pay and k not in self.left_out_this_run:  # (a)
                    assert i not in out, f"{job_id}: {owner}'s row {i} can pay ({row.takes}) but is kept out"
                if not can_pay:  # (b), the policy's half: the ledger keeps out what the budget cannot pay
                    assert i in out or row.total() + epsilon > BUDGET + TOL, f"{job_id}: row {i} overspends"
            kept, asked = kept + len(out), asked + len(keys)
            (outcome,) = ledger.debit_many([Debit(owner, epsilon, 0.0, "p", f"{job_id}-r", job=job_id, rows_out=out)])
            left = set(outcome.rows) if isinstance(outcome, RowsUnused) else set()
            assert out <= left
            for i, k in enumerate(keys):
                if i in left:
                    self.left_out_this_run.add(k)
                else:
                    self.rows[k].takes.append((job_id, epsilon, self.today))
        self.kept_out_counts.append((kept, asked))
        for k, row in self.rows.items():  # (b): what each row really spent, against every limit
            assert row.total() <= min(POLICY.max_epsilon_total, BUDGET) + TOL, (k.hex()[:8], row.takes)
            assert row.in_day(self.today) <= POLICY.max_epsilon_per_day + TOL, (k.hex()[:8], row.takes)
            for j, _, _ in row.takes:
                assert row.in_job(j) <= POLICY.max_epsilon_per_job + TOL


def _changed(X: np.ndarray, rng: np.random.Generator, drop: int, add: int) -> np.ndarray:
    """The file after a nightly export: its first ``drop`` rows removed, ``add`` new rows appended."""
    return np.vstack([X[drop:], rng.normal(size=(add, X.shape[1]))])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_dealt_to_other_ids_by_a_changed_file_are_held_to_what_they_spent_themselves(tmp_path, capsys, seed):
    rng = np.random.default_rng(seed)
    node = Node(tmp_path / "ledger.sqlite", seed)
    X1 = rng.normal(size=(120, 3))
    node.start(X1)  # run 1: 4 of the day's 5, on two days: every row and id at 8
    node.job("a1", 2.0)
    node.job("a2", 2.0)
    node.next_day()
    node.job("a3", 2.0)
    node.job("a4", 2.0)
    X2 = _changed(X1, rng, drop=5, add=20)
    node.start(X2)  # run 2, the same day: nearly every row under another id
    moved = sum(
        1
        for owner, keys in node.held.items()
        for k in keys
        if any(k in ks for o, ks in _dealt(X1, seed).items() if o != owner)
    )
    assert moved > len(X2) // 2  # the finding's case: most rows changed their id
    node.job("b1", 1.0)  # the day's 5th: rows 4 + 1 today, 9 in all; counted 4 + 4 + 1 before W8-5
    assert node.kept_out_counts[-1][0] == 0, node.kept_out_counts
    node.next_day()
    node.job("b2", 2.0)
    node.job("b3", 2.0)  # 13 in all
    node.next_day()
    X3 = _changed(X2, rng, drop=3, add=7)
    node.start(X3)  # run 3
    node.job("c1", 2.0)  # 15
    node.job("c2", 1.0)  # 16: the total limit, which the older rows reach and the newer do not pass
    node.next_day()
    node.job("c3", 1.0)  # the ids are at 16 after run 1's 8 on the same ids: declined for every id
    assert node.kept_out_counts[-1] == (0, 0)
    assert all(kept == 0 for kept, _ in node.kept_out_counts), node.kept_out_counts
    old = {k for k, row in node.rows.items() if len(row.takes) >= 9}
    assert old and all(abs(node.rows[k].total() - 16.0) <= TOL for k in old)  # every old row spent its total limit
    node.start(X3, name="node2", n_owners=6)  # run 4: fresh ids, which have spent nothing; the rows bring theirs
    node.job("d1", 1.0)
    held = {k for keys in node.held.values() for k in keys}
    assert node.kept_out_counts[-1] == (len(old & held), len(X3))  # exactly the rows at the total limit
    # `privfed ledger show --policy` counts them, as the node does (W8-5: it showed none of this)
    policy = tmp_path / "policy.toml"
    policy.write_text("max_epsilon_per_job = 2.0\nmax_epsilon_per_day = 5.0\nmax_epsilon_total = 16.0\n")
    assert main(["ledger", "show", "--ledger", str(node.path), "--policy", str(policy), "--json"]) == 0
    shown = {o["owner_id"]: o["policy"]["rows"] for o in json.loads(capsys.readouterr().out)}
    mine = [shown[o] for o in node.held]
    assert sum(r["count"] for r in mine) == len(X3)
    assert sum(r["kept_out"] for r in mine) == sum(r["no_room"] for r in mine) == len(old & held)
    assert main(["ledger", "show", "--ledger", str(node.path), "--policy", str(policy)]) == 0
    assert "rows kept out" in capsys.readouterr().out


def _dealt(X: np.ndarray, seed: int) -> dict[str, list[bytes]]:
    digests = row_digests(X, np.zeros(len(X), dtype=np.int64))
    return {f"node.o{i}": [digests[j] for j in idx] for i, idx in enumerate(partition(len(X), N_OWNERS, seed=seed))}


def test_an_older_ledgers_holders_are_counted_with_every_release_of_their_ids_of_then(tmp_path):
    """A ledger written before the runs (schema 5: holders without a run) gives no budget back: a row an id held
    then is counted with every release that id made then, and the owner id's own releases of then with each of its
    rows, as before W8-5; the releases made from then on are counted run by run."""
    path = tmp_path / "ledger.sqlite"
    X = np.random.default_rng(5).normal(size=(40, 2))
    keys = row_digests(X, np.zeros(len(X), dtype=np.int64))
    with Ledger(path, epsilon_budget=BUDGET) as led:
        led.bind_rows("n.a", keys[:20])
        led.bind_rows("n.b", keys[20:])
        led.debit_many([Debit("n.a", 3.0, 0.0, "p", "r1", job="j1"), Debit("n.b", 3.0, 0.0, "p", "r1", job="j1")])
    conn = sqlite3.connect(path)  # the file as schema 5 left it
    conn.executescript(
        "CREATE TABLE h5 (row_key TEXT NOT NULL, owner_id TEXT NOT NULL, PRIMARY KEY (row_key, owner_id)) "
        "WITHOUT ROWID; INSERT INTO h5 SELECT row_key, owner_id FROM holders; DROP TABLE holders; "
        "ALTER TABLE h5 RENAME TO holders; DROP INDEX releases_run; ALTER TABLE releases DROP COLUMN run; "
        "PRAGMA user_version = 5;"
    )
    conn.close()
    job = JobInfo("j2", "alice", "ncc", 1.0, 0.0, "ab" * 32)
    policy = OwnerPolicy(max_epsilon_total=6.5)
    with Ledger(path, epsilon_budget=BUDGET) as led:
        led.bind_rows("n.a", keys[10:30])  # 10 of n.a's rows, 10 of n.b's
        out = rows_kept_out(policy, job, led, "n.a", [Debit("n.a", 1.0, 0.0, "p", "r2", job="j2")])
        assert out == frozenset(range(10, 20))  # n.b's rows: 3 (n.a's, then) + 3 (n.b's) + 1 > 6.5
        led.debit_many([Debit("n.a", 1.0, 0.0, "p", "r2", job="j2", rows_out=out)])
    with Ledger(path, epsilon_budget=BUDGET) as led:
        led.bind_rows("n.b", keys[:20])  # n.a's rows of the first run, each at 3 + 1 of run 2 ...
        groups = led.row_holder_groups("n.b")
        assert len(groups) == 2, groups  # ... with n.a's rows of run 2 apart from those n.a no longer held
        job3 = JobInfo("j3", "alice", "ncc", 1.0, 0.0, "ab" * 32)
        out = rows_kept_out(OwnerPolicy(max_epsilon_total=7.0), job3, led, "n.b", [Debit("n.b", 1.0, 0.0, "p", "r3")])
        # n.b's releases of then (3) count for every row it holds; n.a's of then (3) for the rows it held then;
        # n.a's of run 2 (1) only for the rows it held in run 2 (keys 10-19): 3 + 3 + 1 + 1 > 7 for those alone
        assert out == frozenset(range(10, 20)), sorted(out)
