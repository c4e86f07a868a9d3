"""Audit 37, A37-3: a resumed boosting job that stops before its owners are back overwrites the interrupted run's
report, and what that report said its owners may have spent is gone from every later report.

``privfed serve`` writes a running job's report before each batch that asks for a release (``write_ahead``), so a
service killed mid-batch leaves a report naming who may have paid (walkthrough 10, W10-3). A journal-less job is
failed at the next start *with that report* (``CoordinatorService._recovered``). A boosting job by shares is queued
again and resumed; its run reads the old report once (``spent_before``, :func:`~privfed.server.rounds.may_have_spent`)
and writes a *new* ``JobReport`` that starts from ``{"status": "running"}``. The carry lives only in the new run's
``JobBook``, and the book writes it only once it knows its owners (``JobReport.fail`` writes the book's fields only
when ``book.owner_ids`` is set, i.e. after ``run_job``'s ``book.begin``).

So when the resumed run ends before ``book.begin`` -- its owners' nodes are not back within ``register_timeout``
(``RoundFailed`` in ``run_job``, or in ``_gone`` when fewer than its quorum come back), the service is stopped while
it waits (``JobAborted``: the job is queued again, "nobody paid for it"), or ``check_feasible`` fails -- the failed
report it writes has no ``epsilon_by_owner`` and no ``epsilon_unanswered_by_owner``. The owners' ledgers hold the
interrupted run's releases for the job; its report, and (after ``JobAborted``) the carry of every later run, name
none of them.

Real service in this process (no owner node: none comes back), its store holding what the killed service left: the
job ``running`` with ``asked``, its journal file, and the write-ahead report naming two owners. Control: the same
store for a journal-less job (``nb``), which the start fails with its report kept.

Fixed: the service reads the earlier report's may-have-spent before a run's report replaces it, and writes it as
unanswered from the run's first write (``server/service.py``); these tests pass since.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from privfed.server.jobstore import JobStore
from privfed.server.rounds import may_have_spent
from privfed.server.service import CoordinatorService, ServiceConfig

#: What the killed service's write-ahead report said: one owner counted, one asked with no answer yet.
PAID = {"epsilon_by_owner": {"node-0.o00000": 0.4}, "epsilon_unanswered_by_owner": {"node-1.o00000": 0.4}}
BDT = {"task": "bdt", "release": "shares", "epsilon": 2.0, "owners": 10, "n_rounds": 3, "register_timeout": 1}
NB = {"task": "nb", "epsilon": 2.0, "owners": 2, "register_timeout": 1}


def _killed_mid_batch(store_root: Path, settings: dict) -> str:
    """The store as a service SIGKILLed mid-batch leaves it: the job running, its owners asked, its journal (a
    boosting job's, made when its run began) and its write-ahead report."""
    store = JobStore(store_root)
    job_id = store.submit(settings, "alice").job_id
    store.update(job_id, state="running", asked=True)
    job_dir = store.job_dir(job_id)
    if settings["task"] == "bdt":
        from privfed.server.journal import Journal

        Journal(job_dir / "journal.sqlite").close()
    (job_dir / "report.json").write_text(json.dumps({"status": "running", **PAID}))
    return job_id


def _after_restart(tmp_path: Path, settings: dict) -> tuple[str, dict]:
    """Start the service over that store with no owner node coming back; the job's state and report once it ends."""
    job_id = _killed_mid_batch(tmp_path / "store", settings)
    svc = CoordinatorService(ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None), None)
    svc.start()
    try:
        deadline = time.monotonic() + 60
        while svc.store.get(job_id).state in ("queued", "running"):
            assert time.monotonic() < deadline, svc.store.get(job_id)
            time.sleep(0.05)
        state = svc.store.get(job_id).state
        report = svc.report_of(job_id) or {}
    finally:
        svc.stop()
    return state, report


def test_a_resumed_job_that_fails_waiting_for_its_owners_keeps_who_may_have_paid(tmp_path):
    state, report = _after_restart(tmp_path, BDT)
    assert state == "failed", (state, report)
    named = may_have_spent(report)
    assert named == may_have_spent(PAID), (named, {k: report.get(k) for k in ("status", "error")})


def test_a_resumed_job_stopped_while_waiting_for_its_owners_keeps_who_may_have_paid(tmp_path):
    """The service is stopped (SIGTERM: ``stop()``) while the resumed run waits for its owners: the job is queued
    again ("stopped before it asked its owners anything"), and the report the next start carries from must still
    name the interrupted run's owners."""
    job_id = _killed_mid_batch(tmp_path / "store", {**BDT, "register_timeout": 60})
    svc = CoordinatorService(ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None), None)
    svc.start()
    try:
        deadline = time.monotonic() + 30
        while svc.store.get(job_id).state != "running" or not (svc.store.job_dir(job_id) / "job.log").exists():
            assert time.monotonic() < deadline, svc.store.get(job_id)
            time.sleep(0.05)
        time.sleep(0.5)  # waiting for its owners
    finally:
        svc.stop()
    assert JobStore(tmp_path / "store").get(job_id).state in ("queued", "running")  # to run again at the next start
    report = json.loads((tmp_path / "store" / job_id / "report.json").read_text())
    assert may_have_spent(report) == may_have_spent(PAID), report


@pytest.mark.parametrize("settings", [NB, BDT], ids=["nb", "bdt"])
def test_a_job_whose_settings_the_restarted_service_no_longer_takes_keeps_who_may_have_paid(tmp_path, settings):
    """``_recovered`` cannot tell what such a job is (``journal_less`` raises ``ConfigError``: a key this version of
    the service no longer takes, after an upgrade), so it queues it again "to fail with the reason when it starts";
    that start's fresh ``JobReport`` replaces the report naming who may have paid, for a journal-less job too (the
    W14-1 fix keeps the report only where ``_recovered`` fails the job itself)."""
    state, report = _after_restart(tmp_path, {**settings, "retired_setting": 1})
    assert state == "failed", (state, report)
    assert may_have_spent(report) == may_have_spent(PAID), {k: report.get(k) for k in ("status", "error")}


def test_control_a_journal_less_job_is_failed_at_the_start_with_its_report_kept(tmp_path):
    """Control: the journal-less job is failed by ``_recovered`` with the killed run's report, so the check above
    passes where the report is kept."""
    state, report = _after_restart(tmp_path, NB)
    assert state == "failed", (state, report)
    assert may_have_spent(report) == may_have_spent(PAID), report
