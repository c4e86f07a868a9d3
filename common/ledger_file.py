"""The ledger file: its tables, their migrations, and the read-only audit of a file
(:func:`read_accounts`).

Durability
    The file is opened in WAL mode with ``synchronous=FULL``. In WAL mode a commit appends to the
    ``-wal`` file; ``NORMAL`` would already survive a crash or ``kill -9`` of this process (the
    write is in the OS page cache when ``COMMIT`` returns), but not an OS crash or power loss,
    which could roll back the last commits *after* the release has left: the owner would then
    forget a release and could spend the same budget again. ``FULL`` fsyncs the WAL on every
    commit, so a debit that returned is on disk. The cost is one fsync per commit, which
    :meth:`~privfed.common.ledger.Ledger.debit_many` amortises over a whole batch of owners.

Schema versions
    1: the original tables. 2: ``releases.nonprivate``. 3: ``accounts`` (rows), ``meta`` (the row-key
    salt) and ``schema_decisions``. 4: ``releases.job``, the id of the job a release was made for
    (empty: a release of no announced job; issue 26, ``privfed ledger show`` groups by it). 5:
    ``releases.data_user`` and ``releases.coordinator``, whom the release went to (walkthrough 4, M4):
    the data user the job's announcement names (:class:`~privfed.common.jobinfo.JobInfo`; empty: the
    coordinator's operator ran it, or no job was announced) and the coordinator the owner node's
    session is with, as its channel authenticated it (``privfed.proto.transport.peer_identity``;
    empty: an in-process coordinator). Both are written in the owner's file only: nothing the owner
    sends, refuses or answers depends on them (:class:`~privfed.common.ledger_records.Recipient`).
    An older file is migrated in place the first time it is opened (a version-1 file's rows marked
    private; the columns a version lacks added with '' in every old row: unknown, as ``privfed
    ledger show`` prints them).
    Table ``holders`` (which owner ids debited with which row accounts, ``privfed.common.ledger_rows``)
    is created in any version's file when it is opened. 6: ``releases.run`` and ``holders.run``, the *run* (one
    opening of the file for writing, numbered in table ``meta``) a release was debited in and in which an id held a
    row (walkthrough 8, W8-5): an owner policy counts, for a row, the releases of each id in the runs in which that
    id held the row, not every release the id ever made (``privfed.common.ledger_rows``). An older file's releases
    and holders are migrated with run 0, which stands for every run before this version: a row held by an id before
    it is counted with every one of that id's releases of then (as before: nothing is given back).
"""

from __future__ import annotations

import logging
import math
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfed.common.errors import ConfigError
from privfed.common.files import private_sqlite_file
from privfed.common.ledger_records import Budget, fmt_amount, release_dict, remaining_of, used_up

log = logging.getLogger("privfed.ledger")

#: Seconds a statement waits for a lock held by another connection before failing.
BUSY_TIMEOUT_S = 30.0
#: Schema version stored in ``PRAGMA user_version``.
SCHEMA_VERSION = 6
#: Owners (or accounts) per ``IN (...)`` query: below SQLite's historical limit of 999 bound variables.
CHUNK = 500

_SCHEMA = """
CREATE TABLE IF NOT EXISTS owners (
    owner_id       TEXT PRIMARY KEY,
    epsilon_budget REAL NOT NULL,
    delta_budget   REAL NOT NULL,
    created        TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE IF NOT EXISTS releases (
    seq        INTEGER PRIMARY KEY,
    owner_id   TEXT NOT NULL REFERENCES owners(owner_id),
    release_id TEXT NOT NULL,
    purpose    TEXT NOT NULL,
    epsilon    REAL NOT NULL,
    delta      REAL NOT NULL,
    ts         TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    nonprivate INTEGER NOT NULL DEFAULT 0,
    job        TEXT NOT NULL DEFAULT '',
    data_user  TEXT NOT NULL DEFAULT '',
    coordinator TEXT NOT NULL DEFAULT '',
    run        INTEGER NOT NULL DEFAULT 0,
    UNIQUE (owner_id, release_id)
);
CREATE INDEX IF NOT EXISTS releases_purpose ON releases (owner_id, purpose);
CREATE INDEX IF NOT EXISTS releases_job ON releases (owner_id, job);
CREATE INDEX IF NOT EXISTS releases_ts ON releases (owner_id, ts);
CREATE INDEX IF NOT EXISTS releases_run ON releases (owner_id, run);
CREATE TABLE IF NOT EXISTS accounts (
    key     TEXT PRIMARY KEY,
    epsilon REAL NOT NULL,
    delta   REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS holders (
    row_key  TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    run      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (row_key, owner_id, run)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS schema_decisions (
    seq      INTEGER PRIMARY KEY,
    digest   TEXT NOT NULL,
    accepted INTEGER NOT NULL,
    ts       TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);
"""


