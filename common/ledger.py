"""Per-owner (ε, δ) privacy ledger kept in SQLite (DESIGN ``ledger``; STYLE rule 7).

Each logical owner has a fixed (ε, δ) budget. Every release an owner makes is *debited* here, in
one committed SQLite transaction, before the release leaves the owner; a release that would
overspend is refused with :class:`~privfed.common.errors.BudgetExceeded` and nothing is
recorded. One ledger file holds many logical owners (an owner node hosts thousands of shards).

Composition is basic (sequential) composition: spent = Σ ε_i, Σ δ_i over the owner's releases,
which is what the seed papers use (each owner spends its whole ε once in LDP boosting; FedDPDR
splits ε = ε1 + ε2).

Durability
    The file is opened in WAL mode with ``synchronous=FULL``. In WAL mode a commit appends to the
    ``-wal`` file; ``NORMAL`` would already survive a crash or ``kill -9`` of this process (the
    write is in the OS page cache when ``COMMIT`` returns), but not an OS crash or power loss,
    which could roll back the last commits *after* the release has left: the owner would then
    forget a release and could spend the same budget again. ``FULL`` fsyncs the WAL on every
    commit, so a debit that returned is on disk. The cost is one fsync per commit, which
    :meth:`Ledger.debit_many` amortises over a whole batch of owners.

Floating point
    Sums are exact-rounded (:func:`math.fsum` over the recorded rows), and a request fits if
    ``spent + request <= budget * (1 + 1e-12)``. The relative tolerance lets budgets split by
    decimal fractions be spent exactly (e.g. three debits of 0.1 against 0.3, whose double sum is
    0.30000000000000004); it allows an overspend of at most 1e-12·budget, far below any privacy
    difference that matters.

Infinite ε records a non-private release (ε = ∞). It is only affordable with an infinite budget,
so a non-private run needs a ledger opened with ``epsilon_budget=math.inf`` on purpose.

Non-private entries
    Some releases carry no DP guarantee by the owner's own choice (clear labels, which an owner
    node only makes with ``--allow-clear-labels``; issue 9, contract 6). They are recorded with
    ``nonprivate = 1`` and ε = δ = 0: counted apart from ε (they do not spend the budget, and no ε
    could describe them), but on the record, so :meth:`Ledger.history` and
    :meth:`Ledger.nonprivate_count` show the owner what left without noise.

Budgets follow the rows (issue 20, finding 4)
    Besides its own record (the releases of its id), an owner has *row accounts*: one per row it
    holds in this process (:meth:`Ledger.bind_rows`, keyed by a salted digest of the row's content
    and its occurrence in the data, ``privfed.owner.data.row_digests``), to which each of its
    debits is added. Its spent budget is the larger of what its id released and what the
    most-spent of its rows has. So re-sharding the same data (another ``--shards``), renaming the
    node (another ``--name``) or re-ordering the file never gives a row a fresh budget: a new
    logical owner inherits the most any of its rows has spent (and a reused id what it released).
    Limits: a fresh ledger file starts every row at zero; a row whose content changes is a new row;
    identical rows are told apart by their order in the data (re-ordering two identical rows can
    swap their accounts); rows live in the process that binds them (owners sharing rows across two
    nodes' ledgers are not linked); releases recorded before schema 3 are on their ids only.

Schema decisions (issue 20, finding 5)
    The digest of the federation schema an owner node checked its rows against, and whether they
    fitted, recorded before the node answers anything (:meth:`Ledger.record_schema`,
    :meth:`Ledger.schema_decision`): ``privfed.owner.main`` refuses another schema after a restart
    without reading the rows.

Schema versions
    1: the original tables. 2: ``releases.nonprivate``. 3: ``accounts`` (rows), ``meta`` (the row-key
    salt) and ``schema_decisions``. 4: ``releases.job``, the id of the job a release was made for
    (empty: a release of no announced job; issue 26, ``privfed ledger show`` groups by it). An older file is migrated in place the first time it is opened
    (a version-1 file's rows marked private).

A ledger is used by one process; the connection has a busy timeout anyway so that a second reader
(e.g. an audit tool) waits instead of failing. The connection belongs to the thread that opened
the ledger (sqlite3's default ``check_same_thread``).
"""

from __future__ import annotations

