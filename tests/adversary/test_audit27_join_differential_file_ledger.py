"""Audit 27: the accept round's budget check (``OwnerCore._check_affords``) answers alike for owners of any rows on a
ledger file that a restarted node opened again.

``test_join_differential.py`` (audit 25) compares five owners that share one id history and hold different rows.
It uses in-memory ledgers, built and asked in one process. A node on a ledger file opens it again when it
restarts (``common/ledger_file.py``: since e742ad5 the open refuses a file with no ledger in it, and the node's
start reads its last release). A resumed boosting job (c92c004/4e1b654) asks its owners to join again, under the
same job id. Here the same histories are written to a ledger file by one ``Ledger``, which is then closed. A new
``Ledger`` and core over the same rows then answer each hostile announcement, the resumed job's own id
(``the-spent-job``) among them, and the answer bytes, the ledger's SQL statements and the Python calls must be
the same for the five owners.
"""

from __future__ import annotations

import numpy as np
import pytest
import test_join_differential as jd
from differential import K, traced_answer

from privfed.common.ledger import Debit, Ledger
from privfed.common.tasks import JoinTask, LrShareTask, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner

pytestmark = pytest.mark.in_process


def _reopened_core(tmp_path, rows: str, policy: str) -> OwnerCore:
    """``jd._core``'s history for ``rows``, written to a ledger file, and a core over the file opened again."""
    path = tmp_path / f"{rows}-{policy}.sqlite"
    for p in tmp_path.glob(f"{rows}-{policy}.sqlite*"):
        p.unlink()
    X, y = jd.ROWS[rows]
    keys = tuple(row_digests(X, y))
    n_held, n_ids = jd.HELD.get(rows, (0, 0))
    with Ledger(path, epsilon_budget=jd.BUDGET, delta_budget=1e-3) as ledger:
        for old in jd.OLD[:n_ids]:
            ledger.bind_rows(old, keys[:n_held])
            ledger.debit_many([Debit(old, 10.0, 0.0, "lr", f"{old}-spent#0", job="old-job")])
        owner = LocalOwner(jd.OWNER, X, y, np.random.Generator(np.random.PCG64(7)), K, jd.BOUNDS, row_keys=keys)
        core = OwnerCore([owner], ledger, owner_policy=jd.POLICIES[policy])
        spec = LrShareTask("pm", 1.0, 1.0, 1.0, K, jd.BOUNDS)
        core.answer([Task("pre-0", jd.OWNER, "round-0", spec)], job=jd._decoded(jd.SPENT_JOB))
    ledger = Ledger(path, epsilon_budget=jd.BUDGET, delta_budget=1e-3)  # the node's restart
    owner = LocalOwner(jd.OWNER, X, y, np.random.Generator(np.random.PCG64(7)), K, jd.BOUNDS, row_keys=keys)
    return OwnerCore([owner], ledger, owner_policy=jd.POLICIES[policy])


def _observed(tmp_path, rows: str, policy: str, announcement: str):
    core = _reopened_core(tmp_path, rows, policy)
    statements: list[str] = []
    calls: list[tuple[str, str]] = []
    core.ledger._db().set_trace_callback(lambda s: statements.append(jd._normalised(s)))
    try:
        result = traced_answer(
            jd._JoinAt(core, jd.ANNOUNCEMENTS[announcement]),
            jd.OWNER,
            JoinTask(),
            lambda w, f: calls.append((w, f.f_code.co_name)),
        )
    finally:
        core.ledger._db().set_trace_callback(None)
        core.ledger.close()
    return jd._wire(result), statements, calls


@pytest.mark.parametrize("policy", list(jd.POLICIES))
def test_owners_of_any_rows_on_a_reopened_ledger_file_answer_every_join_alike(tmp_path, policy):
    answers = {}
    for announcement in jd.ANNOUNCEMENTS:
        _observed(tmp_path, "seven", policy, announcement)  # a warm-up: module caches filled before any trace
        seen = {rows: _observed(tmp_path, rows, policy, announcement) for rows in jd.ROWS}
        wire, statements, calls = seen["three"]
        answers[announcement] = jd.pb.Result.FromString(wire).WhichOneof("kind")
        for rows, (w, s, c) in seen.items():
            assert w == wire, (announcement, rows)
            assert s == statements, (announcement, rows, jd._first_difference(s, statements))
            assert c == calls, (announcement, rows, jd._first_difference(c, calls))
    assert answers["ok"] != "refusal" and answers["huge"] == "refusal", answers  # the check did run on the file