def open_file(path: Path, default: Budget) -> sqlite3.Connection:
    """A connection to the ledger file ``path`` (0600, created with its tables if missing, migrated if
    older: :func:`init_schema`) in autocommit mode with the busy timeout; :class:`ConfigError` if it
    cannot be opened, is not a usable ledger, or stores a lower budget than ``default`` (a higher one is lowered to it)."""
    existed = path.exists() and path.stat().st_size > 0  # a file of 0 bytes is a new ledger too
    private_sqlite_file(path)  # 0600, and SQLite's -wal/-shm/-journal files with it
    try:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as exc:
        raise ConfigError(f"ledger {path}: cannot open ({exc}); does its directory exist?") from exc
    try:
        init_schema(conn, path, default, existed=existed)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise ConfigError(f"ledger {path}: not a usable SQLite ledger ({exc})") from exc
    except ConfigError:
        conn.close()
        raise
    return conn


def init_schema(conn: sqlite3.Connection, path: Path, default: Budget, *, existed: bool = False) -> None:
    """Create or migrate the tables of the ledger file ``path`` open on ``conn`` (module docstring),
    set its pragmas, and lower the owners' stored budgets to ``default`` or refuse a higher one
    (:func:`_keep_or_lower_budget`).

    A file that ``existed`` with bytes in it but no ledger (schema version 0) is refused, never made a new ledger:
    a plain ``cp`` of a running node's ledger holds its releases in no file but the write-ahead log it left behind,
    and a node started on it gave every owner, and every row's account, a fresh budget with no word (walkthrough 7,
    W7-4). Such a copy is caught until the log is first checkpointed into the file (SQLite does at 1000 pages); a
    later copy misses only the releases since, which no check of the file can tell: ``privfed ledger backup``
    copies a ledger whole. (A file whose creation was killed before its tables were written is refused too.)"""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version not in (0, 1, 2, 3, 4, 5, SCHEMA_VERSION):
        raise ConfigError(_unknown_schema(path, version))
    if version == 0 and existed:
        raise ConfigError(
            f"ledger {path} is a file that holds no privfed ledger (schema version 0): a copy made with cp while its "
            f"node ran lacks the releases in its write-ahead log ({path.name}-wal), and starting on it would give "
            "every owner its budget again; copy a ledger with `privfed ledger backup`, and give a new ledger a "
            "path that does not exist yet (or remove a file whose creation was interrupted before any release)"
        )
    conn.execute("PRAGMA journal_mode=WAL")  # returns 'memory' for ':memory:', which is fine
    conn.execute("PRAGMA synchronous=FULL")  # module docstring, "Durability"
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("BEGIN IMMEDIATE")
    try:
        if version == 1:  # module docstring, "Schema versions"
            conn.execute("ALTER TABLE releases ADD COLUMN nonprivate INTEGER NOT NULL DEFAULT 0")
        columns = {row[1] for row in conn.execute("PRAGMA table_info(releases)")}
        for column in ("job", "data_user", "coordinator"):  # versions 4 and 5: '' in every old row (unknown)
            if version and column not in columns:
                conn.execute(f"ALTER TABLE releases ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")
        if version and "run" not in columns:  # version 6: run 0, every run before it
            conn.execute("ALTER TABLE releases ADD COLUMN run INTEGER NOT NULL DEFAULT 0")
        _add_holders_run(conn)
        for statement in _SCHEMA.split(";"):  # not executescript: it would COMMIT first
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT OR IGNORE INTO meta (name, value) VALUES ('row_salt', ?)", (secrets.token_hex(16),))
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        _keep_or_lower_budget(conn, path, default)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    if 0 < version < SCHEMA_VERSION:  # walkthrough 9, W9-5: it said nothing, and the older privfed then refused it
        log.warning(
            "ledger %s: upgraded from schema version %d to %d, every release kept; a privfed older than this one "
            "can no longer open it (to go back, restore the copy `privfed ledger backup` made before the upgrade)",
            path,
            version,
            SCHEMA_VERSION,
        )


def _unknown_schema(path: Path, version: int) -> str:
    """Why the ledger ``path`` of schema ``version`` cannot be read: one of a newer privfed, or no ledger at all."""
    if version > SCHEMA_VERSION:  # walkthrough 9, W9-5: it read "not a privfed ledger"
        return (
            f"ledger {path}: written by a newer privfed (schema version {version}; this one reads 1 to "
            f"{SCHEMA_VERSION}): run the privfed that upgraded it, or restore the copy made before the upgrade"
        )
    return f"ledger {path}: not a privfed ledger (schema version {version})"


