"""A ledger's row accounts: budgets follow the rows (issue 20, finding 4).

Besides its own record (the releases of its id), an owner has *row accounts*: one per row it holds
in this process (:meth:`~privfed.common.ledger.Ledger.bind_rows`, keyed by a salted digest of the
row's content and its occurrence in the data, ``privfed.owner.data.row_digests``), to which each
release that reads its rows is added. A request is refused by what the id released alone; a row that
cannot afford a release is left out of it, and its account keeps its sum, while the other rows take it
(:class:`~privfed.common.ledger_records.RowsUnused`; no row left: the owner sends its kind's data-independent
fallback; an individual privacy filter, each row by its own account). So re-sharding the same data (another ``--shards``), renaming
the node (another ``--name``) or re-ordering the file never gives a row a fresh budget, and no refusal
tells a coordinator that one of an owner's rows was spent before (which would say the row was in an
earlier file).

The owner policy's limits per job, per day and in total (``privfed.owner.policy``) are sums over releases
with their job and time, which the accounts do not keep. So each owner id that debits with row accounts is
recorded as a *holder* of them in its *run* (table ``holders``: the row, the id, and the opening of the file for
writing it debited in, once per id and run, in its first debit's transaction; each release records its run too),
and :meth:`RowAccounts.holder_groups` names, row by row, the (id, run) pairs that held it: a row is counted with
the releases each id made in the runs in which it held the row, and with the releases of its owner id in this run,
within each limit's window (``Ledger.spent_by_holdings``); a row that a release would take past a limit so
counted is left out of it (``Debit.rows_out``), so re-sharding or renaming does not reset a job's, a day's or the
total limit of a row either. The count is at least what the row spent within the window: more only by the releases
of those runs it was left out of, and, for a file older than schema 6, by every release its earlier holders made
before it (run 0 stands for all of those runs; the owner id's own releases of then are counted for each of its rows,
as before). Until walkthrough 8 (W8-5) a row was counted with *every* release of each id that ever held it: after a
changed data file deals nearly every row to another of the node's ids, each row counted its old id's and its new
id's spending, about twice its own, and a day or total limit kept most rows out though their own accounts could
pay (for good under the total limit). Its refusals count the owner id's own releases only.

Timing. Every debit adds to each account of the owner (a sum and an ``INSERT ... ON CONFLICT`` each, ~6 us), and a
policy looks up each one's holders: work that followed the private row count exactly, where the fits follow its
public cell (:mod:`privfed.common.work_rows`): one timing of a debit told 600 rows from 1000 by 2.3 ms of CPU
(audit 10, ``tests/adversary/test_timing_debit_rows.py``). So an owner is bound to *pad accounts* too, its own
(keyed by its id and their index, ``pad:``), up to :func:`~privfed.common.work_rows.work_rows` accounts in all,
and each is read, added to and written like a row's. A pad account holds what the id's releases spent, never more
than the id's own record (up to rounding), so it decides nothing the record does not (nor leaves a row out). Cost: up to
twice the accounts (an owner just above a power of two); none for one-row owners.

Limits: a fresh ledger file starts every row at zero; a row whose content changes is a new row;
identical rows are told apart by their order in the data (re-ordering two identical rows can swap
their accounts); rows live in the process that binds them (owners sharing rows across two nodes'
ledgers are not linked); releases recorded before schema 3 are on their ids only, and debits made before the ``holders`` table
name no holder (the owner id's releases of before schema 6 are counted for each of its rows all the same).

Layout. A row's digest reads its feature columns in an order and its label as a class's position; the ledger
records the layout the node's rows were digested in (:func:`recorded_layout`: the encoded feature names and the
class values, table ``meta``), and a node whose schema lists the same features and classes in another order
digests its rows in the recorded one (``privfed.owner.data.in_layout``): a federation schema's next version that
only reorders them reads every row to the same values, and must not give it a fresh account
(``tests/adversary/test_schema_order_budget.py``, audit 11). A layout of other features or classes replaces the
record: its rows are new rows.

An account's (ε, δ) is stored as a number per account (table ``accounts``) and read through the
connection's cache (``privfed.common.ledger_cache``); its cost does not depend on the history. Each
debit is added rounded up (``privfed.common.ledger_sum.add_rounding_up``), so a stored total is never
below the exact sum of the account's debits.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence

from privfed.common.ledger_cache import RecordCache
from privfed.common.ledger_file import CHUNK
from privfed.common.work_rows import work_rows

#: The (owner id, run) pairs that held a row before (:meth:`RowAccounts.holder_groups`; run 0: before schema 6).
Holdings = tuple[tuple[str, int], ...]
#: A row layout: the encoded feature names in column order, and the class values' texts in index order.
RowLayout = tuple[tuple[str, ...], tuple[str, ...]]


def recorded_layout(conn: sqlite3.Connection, layout: RowLayout) -> RowLayout:
    """The layout to digest rows of ``layout`` in (module docstring, "Layout"): the recorded one if ``layout``
    lists its features and classes in another order, else ``layout``, recorded in one committed transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT value FROM meta WHERE name = 'row_layout'").fetchone()
        if row is not None:
            features, classes = json.loads(row[0])
            recorded = (tuple(features), tuple(classes))
            if all(sorted(a) == sorted(b) and len(set(a)) == len(a) for a, b in zip(recorded, layout, strict=True)):
                conn.execute("COMMIT")
                return recorded
        value = json.dumps([list(layout[0]), list(layout[1])])
        conn.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('row_layout', ?)", (value,))
        conn.execute("COMMIT")
        return layout
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


