"""Audit 38, A38-4: cancelling a job that is queued *again* (after a restart, or after its resumed run was stopped
while it waited for its owners) writes a fresh report over the one that named who may have paid.

A boosting job by shares that the service was running when it was killed (or stopped) stays ``running`` in the store;
the next start queues it again (``JobStore.recover``, ``CoordinatorService._recovered``) with its write-ahead report,
which names every owner asked for a release (``epsilon_by_owner``, ``epsilon_unanswered_by_owner``). A37-3's fix keeps
that naming through the resumed run's reports. But a job that is ``queued`` can be cancelled by its data user (or the
operator's job API) at once: ``CoordinatorService.cancel`` then writes ``JobReport(store, {"status": "cancelled",
"error": ...}).write()``, a new report over the job's ``report.json``. The owners that paid in the interrupted run are
then in no report of the job, while their ledgers hold the releases (under the job's id).

Reachable by the data user alone, with no crash needed after the first: a resumed run stopped while it waits for
its owners is queued again by ``_run`` ("stopped before it asked its owners anything"), and a restarted service
queues every interrupted job before its runner picks one. Severity medium (report accounting: the invariant that every
job report names every owner that may have paid). Suggested fix: a cancel of a queued job updates the job's existing
report (``status``/``error``) instead of replacing it, as ``JobReport(..., report_of(job_id)).fail`` does in
``_recovered``.

The real service's pieces over a store as a killed service leaves it (A37-3's harness): not started, so its runner
does not take the queued job before the cancel.

Fixed: ``cancel`` writes its status and error over the job's report, keeping the rest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privfed.server.jobstore import JobStore
from privfed.server.journal import Journal
from privfed.server.rounds import may_have_spent
from privfed.server.service import CoordinatorService, ServiceConfig

pytestmark = pytest.mark.in_process

PAID = {"epsilon_by_owner": {"node-0.o00000": 0.4}, "epsilon_unanswered_by_owner": {"node-1.o00000": 0.4}}
BDT = {"task": "bdt", "release": "shares", "epsilon": 2.0, "owners": 10, "n_rounds": 3}


def _restarted(tmp_path: Path, settings: dict, *, running: bool = True) -> tuple[CoordinatorService, str]:
    """A service over the store a killed one left (the job ``running`` with ``asked``, its journal and write-ahead
    report), after its start's recovery: the job is queued again."""
    store = JobStore(tmp_path / "store")
    job_id = store.submit(settings, "alice").job_id
    if running:
        store.update(job_id, state="running", asked=True)
        job_dir = store.job_dir(job_id)
        Journal(job_dir / "journal.sqlite").close()
        (job_dir / "report.json").write_text(json.dumps({"status": "running", **PAID}))
    svc = CoordinatorService(ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None), None)
    for again in svc.store.recover():  # what start() does before its runner takes the queue
        svc._recovered(svc.store.get(again))
    return svc, job_id


def test_cancelling_a_job_queued_again_keeps_who_may_have_paid(tmp_path):
    svc, job_id = _restarted(tmp_path, BDT)
    assert svc.store.get(job_id).state == "queued"
    assert svc.cancel(job_id, "alice").state == "cancelled"
    report = svc.report_of(job_id) or {}
    assert may_have_spent(report) == may_have_spent(PAID), report  # on current code: {"status": "cancelled", ...}


def test_control_a_cancelled_job_that_never_ran_names_nobody(tmp_path):
    """Control: a job cancelled while queued for the first time had nobody pay; its report names nobody, rightly."""
    svc, job_id = _restarted(tmp_path, BDT, running=False)
    assert svc.cancel(job_id, "alice").state == "cancelled"
    report = svc.report_of(job_id) or {}
    assert report.get("status") == "cancelled" and may_have_spent(report) == {}, report
