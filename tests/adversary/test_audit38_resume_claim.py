"""Audit 38, A38-2: ``privfed coordinator --journal J --resume`` rewrites a killed run's report to say the job "was
resumed in" the new run directory before it knows the new run can resume it.

``server/main.py`` ``_spent_in_earlier_runs`` (W14-2 residual, commit 76cb034) runs as soon as the job is built: it
records the new run with ``Journal.note_run`` and marks every earlier report still ``running`` as
``failed`` with ``"interrupted; the job was resumed in <new run dir>"``. Whether the new run resumes the job is
decided later, by ``Journal.begin`` in the boosting strategy (after the owners registered): a run whose
configuration or owners differ from the journal's job (an operator who changed a flag; ``docker compose`` passes
``--resume`` on every start) is refused there, and a run that fails before (its port taken, a register timeout)
never gets that far. The killed run's report then points at a run that resumed nothing, and that run's own report
says it failed, so a reader of the first report is sent to a directory that holds none of the job's rounds.

Severity low: the owners the killed run may have had pay stay named in its report (only ``status`` and ``error``
change), and a later, matching ``--resume`` still reads both reports. It is a report claiming something false,
written from a crafted (or merely changed) command line. Suggested fix: mark earlier reports only once
``Journal.begin`` accepted the resume (or say "a run of this journal started in ..." without claiming a resume).

Fixed: the killed run's report says "interrupted; a later run of its journal started in <dir>", true either way.
"""

from __future__ import annotations

import json

import pytest

from privfed.common.errors import ConfigError
from privfed.server.journal import Journal
from privfed.server.main import _spent_in_earlier_runs
from privfed.server.report import JobReport, write_json

OWNERS = ["node-0.o00000", "node-1.o00000"]


def _killed_run(tmp_path):
    """A journaled job killed mid-run: the journal holds it unfinished and its write-ahead report is ``running``."""
    journal = tmp_path / "journal.sqlite"
    first = tmp_path / "out" / "run1" / "report.json"
    first.parent.mkdir(parents=True)
    with Journal(journal) as book:
        assert book.note_run(first, resume=False) == []
        book.begin(fingerprint="job-x", owner_ids=OWNERS, run_id="boost-x", resume=False)
    write_json(first, {"status": "running", "epsilon_unanswered_by_owner": {OWNERS[0]: 0.5}})
    return journal, first


def test_a_run_that_does_not_resume_the_job_is_not_named_as_its_resumption(tmp_path):
    journal, first = _killed_run(tmp_path)
    second = JobReport(tmp_path / "out", {"status": "running"})
    carried = _spent_in_earlier_runs(journal, second, resume=True)
    assert carried == {OWNERS[0]: {"": 0.5}}  # by owner only, as a report of older code names it
    with Journal(journal) as book, pytest.raises(ConfigError, match="another configuration"):
        # what the boosting strategy's begin says to a run whose configuration changed: it resumes nothing
        book.begin(fingerprint="job-y", owner_ids=OWNERS, run_id="boost-y", resume=True)
    fields = json.loads(first.read_text())
    assert fields["epsilon_unanswered_by_owner"] == {OWNERS[0]: 0.5}  # the payers stay named (why it is low)
    assert "resumed in" not in fields.get("error", ""), fields


def test_control_a_run_that_resumes_the_job_names_itself(tmp_path):
    """Control: the matching run is accepted by ``begin``; naming it in the killed run's report is then true."""
    journal, first = _killed_run(tmp_path)
    second = JobReport(tmp_path / "out", {"status": "running"})
    _spent_in_earlier_runs(journal, second, resume=True)
    with Journal(journal) as book:
        assert book.begin(fingerprint="job-x", owner_ids=OWNERS, run_id="boost-z", resume=True) == "boost-x"
    assert str(second.run_dir()) in json.loads(first.read_text())["error"]