def _add_holders_run(conn: sqlite3.Connection) -> None:
    """Give an older file's table ``holders`` its column ``run`` (version 6), every holding it records at run 0
    (any run before it), in the open transaction: the key takes the run, so the table is copied."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(holders)")}
    if not columns or "run" in columns:
        return
    conn.execute(
        "CREATE TABLE holders_v6 (row_key TEXT NOT NULL, owner_id TEXT NOT NULL, run INTEGER NOT NULL DEFAULT 0, "
        "PRIMARY KEY (row_key, owner_id, run)) WITHOUT ROWID"
    )
    conn.execute("INSERT INTO holders_v6 (row_key, owner_id, run) SELECT row_key, owner_id, 0 FROM holders")
    conn.execute("DROP TABLE holders")
    conn.execute("ALTER TABLE holders_v6 RENAME TO holders")


def next_run(conn: sqlite3.Connection) -> int:
    """A new run number for this opening of the file for writing (module docstring, version 6), recorded in table
    ``meta`` in one committed transaction; runs are numbered from 1 (0: before version 6)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT value FROM meta WHERE name = 'last_run'").fetchone()
        run = (0 if row is None else int(row[0])) + 1
        conn.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('last_run', ?)", (str(run),))
        conn.execute("COMMIT")
        return run
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _keep_or_lower_budget(conn: sqlite3.Connection, path: Path, default: Budget) -> None:
    """Check the owners' stored budgets against ``default`` (the one the ledger is opened with), in the open
    transaction: equal, it opens; lower in both components, every stored budget is lowered to it (tightening
    privacy is always safe: each owner and each of its rows' accounts is then held to the lower total, spent
    budget stays counted, and a budget already spent beyond it refuses every further release); higher in
    either, it is refused: raising a budget is a policy decision the ledger does not make (walkthrough 4, M6: the
    message advised "use a new ledger file", which starts every row's account at zero, a reset of the privacy
    accounting). The message never advises a new ledger."""
    row = conn.execute(
        "SELECT owner_id, epsilon_budget, delta_budget FROM owners "
        "WHERE epsilon_budget < ? OR delta_budget < ? LIMIT 1",
        (default.epsilon, default.delta),
    ).fetchone()
    if row is not None:
        stored = Budget(row[1], row[2])
        raise ConfigError(
            f"ledger {path}: owner {row[0]!r} has stored budget {stored}, but the ledger was opened with "
            f"epsilon_budget={fmt_amount(default.epsilon)}, delta_budget={fmt_amount(default.delta)}; raising a "
            "stored budget is refused (a policy decision this ledger does not make: the rows' spent budget stays "
            f"counted against it). To keep it, pass the stored budget (--epsilon-budget {fmt_amount(stored.epsilon)} "
            f"--delta-budget {fmt_amount(stored.delta)}, as `privfed ledger show --ledger {path}` shows); a lower "
            "budget lowers it"
        )
    lowered = conn.execute(
        "UPDATE owners SET epsilon_budget = ?, delta_budget = ? WHERE epsilon_budget > ? OR delta_budget > ?",
        (default.epsilon, default.delta, default.epsilon, default.delta),
    ).rowcount
    if lowered:
        log.warning(
            "ledger %s: the budget of %d owner(s) lowered to %s (it can be lowered again, never raised)",
            path,
            lowered,
            default,
        )


@dataclass(frozen=True)
class RowsStanding:
    """The row accounts a ledger file records as held by one owner id (table ``holders``, its ``row:`` keys;
    ``privfed.common.ledger_rows``), against the id's budget. Budgets follow the rows: a row spent under
    another owner id (the node ran with other ``--shards`` or ``--name`` over the same rows) is spent under
    this one too, which the id's own releases do not show (walkthrough 6, W6-16).

    Parameters
    ----------
    count : int
        The rows recorded as held by the id, in any run of its node (its pad accounts are not rows).
    spent : int
        How many of them can afford no more ε (:func:`~privfed.common.ledger_records.used_up`).
    least_remaining : Budget
        What the most-spent of them has left, per component (an account never debited spent nothing).
    """

    count: int
    spent: int
    least_remaining: Budget


