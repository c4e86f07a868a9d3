"""Issue 20, finding 4: a row's budget survives re-sharding and renaming its node.

Logical owner ids are ``<node>.o<i>``, and an owner's rows are fixed by the partition of the node's
file into ``--shards`` owners. Before the fix the ledger accounted per owner id: the same node,
ledger and data file restarted with another ``--shards`` gave the rows new owner ids with fresh
budgets (a row that had spent 17 of 20 could spend 20 more), and another ``--name`` did the same.
Now the ledger keeps an account per row (keyed by the row's content and its occurrence in the
file) and an owner spends what the most-spent of its rows allows: the row's total stays within the
budget whatever the partition or the node's name.
"""

import subprocess

import numpy as np
from hostile import OwnerProcess, kind, owner_command, pb, refusal_code, write_rows

D = 2
BUDGET = 20.0
SEED = 7
X = np.array([[0.11, 0.92], [0.47, 0.33], [0.68, 0.05], [0.86, 0.71]])
Y = np.array([0, 1, 1, 0])


def _lr(task_id, owner_id, epsilon):
    from hostile import lr_task

    return lr_task(task_id, owner_id, d=D, epsilon=epsilon)


def _holder(row: int, shards: int) -> int:
    """Which logical owner of a ``--shards`` node holds file row ``row`` (the node's own partition)."""
    from privfed.common.datasets import partition

    return next(i for i, p in enumerate(partition(X.shape[0], shards, seed=SEED)) if row in p)


class Restarts:
    """One node's data file and ledger, started again and again under a name and a ``--shards``."""

    def __init__(self, tmp_path, coordinator, certs, extra=()):
        self.tmp, self.coordinator, self.certs, self.extra = tmp_path, coordinator, certs, tuple(extra)
        self.data = write_rows(tmp_path / "rows.csv", X, Y)
        self.ledger = tmp_path / "node.sqlite"
        self.started = []

    def start(self, name, shards):
        cmd = owner_command(
            self.coordinator.port,
            name,
            data=self.data,
            n_owners=shards,
            ledger=self.ledger,
            certs=self.certs,
            budget=BUDGET,
            seed=SEED,
            extra=self.extra,
        )
        log_path = self.tmp / f"{name}-{len(self.started)}.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        node = OwnerProcess(name, proc, log_path, self.ledger, X, Y, SEED, BUDGET)
        self.started.append(node)
        ids = [f"{name}.o{i:05d}" for i in range(shards)]
        self.coordinator.wait_registered(ids)
        return node, ids

    def ask(self, owner_id, epsilon, tag):
        """The answer's kind, or the refusal's code and message."""
        task = _lr(f"{tag}-{owner_id}", owner_id, epsilon)
        result = self.coordinator.run([task])[task.task_id]
        return f"{refusal_code(result)}: {result.refusal.message}" if kind(result) == "refusal" else kind(result)

    def stop(self):
        for n in self.started:
            n.stop()


#: The row whose owner index changes when the node is re-sharded from 4 owners to 2.
ROW = next(r for r in range(X.shape[0]) if _holder(r, 4) != _holder(r, 2))


def row_spent(ledger, row):
    """What file row ``row`` has spent under any owner id (its account in the node's ledger)."""
    from privfed.common.ledger import Ledger
    from privfed.owner.data import row_digests

    with Ledger(ledger, epsilon_budget=BUDGET, delta_budget=1e-3) as led:
        led.bind_rows("test.reader", [row_digests(X, Y)[row]])
        return led.rows_spent("test.reader").epsilon


def test_a_row_keeps_its_spent_budget_across_shards_and_names(tmp_path, coordinator, certs):
    """Every new owner id answers (its own record decides a refusal, and the coordinator knows that record),
    but a release the row cannot afford does not read it: the row's account never passes the budget."""
    node = Restarts(tmp_path, coordinator, certs)
    asked = []  # (epsilon, answer, the row's account after it) of every task to the owner holding the row
    try:
        _, ids = node.start("owner-0", 4)
        asked.append((17.0, node.ask(ids[_holder(ROW, 4)], 17.0, "first"), row_spent(node.ledger, ROW)))
        node.stop()
        _, ids = node.start("owner-0", 2)  # the same data and ledger, another partition
        for epsilon, tag in ((3.5, "reshard-a"), (3.0, "reshard-b")):
            asked.append((epsilon, node.ask(ids[_holder(ROW, 2)], epsilon, tag), row_spent(node.ledger, ROW)))
        node.stop()
        _, ids = node.start("owner-1", 4)  # the same data and ledger under another node name
        asked.append((1.0, node.ask(ids[_holder(ROW, 4)], 1.0, "renamed"), row_spent(node.ledger, ROW)))
    finally:
        node.stop()
    assert [a for _, a, _ in asked] == ["lr_share"] * 4, asked  # no refusal tells the row was spent before
    assert [s for _, _, s in asked] == [17.0, 17.0, 20.0, 20.0], asked  # 3.5 and 1.0 did not read the row


def test_a_rows_policy_limits_per_job_and_per_day_survive_shards_and_names(tmp_path, coordinator, certs):
    """The owner policy's limits hold for a row under its new owner ids (found by wt-redteam: re-sharding
    gave new ids a fresh day) without a refusal that would tell the row was spent (wt-redteam2): a job that
    spent its announced 1.0 on the row reads it no more through the row's new id, nor does a second job past
    the day's limit of 1.5, under another partition and another node name alike; every one of them is
    answered (with the data-independent fallback), and an owner whose row spent nothing still reads it."""
    policy = tmp_path / "policy.toml"
    policy.write_text("max_epsilon_per_day = 1.5\n")
    node = Restarts(tmp_path, coordinator, certs, extra=("--policy", str(policy)))
    try:
        coordinator.job = pb.JobInfo(job_id="job-1", task="lr", epsilon=1.0, delta=0.0)
        _, ids = node.start("owner-0", 4)
        assert node.ask(ids[_holder(ROW, 4)], 1.0, "first") == "lr_share"
        node.stop()
        _, ids = node.start("owner-0", 2)  # the same data and ledger, another partition
        holder = ids[_holder(ROW, 2)]
        assert node.ask(holder, 0.5, "reshard-same-job") == "lr_share"
        coordinator.job = pb.JobInfo(job_id="job-2", task="lr", epsilon=1.0, delta=0.0)
        assert node.ask(holder, 1.0, "reshard-next-job") == "lr_share"
        node.stop()
        _, ids = node.start("owner-1", 4)  # the same data and ledger under another node name
        assert node.ask(ids[_holder(ROW, 4)], 1.0, "renamed") == "lr_share"
        assert row_spent(node.ledger, ROW) == 1.0  # only the first release read the row
        untouched = next(r for r in range(X.shape[0]) if r != ROW)
        assert node.ask(ids[_holder(untouched, 4)], 1.0, "untouched") == "lr_share"
        assert row_spent(node.ledger, untouched) == 1.0
    finally:
        node.stop()
