"""``privfed serve``: a coordinator service that keeps the owner nodes connected and runs a queue of
jobs, one at a time (issue 26, item 1).

Data users submit jobs through the job API (:mod:`privfed.server.jobapi`, mTLS with a data-user
certificate); each job is run by the one job runner, :func:`~privfed.server.job.run_federated_job`,
on the service's long-lived :class:`~privfed.server.app.CoordinatorServer`, and leaves its
``report.json``, ``model.json`` and ``job.log`` under its id in the store
(:mod:`privfed.server.jobstore`). Owners are not released between jobs: daemons (``privfed owner
--policy``) serve job after job. A job is announced to the owners before its first task, and an
owner's policy may decline it (its report lists ``declined_owners``).

A stopped or killed service leaves its running job ``running`` in the store; the next start queues
it again, and a boosting job by shares continues from its journal (``journal.sqlite`` in its directory);
any other, which keeps no journal, fails then with the reason rather than ask its owners twice. A
cancelled job (``privfed job cancel``) stops at once (its waiting round ends) and its report says so.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from privfed.common.errors import ConfigError, JobAborted, PrivfedError, reason
from privfed.common.files import sole_writer
from privfed.common.learners.trained import TrainedModel
from privfed.common.schema import FederationSchema
from privfed.proto.transport import TlsFiles
from privfed.server.app import CoordinatorServer
from privfed.server.config import JobConfig
from privfed.server.jobapi import JobApi, in_job_file_terms, job_config, job_file_errors
from privfed.server.joblog import JobLogFile, JobRecords, outside_jobs
from privfed.server.jobstore import FINAL, JobRecord, JobStore, now
from privfed.server.main import coordinator_job, federation_schema, public_rows_per_owner
from privfed.server.models import ModelStore, load_model, may_use
from privfed.server.registration import Expected, status
from privfed.server.report import JobReport, host_info, version_info
from privfed.server.revocation import RevokedCertificates, RevokedDataUsers, revoked_message
from privfed.server.rounds import carried_fields, releases_may_have_spent
from privfed.server.statuspage import StatusPage, refusals_by_node

log = logging.getLogger("privfed.coordinator")

#: Jobs the status page shows, the last submitted.
STATUS_JOBS = 100
#: Seconds between two checks that a running job's data user is not revoked and it is within its time
#: (:meth:`CoordinatorService._watch_job`).
REVOCATION_CHECK = 1.0
#: The longest ``register_timeout`` or ``round_timeout`` a job of ``privfed serve`` may ask by default, in seconds.
MAX_JOB_WAIT = 3600.0
#: The longest a job of ``privfed serve`` runs by default, in seconds, before the service cancels it (audit 28, A28-3:
#: ``--max-job-wait`` bounds each wait, not their number).
MAX_JOB_TIME = 86400.0
#: Seconds between two tries to start a queued job while the store cannot be written.
STORE_RETRY = 5.0
#: Seconds between two looks at the nodes' states, for the log lines of a node going silent and calling again.
NODE_WATCH = 1.0
#: Finished jobs' models held in memory to serve (more are read back from the store when asked for).
KEEP_MODELS = 16


def _took_part(report: dict[str, Any] | None) -> int | None:
    """The owners that released anything a job used: its report's ``took_part`` (an older report: ``answered``); a
    failed job's report has neither, and counts the owners it debited instead (walkthrough 13, W13-6: the listing of a
    job that failed after 452 of its 455 owners had paid showed ``455``, as if nobody had)."""
    if report is None:
        return None
    if "took_part" in report or "answered" in report:
        return report.get("took_part", report.get("answered"))
    spent = report.get("epsilon_by_owner")
    return None if not isinstance(spent, dict) else sum(1 for e in spent.values() if e)


def not_rerun(what: str) -> str:
    """Why a job of ``what`` (a task, or ``bdt --release marginals``) that the service's stop interrupted fails at the
    next start instead of running again: only a boosting job by shares keeps a journal to continue from."""
    return (
        f"the service stopped during this {what} job, which keeps no journal: its owners may have spent their budget "
        "on it, so it is not run again (that would ask them twice); submit a new job instead"
    )


def journal_less(config: JobConfig) -> str | None:
    """What a job of ``config`` is (its task, or ``bdt --release marginals``) when it keeps no journal to continue
    from after the service's stop (:func:`not_rerun`); None for a boosting job by shares, which does."""
    if config.task == "bdt":
        return None if config.release == "shares" else f"bdt --release {config.release}"
    return config.task


#: What stopped a job the service's own stop interrupted (``_stopped``; a failed report's reason starts "stopped by"
#: it): such a job is queued again or fails at the next start as its task allows, not as its report says it ended.
SERVICE_STOP = "service stop"


def journaled_rounds(path: Path) -> int:
    """The rounds a boosting job's journal at ``path`` holds done (none yet: 0), where its progress starts again
    after a restart, in the unit the strategy counts in (:meth:`~privfed.server.strategies.base.Transport.progressed`):
    a resumed job showed 0 % while it went on from its tenth round, and then, counted in batches, less than
    before the restart."""
    from privfed.server.journal import Journal  # here: a service that runs no boosting job never loads it

    if not path.exists():
        return 0
    with Journal(path) as journal:
        return journal.evaluated_rounds()


