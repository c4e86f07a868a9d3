"""Per-owner (ε, δ) privacy ledger kept in SQLite (DESIGN ``ledger``; STYLE rule 7).

Each logical owner has a fixed (ε, δ) budget. Every release an owner makes is *debited* here, in
one committed SQLite transaction, before the release leaves the owner; a release that would
overspend is refused with :class:`~privfed.common.errors.BudgetExceeded` and nothing is
recorded. One ledger file holds many logical owners (an owner node hosts thousands of shards).

Composition is basic (sequential) composition: spent = Σ ε_i, Σ δ_i over the owner's releases,
which is what the seed papers use (each owner spends its whole ε once in LDP boosting; FedDPDR
splits ε = ε1 + ε2).

Durability
    One committed, fsynced SQLite transaction per batch (``privfed.common.ledger_file``, "Durability"):
    a debit that returned is on disk.

Floating point
    Sums are exact-rounded (what :func:`math.fsum` over the recorded rows gives, kept as a running
    exact sum: ``privfed.common.ledger_sum``), and a request fits if
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
    Besides its own record, an owner has an account per row it holds. A request is refused by the id's
    own record alone; a release the most-spent of its rows cannot afford is recorded on the id only and
    is not made from the rows (:class:`RowsUnused`: the owner sends a data-independent fallback), so a row
    never spends past its budget under any owner id, and a refusal never tells that a row was spent
    (``privfed.common.ledger_rows``).

Schema decisions (issue 20, finding 5)
    The digest of the federation schema an owner node checked its rows against, and whether they
    fitted, recorded before the node answers anything (:meth:`Ledger.record_schema`,
    :meth:`Ledger.schema_decision`): ``privfed.owner.main`` refuses another schema after a restart
    without reading the rows.

Cost against an owner's history (issue 27)
    A debit and a read of :meth:`Ledger.standings` or :meth:`Ledger.spent` cost the same (amortised)
    however many releases the owner has on record: the connection keeps each owner's spent ε and δ
    as running exact sums (``privfed.common.ledger_cache``, O(1) memory per owner, amortised O(1)
    time), and whether a release id was used is one lookup in the file's unique index (O(log n)); a
    standing's ``release_ids`` is a view of that index (:class:`ReleaseIds`), not a copy. An owner
    is read back from the file in full (O(its history)) the first time this connection uses it and
    again each time another connection has written the file, i.e. once per change of the file by
    another writer, never per debit. :meth:`Ledger.spent_on` reads one job's or one day's releases
    (``privfed.common.ledger_releases``); :meth:`Ledger.history` and :func:`read_accounts` read every
    row they report from the file.

Modules
    ``ledger_records`` (budgets, debits, standings, the budget test), ``ledger_file`` (opening the
    file, tables, schema versions and migrations, schema decisions, the release-id view, the read-only
    audit :func:`read_accounts`), ``ledger_debit`` (the debit transaction), ``ledger_releases``
    (questions answered from the recorded releases), ``ledger_rows`` (row accounts), ``ledger_cache``
    and ``ledger_sum`` (what a connection keeps of each owner); the public names are importable from here.

A ledger is used by one process (an owner node holds :func:`~privfed.common.files.sole_writer`
for it); the connection has a busy timeout anyway so that a second reader
(e.g. an audit tool) waits instead of failing. The connection belongs to the thread that opened
the ledger (sqlite3's default ``check_same_thread``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from privfed.common.errors import BudgetExceeded, ConfigError, LocalProtocolError
from privfed.common.ledger_cache import MAX_ACCOUNTS, RecordCache
from privfed.common.ledger_debit import Outcome, debit_batch
from privfed.common.ledger_file import (
    BUSY_TIMEOUT_S,
    SCHEMA_VERSION,
    OwnerAccount,
    ReleaseIds,
    latest_schema_decision,
    open_file,
    read_accounts,
    record_schema_decision,
)
from privfed.common.ledger_records import (
    REL_TOL,
    Budget,
    Debit,
    RowsUnused,
    Standing,
    refusal,
    remaining_of,
    require_name,
)
from privfed.common.ledger_releases import history, nonprivate_count, purpose_used, release_used, spent_but, spent_where
from privfed.common.ledger_rows import RowAccounts, RowLayout, recorded_layout
from privfed.common.validation import check_non_negative, check_probability

__all__ = [
    "BUSY_TIMEOUT_S",
    "REL_TOL",
    "SCHEMA_VERSION",
    "Budget",
    "Debit",
    "Ledger",
    "OwnerAccount",
    "ReleaseIds",
    "RowsUnused",
    "Standing",
    "read_accounts",
]


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
    A reused ``release_id`` is refused as a replay, not a budget matter (``privfed.common.ledger_debit``).
    """

    def __init__(self, path: str | Path, *, epsilon_budget: float, delta_budget: float = 0.0) -> None:
        self._default = Budget(
            check_non_negative(epsilon_budget, name="epsilon_budget", allow_inf=True),
            check_probability(delta_budget, name="delta_budget"),
        )
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = open_file(self.path, self._default)
        self._cache = RecordCache()
        self._rows = RowAccounts(self._cache)

    # ------------------------------------------------------------------ queries
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise LocalProtocolError(f"ledger {self.path} is closed")
        return self._conn

    def _fresh(self) -> sqlite3.Connection:
        """The connection, with :attr:`_cache` dropped if another connection wrote the file since it
        was last checked (``PRAGMA data_version``); once per read or debit, before its first record."""
        conn = self._db()
        self._cache.validate(conn)
        return conn

    def budget(self, owner_id: str) -> Budget:
        """The owner's total budget: the stored one, or the ledger's if the owner never debited."""
        require_name("owner_id", owner_id)
        row = (
            self._db()
            .execute("SELECT epsilon_budget, delta_budget FROM owners WHERE owner_id = ?", (owner_id,))
            .fetchone()
        )
        return self._default if row is None else Budget(row[0], row[1])

    def spent(self, owner_id: str) -> Budget:
        """What the owner's id has spent: the exact-rounded sum of its releases. A refusal depends on it
        alone (:class:`RowsUnused`)."""
        require_name("owner_id", owner_id)
        record = self._cache.read(self._fresh(), [owner_id])[owner_id]
        return Budget(record.epsilon.value(), record.delta.value())

    def rows_spent(self, owner_id: str) -> Budget:
        """What the most-spent of the rows the owner holds in this process has spent, under any owner id
        (``privfed.common.ledger_rows``; zero without bound rows): a release its rows cannot afford is
        not made from them (:class:`RowsUnused`)."""
        require_name("owner_id", owner_id)
        conn = self._fresh()
        return Budget(*self._rows.most((0.0, 0.0), self._rows.sums(conn, self.accounts(owner_id)), owner_id))

    # ------------------------------------------------------------------ row accounts
    def accounts(self, owner_id: str) -> tuple[str, ...]:
        """The row accounts of ``owner_id`` (:meth:`bind_rows`); empty for an owner without bound rows."""
        return self._rows.keys(owner_id)

    def bind_rows(self, owner_id: str, row_keys: Sequence[bytes]) -> None:
        """The rows ``owner_id`` holds in this process, as digests (``privfed.owner.data.row_digests``):
        from now on each of its debits is added to each row's account too, and it may spend only what
        the most-spent of them leaves (``privfed.common.ledger_rows``)."""
        self._rows.bind(self._db(), require_name("owner_id", owner_id), row_keys)

    def load_row_accounts(self) -> None:
        """Read the account of every bound row now (a node's start, before any task), when they fit the
        cache: the first release then finds them read, whether an earlier id made them or they are new,
        and its time does not tell which (``privfed.owner.core``, "Limits"). A node with more rows than
        the cache keeps reads each batch's from the file, as every batch does."""
        keys = self._rows.all_keys()
        if not keys or len(keys) > MAX_ACCOUNTS:
            return
        with self._read_snapshot() as conn:
            self._rows.sums(conn, keys)

    def remaining(self, owner_id: str) -> Budget:
        """``budget - spent`` per component, never negative; ∞ while the budget is ∞."""
        return remaining_of(self.budget(owner_id), self.spent(owner_id))

    def has_released(self, owner_id: str, purpose: str) -> bool:
        """Whether the owner has any recorded release with this purpose."""
        require_name("owner_id", owner_id)
        require_name("purpose", purpose)
        return purpose_used(self._db(), owner_id, purpose)

    def has_release_id(self, owner_id: str, release_id: str) -> bool:
        """Whether the owner already recorded a release with this id (a replayed task)."""
        require_name("owner_id", owner_id)
        require_name("release_id", release_id)
        return release_used(self._db(), owner_id, release_id)

    def row_holders(self, owner_id: str) -> tuple[str, ...]:
        """The other owner ids that debited with any of the rows ``owner_id`` holds in this process (a
        re-sharded or renamed node's earlier ids; ``privfed.common.ledger_rows``): an owner policy counts
        their releases with the owner's own (:meth:`spent_on`)."""
        return self._rows.holders(self._db(), require_name("owner_id", owner_id))

    def spent_on(
        self,
        owner_ids: str | Sequence[str],
        *,
        job: str | None = None,
        other_than: str | None = None,
        since: str | None = None,
    ) -> Budget:
        """(ε, δ) of the owner's own releases made for ``job``, or for every job but ``other_than``,
        debited at or after ``since`` (SQLite ``datetime`` text such as ``'-1 day'`` relative to now;
        None: ever). An owner policy bounds a job's, a day's and the total spending with it
        (``privfed.owner.policy``), on every task of a node that has one. Several ids (an owner's and
        those that held its rows, :meth:`row_holders`): the sum of each id's, read in the same number of
        statements as for one, so the time of a policy's check barely grows with the number of ids.

        Cost: never the owner's whole history (``privfed.common.ledger_releases``)."""
        ids = [owner_ids] if isinstance(owner_ids, str) else list(dict.fromkeys(owner_ids))
        for owner_id in ids:
            require_name("owner_id", owner_id)
        if job is None and since is None:
            with self._read_snapshot() as conn:
                return spent_but(conn, self._cache.read(conn, ids), ids, other_than)
        return spent_where(self._db(), ids, job, other_than, since)

    @contextmanager
    def _read_snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read snapshot of the file (a read transaction, started by its first read), the cache
        checked against it (:meth:`_fresh`): what is read inside belongs to one moment even when
        another process commits meanwhile."""
        conn = self._db()
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT 1 FROM releases LIMIT 1").fetchall()  # starts the snapshot
            self._fresh()
            yield conn
        finally:
            conn.execute("COMMIT")  # a read: nothing to write

    def nonprivate_count(self, owner_id: str) -> int:
        """How many non-private releases the owner made (module docstring, "Non-private entries")."""
        require_name("owner_id", owner_id)
        return nonprivate_count(self._db(), owner_id)

    def history(self, owner_id: str) -> list[dict[str, Any]]:
        """The owner's releases in debit order: dicts with release_id, purpose, epsilon, delta, ts, nonprivate, job.

        ``ts`` is SQLite's ``CURRENT_TIMESTAMP`` at commit (UTC, ``YYYY-MM-DD HH:MM:SS``);
        ``nonprivate`` is True for a release made without DP guarantee (its ε and δ are 0).
        """
        require_name("owner_id", owner_id)
        return history(self._db(), owner_id)

    def check(self, owner_id: str, epsilon: float, delta: float = 0.0, *, standing: Standing | None = None) -> None:
        """Raise :class:`BudgetExceeded` if ``spent + (epsilon, delta)`` exceeds the budget.

        Call before any computation (STYLE rule 7); :meth:`debit` checks again atomically.
        ``standing``: the owner's record read before (:meth:`standings`) instead of a new query.
        """
        require_name("owner_id", owner_id)
        request = Budget(
            check_non_negative(epsilon, name="epsilon", allow_inf=True), check_probability(delta, name="delta")
        )
        if standing is None:
            standing = Standing(self.spent(owner_id), self.budget(owner_id), frozenset())
        error = refusal(owner_id, request, standing.spent, standing.budget, "")
        if error is not None:
            raise error

    def standings(self, owner_ids: Sequence[str]) -> dict[str, Standing]:
        """Each owner's spent, budget and release ids in a few queries for all of them (issue 27: a
        node checks a batch of thousands of owners before one transaction debits them; the debit
        checks again atomically, so a standing read before it can never let a release overspend).
        O(1) per owner in its history (module docstring, "Cost against an owner's history"): the
        release ids are a view (:class:`ReleaseIds`) of those recorded at this moment."""
        ids = list(dict.fromkeys(require_name("owner_id", o) for o in owner_ids))
        with self._read_snapshot() as conn:  # the records and the ids' bound of one moment
            upto = conn.execute("SELECT coalesce(max(seq), 0) FROM releases").fetchone()[0]
            records = self._cache.read(conn, ids)
        return {  # the ids' own records: a refusal depends on nothing else (RowsUnused)
            o: Standing(
                Budget(r.epsilon.value(), r.delta.value()),
                r.budget or self._default,
                ReleaseIds(self._db, o, upto, r.count),
            )
            for o, r in records.items()
        }

    # ------------------------------------------------------------------ schema decisions
    def schema_decision(self) -> tuple[str, bool] | None:
        """The latest recorded schema decision: (the schema's digest, whether the rows fitted it)."""
        return latest_schema_decision(self._db())

    def record_schema(self, digest: str, accepted: bool) -> None:
        """Record, in one committed transaction, that this node checked its rows against the schema of
        ``digest`` and whether they fitted (module docstring, "Schema decisions")."""
        require_name("digest", digest)
        record_schema_decision(self._db(), digest, accepted)

    def row_layout(self, layout: RowLayout) -> RowLayout:
        """The layout to digest rows of ``layout`` in (``ledger_rows.recorded_layout``)."""
        return recorded_layout(self._db(), layout)

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
    ) -> RowsUnused | None:
        """Check and record one release in one committed transaction.

        Returns :class:`RowsUnused` when the owner's rows cannot afford it (recorded on the id only).

        Raises
        ------
        BudgetExceeded
            The release would overspend the owner id's budget; nothing is recorded.
        LocalProtocolError
            ``release_id`` was already used by this owner; nothing is recorded.
        """
        (outcome,) = self.debit_many([Debit(owner_id, epsilon, delta, purpose, release_id, nonprivate)])
        if isinstance(outcome, BudgetExceeded | LocalProtocolError):
            raise outcome
        return outcome

    def debit_many(self, entries: list[Debit]) -> list[Outcome]:
        """Debit a batch in ONE transaction (one fsync for thousands of owners).

        Entries are applied in order (an owner listed twice sees its earlier entry). An entry that
        would overspend the owner id's budget, or reuses a release_id, is refused alone: its slot holds the
        exception (not raised) and it records nothing; the other entries are committed. An entry the
        owner's rows cannot afford (or that keeps them out) is recorded on the id and not on the rows: its
        slot holds :class:`RowsUnused` (the release must not be made from the rows). O(1) per
        entry in the owner's history (module docstring, "Cost against an owner's history").

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
        return debit_batch(self._db(), entries, cache=self._cache, rows=self._rows, default=self._default)

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
