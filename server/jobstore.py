"""The job store of a coordinator service (``privfed serve --store DIR``; issue 26, item 1).

One directory per job, ``DIR/<id>/``: ``job.json`` (what was submitted, by whom, its state and
its times), and once it ran its ``report.json``, ``model.json``, ``job.log`` and, for boosting, its
``journal.sqlite`` (:mod:`privfed.server.journal`). Ids sort in submission order
(``<UTC time to the microsecond>Z-<4 hex>``, each after the last), so the queue is the sorted list of queued jobs. ``job.json`` is
replaced atomically on every change, so a service killed at any point finds each job in one state;
a job it finds ``running`` was interrupted and is queued again (:meth:`JobStore.recover`).

The store is read whole once, when it opens; from then on it keeps the ids of the queued jobs, so
taking the next job reads one record, however many jobs the service has run (a service that stays
up for weeks: it read every ``job.json`` before each job, and twice a second while idle). Only the
one service writes its store.

Only public values are stored: the job's configuration, who submitted it, what the coordinator learned.

A store kept its jobs one level down, in ``DIR/jobs/<id>/`` (``--store jobs`` made ``jobs/jobs/<id>``, a doubled
folder a walkthrough found); such a store's jobs are moved up when it opens (:data:`LEGACY_DIR`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import stat
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from privfed.common.errors import ConfigError, reason
from privfed.common.files import replace_file

log = logging.getLogger("privfed.coordinator")

#: The folder of a store's jobs before they were the store's own folders; moved up when the store opens.
LEGACY_DIR = "jobs"

#: What a job id may be: ``submit`` makes ``YYYYMMDDTHHMMSSffffffZ-hhhh``; anything else (a path, a NUL, a
#: name too long for the file system) names no job, and is answered as a missing one (wt-redteam3).
JOB_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,63}")


def no_job(job_id: str) -> ConfigError:
    """The one answer for a job id that names no job the caller may see."""
    return ConfigError(f"no job {job_id!r}; `privfed jobs` lists them")


#: The start of a deleted job's folder name while it is removed (:meth:`JobStore.delete`): no job id starts so, so no
#: listing sees it, and a store opened after a stop midway removes the rest.
DELETING = ".deleting-"

#: The owner nodes registered when the service last started a job or stopped (:meth:`JobStore.remember_nodes`); no job
#: id starts with a dot.
NODES_FILE = ".nodes.json"

#: Every state a job can be in; the last three are final.
STATES = ("queued", "running", "done", "failed", "cancelled")
FINAL = frozenset({"done", "failed", "cancelled"})


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: A record's ``extra`` key for the token its client sent with the submission (``privfed submit`` sends one and
#: sends it again if the answer is lost: walkthrough 10, W10-2, where a lost answer made users submit twice).
SUBMISSION = "submission"


@dataclass(frozen=True)
class JobRecord:
    """One submitted job: ``settings`` are its job file's keys (JSON values), ``data_user`` the
    certificate name that submitted it; ``error`` says why a job failed or who cancelled it."""

    job_id: str
    data_user: str
    settings: dict[str, Any]
    state: str = "queued"
    submitted: str = ""
    started: str | None = None
    finished: str | None = None
    error: str | None = None
    restarts: int = 0
    accuracy: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: Whether the job has asked its owners for a release since it was last claimed, recorded before the first
    #: such task reaches a node (:attr:`~privfed.server.dispatcher.Dispatcher.on_first_ask`); None: a record of
    #: older code, taken as yes. A job without a journal that a crash stopped runs again only if it had not.
    asked: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _private_directory(root: Path) -> None:
    """Make the store readable by its owner only (walkthrough 5: 0755 with every data user's report and model
    0644, so any account on the coordinator's host read them; ledgers and journals are 0600): whatever modes the
    files inside have, no one else can reach them. A store made before is tightened, saying so."""
    mode = stat.S_IMODE(root.stat().st_mode)
    if mode & 0o077:
        os.chmod(root, mode & 0o700)
        log.info("--store %s: made readable by its owner only (mode %o, was %o)", root, mode & 0o700, mode)


class JobStore:
    """The jobs under ``root``, one folder each (``root`` is created if missing), safe to use from several threads."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        try:
            try:
                self.root.mkdir(mode=0o700, parents=True)  # a new store: its owner's only from the start (W6-15)
            except FileExistsError:
                if not self.root.is_dir():
                    raise
                _private_directory(self.root)
            self._move_legacy()
            for gone in self.root.glob(f"{DELETING}*"):  # deleted, and not yet removed when the last service stopped
                shutil.rmtree(gone, ignore_errors=True)
        except OSError as exc:
            raise ConfigError(f"--store {root}: cannot create it ({reason(exc)})") from exc
        self._lock = threading.Lock()
        self._last = datetime.now(UTC) - timedelta(days=1)
        records = self.all()
        self._queued = {r.job_id for r in records if r.state == "queued"}  # kept by _write from now on
        self._by_user: dict[str, list[str]] = {}  # data user -> their job ids in submission order (kept by submit)
        self._user_of: dict[str, str] = {}  # job id -> its data user (kept by submit)
        self._submissions: dict[tuple[str, str], str] = {}  # (data user, submission token) -> its job id
        for r in records:
            self._by_user.setdefault(r.data_user, []).append(r.job_id)
            self._user_of[r.job_id] = r.data_user
            if isinstance(r.extra.get(SUBMISSION), str):
                self._submissions[(r.data_user, r.extra[SUBMISSION])] = r.job_id

    def _move_legacy(self) -> None:
        """Move the jobs of the store's earlier layout (``root/jobs/<id>/``) up to ``root/<id>/``, each in one
        rename: a service stopped midway moves the rest at its next start."""
        old = self.root / LEGACY_DIR
        if not old.is_dir() or (old / "job.json").exists():  # none, or a job of that name (never made by submit)
            return
        moved = 0
        for d in sorted(old.iterdir()):
            if (d / "job.json").exists() and not (self.root / d.name).exists():
                os.replace(d, self.root / d.name)
                _moved_paths(self.root / d.name, f"{LEGACY_DIR}/{d.name}/", f"{d.name}/")
                moved += 1
        if not any(old.iterdir()):
            old.rmdir()
        if moved:
            log.info(
                "store %s: moved %d job(s) up from %s/ (jobs are the store's own folders now)", self.root, moved, old
            )

    def job_dir(self, job_id: str) -> Path:
        if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
            raise no_job(str(job_id))
        return self.root / job_id

    def _write(self, record: JobRecord) -> JobRecord:
        d = self.job_dir(record.job_id)
        d.mkdir(exist_ok=True)
        # On disk before it replaces the old record, and the rename with it (audit 27): a machine that stops (power,
        # kernel) must not come back to a record older than an owner's ledger, which syncs every debit. Above all the
        # record that the job asked its owners (``asked``, written before its first release task reaches a node): a
        # lost one reads as the claim's "not asked", and the job runs again, its owners paying twice.
        replace_file(d / "job.json", json.dumps(record.to_json(), indent=2))
        if record.state == "queued":
            self._queued.add(record.job_id)
        else:
            self._queued.discard(record.job_id)
        return record

    def submit(self, settings: dict[str, Any], data_user: str) -> JobRecord:
        """Queue a job; returns its record (its id is new)."""
        return self.submit_once(settings, data_user, None)[0]

    def submit_once(self, settings: dict[str, Any], data_user: str, submission: str | None) -> tuple[JobRecord, bool]:
        """Queue a job, unless ``data_user`` queued one with the client's token ``submission`` already: returns its
        record and whether it is new. Checked and recorded under one lock: a submission sent again while the first
        is still being answered is not queued twice either."""
        with self._lock:
            earlier = None if submission is None else self._submissions.get((data_user, submission))
            if earlier is not None:
                return self.get(earlier), False
            t = max(datetime.now(UTC), self._last + timedelta(microseconds=1))  # strictly after the last id
            self._last = t
            job_id = f"{t.strftime('%Y%m%dT%H%M%S')}{t.microsecond:06d}Z-{secrets.token_hex(2)}"
            try:
                extra = {} if submission is None else {SUBMISSION: submission}
                record = self._write(JobRecord(job_id, data_user, dict(settings), submitted=now(), extra=extra))
            except OSError:  # a full disk: no folder left behind of a job never queued (walkthrough 9, W9-1)
                shutil.rmtree(self.job_dir(job_id), ignore_errors=True)
                raise
            self._by_user.setdefault(data_user, []).append(job_id)
            self._user_of[job_id] = data_user
            if submission is not None:
                self._submissions[(data_user, submission)] = job_id
            return record, True

    def submitted_by(self, job_id: str) -> str | None:
        """The data user who submitted ``job_id`` (None: no such job), from memory: no file is read, so
        asking of a job that is not the caller's costs what asking of one that does not exist does."""
        with self._lock:
            return self._user_of.get(job_id)

    def get(self, job_id: str) -> JobRecord:
        path = self.job_dir(job_id) / "job.json"
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise no_job(job_id) from None
        return JobRecord(**doc)

    def queued_before(self, job_id: str) -> int:
        """How many queued jobs were submitted before ``job_id`` (job ids sort in submission order)."""
        with self._lock:
            return sum(1 for j in self._queued if j < job_id)

    def remember_nodes(self, node_ids: Iterable[str]) -> None:
        """Record the owner nodes registered now (``NODES_FILE``): the next start waits for them to come back
        before its first job (:meth:`known_nodes`). Node ids only: nothing of any owner's."""
        replace_file(self.root / NODES_FILE, json.dumps(sorted(set(node_ids))))

    def known_nodes(self) -> set[str]:
        """The owner nodes :meth:`remember_nodes` recorded last (none if it never did, or the file is unreadable)."""
        try:
            ids = json.loads((self.root / NODES_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return set()
        return {i for i in ids if isinstance(i, str)} if isinstance(ids, list) else set()

    def all(self) -> list[JobRecord]:
        """Every job, in submission order."""
        return self.records(self.ids())

    def records(self, job_ids: list[str]) -> list[JobRecord]:
        """The records of ``job_ids`` still in the store, in their order: a job deleted since its id was listed
        (:meth:`delete`, by another caller's thread) is left out."""
        out = []
        for job_id in job_ids:
            try:
                out.append(self.get(job_id))
            except ConfigError:  # deleted meanwhile
                continue
        return out

    def ids(self, data_user: str | None = None) -> list[str]:
        """Every job's id, in submission order (a directory listing: no record is read); with
        ``data_user``, that data user's jobs only."""
        if data_user is not None:
            with self._lock:
                return list(self._by_user.get(data_user, ()))
        return [d.name for d in sorted(self.root.iterdir()) if JOB_ID.fullmatch(d.name) and (d / "job.json").exists()]

    def delete(self, job_id: str) -> JobRecord:
        """Remove a finished job's folder, everything the service kept of it (its record, log, report, model and
        journal), and return its record. The folder is renamed first, in one step, so no listing, reader or
        restart sees half a job; then removed (:data:`DELETING`). A job that is not finished is kept
        (:class:`ConfigError`): it may still write there."""
        with self._lock:
            record = self.get(job_id)
            if record.state not in FINAL:
                raise ConfigError(
                    f"job {job_id} is {record.state}: only a finished job can be deleted; "
                    f"`privfed job cancel {job_id}` stops it first"
                )
            gone = self.root / f"{DELETING}{job_id}"
            os.replace(self.job_dir(job_id), gone)
            self._queued.discard(job_id)
            user = self._user_of.pop(job_id, None)
            if user is not None:
                self._by_user[user].remove(job_id)
            token = record.extra.get(SUBMISSION)
            if user is not None and isinstance(token, str) and self._submissions.get((user, token)) == job_id:
                del self._submissions[(user, token)]
        shutil.rmtree(gone, ignore_errors=True)  # what cannot be removed now is no job; the next start tries again
        return record

    def update(self, job_id: str, **changes: Any) -> JobRecord:
        with self._lock:
            return self._write(replace(self.get(job_id), **changes))

    def transition(self, job_id: str, from_state: str, **changes: Any) -> JobRecord | None:
        """Apply ``changes`` if the job is in ``from_state`` (atomically: a job is claimed or
        cancelled once); None if it is not."""
        with self._lock:
            record = self.get(job_id)
            return self._write(replace(record, **changes)) if record.state == from_state else None

    def next_queued(self) -> JobRecord | None:
        """The oldest queued job (None: the queue is empty): its record alone is read."""
        while True:
            with self._lock:
                first = min(self._queued, default=None)  # ids sort in submission order
            if first is None:
                return None
            try:
                return self.get(first)
            except ConfigError:  # its directory was removed meanwhile: not queued any more
                with self._lock:
                    self._queued.discard(first)

    def recover(self) -> list[str]:
        """Queue again every job a previous service left ``running`` (it was stopped or killed
        mid-job); returns their ids. Boosting continues from its journal."""
        again = []
        for r in self.all():
            if r.state == "running":
                self.update(r.job_id, state="queued", restarts=r.restarts + 1)
                again.append(r.job_id)
        return again


def _moved_paths(job_dir: Path, old: str, new: str) -> None:
    """A moved job's error, in its record and report, names its folder's new place (walkthrough 9, W9-7: it still
    read ``STORE/jobs/<id>/report.json``). A file that cannot be read or written keeps its text."""
    for name in ("job.json", "report.json"):
        try:
            doc = json.loads((job_dir / name).read_text(encoding="utf-8"))
            if isinstance(doc, dict) and isinstance(doc.get("error"), str) and old in doc["error"]:
                doc["error"] = doc["error"].replace(old, new)
                replace_file(job_dir / name, json.dumps(doc, indent=2))
        except (OSError, ValueError):
            continue