def _start_word(restarts: int, config: JobConfig) -> str:
    """How a job's log says it starts: anew, or again after the service restarted (walkthrough 5: a resumed
    job's log did not say it resumed), from its journal's rounds if it keeps one."""
    if not restarts:
        return "starts"
    again = f"starts again after {restarts} restart(s) of the service"
    if config.resume and config.journal is not None:
        return f"{again}, from its journal's {journaled_rounds(config.journal)} recorded round(s)"
    return again


def progress_of(state: str, done: int, planned: int | None) -> float:
    """A job's progress from 0 to 1: ``done`` of its strategy's ``planned`` steps (unknown: 0); 1 once it is done,
    below 1 before (a job's last step is followed by its model and report)."""
    if state == "done":
        return 1.0
    return min(0.99, done / planned) if planned else 0.0


@dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    """``privfed serve``'s settings: where it listens and keeps its jobs, its status page
    (``status_listen``; None: none), and the federation every job runs over: a built-in data set
    (``dataset``, ``n_samples``, ``test_fraction``, ``seed``) or a schema file (``schema``)."""

    store: Path
    listen: str = "0.0.0.0:50051"
    status_listen: str | None = "127.0.0.1:8080"
    dataset: str = "synthetic"
    n_samples: int | None = None
    test_fraction: float = 0.2
    seed: int = 0
    schema: Path | None = None
    node_timeout: float = 15.0
    max_job_wait: float = MAX_JOB_WAIT  # the longest register_timeout, round_timeout or ring_timeout a job may ask
    max_job_time: float = MAX_JOB_TIME  # the longest a job runs (each start of it counted alone) before it is cancelled
    revoked_data_users: Path | None = None  # privfed.server.revocation
    revoked_certificates: Path | None = None  # privfed.server.revocation, by fingerprint (walkthrough 9, W9-2)
    revoked_certificates_optional: bool = False  # a missing file lists nothing: the default one in --certs (A30-3)

    def job_fields(self) -> dict[str, Any]:
        """The :class:`JobConfig` fields every job takes from the service."""
        return {
            "dataset": self.dataset,
            "n_samples": self.n_samples,
            "test_fraction": self.test_fraction,
            "seed": self.seed,
            "schema": self.schema,
            "node_timeout": self.node_timeout,
            "listen": self.listen,
            "out": self.store,
        }


