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
    own record alone; a row that cannot afford a release keeps its account and is left out of it (the id
    records the release, the other rows take it: :class:`RowsUnused`; no row left: the owner sends a
    data-independent fallback), so a row never spends past its budget under any owner id, a refusal never
    tells that a row was spent, and a spent row changes the release only as leaving it out does
    (``privfed.common.ledger_rows``).

Recipients (walkthrough 4, M4)
    Each release records whom it went to (:class:`Recipient`, ``Debit.recipient``): the data user the
    job's announcement names and the coordinator the owner node's session is with, as its channel
    authenticated it. The owner core stamps them on every debit of a batch; they are written in this file
    only, and nothing a ledger checks or answers before the debit's COMMIT reads them, so no refusal, reply
    or timing depends on them. Releases recorded before schema version 5 read as '' (unknown).
    ``privfed ledger show`` totals what each recipient received.

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
    ``ledger_queries`` (what the ledger answers, the connection and what it keeps), ``ledger_records``
    (budgets, debits, standings, the budget test), ``ledger_file`` (opening the
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

from collections.abc import Sequence

from privfed.common.errors import BudgetExceeded, ConfigError, LocalProtocolError
from privfed.common.ledger_cache import MAX_ACCOUNTS, MAX_OWNERS
from privfed.common.ledger_debit import Outcome, debit_batch
from privfed.common.ledger_file import (
    BUSY_TIMEOUT_S,
    SCHEMA_VERSION,
    OwnerAccount,
    ReleaseIds,
    latest_schema_decision,
    read_accounts,
    record_schema_decision,
)
from privfed.common.ledger_queries import LedgerQueries
from privfed.common.ledger_records import (
    REL_TOL,
    Budget,
    Debit,
    Recipient,
    RowsUnused,
    Standing,
    require_name,
)
from privfed.common.ledger_rows import RowLayout, recorded_layout

__all__ = [
    "BUSY_TIMEOUT_S",
    "REL_TOL",
    "SCHEMA_VERSION",
    "Budget",
    "Debit",
    "Ledger",
    "OwnerAccount",
    "Recipient",
    "ReleaseIds",
    "RowsUnused",
    "Standing",
    "read_accounts",
]


class Ledger(LedgerQueries):
    """SQLite ledger of the (ε, δ) spent by each logical owner.

    Parameters
    ----------
    path : str or Path
        The SQLite file; created with its tables if missing. Its directory must exist.
    epsilon_budget : float
        Total ε of each owner, in [0, inf]. Stored per owner the first time the owner debits; a later
        opening with a lower budget lowers it (never raises it).
    delta_budget : float, default 0
        Total δ of each owner, in [0, 1].

    Raises
    ------
    ConfigError
        Invalid budget; unreadable or foreign file; or an owner already in the file has a stored
        budget lower than the one given (a restarted owner cannot enlarge its budget by passing another
        flag: raising is a policy decision). A lower budget than the stored one lowers every owner's to it.

    Notes
    -----
    A reused ``release_id`` is refused as a replay, not a budget matter (``privfed.common.ledger_debit``).
    """

    def bind_rows(self, owner_id: str, row_keys: Sequence[bytes]) -> None:
        """The rows ``owner_id`` holds in this process, as digests (``privfed.owner.data.row_digests``):
        from now on each of its debits is added to each row's account too, and it may spend only what
        the most-spent of them leaves (``privfed.common.ledger_rows``)."""
        self._rows.bind(self._db(), require_name("owner_id", owner_id), row_keys)

    def load_row_accounts(self) -> None:
        """Read the account of every bound row now (a node's start, before any task), when they fit the
        cache: the first release then finds them read, whether an earlier id made them or they are new,
        and its time does not tell which (``docs/owner-limits.md``, "Limits"). A node with more rows than
        the cache keeps reads each batch's from the file, as every batch does."""
        keys = self._rows.all_keys()
        if not keys or len(keys) > MAX_ACCOUNTS:
            return
        with self._read_snapshot() as conn:
            self._rows.sums(conn, keys)

    def load_owner_records(self) -> None:
        """Read the record of every owner with bound rows, and of every other id that held any of their rows (what
        a policy counts with the owner's: :meth:`row_holders`), now, when they fit the cache: the first answer
        then reads none, and one more query for the earlier holders' releases no longer tells that the rows were
        held before (``tests/adversary/test_timing_ledger.py``)."""
        owners = self._rows.owners()
        if not owners or len(self._rows.all_keys()) > MAX_ACCOUNTS:
            return
        with self._read_snapshot() as conn:
            ids = list(dict.fromkeys([*owners, *sorted(self._rows.all_holders(conn))]))
            if len(ids) <= MAX_OWNERS:
                self._cache.read(conn, ids)

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
        exception (not raised) and it records nothing; the other entries are committed. An entry some of the
        owner's rows cannot afford (or keeps out) is recorded on the id and on the other rows: its slot holds
        :class:`RowsUnused`, their positions (the release must be made without them). O(1) per
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
