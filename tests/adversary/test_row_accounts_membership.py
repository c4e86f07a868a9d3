"""Budgets that follow rows by their content make a refusal depend on a row (wt-redteam2).

DESIGN "Release discipline" rule 5 keeps a row's spent budget across re-sharding, renaming and
re-ordering by keying its account on the row's *content* (``privfed.common.ledger_rows``). Rule 1 says
whether a task is refused never depends on a row. The two meet when a node's operator refreshes its
data file and keeps its ledger (a monthly export, here also under a new node name, so that no owner
id has spent anything of its own): a new owner whose row was in the old file inherits
that row's spent budget, one whose row is new starts fresh. A hostile coordinator that spent the old
rows' budgets then asks every new owner for a release and reads, from ``budget_exceeded`` or an
answer, which owners hold a row of the old file: membership of each one-row owner's record in the
earlier data, exactly, with no ledger entry for the question.

Differential form: one ledger history, then two refreshed files that differ in one row only (the
row an owner holds is an old one, or a new one). The answer must be the same for both: a refusal is
decided by the owner id's own record, and a release the old row cannot afford does not read it (the
ledger's ``RowsUnused``: the owner sends its data-independent fallback), so the old row's account stays
where the old owner left it.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
from hostile import OwnerProcess, kind, owner_command, refusal_code, rows_by_owner, write_rows
from test_budget_follows_rows import _lr

BUDGET = 20.0
SEED = 7
OLD = np.array([[0.11, 0.92], [0.47, 0.33], [0.68, 0.05], [0.86, 0.71]])
NEW = np.array([[0.21, 0.52], [0.37, 0.83], [0.58, 0.15], [0.96, 0.41]])
Y = np.array([0, 1, 1, 0])


def _start(tmp_path, coordinator, certs, X, ledger, tag, name="owner-0"):
    data = write_rows(tmp_path / f"{tag}.csv", X, Y)
    cmd = owner_command(coordinator.port, name, data=data, n_owners=len(X), ledger=ledger, certs=certs,
                        budget=BUDGET, seed=SEED)  # fmt: skip
    log_path = tmp_path / f"{tag}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    node = OwnerProcess(name, proc, log_path, ledger, X, Y, SEED, BUDGET)
    ids = [f"{name}.o{i:05d}" for i in range(len(X))]
    coordinator.wait_registered(ids)
    return node, ids


def _ask(coordinator, owner_id, epsilon, tag):
    task = _lr(f"{tag}-{owner_id}", owner_id, epsilon)
    result = coordinator.run([task])[task.task_id]
    return refusal_code(result) if kind(result) == "refusal" else kind(result)


def test_a_refreshed_file_does_not_tell_which_owners_hold_an_old_row(tmp_path, coordinator, certs):
    history = tmp_path / "history.sqlite"
    node, ids = _start(tmp_path, coordinator, certs, OLD, history, "old")
    try:  # the coordinator spends 17 of every old row's 20
        assert [_ask(coordinator, o, 17.0, "old") for o in ids] == ["lr_share"] * len(ids)
    finally:
        node.stop()
    target = rows_by_owner(len(OLD), SEED).index(0)  # the owner that holds file row 0 after the refresh
    answers = {}
    for variant, row0 in (("kept", OLD[0]), ("new", NEW[0])):  # the refreshed files differ in row 0 only
        ledger = tmp_path / f"{variant}.sqlite"
        shutil.copy(history, ledger)
        node, ids = _start(tmp_path, coordinator, certs, np.vstack([row0, NEW[1:]]), ledger, variant, "owner-1")
        try:
            answers[variant] = _ask(coordinator, ids[target], 5.0, variant)
        finally:
            node.stop()
    assert answers["kept"] == answers["new"] == "lr_share", answers
    from privfed.common.ledger import Ledger
    from privfed.owner.data import row_digests

    with Ledger(tmp_path / "kept.sqlite", epsilon_budget=BUDGET, delta_budget=1e-3) as led:
        led.bind_rows("test.reader", [row_digests(OLD, Y)[0]])
        assert led.rows_spent("test.reader").epsilon == 17.0  # the old row was not read again