import hashlib
import math
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfed.common.errors import BudgetExceeded, ConfigError, LocalProtocolError
from privfed.common.files import private_sqlite_file
from privfed.common.ledger_cache import OwnerRecord, RecordCache
from privfed.common.validation import check_non_negative, check_probability

#: Relative tolerance on the budget comparison (module docstring, "Floating point").
REL_TOL = 1e-12
#: Seconds a statement waits for a lock held by another connection before failing.
BUSY_TIMEOUT_S = 30.0
#: Schema version stored in ``PRAGMA user_version``.
SCHEMA_VERSION = 4
#: Owners per ``IN (...)`` query: below SQLite's historical limit of 999 bound variables.
_CHUNK = 500

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
    UNIQUE (owner_id, release_id)
);
CREATE INDEX IF NOT EXISTS releases_purpose ON releases (owner_id, purpose);
CREATE TABLE IF NOT EXISTS accounts (
    key     TEXT PRIMARY KEY,
    epsilon REAL NOT NULL,
    delta   REAL NOT NULL
);
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


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.12g}"


@dataclass(frozen=True, order=False)
class Budget:
    """An (ε, δ) pair, ordered jointly: ``a <= b`` iff ``a.epsilon <= b.epsilon`` and
    ``a.delta <= b.delta`` (a partial order, as diffprivlib's ``Budget``).

    ε may be ``math.inf`` (a non-private release); δ is a finite non-negative number.
    """

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_non_negative(self.epsilon, name="epsilon", allow_inf=True))
        object.__setattr__(self, "delta", check_non_negative(self.delta, name="delta"))

    def __add__(self, other: Budget) -> Budget:
        if not isinstance(other, Budget):
            return NotImplemented
        return Budget(self.epsilon + other.epsilon, self.delta + other.delta)

    def __le__(self, other: Budget) -> bool:
        if not isinstance(other, Budget):
            return NotImplemented
        return self.epsilon <= other.epsilon and self.delta <= other.delta

    def __ge__(self, other: Budget) -> bool:
        if not isinstance(other, Budget):
            return NotImplemented
        return other <= self

    def __lt__(self, other: Budget) -> bool:
        if not isinstance(other, Budget):
            return NotImplemented
        return self <= other and self != other

    def __gt__(self, other: Budget) -> bool:
        if not isinstance(other, Budget):
            return NotImplemented
        return other < self

    def __str__(self) -> str:
        return f"(epsilon={_fmt(self.epsilon)}, delta={_fmt(self.delta)})"


@dataclass(frozen=True)
class Debit:
    """One entry of :meth:`Ledger.debit_many`; validated when built.

    ``nonprivate=True`` records a release without DP guarantee (module docstring, "Non-private
    entries"); its ε and δ must be 0.
    """

    owner_id: str
    epsilon: float
    delta: float
    purpose: str
    release_id: str
    nonprivate: bool = False
    job: str = ""  # the announced job the release is made for (empty: none)

    def __post_init__(self) -> None:
        _name("owner_id", self.owner_id)
        _name("purpose", self.purpose)
        _name("release_id", self.release_id)
        object.__setattr__(self, "epsilon", check_non_negative(self.epsilon, name="epsilon", allow_inf=True))
        object.__setattr__(self, "delta", check_probability(self.delta, name="delta"))
        if not isinstance(self.nonprivate, bool):
            raise ConfigError(f"nonprivate must be a bool, got {self.nonprivate!r}")
        if self.nonprivate and (self.epsilon != 0 or self.delta != 0):
            raise ConfigError(
                f"a non-private entry is counted apart from the budget: its epsilon and delta must be "
                f"0, got ({self.epsilon!r}, {self.delta!r}); debit the private part separately"
            )


