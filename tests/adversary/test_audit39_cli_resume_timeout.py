"""Audit 39, A39-5: ``privfed coordinator --journal J --resume`` whose owners are not back by the register timeout
writes a failed report naming nobody, and the killed run's report points the reader at it.

A37-3's fix (commit 0820608) is the service's: ``CoordinatorService._run`` writes the earlier runs' may-have-spent
into the new report before anything can fail. The coordinator CLI carries it only in the job book
(``server/main.py``: ``spent_before=_spent_in_earlier_runs(...)``, ``JobBook.carry``), and the book's account reaches
a failed report only once owners registered (``JobReport.fail``: ``book.to_report() if ... book.owner_ids``). A
resumed run that fails waiting for its owners therefore writes ``status: failed`` with no ``epsilon_*`` field, while
``_spent_in_earlier_runs`` has already rewritten the killed run's report to ``failed``: "interrupted; a later run of
its journal started in <the new run>". The report the job's story ends on names nobody; the owners the killed run
had pay are only in the older report, which now reads as superseded. (A later ``--resume`` reads both: not a loss
of the ledger-side bound, a report naming nobody.)

Severity low-medium (report accounting; docker compose restarts pass ``--resume`` each time, so a node slow to come
back after a crash is enough). Suggested fix: as the service does, write the carried account
(``epsilon_unanswered_by_owner`` / ``epsilon_by_release``) into the new run's report as soon as
``_spent_in_earlier_runs`` returns, or let ``JobReport.fail`` include a book's carried account without owners.

Real process: the CLI over a journal and write-ahead report as a killed run leaves them, no owner node, 1 s timeout.

Fixed: the coordinator writes the carried account into its report as soon as it reads it (``carried_fields``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from privfed.server.journal import Journal
from privfed.server.report import write_json
from privfed.server.rounds import may_have_spent

OWNERS = ["node-0.o00000", "node-1.o00000"]
KILLED = {
    "status": "running",
    "epsilon_by_owner": {OWNERS[0]: 0.5},
    "epsilon_unanswered_by_owner": {OWNERS[1]: 0.5},
    "epsilon_by_release": {o: {"boost-share:boost-x": 0.5} for o in OWNERS},
}
CLI = [sys.executable, "-m", "privfed.deploy.cli", "coordinator", "--task", "bdt", "--insecure"]
CLI += ["--listen", "127.0.0.1:0", "--owners", "10", "--epsilon", "4", "--rounds", "3", "--n-bins", "4"]
CLI += ["--weight-bound", "4", "--max-owner-rows", "20", "--dataset", "synthetic", "--n-samples", "800"]
CLI += ["--seed", "3", "--test-fraction", "0.25", "--register-timeout", "1"]


def _resumed_run_timing_out(tmp_path: Path) -> tuple[dict, dict]:
    journal, out = tmp_path / "journal.sqlite", tmp_path / "out"
    first = out / "run1" / "report.json"
    first.parent.mkdir(parents=True)
    with Journal(journal) as book:  # the killed run: recorded, begun, unfinished
        book.note_run(first, resume=False)
        book.begin(fingerprint="job-x", owner_ids=OWNERS, run_id="boost-x", resume=False)
    write_json(first, KILLED)
    cmd = [*CLI, "--out", str(out), "--journal", str(journal), "--resume"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "not registered" in done.stderr, done.stderr[-2000:]
    (second,) = [p for p in out.glob("*/report.json") if p != first]
    return json.loads(first.read_text()), json.loads(second.read_text())


def test_the_resumed_runs_report_names_who_may_have_paid(tmp_path):
    earlier, report = _resumed_run_timing_out(tmp_path)
    assert report["status"] == "failed"
    assert may_have_spent(report) == may_have_spent(KILLED), {k: report.get(k) for k in ("status", "error")}


def test_control_the_killed_runs_report_keeps_its_account_and_points_at_the_new_run(tmp_path):
    """Control: the older report still names the payers (why the ledger-side bound holds), and now says a later
    run started elsewhere."""
    earlier, _ = _resumed_run_timing_out(tmp_path)
    assert may_have_spent(earlier) == may_have_spent(KILLED)
    assert earlier["status"] == "failed" and "a later run of its journal started in" in earlier["error"], earlier
