"""The coordinator's journal: a boosting job's checkpoints in SQLite, so a coordinator killed
at any point (kill -9 included) continues the job with ``--resume`` instead of starting it over
(issue 14, item 1).

What is recorded, per job: a fingerprint of its public configuration, the owners it runs over,
and its run id (owners key their releases by it); per round, the learner the shares selected and
then the secure sum of its evaluation, each committed before it is used
(:class:`privfed.common.boosting.loop.RoundJournal`). The SAMME decisions, the published history
and the groups are recomputed from these and the seed, so they come out the same. With each
checkpoint goes its step's account: what the job's book booked of the owners it asked (their ε,
who contributed, refusals, rejections: :meth:`privfed.server.rounds.JobBook.account`), and the
round's own record (shares used, its secure sum), so a resumed job's report counts the steps it
takes from the journal as the uninterrupted job's does (a journal of older code has none: its
rounds count as nothing there, and the job resumes all the same).

What a resume therefore costs the owners: nothing for a recorded step (nobody is asked again);
for the step that was in flight when the coordinator died, an owner that already released sends
what it kept again (a boosting run's share or evaluation pair: no new draw, no debit;
:mod:`privfed.owner.core`) or, its node restarted meanwhile, refuses (``already_released``: its ledger
knows the run id and round), and that step goes on without it -- the ledger bound holds either way. A ring interrupted mid-sum is re-run under a fresh
session and the members' cached noisy pairs make it cost them nothing (while their nodes live).

Only public values are recorded: learners, noisy sums, owner ids, their accounts and configuration
-- what the coordinator learned anyway. The file is written with SQLite's journaling (each checkpoint one
transaction), so a crash leaves either the checkpoint or nothing.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privfed.common.boosting.loop import Evaluation
from privfed.common.errors import ConfigError
from privfed.common.files import private_sqlite_file
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde

if TYPE_CHECKING:
    from privfed.common.boosting.wire import Learner

_SCHEMA = """
CREATE TABLE IF NOT EXISTS job (
    fingerprint TEXT NOT NULL,
    owners TEXT NOT NULL,          -- JSON list of owner ids, in the job's order
    run_id TEXT NOT NULL,
    finished INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS rounds (
    round INTEGER PRIMARY KEY,     -- 0-based
    learner BLOB NOT NULL,         -- privfed.v1.BoostLearner
    err_total REAL,                -- the round's secure sum, once done
    weight_total REAL,
    n_parties INTEGER,
    learner_account TEXT,          -- JSON: what the round's shares booked (a journal of older code: NULL)
    sum_account TEXT               -- JSON: what its evaluation booked
);
CREATE TABLE IF NOT EXISTS reports (
    path TEXT NOT NULL             -- a run of the unfinished job: its report.json (the runs in order)
);
"""
#: Columns added after the first journals were written: a journal without them gets them, NULL in its rounds.
_ADDED = {"learner_account": "TEXT", "sum_account": "TEXT"}
#: The checkpoints a round's account goes with (:meth:`Journal.account`).
_ACCOUNTS = {"learner": "learner_account", "sum": "sum_account"}


class Journal:
    """One job's checkpoints in the SQLite file ``path`` (created if missing).

    Use :meth:`begin` once per job, then the :class:`~privfed.common.boosting.loop.RoundJournal`
    methods; :meth:`finish` marks the job done (a finished journal is not resumed).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        private_sqlite_file(self.path)  # 0600, and SQLite's -journal file with it
        try:
            self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
            self._db.executescript(_SCHEMA)
            have = {row[1] for row in self._db.execute("PRAGMA table_info(rounds)")}
            for column, kind in _ADDED.items():
                if column not in have:
                    self._db.execute(f"ALTER TABLE rounds ADD COLUMN {column} {kind}")
        except sqlite3.Error as exc:
            raise ConfigError(f"journal {self.path}: cannot open or create it ({exc})") from exc

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the job
    def recorded_rounds(self) -> int:
        """How many rounds have a recorded learner."""
        return int(self._db.execute("SELECT COUNT(*) FROM rounds").fetchone()[0])

    def evaluated_rounds(self) -> int:
        """How many rounds are done: their learner and its evaluation recorded (what is left of a round is
        their decision, made again from these)."""
        return int(self._db.execute("SELECT COUNT(n_parties) FROM rounds").fetchone()[0])

    def unfinished_owners(self) -> list[str]:
        """The owners an unfinished recorded job ran over (none recorded, or finished: empty): whom a resumed
        job waits for."""
        row = self._db.execute("SELECT owners, finished FROM job").fetchone()
        return [] if row is None or row[1] else list(json.loads(row[0]))

    def begin(self, *, fingerprint: str, owner_ids: list[str], run_id: str, resume: bool) -> str:
        """Start the job, or continue the one recorded; returns the run id to use.

        Raises
        ------
        ConfigError
            The file holds an unfinished job and ``resume`` is false (it would be overwritten), or
            it holds another unfinished job (configuration or owners differ). A finished job's
            journal is replaced: ``--resume`` on every start (compose) continues a killed job and
            starts the next one afresh.
        """
        row = self._db.execute("SELECT fingerprint, owners, run_id, finished FROM job").fetchone()
        if row is not None and row[3]:  # a finished job: its results are in its report; start afresh
            with self._db:
                self._db.execute("BEGIN")
                self._db.execute("DELETE FROM job")
                self._db.execute("DELETE FROM rounds")
            row = None
        if row is None:
            with self._db:
                self._db.execute("BEGIN")
                self._db.execute(
                    "INSERT INTO job (fingerprint, owners, run_id) VALUES (?, ?, ?)",
                    (fingerprint, json.dumps(list(owner_ids)), run_id),
                )
            return run_id
        recorded_fp, owners, recorded_run, _ = row
        if not resume:
            raise ConfigError(
                f"journal {self.path} already holds job {recorded_run} ({self.recorded_rounds()} round(s)); "
                "pass --resume to continue it, or another journal file to start a new job"
            )
        if recorded_fp != fingerprint:
            raise ConfigError(
                f"journal {self.path} holds job {recorded_run} with another configuration; resume it with the "
                "same task, data set, bounds, epsilon and seed"
            )
        if json.loads(owners) != list(owner_ids):  # run_federated_job waited for as many: resumed_owners
            raise ConfigError(
                f"journal {self.path}: job {recorded_run} ran over other owners than those registered now; "
                "start the same owner nodes (same --name and --shards) before resuming"
            )
        return str(recorded_run)

    def note_run(self, report: Path, *, resume: bool) -> list[Path]:
        """Record that this run of the job writes its report to ``report``; return the reports of the earlier runs
        of the unfinished job the journal holds, oldest first (none: no unfinished job).

        A resumed ``privfed coordinator`` reads them to name what the owners may have spent in the runs before it
        (their reports are written ahead of every batch that asks for releases: ``run_federated_job(write_ahead=
        True)``), as the service does with a job's one report (walkthrough 14, W14-2). With no unfinished job the
        list starts afresh; a run that would overwrite an unfinished job without ``resume`` is not recorded
        (:meth:`begin` refuses it)."""
        unfinished = bool(self.unfinished_owners())
        if unfinished and not resume:
            return []
        earlier = [Path(row[0]) for row in self._db.execute("SELECT path FROM reports ORDER BY rowid")]
        with self._db:
            self._db.execute("BEGIN")
            if not unfinished:
                self._db.execute("DELETE FROM reports")
            self._db.execute("INSERT INTO reports (path) VALUES (?)", (str(Path(report).resolve()),))
        return earlier if unfinished else []

    def reopen(self) -> bool:
        """Mark a finished job unfinished again (:func:`reopen_finished`); whether there was one."""
        if self._db.execute("SELECT finished FROM job").fetchone() != (1,):
            return False
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute("UPDATE job SET finished = 0")
        return True

    def finish(self) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute("UPDATE job SET finished = 1")

    # ------------------------------------------------------------------ RoundJournal
    def learner(self, round_no: int) -> Learner | None:
        row = self._db.execute("SELECT learner FROM rounds WHERE round = ?", (round_no,)).fetchone()
        return None if row is None else serde.learner_from_proto(pb.BoostLearner.FromString(row[0]))

    def record_learner(self, round_no: int, learner: Learner, account: Mapping[str, Any] | None = None) -> None:
        """The round's learner, and ``account``: what its shares cost and brought (JSON; :meth:`account`)."""
        blob = serde.learner_to_proto(learner).SerializeToString()
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT INTO rounds (round, learner, learner_account) VALUES (?, ?, ?)",
                (round_no, blob, _json(account)),
            )

    def account(self, round_no: int, checkpoint: str) -> dict[str, Any]:
        """What was recorded with round ``round_no``'s ``checkpoint`` (``"learner"`` or ``"sum"``): the account of the
        owners the step asked, so a resumed job's report counts them. Empty if none was (a journal of older code)."""
        row = self._db.execute(f"SELECT {_ACCOUNTS[checkpoint]} FROM rounds WHERE round = ?", (round_no,)).fetchone()
        return {} if row is None or row[0] is None else dict(json.loads(row[0]))

    def evaluation(self, round_no: int) -> Evaluation | None:
        row = self._db.execute(
            "SELECT err_total, weight_total, n_parties FROM rounds WHERE round = ? AND n_parties IS NOT NULL",
            (round_no,),
        ).fetchone()
        return None if row is None else Evaluation(float(row[0]), float(row[1]), int(row[2]))

    def record_evaluation(
        self, round_no: int, evaluation: Evaluation, account: Mapping[str, Any] | None = None
    ) -> None:
        """The round's secure sum, and ``account``: what its evaluation cost and brought (JSON; :meth:`account`)."""
        with self._db:
            self._db.execute("BEGIN")
            updated = self._db.execute(
                "UPDATE rounds SET err_total = ?, weight_total = ?, n_parties = ?, sum_account = ? WHERE round = ?",
                (
                    float(evaluation.err_total),
                    float(evaluation.weight_total),
                    int(evaluation.n_parties),
                    _json(account),
                    round_no,
                ),
            ).rowcount
            if updated != 1:
                raise ConfigError(f"journal {self.path}: round {round_no} has no recorded learner to evaluate")


