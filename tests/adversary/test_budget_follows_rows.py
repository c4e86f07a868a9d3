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
    from hostile import bounds_matrix

    return pb.Task(
        task_id=task_id,
        owner_id=owner_id,
        round_id=task_id,
        lr_share=pb.LrShareTask(
            mechanism=pb.MechanismSpec(name=pb.MECHANISM_PM, epsilon=epsilon),
            param_bound=1.0,
            c=1.0,
            n_classes=2,
            bounds=bounds_matrix(D),
        ),
    )


def _holder(row: int, shards: int) -> int:
    """Which logical owner of a ``--shards`` node holds file row ``row`` (the node's own partition)."""
    from privfed.common.datasets import partition

    return next(i for i, p in enumerate(partition(X.shape[0], shards, seed=SEED)) if row in p)


def test_a_row_keeps_its_spent_budget_across_shards_and_names(tmp_path, coordinator, certs):
    data = write_rows(tmp_path / "rows.csv", X, Y)
    ledger = tmp_path / "node.sqlite"
    started = []

    def start(name, shards):
        cmd = owner_command(
            coordinator.port, name, data=data, n_owners=shards, ledger=ledger, certs=certs, budget=BUDGET, seed=SEED
        )
        log_path = tmp_path / f"{name}-{len(started)}.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        node = OwnerProcess(name, proc, log_path, ledger, X, Y, SEED, BUDGET)
        started.append(node)
        ids = [f"{name}.o{i:05d}" for i in range(shards)]
        coordinator.wait_registered(ids)
        return node, ids

    def ask(node, owner_id, epsilon, tag):
        task = _lr(f"{tag}-{owner_id}", owner_id, epsilon)
        result = coordinator.run([task])[task.task_id]
        return refusal_code(result) if kind(result) == "refusal" else kind(result)

    # The row whose owner index changes when the node is re-sharded from 4 owners to 2.
    row = next(r for r in range(X.shape[0]) if _holder(r, 4) != _holder(r, 2))
    asked = []  # (epsilon, answer) of every task to the owner holding the row
    try:
        node, ids = start("owner-0", 4)
        asked.append((17.0, ask(node, ids[_holder(row, 4)], 17.0, "first")))
        node.stop()
        node, ids = start("owner-0", 2)  # the same data and ledger, another partition
        for epsilon, tag in ((3.5, "reshard-a"), (3.0, "reshard-b")):
            asked.append((epsilon, ask(node, ids[_holder(row, 2)], epsilon, tag)))
        node.stop()
        node, ids = start("owner-1", 4)  # the same data and ledger under another node name
        asked.append((1.0, ask(node, ids[_holder(row, 4)], 1.0, "renamed")))
    finally:
        for n in started:
            n.stop()
    spent_on_row = sum(e for e, answer in asked if answer == "lr_share")
    assert spent_on_row <= BUDGET, f"row {row} spent {spent_on_row} of a budget of {BUDGET}: {asked}"
    assert [a for _, a in asked] == ["lr_share", "budget_exceeded", "lr_share", "budget_exceeded"], asked
