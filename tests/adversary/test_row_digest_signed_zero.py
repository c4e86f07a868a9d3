"""Audit 7: a row's budget survives a data file that writes one of its zeros as ``-0.0``.

The ledger keeps an account per row, keyed by a digest of the row's float64 bytes
(:func:`privfed.owner.data.row_digests`; ``test_budget_follows_rows.py``). ``0.0`` and ``-0.0`` are one
number to every mechanism (the release of a row is the same function of either), but two byte strings:
the same rows re-exported by a pipeline that flips a zero's sign (``-1 * 0.0``, a CSV writer's ``-0``)
gave the row a fresh account, and an owner holding it alone under a new id (the node renamed, or re-sharded:
the id's own record is fresh) released from it again past its budget.
"""

import subprocess

import numpy as np
from hostile import OwnerProcess, kind, lr_task, owner_command, refusal_code, rows_by_owner, write_rows

D = 2
BUDGET = 20.0
SEED = 7
#: Row 1 holds a zero; one owner per row (``--shards 4``), so the owner of row 1 holds it alone.
X = np.array([[0.11, 0.92], [0.0, 0.33], [0.68, 0.05], [0.86, 0.71]])
Y = np.array([0, 1, 1, 0])
ROW = 1


def _spent(ledger, digest: bytes, reader: str) -> float:
    from privfed.common.ledger import Ledger

    with Ledger(ledger, epsilon_budget=BUDGET, delta_budget=1e-3) as led:
        led.bind_rows(reader, [digest])
        return led.rows_spent(reader).epsilon


def test_a_row_written_with_a_negative_zero_keeps_its_account(tmp_path, coordinator, certs):
    """Spend 17 of the row's 20, restart the node renamed on the same ledger with the same rows but the zero
    written ``-0.0``, ask its new owner 3.5: over every account the row has had, it never spends more than its
    budget (on main: 17 + 3.5 on two accounts)."""
    from privfed.owner.data import row_digests

    negative = X.copy()
    negative[ROW, 0] = -0.0
    ledger = tmp_path / "node.sqlite"
    holder = rows_by_owner(X.shape[0], SEED).index(ROW)
    answers, started = [], []
    try:
        for life, (name, rows, epsilon) in enumerate((("owner-0", X, 17.0), ("owner-1", negative, 3.5))):
            owner_id = f"{name}.o{holder:05d}"
            data = write_rows(tmp_path / f"rows-{life}.csv", rows, Y)
            assert ("-0.0" in data.read_text()) == (life == 1)
            cmd = owner_command(
                coordinator.port, name, data=data, n_owners=4, ledger=ledger, certs=certs, budget=BUDGET, seed=SEED
            )
            log_path = tmp_path / f"owner-{life}.log"
            with open(log_path, "w") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            started.append(OwnerProcess(name, proc, log_path, ledger, rows, Y, SEED, BUDGET))
            coordinator.wait_registered([owner_id])
            task = lr_task(f"life{life}-{owner_id}", owner_id, d=D, epsilon=epsilon)
            result = coordinator.run([task])[task.task_id]
            answers.append(refusal_code(result) if kind(result) == "refusal" else kind(result))
            started[-1].stop()
    finally:
        for node in started:
            node.stop()
    assert answers == ["lr_share", "lr_share"], answers  # the second is the fallback: no refusal tells
    before, after = row_digests(X, Y)[ROW], row_digests(negative, Y)[ROW]
    total = _spent(ledger, before, "test.before") + (0.0 if after == before else _spent(ledger, after, "test.after"))
    assert total <= BUDGET, (total, after == before)