class CoordinatorService:
    """The service (module docstring): :meth:`start`, then :meth:`stop` (SIGTERM)."""

    def __init__(
        self,
        config: ServiceConfig,
        tls: TlsFiles | None,
        *,
        reference: Callable[[JobConfig], Mapping[str, Any]] | None = None,
    ) -> None:
        """``reference``: a job's non-private reference (its report's ``reference_accuracy``), computed once the job's
        training is over, as ``privfed coordinator`` computes it; None: reports record none."""
        self.config, self.tls = config, tls
        self._reference = reference
        self.store = JobStore(config.store)
        self.revoked = RevokedDataUsers(config.revoked_data_users)
        self._store_lock = ExitStack()  # held from start() to stop(): one service per store
        self.schema: FederationSchema = federation_schema(self._job_config({"task": "ncc", "epsilon": 1.0}))[0]
        self.server = CoordinatorServer(
            tls=tls,
            node_timeout=config.node_timeout,
            schema=self.schema,
            handlers=[JobApi(self, require_role=tls is not None).handler()],
            models=ModelStore(
                load=self._finished_model, keep=KEEP_MODELS, loadable=self._models_of, pending=self._unfinished
            ),
            revoked=self.revoked.revoked,
            revoked_certificates=RevokedCertificates(
                config.revoked_certificates, optional=config.revoked_certificates_optional
            ).revoked,
        )
        self._wake = threading.Condition()
        self._stopping = False
        self._cancels: dict[str, str] = {}  # running job id -> who cancelled it
        self._progress: dict[str, dict[str, Any]] = {}  # the running job's id -> its steps so far, and its last round
        self._runner = threading.Thread(target=self._loop, name="privfed-jobs", daemon=True)
        self._node_watch = threading.Thread(target=self._watch_nodes, name="privfed-node-states", daemon=True)
        self.current: str | None = None
        self.store_error: str | None = None  # why the store cannot be written now (None: it can)
        self._unrecorded: dict[str, dict[str, Any]] = {}  # job id -> how it ended, not yet in its record (full disk)
        self.status = StatusPage(self.snapshot)
        self.status_port: int | None = None

    def _finished_model(self, model_id: str, data_user: str | None) -> tuple[TrainedModel, str] | None:
        """The model of the finished job ``model_id`` (a job's model is served under its id), read
        back from the store, and the data user who submitted the job; None if there is no such job,
        it saved no model, or ``data_user`` (None: a caller that is no data user) may not use it. Whose
        job it is is asked first, of memory (wt-redteam4): another data user's model is not read."""
        submitter = self.store.submitted_by(model_id)
        if submitter is None or not may_use(data_user, submitter):
            return None
        try:
            path = self.store.job_dir(model_id) / "model.json"
            return (load_model(path), submitter) if path.is_file() else None
        except ConfigError:  # a model file that cannot be read: no model
            return None

    def _models_of(self, data_user: str | None) -> list[str]:
        """The ids of ``data_user``'s jobs that saved a model, which :meth:`_finished_model` serves, for the refusal
        of an id with no model (walkthrough 11, W11-1: after a restart it listed none, the models in memory). None
        (a caller that is no data user, an owner node): none, as before (walkthrough 8, W8-11)."""
        if data_user is None:
            return []
        return [j for j in self.store.ids(data_user) if (self.store.job_dir(j) / "model.json").is_file()]

    def _unfinished(self, job_id: str, data_user: str | None) -> str | None:
        """The state of ``data_user``'s own job ``job_id`` if it is not finished (its model is still to come), else
        None; another's job is not read (asked of the store's memory first, as :meth:`_finished_model` does)."""
        if data_user is None or self.store.submitted_by(job_id) != data_user:
            return None
        try:
            state = self.store.get(job_id).state
        except ConfigError:  # deleted meanwhile
            return None
        return None if state in FINAL else state

    def _job_config(self, settings: Mapping[str, Any]) -> JobConfig:
        """A job's configuration on this service; a wait past ``--max-job-wait`` is refused (walkthrough 8, W8-14:
        one job with ``register_timeout = 1e12`` held every other data user's queue for good): a bdt job's
        ``ring_timeout`` too, which a ring's batches wait instead of the round timeout (audit 33, A33-1)."""
        config = job_config(settings, self.config.job_fields())
        waits = {key: getattr(config, key) for key in ("register_timeout", "round_timeout")}
        waits["ring_timeout"] = getattr(config.params, "ring_timeout", None)
        for key, wait in waits.items():
            if wait is not None and wait > self.config.max_job_wait:
                raise ConfigError(
                    f"{key} {wait:g} s is longer than this service lets a job wait "
                    f"({self.config.max_job_wait:g} s, privfed serve --max-job-wait): the jobs queued behind it would "
                    "wait too"
                )
        return config

    def _delta(self, settings: Mapping[str, Any]) -> float | None:
        """A job's δ per owner: its setting, or its task's default (FedDPDR's is not 0); None if it does not parse."""
        try:
            return self._job_config(settings).delta
        except ConfigError:
            return None

    def _recovered(self, record: JobRecord) -> None:
        """A job the previous run left running, queued again by the store: a boosting job by shares goes on from
        its journal, and so does a job that had asked its owners for nothing (:attr:`JobRecord.asked`: recorded
        before its first release task reached a node, so a crash is judged as a stop is; walkthrough 7, W7-6);
        any other fails now, its report keeping the progress it reached (walkthrough 6, W6-7: it was logged
        "queued again", then failed when it started, and its progress showed 0 %). The one place that decides
        it: run again, its owners would pay twice. A job whose report says it finished is recorded done: only its
        record was not written, on a full disk (audit 30, A30-4: it was failed, and its ok report overwritten)."""
        report = self.report_of(record.job_id) or {}
        if report.get("status") == "ok":
            self.store.update(record.job_id, state="done", finished=now(), accuracy=report.get("accuracy"))
            log.info("job %s had finished when the service stopped, its record not written: done", record.job_id)
            return
        ended = report.get("status")  # its run wrote how it ended, and stopped before its record (audit 39, A39-4)
        stop = str(report.get("error", "")).startswith(
            f"stopped by {SERVICE_STOP}"
        )  # the stop's, not an end of its own
        if ended == "cancelled" or (ended == "failed" and record.asked and not stop):
            self.store.update(record.job_id, state=ended, finished=now(), error=report.get("error"))
            self.server.dispatcher.end_job(record.job_id, failed=True, nodes=self.store.known_nodes())
            log.info("job %s had ended (%s) when the service stopped, its record not written", record.job_id, ended)
            return
        try:
            what = journal_less(self._job_config(record.settings))
        except ConfigError:  # settings this service no longer takes: the job fails with the reason when it starts
            what = None
        if what is None or record.asked is False:  # it goes on from its journal, or no owner was asked anything
            from privfed.server.journal import reopen_finished  # here, as in journaled_rounds

            if reopen_finished(self.store.job_dir(record.job_id) / "journal.sqlite"):  # its rounds done (A38-3)
                log.info("job %s had done its rounds when the service stopped, not written its report: queued "
                         "again, to rebuild its model from its journal (its owners are asked nothing that costs)",
                         record.job_id)  # fmt: skip
                return
            log.info("job %s was running when the service stopped: queued again", record.job_id)
            return
        reason = not_rerun(what)
        JobReport(self.config.store, report, run_dir=self.store.job_dir(record.job_id), terms=in_job_file_terms).fail(
            reason
        )
        self.store.update(record.job_id, state="failed", finished=now(), error=reason)
        # the daemons of the last run that took part log it (which of them it asked is not kept)
        self.server.dispatcher.end_job(record.job_id, failed=True, nodes=self.store.known_nodes())
        log.info("job %s was running when the service stopped: failed, %s", record.job_id, reason)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> int:
        """Take the store (one service per store), queue again the jobs a previous run left running, listen, and
        start the queue; returns the port."""
        self._store_lock.enter_context(  # before recover(): a second service failed the first's running job
            sole_writer(
                self.store.root / "service",
                what="job store",
                user="privfed serve",
                instead="give it a store of its own",
            )
        )  # walkthrough 5: then it could not be cancelled, and held the first service's queue up
        try:
            self._warn_of_another_schema()
            for job_id in self.store.recover():
                self._recovered(self.store.get(job_id))
            if self.config.status_listen is not None:  # a taken status port stops the start before gRPC listens
                self.status_port = self.status.start(self.config.status_listen)
            try:
                port = self.server.start(self.config.listen)
            except BaseException:
                self.status.stop()
                raise
        except BaseException:
            self._store_lock.close()
            raise
        self._runner.start()
        self._node_watch.start()
        return port

    def _warn_of_another_schema(self) -> None:
        """One WARNING at the start when the store's last job that ran read its owners' rows by another schema than
        this service's (walkthrough 14, W14-4: restarted with an edited schema, the service saw every daemon stop for
        good, and logged that their rows did not fit it). A daemon keeps the schema it read its rows by."""
        for job_id in reversed(self.store.ids()):
            ran = (self.report_of(job_id) or {}).get("schema_sha256")
            if not isinstance(ran, str):
                continue
            if ran != self.schema.digest():
                log.warning(
                    "this service's federation schema (sha256 %s) is not the one its last job %s read the owners' "
                    "rows by (sha256 %s): every owner node that read its rows by that one refuses this one and stops "
                    "for good at its next registration (a new schema is a new federation); to keep them, start the "
                    "service with the schema they hold",
                    self.schema.digest()[:12],
                    job_id,
                    ran[:12],
                )
            return

    def stop(self) -> None:
        """Stop the running job where it is (it stays ``running``: the next start queues it again), tell
        the nodes the service is going, and stop serving."""
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        self._remember_nodes()
        self.server.dispatcher.cancel_job()
        if self._runner.is_alive():
            self._runner.join()
        if self._node_watch.is_alive():
            self._node_watch.join()
        self.status.stop()
        self.server.stop()
        self._store_lock.close()

    # ------------------------------------------------------------------ the job API's calls
    def submit(self, settings: dict[str, Any], data_user: str, submission: str | None = None) -> JobRecord:
        """Check the job can run on this federation (ConfigError says why not, naming the job file's keys), then
        queue it. ``submission``: the client's token; a submission sent again (its answer lost on the way) answers
        with the job it queued the first time, which is not queued again (walkthrough 10, W10-2)."""
        with job_file_errors():
            config = public_rows_per_owner(self._job_config(settings))
            # builds the strategy: an infeasible job is refused now; its warnings go to its log when it starts
            job = coordinator_job(config, self.tls, warn=lambda _: None)
        if job.schema.digest() != self.schema.digest():
            raise ConfigError(
                f"the job gives another federation schema (sha256 {job.schema.digest()[:12]}) than this "
                f"service's (sha256 {self.schema.digest()[:12]}): a job runs on the service's data"
            )
        settings = {k: ("inf" if v == float("inf") else v) for k, v in settings.items()}
        record, new = self.store.submit_once(settings, data_user, submission)
        if not new:
            log.info("job %s: the same submission sent again by %r; not queued twice", record.job_id, data_user)
            return record
        log.info("job %s (%s, epsilon %s) submitted by %r", record.job_id, config.task, config.epsilon, data_user)
        with self._wake:
            self._wake.notify_all()
        return record

    def cancel(self, job_id: str, data_user: str, *, by: str | None = None) -> JobRecord:
        """Cancel a queued job at once, or stop the running one (its report then says who cancelled it: ``by``, the
        operator's job API, or else ``data_user``, who must have submitted it)."""
        record = self.store.get(job_id)
        if record.data_user != data_user:
            raise ConfigError(f"job {job_id} was submitted by {record.data_user!r}: only they may cancel it")
        data_user = by or data_user
        if record.state in FINAL:
            return record
        done = self.store.transition(
            job_id, "queued", state="cancelled", finished=now(), error=f"cancelled by {data_user}"
        )
        if done is not None:  # over the report an earlier run left, which may name who paid (audit 38, A38-4)
            JobReport(self.config.store, self.report_of(job_id) or {}, run_dir=self.store.job_dir(job_id)).write(
                status="cancelled", error=done.error
            )
            return done
        with self._wake:
            if self.current == job_id:  # answered as it was when asked: running (it may stop before the answer)
                running = self.store.get(job_id)
                self._cancels[job_id] = data_user
                self.server.dispatcher.cancel_job()
                return running
        return self.store.get(job_id)

    def delete(self, job_id: str, data_user: str) -> JobRecord:
        """Delete a finished job of ``data_user``'s: its folder in the store (record, log, report, model, journal),
        and its model is served no more. Owners' ledgers keep what they released for it: a deletion spends nothing
        and gives nothing back."""
        record = self.store.get(job_id)
        if record.data_user != data_user:
            raise ConfigError(f"job {job_id} was submitted by {record.data_user!r}: only they may delete it")
        with self._wake:  # not the job the queue is running, which writes its log and report until it ends
            if self.current == job_id:
                raise ConfigError(
                    f"job {job_id} is running: only a finished job can be deleted; "
                    f"`privfed job cancel {job_id}` stops it first"
                )
            deleted = self.store.delete(job_id)
        self.server.models.drop(job_id)
        log.info("job %s deleted by %s: its folder in the store is removed", job_id, data_user)
        return deleted

    def short_of_owners(self, asked: Any) -> str | None:
        """``k of N owners registered (nodes: ...)`` when fewer than the ``asked`` owners (a job's ``owners``) are
        registered now, as the job's log says while it waits for them; None when there are enough (or it asks for
        none)."""
        if not isinstance(asked, int) or len(self.server.dispatcher.live_owners()) >= asked:
            return None
        return status(self.server.dispatcher, Expected(asked))

    def report_of(self, job_id: str) -> dict[str, Any] | None:
        path = self.store.job_dir(job_id) / "report.json"
        try:
            return dict(json.loads(path.read_text(encoding="utf-8")))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def summary(self, record: JobRecord) -> dict[str, Any]:
        """What ``privfed jobs`` and the status page show of a job: no owner data, no ledger."""
        s = record.settings
        report = self.report_of(record.job_id) if record.state in FINAL else None
        resolved = (report or {}).get("config") or s  # a job that ran reports its resolved release and rounds
        # a running job's steps so far; a finished one's, as its report records them
        progress = self._progress.get(record.job_id) or (report or {}).get("progress") or {}
        done, planned = int(progress.get("done") or 0), progress.get("planned")
        note = record.error
        warnings = (report or {}).get("warnings") or []
        if record.state == "done" and warnings:  # a model below its baseline is not a plain "done" (W6-2)
            note = "; ".join(in_job_file_terms(w.removeprefix("warning: ")) for w in warnings)
        lost = (report or {}).get("lost_nodes") or []
        if record.state == "done" and lost:  # though enough owners remained (walkthrough 14, W14-13: no sign of it)
            unanswered = len((report or {}).get("epsilon_unanswered_by_owner") or {})
            said = f"lost node(s) {', '.join(map(str, lost))} while it ran; {unanswered} owner(s) asked with no answer"
            note = f"{note}; {said}" if note else said
        if record.state == "running" and progress.get("round") is None:  # no batch sent yet: it may wait for owners
            short = self.short_of_owners(s.get("owners"))
            note = note or (None if short is None else f"waiting for owners: {short}")
        if record.state == "running":  # a batch waiting a minute or more says for what (W14-17)
            note = note or self.server.dispatcher.waiting
        if record.state == "queued":  # why it waits, naming no other data user's job (walkthrough 8, W8-12)
            note = note or self._queue_note(record.job_id)
        return {
            "job_id": record.job_id,
            "state": record.state,
            "data_user": record.data_user,
            "task": s.get("task"),
            "epsilon": s.get("epsilon"),
            "delta": self._delta(s),
            "owners": s.get("owners"),
            "answered": (report or {}).get("answered"),  # the owners whose shares it used (W6-9)
            # the owners that released anything it used, evaluations too (walkthrough 9, W9-4); an older report: None
            "took_part": _took_part(report),
            "rounds": resolved.get("n_rounds") if s.get("task") == "bdt" else None,
            "done": done,
            "planned": planned,
            "progress": progress_of(record.state, done, planned),
            "last_round": progress.get("round"),
            "accuracy": record.accuracy,
            "majority": ((report or {}).get("baselines") or {}).get("majority_class"),
            "declined_owners": (report or {}).get("declined_owners", []),
            "refused_by_node": refusals_by_node((report or {}).get("refused") or {}),
            "submitted": record.submitted,
            "started": record.started,
            "finished": record.finished,
            "error": record.error,
            "note": note,
            "restarts": record.restarts,
        }

    def _queue_note(self, job_id: str) -> str:
        """What a queued job waits behind: the jobs before it, and whether the running one waits for owners."""
        if self.store_error is not None:  # no path: the store's place is the operator's (audit 28)
            return "waiting: the service cannot write its job store now; its operator is told in its log"
        running = self.current
        ahead = self.store.queued_before(job_id) + (running is not None)
        if not ahead:
            return "next to run"
        waits = ""
        if running is not None and (self._progress.get(running) or {}).get("round") is None:
            waits = "; the running one waits for its owners, up to its register_timeout"
        return f"queued behind {ahead} job(s){waits}"

    def listing(self, last: int | None, data_user: str | None = None) -> dict[str, Any]:
        """The summaries of the ``last`` jobs submitted (None: every job; ``data_user``: of theirs only), in
        submission order, and how many earlier ones are left out; only the listed jobs' records are read,
        so the cost of a listing does not grow with the jobs a long-lived service ran."""
        ids = self.store.ids(data_user)
        shown = ids if last is None else ids[-last:]  # last >= 1
        return {"jobs": [self.summary(r) for r in self.store.records(shown)], "earlier": len(ids) - len(shown)}

    def snapshot(self) -> dict[str, Any]:
        """What the status page shows: the :meth:`listing` of the :data:`STATUS_JOBS` last jobs and the
        owner nodes."""
        return {**self.listing(STATUS_JOBS), "nodes": self.owners_online(), "store_error": self.store_error}

    def owners_online(self) -> dict[str, Any]:
        """Nodes registered, each with its owners, its state (``online``, ``silent``: no call within the node
        timeout, or ``left``: it said it stops) and whether it is online."""
        d = self.server.dispatcher
        states = d.node_states()
        return {
            node: {"owners": n, "online": states.get(node) == "online", "state": states.get(node, "silent")}
            for node, n in sorted(d.nodes().items())
        }

    def _watch_nodes(self) -> None:
        """One line in the operator's log when a node goes silent (no call within the node timeout) and when it calls
        again: between jobs nothing said so (walkthrough 10, W10-5: all three nodes cut off for a minute left no
        trace in the service's log). A node that said it leaves is logged where it says so."""
        before = self.server.dispatcher.node_states()
        while True:
            with self._wake:
                if self._stopping:
                    return
                self._wake.wait(NODE_WATCH)
                if self._stopping:
                    return
            now_states = self.server.dispatcher.node_states()
            owners = self.server.dispatcher.nodes()
            with outside_jobs():  # the operator's, not a running job's log
                for node, state in sorted(now_states.items()):
                    was = before.get(node)  # None: it registered and went silent between two looks
                    if state == "silent" and was in (None, "online"):
                        log.warning(
                            "node %s silent: no call within the node timeout (%.0f s); its %d owner(s) are not "
                            "counted until it calls again",
                            node,
                            self.config.node_timeout,
                            owners.get(node, 0),
                        )
                    elif state == "online" and was == "silent":
                        log.info("node %s calls again: its %d owner(s) are counted", node, owners.get(node, 0))
            before = now_states

    # ------------------------------------------------------------------ the queue
    def _remember_nodes(self) -> None:
        """Record the nodes registered now, for the next start's :meth:`_await_known_nodes`."""
        states = self.server.dispatcher.node_states()
        try:
            self.store.remember_nodes(n for n, state in states.items() if state != "left")
        except OSError as exc:
            log.warning("could not record the registered nodes in the store: %s", exc)

    def _await_known_nodes(self) -> None:
        """Before the first job after a start, wait up to the node timeout for the nodes registered at the last stop
        (or the last job's start) to register again (walkthrough 8, W8-13: a queued job started 25 ms after the
        service, on the first node back, which declined its data user, 2 s before the node that serves them). A
        job runs on every owner registered when it starts, so it would have run on another federation than the one
        it was queued for. A node that does not come back within the timeout is not waited for."""
        known = self.store.known_nodes()
        self.server.dispatcher.known_before = frozenset(known)  # named while they are not back (W10-6)
        deadline = time.monotonic() + self.config.node_timeout
        logged = False
        while known and not self._stopping:
            back = known & set(self.server.dispatcher.nodes())
            if back == known or time.monotonic() >= deadline:
                if logged:
                    log.info("%d of the %d node(s) of the last run are back; the queue goes on", len(back), len(known))
                return
            if not logged and self.store.next_queued() is not None:
                log.info(
                    "waiting up to %.0f s for the %d node(s) of the last run to register again before the first job "
                    "(%d back)",
                    self.config.node_timeout,
                    len(known),
                    len(back),
                )
                logged = True
            with self._wake:
                self._wake.wait(0.2)

    def _loop(self) -> None:
        self._await_known_nodes()
        while True:
            with self._wake:
                if self._stopping:
                    return
                self._record_failures()
                record = self.store.next_queued()
                if record is None:
                    self._wake.wait(0.5)
                    continue
                # a job queued again after a restart keeps the time it first started
                try:
                    claimed = self.store.transition(
                        record.job_id, "queued", state="running", started=record.started or now(), asked=False
                    )
                except OSError as exc:  # it stays queued, and runs once the store can be written again
                    self._store_unwritable(exc)
                    self._wake.wait(STORE_RETRY)
                    continue
                self.store_error = None
                if claimed is None:
                    continue
                self.current = claimed.job_id
                self._remember_nodes()
                self.server.dispatcher.clear_cancel()  # under the lock cancel() takes: no cancel is lost
                # nothing asked for it yet: a stop before it is announced is not taken for one after its owners
                # were asked (audit 27: the log said so by the job before's `asked`)
                self.server.dispatcher.begin_job(None)
            try:
                self._run(claimed)
            except OSError as exc:  # the job's report, model or record could not be written: the queue goes on
                self._store_unwritable(exc)  # the job's own error names no path: the store's is the operator's
                self._fail_outside(claimed.job_id, f"the service could not write its job store ({reason(exc)})")
            except Exception:  # noqa: BLE001 - one job's bug must not stop the queue
                log.exception("job %s failed unexpectedly", claimed.job_id)
                self._fail_outside(claimed.job_id, "internal error (see job.log)")
            finally:
                # the restart is behind once a job ran: a node of the last run retired for good is named no more
                self.server.dispatcher.known_before = frozenset()  # (audit 33: named until the next restart)
                with self._wake:
                    self.current = None
                    self._cancels.pop(claimed.job_id, None)
                    # a finished job's progress is its report's (as after a restart): nothing kept per job
                    self._progress.pop(claimed.job_id, None)

    def _store_unwritable(self, exc: OSError) -> None:
        """The store could not be written (a full disk, a read-only mount): :attr:`store_error` says so in one line,
        logged once while it lasts, with no traceback (walkthrough 9, W9-1: the queue's thread died of it, its job
        showed running for good and no job ran again until a restart)."""
        error = f"the service cannot write its job store {self.config.store}: {reason(exc)}"
        if error != self.store_error:
            log.error("%s; jobs stay queued until it can (free space or fix its permissions)", error)
        self.store_error = error

    def _fail_outside(self, job_id: str, error: str) -> None:
        """Record that the running job ``job_id`` failed for a reason its own run could not record, and tell its
        nodes. A store that cannot record it either gets it at the queue's next tries; a stop before then leaves it
        running on disk, for the next start to judge."""
        self.server.dispatcher.end_job(job_id, failed=True)
        self._unrecorded[job_id] = {"state": "failed", "finished": now(), "error": error}
        self._record_failures()

    def _record_failures(self) -> None:
        """Record how the jobs ended that :meth:`_fail_outside` or a finished job's last write could not record,
        once the store takes them."""
        for job_id, changes in list(self._unrecorded.items()):
            try:
                self.store.update(job_id, **changes)
            except OSError as exc:
                self._store_unwritable(exc)
                return
            del self._unrecorded[job_id]
            if changes["state"] == "failed":
                log.error("job %s failed: %s", job_id, changes["error"])
            else:
                log.info("job %s: its end (%s) is recorded now that the store can be written", job_id, changes["state"])

    def _watch_job(self, record: JobRecord, over: threading.Event) -> None:
        """Until ``over``, cancel the running job ``record`` as a cancel by the data user would, within
        :data:`REVOCATION_CHECK` s, whether it waits for its owners or is in a batch, so no owner is asked for more of
        it, once

        - the operator revokes its data user (audit 27, A27-3, and walkthrough 8, W8-14: it ran to its end, or
          waited for owners for its whole register timeout, its owners paying for a model the revoked user is
          refused), or
        - it has run for ``--max-job-time`` since it started in this service's run (audit 28, A28-3: an owner that
          polls but never answers its evaluations made each round wait its whole round timeout, and every other
          data user's jobs behind it)."""
        limit = time.monotonic() + self.config.max_job_time
        while not over.wait(REVOCATION_CHECK):
            if self.revoked.revoked(record.data_user):
                why = revoked_message(record.data_user)
            elif time.monotonic() >= limit:
                why = (
                    f"the job ran for longer than this service lets a job run ({self.config.max_job_time:g} s, "
                    "privfed serve --max-job-time)"
                )
            else:
                continue
            with self._wake:
                if record.job_id not in self._cancels:
                    self._cancels[record.job_id] = f"the operator: {why}"
                    self.server.dispatcher.cancel_job()
            return

    def _stopped(self, job_id: str) -> str | None:
        if job_id in self._cancels:
            return f"cancel by {self._cancels[job_id]}"
        return SERVICE_STOP if self._stopping else None

    def _run(self, record: JobRecord) -> None:
        from privfed.server.job import run_federated_job

        job_dir = self.store.job_dir(record.job_id)
        handler = JobLogFile(job_dir / "job.log", encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        handler.addFilter(JobRecords())  # not the records of other callers' calls (privfed.server.joblog)
        root = logging.getLogger("privfed")
        root.addHandler(handler)
        self._progress[record.job_id] = {"done": 0, "planned": None, "round": None}

        # written before a node can take the job's first release task: what a restart after a crash decides by
        def asked() -> None:
            self.store.update(record.job_id, asked=True)

        self.server.dispatcher.on_first_ask = asked
        # what an earlier run of the job may have had each owner spend, read before this run's report replaces its
        # report: named from the start, so a run that ends before its owners are back keeps it (audit 37, A37-3)
        carried = releases_may_have_spent(self.report_of(record.job_id))
        report = JobReport(
            self.config.store,
            {"status": "running"} | carried_fields(carried),
            run_dir=job_dir,
            terms=in_job_file_terms,
        )

        def on_batch(round_id: str, answered: int, asked: int) -> None:
            self._progress[record.job_id].update(round=round_id, answered=answered, asked=asked)

        def on_progress(done: int, planned: int) -> None:
            """The strategy's steps so far: shown while the job runs, and kept in its report for after."""
            self._progress[record.job_id].update(done=done, planned=planned)
            report.update(progress={"done": done, "planned": planned})

        over = threading.Event()
        watcher = threading.Thread(target=self._watch_job, args=(record, over), name="privfed-job-watch")
        watcher.start()
        try:
            if self.revoked.revoked(record.data_user):  # queued before the name was revoked: nobody is asked
                raise ConfigError(revoked_message(record.data_user))
            config = public_rows_per_owner(self._job_config(record.settings))
            if journal_less(config) is None:  # a boosting job by shares: resumes from its journal after a restart
                journal = job_dir / "journal.sqlite"  # made by the job's first run: its report says whether it resumed
                config = config.replace(journal=journal, resume=journal.exists())
                # until its owners are back, the rounds its journal holds (the strategy goes on from there)
                on_progress(journaled_rounds(journal), int(config.to_report()["n_rounds"]))
            report.update(
                config=config.to_report(),
                job_id=record.job_id,
                data_user=record.data_user,
                transport="grpc+insecure" if self.tls is None else "grpc+mTLS",
                version=version_info(),
                host=host_info(),
            )
            job = coordinator_job(
                config, self.tls, warn=lambda text: log.warning("job %s: %s", record.job_id, in_job_file_terms(text))
            )
            job = replace(  # its report's warnings in the job file's terms too (walkthrough 8, W8-10)
                job,
                job_id=record.job_id,
                data_user=record.data_user,
                settings_warnings=tuple(in_job_file_terms(w) for w in job.settings_warnings),
                spent_before=carried,
            )
            report.update(config=config.to_report(d=job.schema.d), schema_sha256=job.schema.digest())
            log.info(
                "job %s %s (%s, epsilon %g)",
                record.job_id,
                _start_word(record.restarts, config),
                config.task,
                config.epsilon,
            )
            done = run_federated_job(
                self.server,
                job,
                report,
                release=lambda: None,  # the owners stay for the next job
                reference=None if (of := self._reference) is None else lambda: of(config),
                stopped=lambda: self._stopped(record.job_id),
                on_batch=on_batch,
                on_progress=on_progress,
                write_ahead=True,  # a crash's report names who may have paid (the next start fails the job with it)
            )
            ended = {"state": "done", "finished": now(), "accuracy": done.accuracy}
            try:
                self.store.update(record.job_id, **ended)
            except OSError as exc:  # its model and report are written: done, recorded once there is room (A30-2),
                self._store_unwritable(exc)  # not failed, which its data user would submit again, its owners paying
                self._unrecorded[record.job_id] = ended
            self.server.dispatcher.end_job(record.job_id, failed=False)  # its nodes are told (walkthrough 7, W7-11)
            log.info("job %s done: accuracy %s", record.job_id, done.accuracy)
            for warning in (w for w in done.warnings if w not in job.settings_warnings):  # those are logged (W6-2)
                log.warning("job %s: %s", record.job_id, in_job_file_terms(warning.removeprefix("warning: ")))
        except JobAborted:
            who = self._cancels.get(record.job_id)
            if who is not None:
                report.write(status="cancelled", error=f"cancelled by {who}")
                self.store.update(record.job_id, state="cancelled", finished=now(), error=f"cancelled by {who}")
                self.server.dispatcher.end_job(record.job_id, failed=True)
                log.info("job %s cancelled by %s", record.job_id, who)
            elif not self.server.dispatcher.asked:  # stopped while it waited for its owners: nobody paid for it
                self.store.transition(record.job_id, "running", state="queued")
                log.info("job %s stopped before it asked its owners anything: queued again", record.job_id)
            else:  # the service is stopping: the job stays running, to be queued again at the next start
                report.write(status="interrupted")  # not failed: a boosting job by shares goes on (W6-7)
                log.info(
                    "job %s interrupted by the service's stop; at the next start a boosting job by shares continues "
                    "from its journal, any other fails (its owners may have paid for what they were asked)",
                    record.job_id,
                )
        except PrivfedError as exc:
            if not report.failed:
                report.fail(str(exc))
            # the report's reason, in the job file's terms: not the error raised past it, which names the report's
            # path on this machine (what a data user's `privfed jobs` showed)
            error = str(report.fields["error"])
            self.store.update(record.job_id, state="failed", finished=now(), error=error)
            self.server.dispatcher.end_job(record.job_id, failed=True)
            log.warning("job %s failed: %s", record.job_id, error)
        finally:
            over.set()
            watcher.join()
            root.removeHandler(handler)
            handler.close()
