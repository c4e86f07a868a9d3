"""Audit 39, A39-4: a job whose report already says it was cancelled (or failed) is queued again by a restart and
resumes, its owners asked for more.

``CoordinatorService._run`` ends a job by writing its report first and its store record second (``report.write(
status="cancelled", ...)`` then ``store.update(state="cancelled")``; ``report.fail`` then ``store.update(state=
"failed")``). A service killed between the two leaves the record ``running``. At the next start ``_recovered`` reads
the report only for ``status == "ok"`` (A30-4's fix, recorded done); any other status, ``cancelled`` and ``failed``
included, queues a boosting job by shares again "to go on from its journal": the job its data user cancelled (or
that failed, e.g. its quorum lost) runs on, its owners pay for further rounds, and the report that said
``cancelled`` is replaced by the resumed run's. A report that claimed the job ended is contradicted by what follows.

Low severity: a window of two writes (wider for a cancel: the data user's cancel of a running job is answered
``running`` and acted on at the dispatcher's next wait; a crash before that loses it, which this test does not
cover). Suggested fix: in ``_recovered``, record a job whose report says ``cancelled`` or ``failed`` in that state
(as ``ok`` is recorded done), keeping the report.

Harness: A38-4's (the store as a killed service leaves it, ``_recovered`` run as ``start()`` runs it).

Fixed: ``_recovered`` records a job whose report says cancelled, or failed after its owners were asked, as ended.
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


def _restarted(tmp_path: Path, status: dict) -> tuple[CoordinatorService, str]:
    store = JobStore(tmp_path / "store")
    job_id = store.submit(BDT, "alice").job_id
    store.update(job_id, state="running", asked=True)  # the record the killed service did not get to update
    job_dir = store.job_dir(job_id)
    Journal(job_dir / "journal.sqlite").close()
    (job_dir / "report.json").write_text(json.dumps({**status, **PAID}))
    svc = CoordinatorService(ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None), None)
    for again in svc.store.recover():  # what start() does before its runner takes the queue
        svc._recovered(svc.store.get(again))
    return svc, job_id


@pytest.mark.parametrize(
    "status",
    [
        {"status": "cancelled", "error": "cancelled by alice"},
        {"status": "failed", "error": "only 1 of 10 owners take part (quorum 2)"},
    ],
    ids=["cancelled", "failed"],
)
def test_a_job_whose_report_says_it_ended_is_not_resumed(tmp_path, status):
    svc, job_id = _restarted(tmp_path, status)
    assert svc.store.get(job_id).state == status["status"], svc.store.get(job_id)


@pytest.mark.parametrize(
    "status",
    [{"status": "interrupted"}, {"status": "failed", "error": "stopped by service stop: waiting for owners"}],
    ids=["interrupted", "stopped-before-interrupted-written"],
)
def test_control_an_interrupted_job_is_queued_again_with_its_account(tmp_path, status):
    """Control: a report the stop left ``interrupted`` is the job to go on from its journal, as intended; so is one
    the stop's own failure wrote, the process killed before it wrote ``interrupted`` over it."""
    svc, job_id = _restarted(tmp_path, status)
    assert svc.store.get(job_id).state == "queued"
    assert may_have_spent(svc.report_of(job_id)) == may_have_spent(PAID)