@dataclass(frozen=True)
class OwnerAccount:
    """One owner's account as a ledger file records it (:func:`read_accounts`).

    ``releases`` are dicts as :meth:`Ledger.history` returns them, in debit order. ``rows``: the row accounts
    recorded as held by the id; None if none is (no rows bound, debits made before table ``holders``, or a
    file without it).
    """

    owner_id: str
    budget: Budget
    spent: Budget
    releases: tuple[dict[str, Any], ...]
    rows: RowsStanding | None = None

    @property
    def id_remaining(self) -> Budget:
        """What the id's own record leaves: ``budget - spent`` per component, never negative; ∞ while the budget
        is ∞. A request is refused by this alone (:meth:`Ledger.remaining`)."""
        return remaining_of(self.budget, self.spent)

    @property
    def remaining(self) -> Budget:
        """What a new release can take from every row of the id: the least of :attr:`id_remaining` and what its
        most-spent row has left, per component. A release beyond it is made without the rows it exceeds, and from
        the data-independent fallback when that is all of them (``privfed.common.ledger_rows``)."""
        own = self.id_remaining
        if self.rows is None:
            return own
        rows = self.rows.least_remaining
        return Budget(min(own.epsilon, rows.epsilon), min(own.delta, rows.delta))

    @property
    def nonprivate(self) -> int:
        """How many of the releases were non-private (``privfed.common.ledger`` docstring, "Non-private entries")."""
        return sum(r["nonprivate"] for r in self.releases)


def read_accounts(path: str | Path) -> list[OwnerAccount]:
    """Every owner recorded in the ledger file ``path``, sorted by owner id, read without writing.

    The file is opened read-only (SQLite ``mode=ro``): no table is created, no schema migrated and
    no budget stored, so an audit can run beside the owner node that uses the ledger. An owner
    appears once it has debited (its budget is stored with its first release), with its rows'
    standing (:func:`_rows_standing`).

    Raises
    ------
    ConfigError
        The file is missing, unreadable, or not a privfed ledger.
    """
    path = Path(path)
    conn, version = open_read_only(path)
    try:
        nonprivate = "nonprivate" if version >= 2 else "0"
        job = "job" if version >= 4 else "''"
        recipient = "data_user, coordinator" if version >= 5 else "'', ''"  # not migrated here: read-only
        releases: dict[str, list[dict[str, Any]]] = {}
        for row in conn.execute(
            f"SELECT owner_id, release_id, purpose, epsilon, delta, ts, {nonprivate}, {job}, {recipient} "
            "FROM releases ORDER BY seq"
        ):
            releases.setdefault(row[0], []).append(release_dict(row[1:]))
        standing = _rows_standing(conn)
        accounts = []
        for owner, eps, delta in conn.execute(
            "SELECT owner_id, epsilon_budget, delta_budget FROM owners ORDER BY owner_id"
        ):
            rows = releases.get(owner, [])
            spent = Budget(math.fsum(r["epsilon"] for r in rows), math.fsum(r["delta"] for r in rows))
            accounts.append(OwnerAccount(owner, Budget(eps, delta), spent, tuple(rows), standing.get(owner)))
        return accounts
    except sqlite3.Error as exc:
        raise ConfigError(f"ledger {path}: not a readable privfed ledger ({exc})") from exc
    finally:
        conn.close()


def _rows_standing(conn: sqlite3.Connection) -> dict[str, RowsStanding]:
    """Each owner id's :class:`RowsStanding`, in one grouped pass over table ``holders`` (its ``row:`` keys, each
    with its account, against the id's budget); empty for a file without tables ``holders`` and ``accounts``,
    which are looked for by name: ``holders`` came without a schema version of its own (module docstring)."""
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not {"holders", "accounts"} <= tables:
        return {}
    conn.create_function("used_up", 2, used_up, deterministic=True)  # this connection's, nothing written
    standing = {}
    for owner, count, spent, eps, delta, eps_budget, delta_budget in conn.execute(
        "SELECT h.owner_id, count(*), sum(used_up(coalesce(a.epsilon, 0.0), o.epsilon_budget)), "
        "max(coalesce(a.epsilon, 0.0)), max(coalesce(a.delta, 0.0)), o.epsilon_budget, o.delta_budget "
        "FROM (SELECT DISTINCT row_key, owner_id FROM holders) AS h JOIN owners AS o ON o.owner_id = h.owner_id "
        "LEFT JOIN accounts AS a ON a.key = h.row_key "
        "WHERE h.row_key LIKE 'row:%' GROUP BY h.owner_id, o.epsilon_budget, o.delta_budget"
    ):
        least = remaining_of(Budget(eps_budget, delta_budget), Budget(eps, delta))
        standing[owner] = RowsStanding(count, spent, least)
    return standing