def _name(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _fits(spent: float, request: float, budget: float) -> bool:
    return spent + request <= budget * (1.0 + REL_TOL)


def _remaining(budget: Budget, spent: Budget) -> Budget:
    eps = math.inf if math.isinf(budget.epsilon) else max(0.0, budget.epsilon - spent.epsilon)
    return Budget(eps, max(0.0, budget.delta - spent.delta))


@dataclass(frozen=True)
class Standing:
    """An owner's record at one moment (:meth:`Ledger.standings`): what it spent, its budget and
    the ids of its releases."""

    spent: Budget
    budget: Budget
    release_ids: frozenset[str]


@dataclass(frozen=True)
class OwnerAccount:
    """One owner's account as a ledger file records it (:func:`read_accounts`).

    ``releases`` are dicts as :meth:`Ledger.history` returns them, in debit order.
    """

    owner_id: str
    budget: Budget
    spent: Budget
    releases: tuple[dict[str, Any], ...]

    @property
    def remaining(self) -> Budget:
        """``budget - spent`` per component, never negative; ∞ while the budget is ∞."""
        return _remaining(self.budget, self.spent)

    @property
    def nonprivate(self) -> int:
        """How many of the releases were non-private (module docstring, "Non-private entries")."""
        return sum(r["nonprivate"] for r in self.releases)


def read_accounts(path: str | Path) -> list[OwnerAccount]:
    """Every owner recorded in the ledger file ``path``, sorted by owner id, read without writing.

    The file is opened read-only (SQLite ``mode=ro``): no table is created, no schema migrated and
    no budget stored, so an audit can run beside the owner node that uses the ledger. An owner
    appears once it has debited (its budget is stored with its first release).

    Raises
    ------
    ConfigError
        The file is missing, unreadable, or not a privfed ledger.
    """
    path = Path(path)
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise ConfigError(f"ledger {path}: cannot open ({exc})") from exc
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (1, 2, 3, SCHEMA_VERSION):
            raise ConfigError(f"ledger {path}: not a privfed ledger (schema version {version})")
        nonprivate = "nonprivate" if version >= 2 else "0"
        job = "job" if version >= 4 else "''"
        releases: dict[str, list[dict[str, Any]]] = {}
        keys = ("release_id", "purpose", "epsilon", "delta", "ts")
        for row in conn.execute(
            f"SELECT owner_id, release_id, purpose, epsilon, delta, ts, {nonprivate}, {job} FROM releases ORDER BY seq"
        ):
            releases.setdefault(row[0], []).append(dict(zip(keys, row[1:6]), nonprivate=bool(row[6]), job=row[7]))
        accounts = []
        for owner, eps, delta in conn.execute(
            "SELECT owner_id, epsilon_budget, delta_budget FROM owners ORDER BY owner_id"
        ):
            rows = releases.get(owner, [])
            spent = Budget(math.fsum(r["epsilon"] for r in rows), math.fsum(r["delta"] for r in rows))
            accounts.append(OwnerAccount(owner, Budget(eps, delta), spent, tuple(rows)))
        return accounts
    except sqlite3.Error as exc:
        raise ConfigError(f"ledger {path}: not a readable privfed ledger ({exc})") from exc
    finally:
        conn.close()


class Ledger:
    """SQLite ledger of the (ε, δ) spent by each logical owner.

    Parameters
    ----------
    path : str or Path
        The SQLite file; created with its tables if missing. Its directory must exist.
    epsilon_budget : float
        Total ε of each owner, in [0, inf]. Fixed per owner the first time the owner debits.
    delta_budget : float, default 0
        Total δ of each owner, in [0, 1].

    Raises
    ------
    ConfigError
        Invalid budget; unreadable or foreign file; or an owner already in the file has a stored
        budget different from the one given (a restarted owner cannot reset or enlarge its
        budget by passing another flag; use a new ledger file for a new budget).

    Notes
    -----
    A second debit with a ``release_id`` the owner already used raises
    :class:`~privfed.common.errors.LocalProtocolError` ("already released") rather than
    ``BudgetExceeded``: a replayed task is a protocol matter, not a budget one, and the caller must
    not produce a fresh noisy release for it. Nothing is ever debited twice.
    """

    def __init__(self, path: str | Path, *, epsilon_budget: float, delta_budget: float = 0.0) -> None:
        self._default = Budget(
            check_non_negative(epsilon_budget, name="epsilon_budget", allow_inf=True),
            check_probability(delta_budget, name="delta_budget"),
        )
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        private_sqlite_file(self.path)  # 0600, and SQLite's -wal/-shm/-journal files with it
        try:
            conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise ConfigError(f"ledger {self.path}: cannot open ({exc}); does its directory exist?") from exc
        try:
            self._init_db(conn)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise ConfigError(f"ledger {self.path}: not a usable SQLite ledger ({exc})") from exc
        except ConfigError:
            conn.close()
            raise
        self._conn = conn
        self._bound: dict[str, tuple[str, ...]] = {}  # owner id -> its row accounts (bind_rows)
        self._cache = RecordCache()

    def _init_db(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, 1, 2, 3, SCHEMA_VERSION):
            raise ConfigError(f"ledger {self.path}: schema version {version}, this code reads 1 to {SCHEMA_VERSION}")
        conn.execute("PRAGMA journal_mode=WAL")  # returns 'memory' for ':memory:', which is fine
        conn.execute("PRAGMA synchronous=FULL")  # module docstring, "Durability"
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("BEGIN IMMEDIATE")
        try:
            if version == 1:  # module docstring, "Schema versions"
                conn.execute("ALTER TABLE releases ADD COLUMN nonprivate INTEGER NOT NULL DEFAULT 0")
            columns = {row[1] for row in conn.execute("PRAGMA table_info(releases)")}
            if version and "job" not in columns:
                conn.execute("ALTER TABLE releases ADD COLUMN job TEXT NOT NULL DEFAULT ''")
            for statement in _SCHEMA.split(";"):  # not executescript: it would COMMIT first
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT OR IGNORE INTO meta (name, value) VALUES ('row_salt', ?)", (secrets.token_hex(16),))
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            row = conn.execute(
                "SELECT owner_id, epsilon_budget, delta_budget FROM owners "
                "WHERE epsilon_budget != ? OR delta_budget != ? LIMIT 1",
                (self._default.epsilon, self._default.delta),
            ).fetchone()
            if row is not None:
                raise ConfigError(
                    f"ledger {self.path}: owner {row[0]!r} has stored budget {Budget(row[1], row[2])}, "
                    f"but the ledger was opened with epsilon_budget={_fmt(self._default.epsilon)}, "
                    f"delta_budget={_fmt(self._default.delta)}; a stored budget cannot change "
                    "(pass the stored values, or use a new ledger file)"
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # ------------------------------------------------------------------ queries
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise LocalProtocolError(f"ledger {self.path} is closed")
        return self._conn

    def _fresh(self) -> sqlite3.Connection:
        """The connection, with :attr:`_cache` dropped if another connection wrote the file since it
        was last checked (``PRAGMA data_version``); once per read or debit, before its first record."""
        conn = self._db()
        self._cache.validate(conn.execute("PRAGMA data_version").fetchone()[0])
        return conn

    def budget(self, owner_id: str) -> Budget:
        """The owner's total budget: the stored one, or the ledger's if the owner never debited."""
        _name("owner_id", owner_id)
        row = (
            self._db()
            .execute("SELECT epsilon_budget, delta_budget FROM owners WHERE owner_id = ?", (owner_id,))
            .fetchone()
        )
        return self._default if row is None else Budget(row[0], row[1])

    def spent(self, owner_id: str) -> Budget:
        """What the owner has spent: the exact-rounded sum of its id's releases, or more if one of
        its bound rows has spent more (module docstring, "Budgets follow the rows")."""
        _name("owner_id", owner_id)
        conn = self._fresh()
        record = self._records(conn, [owner_id])[owner_id]
        own = (math.fsum(record.epsilons), math.fsum(record.deltas))
        return Budget(*self._most(own, self._account_sums(conn, self._bound.get(owner_id, ())), owner_id))

    def _most(
        self, own: tuple[float, float], sums: dict[str, tuple[float, float]], owner_id: str
    ) -> tuple[float, float]:
        """(ε, δ) spent by an owner: the larger of its id's record and each of its rows' accounts."""
        eps, delta = own
        for k in self._bound.get(owner_id, ()):
            row_eps, row_delta = sums[k]
            if row_eps > eps:
                eps = row_eps
            if row_delta > delta:
                delta = row_delta
        return eps, delta

    # ------------------------------------------------------------------ row accounts
    def accounts(self, owner_id: str) -> tuple[str, ...]:
        """The row accounts of ``owner_id`` (:meth:`bind_rows`); empty for an owner without bound rows."""
        return self._bound.get(owner_id, ())

    def bind_rows(self, owner_id: str, row_keys: Sequence[bytes]) -> None:
        """The rows ``owner_id`` holds in this process, as digests (``privfed.owner.data.row_digests``):
        from now on each of its debits is added to each row's account too, and it may spend only what
        the most-spent of them leaves. The ledger stores a salted digest of each row (the salt is the
        file's own)."""
        _name("owner_id", owner_id)
        salt = self._db().execute("SELECT value FROM meta WHERE name = 'row_salt'").fetchone()[0].encode()
        self._bound[owner_id] = tuple(f"row:{hashlib.sha256(salt + bytes(k)).hexdigest()[:32]}" for k in row_keys)

    def _account_sums(self, conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, tuple[float, float]]:
        """(ε, δ) recorded on each account of ``keys``; (0, 0) for an account with no debit yet. Read
        from the file for the accounts :attr:`_cache` does not hold (checked by :meth:`_fresh` first)."""
        cached = self._cache.accounts
        unique = [k for k in dict.fromkeys(keys) if k not in cached]
        if not unique:
            return {k: cached[k] for k in keys}
        sums = dict.fromkeys(keys, (0.0, 0.0))
        read: dict[str, tuple[float, float]] = {}
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for k, e, d in conn.execute(f"SELECT key, epsilon, delta FROM accounts WHERE key IN ({marks})", chunk):
                read[k] = (e, d)
        for k in sums:
            sums[k] = self._cache.accounts.get(k) or read.get(k, (0.0, 0.0))
        self._cache.keep_accounts({k: sums[k] for k in unique})
        return sums

    def remaining(self, owner_id: str) -> Budget:
        """``budget - spent`` per component, never negative; ∞ while the budget is ∞."""
        return _remaining(self.budget(owner_id), self.spent(owner_id))

    def has_released(self, owner_id: str, purpose: str) -> bool:
        """Whether the owner has any recorded release with this purpose."""
        _name("owner_id", owner_id)
        _name("purpose", purpose)
        row = (
            self._db()
            .execute("SELECT 1 FROM releases WHERE owner_id = ? AND purpose = ? LIMIT 1", (owner_id, purpose))
            .fetchone()
        )
        return row is not None

    def has_release_id(self, owner_id: str, release_id: str) -> bool:
        """Whether the owner already recorded a release with this id (a replayed task)."""
        _name("owner_id", owner_id)
        _name("release_id", release_id)
        row = (
            self._db()
            .execute("SELECT 1 FROM releases WHERE owner_id = ? AND release_id = ? LIMIT 1", (owner_id, release_id))
            .fetchone()
        )
        return row is not None

    def spent_on(
        self, owner_id: str, *, job: str | None = None, other_than: str | None = None, since: str | None = None
    ) -> Budget:
        """(ε, δ) of the owner's own releases made for ``job``, or for every job but ``other_than``,
        debited at or after ``since`` (SQLite ``datetime`` text such as ``'-1 day'`` relative to now;
        None: ever). An owner policy bounds a job's, a day's and the total spending with it
        (``privfed.owner.policy``)."""
        _name("owner_id", owner_id)
        where, args = ["owner_id = ?"], [owner_id]
        if job is not None:
            where.append("job = ?")
            args.append(job)
        if other_than is not None:
            where.append("job != ?")
            args.append(other_than)
        if since is not None:
            where.append("ts >= datetime('now', ?)")
            args.append(since)
        rows = self._db().execute(f"SELECT epsilon, delta FROM releases WHERE {' AND '.join(where)}", args).fetchall()
        return Budget(math.fsum(r[0] for r in rows), math.fsum(r[1] for r in rows))

    def nonprivate_count(self, owner_id: str) -> int:
        """How many non-private releases the owner made (module docstring, "Non-private entries")."""
        _name("owner_id", owner_id)
        return int(
            self._db()
            .execute("SELECT COUNT(*) FROM releases WHERE owner_id = ? AND nonprivate != 0", (owner_id,))
            .fetchone()[0]
        )

    def history(self, owner_id: str) -> list[dict[str, Any]]:
        """The owner's releases in debit order: dicts with release_id, purpose, epsilon, delta, ts, nonprivate, job.

        ``ts`` is SQLite's ``CURRENT_TIMESTAMP`` at commit (UTC, ``YYYY-MM-DD HH:MM:SS``);
        ``nonprivate`` is True for a release made without DP guarantee (its ε and δ are 0).
        """
        _name("owner_id", owner_id)
        cur = self._db().execute(
            "SELECT release_id, purpose, epsilon, delta, ts, nonprivate, job FROM releases WHERE owner_id = ? "
            "ORDER BY seq",
            (owner_id,),
        )
        keys = ("release_id", "purpose", "epsilon", "delta", "ts")
        return [dict(zip(keys, row[:5]), nonprivate=bool(row[5]), job=row[6]) for row in cur]

    def check(self, owner_id: str, epsilon: float, delta: float = 0.0, *, standing: Standing | None = None) -> None:
        """Raise :class:`BudgetExceeded` if ``spent + (epsilon, delta)`` exceeds the budget.

        Call before any computation (STYLE rule 7); :meth:`debit` checks again atomically.
        ``standing``: the owner's record read before (:meth:`standings`) instead of a new query.
        """
        _name("owner_id", owner_id)
        request = Budget(
            check_non_negative(epsilon, name="epsilon", allow_inf=True), check_probability(delta, name="delta")
        )
        if standing is None:
            standing = Standing(self.spent(owner_id), self.budget(owner_id), frozenset())
        error = self._refusal(owner_id, request, standing.spent, standing.budget, "")
        if error is not None:
            raise error

    def standings(self, owner_ids: Sequence[str]) -> dict[str, Standing]:
        """Each owner's spent, budget and release ids in a few queries for all of them (issue 27: a
        node checks a batch of thousands of owners before one transaction debits them; the debit
        checks again atomically, so a standing read before it can never let a release overspend)."""
        ids = list(dict.fromkeys(_name("owner_id", o) for o in owner_ids))
        conn = self._fresh()
        records = self._records(conn, ids)
        sums = self._account_sums(conn, [k for o in ids for k in self._bound.get(o, ())])
        return {
            o: Standing(
                Budget(*self._most((math.fsum(r.epsilons), math.fsum(r.deltas)), sums, o)),
                r.budget or self._default,
                frozenset(r.release_ids),
            )
            for o, r in records.items()
        }

    # ------------------------------------------------------------------ schema decisions
    def schema_decision(self) -> tuple[str, bool] | None:
        """The latest recorded schema decision: (the schema's digest, whether the rows fitted it)."""
        row = self._db().execute("SELECT digest, accepted FROM schema_decisions ORDER BY seq DESC LIMIT 1").fetchone()
        return None if row is None else (str(row[0]), bool(row[1]))

    def record_schema(self, digest: str, accepted: bool) -> None:
        """Record, in one committed transaction, that this node checked its rows against the schema of
        ``digest`` and whether they fitted (module docstring, "Schema decisions")."""
        _name("digest", digest)
        conn = self._db()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT INTO schema_decisions (digest, accepted) VALUES (?, ?)", (digest, int(bool(accepted))))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _refusal(owner_id: str, request: Budget, spent: Budget, budget: Budget, purpose: str) -> BudgetExceeded | None:
        if _fits(spent.epsilon, request.epsilon, budget.epsilon) and _fits(spent.delta, request.delta, budget.delta):
            return None
        what = f" for {purpose!r}" if purpose else ""
        return BudgetExceeded(
            f"owner {owner_id!r}: release{what} of {request} refused: spent {spent} + request exceeds "
            f"budget {budget}; nothing was released or recorded"
        )

    # ------------------------------------------------------------------ debits
    def debit(
        self,
        owner_id: str,
        epsilon: float,
        delta: float = 0.0,
        *,
        purpose: str,
        release_id: str,
        nonprivate: bool = False,
    ) -> None:
        """Check and record one release in one committed transaction.

        Raises
        ------
        BudgetExceeded
            The release would overspend; nothing is recorded.
        LocalProtocolError
            ``release_id`` was already used by this owner; nothing is recorded.
        """
        (error,) = self.debit_many([Debit(owner_id, epsilon, delta, purpose, release_id, nonprivate)])
        if error is not None:
            raise error

    def debit_many(self, entries: list[Debit]) -> list[BudgetExceeded | LocalProtocolError | None]:
        """Debit a batch in ONE transaction (one fsync for thousands of owners).

        Entries are applied in order (an owner listed twice sees its earlier entry). An entry that
        would overspend, or reuses a release_id, is refused alone: its slot holds the
        exception (not raised) and it records nothing; the other entries are committed.

        Raises
        ------
        ConfigError
            An entry is not a :class:`Debit`; the whole batch is rejected before any write.
        """
        entries = list(entries)
        for i, e in enumerate(entries):
            if not isinstance(e, Debit):
                raise ConfigError(f"debit_many entry {i} must be a Debit, got {type(e).__name__}")
        if not entries:
            return []
        conn = self._db()
        owners = list(dict.fromkeys(e.owner_id for e in entries))
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._fresh()  # under the write lock: no other writer until COMMIT
            records = self._records(conn, owners)
            budgets = {o: r.budget for o, r in records.items() if r.budget is not None}
            eps = {o: list(r.epsilons) for o, r in records.items()}
            dlt = {o: list(r.deltas) for o, r in records.items()}
            used = {o: set(r.release_ids) for o, r in records.items()}
            sums = self._account_sums(conn, [k for o in owners for k in self.accounts(o)])
            results: list[BudgetExceeded | LocalProtocolError | None] = []
            new_owners, rows = [], []
            for e in entries:
                if e.release_id in used[e.owner_id]:
                    results.append(
                        LocalProtocolError(
                            f"owner {e.owner_id!r}: release_id {e.release_id!r} already released; "
                            "refusing to debit or release it again"
                        )
                    )
                    continue
                budget = budgets.get(e.owner_id, self._default)
                spent = self._most((math.fsum(eps[e.owner_id]), math.fsum(dlt[e.owner_id])), sums, e.owner_id)
                if _fits(spent[0], e.epsilon, budget.epsilon) and _fits(spent[1], e.delta, budget.delta):
                    error = None
                else:
                    error = self._refusal(e.owner_id, Budget(e.epsilon, e.delta), Budget(*spent), budget, e.purpose)
                results.append(error)
                if error is None:
                    if e.owner_id not in budgets:
                        budgets[e.owner_id] = self._default
                        new_owners.append((e.owner_id, self._default.epsilon, self._default.delta))
                    used[e.owner_id].add(e.release_id)
                    eps[e.owner_id].append(e.epsilon)
                    dlt[e.owner_id].append(e.delta)
                    for k in self.accounts(e.owner_id):
                        sums[k] = (sums[k][0] + e.epsilon, sums[k][1] + e.delta)
                    rows.append((e.owner_id, e.release_id, e.purpose, e.epsilon, e.delta, int(e.nonprivate), e.job))
            if new_owners:
                conn.executemany(
                    "INSERT INTO owners (owner_id, epsilon_budget, delta_budget) VALUES (?, ?, ?)", new_owners
                )
            conn.executemany(
                "INSERT INTO releases (owner_id, release_id, purpose, epsilon, delta, nonprivate, job) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            touched = {k for o in owners for k in self.accounts(o)}
            conn.executemany(
                "INSERT INTO accounts (key, epsilon, delta) VALUES (?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET epsilon = excluded.epsilon, delta = excluded.delta",
                [(k, *sums[k]) for k in touched],
            )
            conn.execute("COMMIT")
        except BaseException:
            self._cache.clear()  # a write that did not commit leaves no trace in the cache either
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._cache.committed(
            {o: OwnerRecord(budgets.get(o), eps[o], dlt[o], used[o]) for o in owners}, {k: sums[k] for k in touched}
        )
        return results

    def _records(self, conn: sqlite3.Connection, owners: list[str]) -> dict[str, OwnerRecord]:
        """Each owner's stored budget (None: not stored yet), recorded ε and δ and release ids: from
        :attr:`_cache` while no other connection has written the file (``PRAGMA data_version``),
        else read (checked by :meth:`_fresh` first). Callers copy what they change (the cache changes
        only after a commit)."""
        missing = [o for o in owners if o not in self._cache.owners]
        read = {o: OwnerRecord(None, [], [], set()) for o in missing}
        for start in range(0, len(missing), _CHUNK):
            chunk = missing[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for o, e, d in conn.execute(
                f"SELECT owner_id, epsilon_budget, delta_budget FROM owners WHERE owner_id IN ({marks})", chunk
            ):
                read[o].budget = Budget(e, d)
            for o, r, e, d in conn.execute(
                f"SELECT owner_id, release_id, epsilon, delta FROM releases WHERE owner_id IN ({marks})", chunk
            ):
                read[o].epsilons.append(e)
                read[o].deltas.append(d)
                read[o].release_ids.add(r)
        self._cache.keep_owners(read)
        return {o: read[o] if o in read else self._cache.owners[o] for o in owners}

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the connection (idempotent). Every debit was already committed."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