class RowAccounts:
    """The row accounts each owner id is bound to in this process, and their recorded sums.

    Parameters
    ----------
    cache : RecordCache
        The ledger connection's cache; the ledger validates it (``PRAGMA data_version``) before
        each use of :meth:`sums`.
    """

    def __init__(self, cache: RecordCache, run: int) -> None:
        self._cache = cache
        self.run = run  # this opening of the file for writing (``privfed.common.ledger_file.next_run``)
        self._bound: dict[str, tuple[str, ...]] = {}  # owner id -> its row accounts, then its pad accounts
        self._rows: dict[str, int] = {}  # owner id -> how many of its accounts are rows'
        self._recorded: set[str] = set()  # owner ids recorded as holders of their accounts by this process

    def keys(self, owner_id: str) -> tuple[str, ...]:
        """The accounts of ``owner_id``; empty for an owner without bound rows."""
        return self._bound.get(owner_id, ())

    def owners(self) -> list[str]:
        """Every owner id with bound rows."""
        return list(self._bound)

    def all_keys(self) -> list[str]:
        """Every bound account, once."""
        return list(dict.fromkeys(k for keys in self._bound.values() for k in keys))

    def bind(self, conn: sqlite3.Connection, owner_id: str, row_keys: Sequence[bytes]) -> None:
        """Bind ``owner_id`` to the rows of ``row_keys``, stored as salted digests (the salt is the
        file's own, table ``meta``), and to pad accounts of its own up to the row count's public cell
        (module docstring, "Timing")."""
        salt = conn.execute("SELECT value FROM meta WHERE name = 'row_salt'").fetchone()[0].encode()
        rows = [f"row:{hashlib.sha256(salt + bytes(k)).hexdigest()[:32]}" for k in row_keys]
        tag = b"pad\0" + owner_id.encode() + b"\0"
        pads = [
            f"pad:{hashlib.sha256(salt + tag + i.to_bytes(8, 'big')).hexdigest()[:32]}"
            for i in range(work_rows(len(rows)) - len(rows))
        ]
        self._bound[owner_id] = (*rows, *pads)
        self._rows[owner_id] = len(rows)

    def count(self, owner_id: str) -> int:
        """How many of ``owner_id``'s accounts are its rows' (the first ones; the rest are pad accounts)."""
        return self._rows.get(owner_id, 0)

    def sums(self, conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, tuple[float, float]]:
        """(ε, δ) recorded on each account of ``keys``; (0, 0) for an account with no debit yet. Read
        from the file for the accounts :attr:`_cache` does not hold (validated by the ledger first)."""
        cached = self._cache.accounts
        unique = [k for k in dict.fromkeys(keys) if k not in cached]
        if not unique:
            return {k: cached[k] for k in keys}
        sums = dict.fromkeys(keys, (0.0, 0.0))
        read: dict[str, tuple[float, float]] = {}
        for start in range(0, len(unique), CHUNK):
            chunk = unique[start : start + CHUNK]
            marks = ",".join("(?)" for _ in chunk)
            # a row per key, whether its account exists or not: the same work for rows spent before as for new ones
            for k, e, d in conn.execute(
                f"WITH asked(key) AS (VALUES {marks}) SELECT asked.key, coalesce(a.epsilon, 0.0), "
                "coalesce(a.delta, 0.0) FROM asked LEFT JOIN accounts AS a ON a.key = asked.key",
                chunk,
            ):
                read[k] = (e, d)
        for k in sums:
            sums[k] = self._cache.accounts.get(k) or read.get(k, (0.0, 0.0))
        self._cache.keep_accounts({k: sums[k] for k in unique})
        return sums

    def record_holders(self, conn: sqlite3.Connection, owner_ids: Sequence[str]) -> list[str]:
        """Record each of ``owner_ids`` not yet recorded by this process as a holder of its row accounts,
        in the caller's write transaction; returns those ids, for :meth:`recorded` once it commits."""
        new = [o for o in owner_ids if o not in self._recorded and self._bound.get(o)]
        conn.executemany(
            "INSERT OR IGNORE INTO holders (row_key, owner_id, run) VALUES (?, ?, ?)",
            [(k, o, self.run) for o in new for k in self._bound[o]],
        )
        return new

    def recorded(self, owner_ids: Sequence[str]) -> None:
        """Note that :meth:`record_holders`' ids are in the file (their transaction committed)."""
        self._recorded.update(owner_ids)

    def holder_groups(self, conn: sqlite3.Connection, owner_id: str) -> dict[Holdings, tuple[int, ...]]:
        """``owner_id``'s rows (their positions) by the (owner id, run) pairs recorded as holders of each row's
        account (module docstring), sorted, but for ``owner_id`` in this run, which holds every one of them: the
        rows nobody held before are under ``()``. An index lookup per account."""
        n_rows, keys = self.count(owner_id), self._bound.get(owner_id, ())  # the pad accounts too: work on the cell
        held: dict[str, set[tuple[str, int]]] = {}
        for start in range(0, len(keys), CHUNK):
            chunk = keys[start : start + CHUNK]
            marks = ",".join("?" * len(chunk))
            for key, holder, run in conn.execute(
                f"SELECT row_key, owner_id, run FROM holders WHERE row_key IN ({marks})", chunk
            ):
                if (holder, run) != (owner_id, self.run):
                    held.setdefault(key, set()).add((holder, int(run)))
        groups: dict[Holdings, list[int]] = {}
        for i, key in enumerate(keys):
            ids = groups.setdefault(tuple(sorted(held.get(key, ()))), [])
            if i < n_rows:  # a pad account's holder is its owner alone: it is in no group
                ids.append(i)
        return {ids: tuple(rows) for ids, rows in sorted(groups.items()) if rows}

    def all_holders(self, conn: sqlite3.Connection) -> set[str]:
        """Every owner id recorded as a holder of any bound account (the bound owners among them once they
        debited), in one pass over the accounts: what a node reads when it starts (``Ledger.load_owner_records``)."""
        return holders_of(conn, self.all_keys())

    def most(
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


def holders_of(conn: sqlite3.Connection, keys: Sequence[str]) -> set[str]:
    """The owner ids recorded as holders of any of the accounts ``keys``: an index lookup per account, in
    chunks of :data:`CHUNK`."""
    found: set[str] = set()
    for start in range(0, len(keys), CHUNK):
        chunk = keys[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        found.update(
            o for (o,) in conn.execute(f"SELECT DISTINCT owner_id FROM holders WHERE row_key IN ({marks})", chunk)
        )
    return found