def open_read_only(path: Path) -> tuple[sqlite3.Connection, int]:
    """A read-only connection to the ledger file ``path`` (SQLite ``mode=ro``) and its schema version."""
    if not path.exists():  # SQLite's own words, "unable to open database file", name no cause (walkthrough 11)
        raise ConfigError(f"ledger {path}: no such file (check --ledger: a node makes its ledger when it starts)")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise ConfigError(f"ledger {path}: cannot open ({exc})") from exc
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error as exc:
        conn.close()
        raise ConfigError(f"ledger {path}: not a readable privfed ledger ({exc})") from exc
    if version not in (1, 2, 3, 4, 5, SCHEMA_VERSION):
        conn.close()
        raise ConfigError(_unknown_schema(path, version))
    return conn, version


class ReleaseIds(AbstractSet[str]):
    """The release ids an owner had recorded when its standing was read (``Ledger.standings``), kept in
    the file rather than copied: ``in`` is one lookup in the unique index on (owner, release id),
    O(log n), limited to the releases up to the last sequence number at that moment (``upto``), so
    the view does not change when the owner releases more; ``len`` is O(1); iterating (an audit
    listing) reads the ids, O(the owner's history), and only happens there.

    Parameters
    ----------
    connection : callable
        The ledger's connection (raises once the ledger is closed).
    owner_id : str
    upto : int
        The largest ``releases.seq`` when the standing was read (0: none).
    count : int
        How many releases the owner had then.
    """

    __slots__ = ("_connection", "_owner_id", "_upto", "_count")

    def __init__(self, connection: Callable[[], sqlite3.Connection], owner_id: str, upto: int, count: int) -> None:
        self._connection = connection
        self._owner_id = owner_id
        self._upto = upto
        self._count = count

    def __contains__(self, release_id: object) -> bool:
        if not isinstance(release_id, str) or self._count == 0:
            return False
        row = (
            self._connection()
            .execute(
                "SELECT 1 FROM releases WHERE owner_id = ? AND release_id = ? AND seq <= ? LIMIT 1",
                (self._owner_id, release_id, self._upto),
            )
            .fetchone()
        )
        return row is not None

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[str]:
        if self._count == 0:
            return iter(())
        rows = (
            self._connection()
            .execute(
                "SELECT release_id FROM releases WHERE owner_id = ? AND seq <= ? ORDER BY seq",
                (self._owner_id, self._upto),
            )
            .fetchall()
        )
        return iter([r[0] for r in rows])

    def __hash__(self) -> int:
        return self._hash()

    def __repr__(self) -> str:
        return f"ReleaseIds({set(self)!r})"


def latest_schema_decision(conn: sqlite3.Connection) -> tuple[str, bool] | None:
    """The latest row of ``schema_decisions``: (the schema's digest, whether the rows fitted it)."""
    row = conn.execute("SELECT digest, accepted FROM schema_decisions ORDER BY seq DESC LIMIT 1").fetchone()
    return None if row is None else (str(row[0]), bool(row[1]))


def record_schema_decision(conn: sqlite3.Connection, digest: str, accepted: bool) -> None:
    """Add a row to ``schema_decisions`` in one committed transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT INTO schema_decisions (digest, accepted) VALUES (?, ?)", (digest, int(bool(accepted))))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def backup_file(path: str | Path, out: str | Path) -> int:
    """Copy the ledger file ``path`` to the new file ``out`` (0600) as one consistent snapshot, the releases still
    in its write-ahead log included, beside a node that writes it (SQLite's online backup over a read-only
    connection); returns the releases copied. A plain copy of the file alone misses the releases not yet
    checkpointed into it (walkthrough 5: 0.6 ε of an owner's debits, or every table of a young ledger), and a node
    restarted on such a copy could spend that budget again.

    Raises
    ------
    ConfigError
        ``path`` is not a privfed ledger (:func:`read_accounts`), or ``out`` exists or cannot be written.
    """
    path, out = Path(path), Path(out)
    read_accounts(path)  # a ledger, readable: else its own error
    if out.exists() or out.is_symlink():
        raise ConfigError(f"--out {out}: exists; a backup is written to a new file only")
    try:
        private_sqlite_file(out)
        source = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        copy = sqlite3.connect(str(out))
        try:
            source.backup(copy)
            return int(copy.execute("SELECT COUNT(*) FROM releases").fetchone()[0])
        finally:
            copy.close()
            source.close()
    except (OSError, sqlite3.Error) as exc:
        out.unlink(missing_ok=True)
        raise ConfigError(f"ledger {path}: cannot back it up to {out} ({exc})") from exc
