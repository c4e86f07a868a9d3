"""One batch of debits as one committed SQLite transaction (``privfed.common.ledger`` docstring,
"Durability", "Budgets follow the rows", "Cost against an owner's history"): the only place a ledger
writes a release.

Each entry is checked against its owner id's own record (a refusal depends on nothing else), then
against each of the owner's row accounts (``privfed.common.ledger_rows``): a row that cannot afford the entry
keeps its sum and is named in the outcome (:class:`~privfed.common.ledger_records.RowsUnused`). The
records read before the batch (``privfed.common.ledger_cache``) take the batch's entries only once its
COMMIT returned.

An entry with a ``release_id`` the owner already used is refused with
:class:`~privfed.common.errors.LocalProtocolError` ("already released") rather than ``BudgetExceeded``:
a replayed task is a protocol matter, not a budget one, and the caller must not produce a fresh noisy
release for it. Nothing is ever debited twice.
"""

from __future__ import annotations

import sqlite3

from privfed.common.errors import BudgetExceeded, LocalProtocolError
from privfed.common.ledger_cache import PendingRecord, RecordCache
from privfed.common.ledger_records import Budget, Debit, RowsUnused, fits, refusal
from privfed.common.ledger_releases import release_used
from privfed.common.ledger_rows import RowAccounts
from privfed.common.ledger_sum import add_rounding_up

#: One entry's outcome: recorded (None), recorded on the id only (RowsUnused), or refused (an error).
Outcome = BudgetExceeded | LocalProtocolError | RowsUnused | None


def debit_batch(
    conn: sqlite3.Connection, entries: list[Debit], *, cache: RecordCache, rows: RowAccounts, default: Budget
) -> list[Outcome]:
    """Check and record ``entries`` (not empty) in ONE transaction on ``conn``, as
    :meth:`~privfed.common.ledger.Ledger.debit_many` describes; ``default`` is the budget of an owner
    not yet in the file."""
    owners = list(dict.fromkeys(e.owner_id for e in entries))
    committing = False
    conn.execute("BEGIN IMMEDIATE")
    try:
        cache.validate(conn)  # under the write lock: no other writer until COMMIT
        # the batch's additions stay beside the cached records until COMMIT (ledger_cache)
        batch = {o: PendingRecord(r, rows.run) for o, r in cache.read(conn, owners).items()}
        sums = rows.sums(conn, [k for o in owners for k in rows.keys(o)])
        results: list[Outcome] = []
        new_owners, written = [], []
        for e in entries:
            owner = batch[e.owner_id]
            if owner.used_in_batch(e.release_id) or (
                owner.record.count and release_used(conn, e.owner_id, e.release_id)
            ):
                results.append(
                    LocalProtocolError(
                        f"owner {e.owner_id!r}: release_id {e.release_id!r} already released; "
                        "refusing to debit or release it again"
                    )
                )
                continue
            budget = owner.budget or default
            spent = owner.spent()  # the id's own record decides a refusal (RowsUnused)
            if fits(spent[0], e.epsilon, budget.epsilon) and fits(spent[1], e.delta, budget.delta):
                error: Outcome = None
            else:
                error = refusal(e.owner_id, Budget(e.epsilon, e.delta), Budget(*spent), budget, e.purpose)
            if error is None:
                if owner.budget is None:
                    owner.budget = default
                    new_owners.append((e.owner_id, default.epsilon, default.delta))
                owner.add(e.release_id, e.epsilon, e.delta)
                # Each account takes the entry if it can afford it (and its row is not kept out); a row that
                # cannot keeps its sum and the release is made without it (RowsUnused). Every account's sum
                # is computed and written either way: the same work whichever rows take it (owner core, "Timing").
                out, n_rows = [], rows.count(e.owner_id)  # accounts from n_rows on are pads: they decide nothing
                for i, k in enumerate(rows.keys(e.owner_id)):
                    eps, delta = sums[k]
                    added = (add_rounding_up(eps, e.epsilon), add_rounding_up(delta, e.delta))
                    if (
                        fits(eps, e.epsilon, budget.epsilon)
                        and fits(delta, e.delta, budget.delta)
                        and i not in e.rows_out
                    ):
                        sums[k] = added
                    elif i < n_rows:
                        out.append(i)
                if out:
                    error = RowsUnused(e.owner_id, e.release_id, tuple(out))
                who = e.recipient  # written, never read: nothing above depends on it (ledger_records.Recipient)
                written.append(
                    (e.owner_id, e.release_id, e.purpose, e.epsilon, e.delta, int(e.nonprivate), e.job)
                    + (who.data_user, who.coordinator, rows.run)
                )
            results.append(error)
        if new_owners:
            conn.executemany("INSERT INTO owners (owner_id, epsilon_budget, delta_budget) VALUES (?, ?, ?)", new_owners)
        conn.executemany(
            "INSERT INTO releases (owner_id, release_id, purpose, epsilon, delta, nonprivate, job, data_user, "
            "coordinator, run) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            written,
        )
        holders = rows.record_holders(conn, owners)
        touched = {k for o in owners for k in rows.keys(o)}
        conn.executemany(
            "INSERT INTO accounts (key, epsilon, delta) VALUES (?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET epsilon = excluded.epsilon, delta = excluded.delta",
            [(k, *sums[k]) for k in touched],
        )
        committing = True
        conn.execute("COMMIT")
    except BaseException:
        # Before COMMIT the rollback undoes everything and the cache never saw the batch. A COMMIT
        # that raised may still have reached the file (e.g. an fsync error after the WAL write):
        # drop the cache so that the next use reads what the file holds.
        if committing:
            cache.clear()
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    cache.committed(batch, {k: sums[k] for k in touched})
    rows.recorded(holders)
    return results