def _json(account: Mapping[str, Any] | None) -> str | None:
    return None if account is None else json.dumps(account, sort_keys=True)


def fingerprint(*parts: bytes | str) -> str:
    """SHA-256 over the job's public configuration, in a fixed order."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


def reopen_finished(path: Path) -> bool:
    """Mark the finished job the journal at ``path`` holds unfinished again; whether it held one. For a service job,
    which is one job by its id: a run that finished its rounds but whose process died before its ``ok`` report (the
    model saved, the reference computed) must not start afresh at the next start, a new run every owner would pay
    for again (audit 38, A38-3); reopened, its next run replays every round from the journal and asks no owner for
    anything that costs. (``privfed coordinator --resume`` keeps starting a finished journal afresh: compose passes
    it on every start, and a job that ended is the next job's start there.)"""
    if not path.exists():
        return False
    with Journal(path) as journal:
        return journal.reopen()


def resumed_owners(path: Path) -> list[str]:
    """The owners the unfinished job in the journal at ``path`` ran over, in its order (no file or no such job:
    none): those that took part in its accept round (``privfed.server.job.accept_round``; a journal of older code:
    every owner registered then). A resumed job waits for as many, not the fewer its job file asked for, else it
    began with the first daemons back and failed for good on the owners' list (walkthrough 5), and runs over
    them again: its rounds are planned from them and its seed."""
    if not path.exists():
        return []
    with Journal(path) as journal:
        return journal.unfinished_owners()
