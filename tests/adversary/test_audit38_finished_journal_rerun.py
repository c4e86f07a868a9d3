"""Audit 38, A38-3: a service killed after a boosting job's journal was marked finished, but before the job's ``ok``
report was written, runs the whole job again at its next start, as a new boosting run: every owner pays a second
time for the same job, and the second run's report names about one run's spending.

The boosting strategy marks its journal finished as soon as its last round is done (``server/strategies/boosting.py``
``_run``: ``self.journal.finish()``), before ``run_federated_job`` serves and saves the model, computes the job's
reference (the service's non-private reference model, seconds on a real data set) and writes the ``ok`` report
(``server/job.py``). A service killed in that window (SIGKILL, the OOM killer, a host reboot, ``docker compose
stop``'s SIGKILL after its grace period while the reference is computed) leaves the job ``running``, its
write-ahead report ``running``, and a journal whose job is finished. At the next start:

* ``CoordinatorService._recovered`` sees a boosting job by shares (``journal_less`` is None) whose report is not
  ``ok`` and queues it again ("it goes on from its journal");
* ``_run`` resumes it (``resume=journal.exists()``), and ``Journal.begin(resume=True)`` reads the finished job as "a
  finished job: its results are in its report; start afresh": it deletes the journal's rounds and returns a *new*
  run id (``boost-<random>``).

A new run id is a new run to every owner (its shares and evaluations are keyed by run), so each pays again under the
same job id; an owner without ``--policy`` is not stopped by the job's announced epsilon (``_check_affords`` counts
only *other* jobs' spending, ``other_than=job.job_id``). ``_recovered``'s own rule, "run again, its owners would pay
twice", is what this breaks. The new run's report then carries the killed run's may-have-spent and nets it per owner
against the new run's counts (A38-1), so it names about one run where the ledgers hold two.

The owners' ledgers record both runs, so the ledger bound holds; the job's promise (epsilon per owner) and its report
do not. Severity medium: it needs a crash in a window, but the window includes the reference computation.
Suggested fix: mark the journal finished only after the ``ok`` report is written (or have ``_recovered`` record the
job done/failed when its journal says finished), and never start a fresh run for a job id that already has one.

Reproduced on the service's own pieces: its store as the killed service leaves it, ``_recovered`` on a service over
it, and the journal's ``begin`` as ``_run`` calls it; then a real owner core over one ledger answers a share of the
killed run and of the run the restart would start. No owner node (the rerun itself needs them; the pieces show it).

Fixed: ``_recovered`` reopens a finished journal of a job queued again (``reopen_finished``), so its next run
replays every round from it (``tests/unit/test_journal.py``: the same model, no new debit).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from differential import BOUNDS, XB, YB, K, boost

from privfed.common.boosting.wire import empty_history
from privfed.common.ledger import Ledger
from privfed.common.tasks import BoostShareTask, Refusal, Task
from privfed.owner.core import OwnerCore
from privfed.owner.local import LocalOwner
from privfed.server.jobstore import JobStore
from privfed.server.journal import Journal
from privfed.server.service import CoordinatorService, ServiceConfig

pytestmark = pytest.mark.in_process

BDT = {"task": "bdt", "release": "shares", "epsilon": 2.0, "owners": 2, "n_rounds": 3, "register_timeout": 1}
OWNERS = ["node-0.o00000", "node-1.o00000"]
KILLED_RUN = "boost-0a1b2c3d"
#: the killed run's write-ahead report, written before its last batch
PAID = {"status": "running", "epsilon_by_owner": {o: 2.0 for o in OWNERS}}


def _killed_after_finish(store_root: Path) -> tuple[str, Path]:
    """The store as a service killed between the journal's ``finish()`` and the ``ok`` report leaves it."""
    store = JobStore(store_root)
    job_id = store.submit(BDT, "alice").job_id
    store.update(job_id, state="running", asked=True)
    job_dir = store.job_dir(job_id)
    journal = job_dir / "journal.sqlite"
    with Journal(journal) as book:
        book.begin(fingerprint="the-job", owner_ids=OWNERS, run_id=KILLED_RUN, resume=False)
        book.finish()  # the strategy's last step; the process dies before report.write(status="ok")
    (job_dir / "report.json").write_text(json.dumps(PAID))
    return job_id, journal


def _restart(tmp_path: Path) -> tuple[str, str]:
    """What the next start does with the job: its state after ``_recovered``, and the run id ``_run``'s strategy
    gets from ``Journal.begin`` (``resume=journal.exists()``) if the job runs again."""
    job_id, journal = _killed_after_finish(tmp_path / "store")
    svc = CoordinatorService(ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None), None)
    svc._recovered(svc.store.get(job_id))
    state = svc.store.get(job_id).state
    if state not in ("queued", "running"):
        return state, KILLED_RUN  # not run again
    with Journal(journal) as book:
        return state, book.begin(fingerprint="the-job", owner_ids=OWNERS, run_id="boost-ffffffff", resume=True)


def test_a_finished_runs_job_is_not_run_again_as_a_new_run(tmp_path):
    state, run_id = _restart(tmp_path)
    assert run_id == KILLED_RUN, (state, run_id)  # it was queued again with a fresh run id


def test_a_new_run_id_is_a_second_payment_for_every_owner(tmp_path):
    """Why a fresh run id matters: one owner, one ledger, the same job's share asked under the killed run and under
    the restart's run; both are drawn and debited (a new run is a new release to the owner)."""
    owner = LocalOwner(OWNERS[0], XB, YB, np.random.Generator(np.random.PCG64(1)), K, BOUNDS)
    core = OwnerCore([owner], Ledger(tmp_path / "ledger.sqlite", epsilon_budget=10.0, delta_budget=1e-3))
    for run in (KILLED_RUN, "boost-ffffffff"):
        task = Task(f"{run}-share", owner.owner_id, run, BoostShareTask(boost("stump", run), empty_history()))
        (answer,) = core.answer([task]).results
        assert not isinstance(answer.payload, Refusal), answer.payload
    runs = {h["purpose"].rpartition(":")[2] for h in core.ledger.history(owner.owner_id)}
    assert runs == {KILLED_RUN, "boost-ffffffff"}, runs


def test_control_a_job_whose_report_says_ok_is_recorded_done(tmp_path):
    """Control: killed after the ``ok`` report (its record not written): ``_recovered`` records it done, not run."""
    job_id, _ = _killed_after_finish(tmp_path / "store")
    report = tmp_path / "store" / job_id / "report.json"
    report.write_text(json.dumps({**PAID, "status": "ok", "accuracy": 0.5}))
    svc = CoordinatorService(ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None), None)
    svc._recovered(svc.store.get(job_id))
    assert svc.store.get(job_id).state == "done"
