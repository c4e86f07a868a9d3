"""What a privacy ledger answers about its owners (:class:`LedgerQueries`): budgets, what an owner's id and
its rows have spent, standings, a job's or a day's releases, the history; and the connection and what it keeps
of each owner, which :class:`~privfed.common.ledger.Ledger` (it extends these with what it records: row
bindings, schema decisions, debits) shares. The module docstring of :mod:`privfed.common.ledger` says how.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from privfed.common.errors import LocalProtocolError
from privfed.common.ledger_cache import RecordCache
from privfed.common.ledger_file import ReleaseIds, next_run, open_file
from privfed.common.ledger_records import Budget, Standing, refusal, remaining_of, require_name
from privfed.common.ledger_releases import (
    history,
    last_release,
    nonprivate_count,
    purpose_used,
    release_count,
    release_used,
    spent_but,
    spent_held,
    spent_held_but,
    spent_where,
)
from privfed.common.ledger_rows import Holdings, RowAccounts
from privfed.common.validation import check_non_negative, check_probability


class LedgerQueries:
    """The questions a :class:`~privfed.common.ledger.Ledger` answers (module docstring); a ledger is one."""

    def __init__(self, path: str | Path, *, epsilon_budget: float, delta_budget: float = 0.0) -> None:
        self._default = Budget(
            check_non_negative(epsilon_budget, name="epsilon_budget", allow_inf=True),
            check_probability(delta_budget, name="delta_budget"),
        )
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = open_file(self.path, self._default)
        self._cache = RecordCache()
        self._rows = RowAccounts(self._cache, next_run(self._conn))

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

    def accounts(self, owner_id: str) -> tuple[str, ...]:
        """The row accounts of ``owner_id`` (:meth:`bind_rows`); empty for an owner without bound rows."""
        return self._rows.keys(owner_id)

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

    def row_holder_groups(self, owner_id: str) -> dict[Holdings, tuple[int, ...]]:
        """The rows ``owner_id`` holds in this process (their positions) by the (owner id, run) pairs that debited
        with each before (a re-sharded or renamed node's earlier ids, or this id in earlier runs; run 0: before
        ledger schema 6; ``privfed.common.ledger_rows``); the rows nobody held before are under ``()``. An owner
        policy counts what those pairs released with what the owner released in this run (:meth:`spent_by_holdings`),
        row by row."""
        return self._rows.holder_groups(self._db(), require_name("owner_id", owner_id))

    def row_holders(self, owner_id: str) -> tuple[str, ...]:
        """The other owner ids that debited with any of the rows ``owner_id`` holds in this process, sorted."""
        return tuple(sorted({h for ids in self.row_holder_groups(owner_id) for h, _ in ids if h != owner_id}))

    def spent_by_holdings(
        self,
        owner_id: str,
        holdings: Holdings,
        *,
        job: str | None = None,
        other_than: str | None = None,
        since: str | None = None,
    ) -> Budget:
        """(ε, δ) that a row of ``owner_id`` held before by ``holdings`` (:meth:`row_holder_groups`) can have spent
        on ``job``, on every job but ``other_than``, at or after ``since`` (as :meth:`spent_on`): what each (id,
        run) pair released in its run (run 0: every release of before ledger schema 6), what ``owner_id`` released
        in this run and before schema 6, each release once. At least what the row spent there (it took no other
        release), more by those it was left out of (``privfed.common.ledger_rows``; walkthrough 8, W8-5: every
        release of each id that ever held the row was counted). Cost: the releases of those runs that the window
        holds (index ``releases_run``), in one statement whatever the number of pairs; without ``job`` and ``since``
        the ids' running sums per run (``privfed.common.ledger_cache``) less ``other_than``'s releases, as
        :meth:`spent_on`."""
        require_name("owner_id", owner_id)
        pairs = list(dict.fromkeys([(owner_id, self._rows.run), (owner_id, 0), *holdings]))
        for holder, _ in pairs:
            require_name("owner_id", holder)
        if job is None and since is None:
            with self._read_snapshot() as conn:
                ids = list(dict.fromkeys(h for h, _ in pairs))
                return spent_held_but(conn, self._cache.read(conn, ids), pairs, other_than)
        return spent_held(self._db(), pairs, job, other_than, since)

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
        None: ever). An owner policy bounds a job's, a day's and the total spending of an owner id with it
        (``privfed.owner.policy``), on every task of a node that has one; its rows' by
        :meth:`spent_by_holdings`. Several ids: the sum of each id's, read in the same number of
        statements as for one.

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

    def release_count(self) -> int:
        """How many releases the ledger holds, of every owner it records."""
        return release_count(self._db())

    def identity(self) -> str:
        """This ledger's own id, made when the file was: the same in every copy of it, another for a ledger made anew
        at the same path (:mod:`privfed.owner.ledger_seen`). A digest of the file's row salt, which it does not show."""
        salt = self._db().execute("SELECT value FROM meta WHERE name = 'row_salt'").fetchone()[0]
        return hashlib.sha256(b"privfed ledger id\0" + str(salt).encode()).hexdigest()[:32]

    def last_release(self) -> tuple[int, str, str] | None:
        """The releases recorded so far, the last one's time (UTC) and job; None: none yet (:func:`last_release`)."""
        return last_release(self._db())

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
