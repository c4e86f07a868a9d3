"""Questions a :class:`~privfed.common.ledger.Ledger` answers from the owners' recorded releases (table
``releases``) rather than from their running sums: whether a release id or a purpose was used, the
non-private count, the history, and what owner ids spent on one job, on every job but one, or since a
time (an owner policy's question on every task, ``privfed.owner.policy``).

Cost (``privfed.common.ledger`` docstring, "Cost against an owner's history"): a release id is one
lookup in the unique index on (owner, release id), O(log n); spending reads one job's releases (index
``releases_job``) or the releases since a time (index ``releases_ts``), never an owner's whole history;
every job but one is the owner's exact running sum (``privfed.common.ledger_cache``) less that job's
releases, computed exactly (equal to ``fsum`` of the releases it keeps). The history reads every release.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privfed.common.errors import ConfigError
from privfed.common.ledger_cache import OwnerRecord
from privfed.common.ledger_file import open_read_only
from privfed.common.ledger_records import RELEASE_COLUMNS, Budget, release_dict


def release_used(conn: sqlite3.Connection, owner_id: str, release_id: str) -> bool:
    """Whether the file records ``release_id`` for ``owner_id`` (its unique index: O(log n))."""
    row = conn.execute(
        "SELECT 1 FROM releases WHERE owner_id = ? AND release_id = ? LIMIT 1", (owner_id, release_id)
    ).fetchone()
    return row is not None


def purpose_used(conn: sqlite3.Connection, owner_id: str, purpose: str) -> bool:
    """Whether the owner has any recorded release with this purpose."""
    row = conn.execute(
        "SELECT 1 FROM releases WHERE owner_id = ? AND purpose = ? LIMIT 1", (owner_id, purpose)
    ).fetchone()
    return row is not None


def nonprivate_count(conn: sqlite3.Connection, owner_id: str) -> int:
    """How many non-private releases the owner made."""
    return int(
        conn.execute("SELECT COUNT(*) FROM releases WHERE owner_id = ? AND nonprivate != 0", (owner_id,)).fetchone()[0]
    )


def release_count(conn: sqlite3.Connection) -> int:
    """How many releases the ledger holds, of every owner."""
    return int(conn.execute("SELECT COUNT(*) FROM releases").fetchone()[0])


def last_release(conn: sqlite3.Connection) -> tuple[int, str, str] | None:
    """The last release's sequence number (the releases recorded so far: none is ever deleted), its time (UTC) and
    its job; None for a ledger with none. One index lookup, whatever the history."""
    row = conn.execute("SELECT seq, ts, job FROM releases ORDER BY seq DESC LIMIT 1").fetchone()
    return None if row is None else (int(row[0]), str(row[1]), str(row[2]))


def history(conn: sqlite3.Connection, owner_id: str) -> list[dict[str, Any]]:
    """The owner's releases in debit order (:meth:`~privfed.common.ledger.Ledger.history`)."""
    cur = conn.execute(f"SELECT {RELEASE_COLUMNS} FROM releases WHERE owner_id = ? ORDER BY seq", (owner_id,))
    return [release_dict(row) for row in cur]


def spent_where(
    conn: sqlite3.Connection, owner_ids: list[str], job: str | None, other_than: str | None, since: str | None
) -> Budget:
    """(ε, δ) of the owners' releases made for ``job`` (None: any), for no job ``other_than`` (None: no
    such condition), debited at or after ``since`` (SQLite ``datetime`` text; None: ever): the releases
    read through the indexes, summed by ``fsum``."""
    where = f"owner_id IN ({','.join('?' * len(owner_ids))})"
    return _sum_releases(conn, where, list(owner_ids), job, other_than, since)


def spent_held(
    conn: sqlite3.Connection,
    pairs: list[tuple[str, int]],
    job: str | None,
    other_than: str | None,
    since: str | None,
) -> Budget:
    """(ε, δ) of the releases each (owner id, run) pair of ``pairs`` made in its run, for ``job`` (None: any), for
    no job ``other_than`` (None: no such condition), debited at or after ``since`` (None: ever), each release once
    (``Ledger.spent_by_holdings``): read through index ``releases_run``, summed by ``fsum``."""
    where = f"(owner_id, run) IN (VALUES {','.join('(?, ?)' for _ in pairs)})"
    return _sum_releases(conn, where, [v for pair in pairs for v in pair], job, other_than, since)


def _sum_releases(
    conn: sqlite3.Connection, where: str, args: list[Any], job: str | None, other_than: str | None, since: str | None
) -> Budget:
    """(ε, δ) of the releases ``where`` (with ``args``) selects, narrowed to ``job``, ``other_than`` and ``since`` as
    :func:`spent_where` says, summed by ``fsum``."""
    clauses, args = [where], list(args)
    for clause, value in (("job = ?", job), ("job != ?", other_than), ("ts >= datetime('now', ?)", since)):
        if value is not None:
            clauses.append(clause)
            args.append(value)
    rows = conn.execute(f"SELECT epsilon, delta FROM releases WHERE {' AND '.join(clauses)}", args).fetchall()
    return Budget(math.fsum(r[0] for r in rows), math.fsum(r[1] for r in rows))


def spent_held_but(
    conn: sqlite3.Connection, records: dict[str, OwnerRecord], pairs: list[tuple[str, int]], job: str | None
) -> Budget:
    """The running sums of each (owner id, run) pair's releases in its run (``records``, read in the same snapshot
    as ``conn``) less the releases of ``job`` (None: none), summed over the pairs, as :func:`spent_but` does for
    whole ids (a pair whose ``job`` releases are not finite sums its other releases instead)."""
    parts: list[tuple[float, float]] = []
    taken: dict[tuple[str, int], list[tuple[float, float]]] = {p: [] for p in pairs}
    if job is not None:
        for o, run, e, d in conn.execute(
            f"SELECT owner_id, run, epsilon, delta FROM releases WHERE (owner_id, run) IN "
            f"(VALUES {','.join('(?, ?)' for _ in pairs)}) AND job = ?",
            [*(v for pair in pairs for v in pair), job],
        ):
            taken[(o, run)].append((e, d))
    for owner_id, run in pairs:
        if not all(math.isfinite(e) and math.isfinite(d) for e, d in taken[(owner_id, run)]):
            other = spent_held(conn, [(owner_id, run)], None, job, None)
            parts.append((other.epsilon, other.delta))
            continue
        epsilon, delta = records[owner_id].in_run(run)
        for e, d in taken[(owner_id, run)]:
            epsilon.add(-e)
            delta.add(-d)
        parts.append((epsilon.value(), delta.value()))
    return Budget(math.fsum(p[0] for p in parts), math.fsum(p[1] for p in parts))


def spent_but(
    conn: sqlite3.Connection, records: dict[str, OwnerRecord], owner_ids: list[str], job: str | None
) -> Budget:
    """The owners' exact running sums (``records``, read in the same snapshot as ``conn``) less the
    releases of ``job`` (None: none), summed over the owners. A job with a non-finite release (ε = ∞: the
    non-private bypass) cannot be taken back out of a sum (∞ − ∞): then that owner's other jobs' releases
    are summed instead."""
    parts: list[tuple[float, float]] = []
    taken: dict[str, list[tuple[float, float]]] = {o: [] for o in owner_ids}
    if job is not None:
        marks = ",".join("?" * len(owner_ids))
        for o, e, d in conn.execute(
            f"SELECT owner_id, epsilon, delta FROM releases WHERE owner_id IN ({marks}) AND job = ?",
            [*owner_ids, job],
        ):
            taken[o].append((e, d))
    for owner_id in owner_ids:
        if not all(math.isfinite(e) and math.isfinite(d) for e, d in taken[owner_id]):
            rows = conn.execute(
                "SELECT epsilon, delta FROM releases WHERE owner_id = ? AND job != ?", (owner_id, job)
            ).fetchall()
            parts.append((math.fsum(r[0] for r in rows), math.fsum(r[1] for r in rows)))
            continue
        epsilon, delta = records[owner_id].epsilon.copy(), records[owner_id].delta.copy()
        for e, d in taken[owner_id]:
            epsilon.add(-e)
            delta.add(-d)
        parts.append((epsilon.value(), delta.value()))
    return Budget(math.fsum(p[0] for p in parts), math.fsum(p[1] for p in parts))


def read_spent(path: str | Path, owner_ids: Sequence[str], *, since: str | None = None) -> dict[str, Budget]:
    """Each owner's (ε, δ) released at or after ``since`` (SQLite ``datetime`` text such as ``'-1 day'``; None:
    ever), read without writing (as :func:`~privfed.common.ledger_file.read_accounts`) by the query through which
    :meth:`~privfed.common.ledger.Ledger.spent_on` reads an owner policy's day limit (:func:`spent_where`)."""
    path = Path(path)
    conn, _ = open_read_only(path)
    try:
        return {o: spent_where(conn, [o], None, None, since) for o in owner_ids}
    except sqlite3.Error as exc:
        raise ConfigError(f"ledger {path}: not a readable privfed ledger ({exc})") from exc
    finally:
        conn.close()


def read_row_spending(path: str | Path, owner_ids: Sequence[str]) -> dict[str, list[tuple[int, Budget, Budget]]]:
    """For each owner id, its rows of its last run (those recorded as held by it in the last run it debited in),
    in groups of the same earlier holdings: (how many rows, what such a row can have spent in the last 24 hours,
    what in all), counted as the node's policy counts them (``Ledger.spent_by_holdings``: the releases of each
    (id, run) pair that held the row, and the id's own of before schema 6), read without writing. Empty for an id
    without rows, and for every id of a file older than schema 6 (its holdings name no run)."""
    path = Path(path)
    conn, version = open_read_only(path)
    try:
        if version < 6:
            return {o: [] for o in owner_ids}
        out: dict[str, list[tuple[int, Budget, Budget]]] = {}
        for owner_id in owner_ids:
            row = conn.execute("SELECT max(run) FROM holders WHERE owner_id = ?", (owner_id,)).fetchone()
            if row is None or row[0] is None:
                out[owner_id] = []
                continue
            held: dict[str, set[tuple[str, int]]] = {}
            for key, holder, run in conn.execute(
                "SELECT h.row_key, h.owner_id, h.run FROM holders AS mine JOIN holders AS h ON h.row_key = "
                "mine.row_key WHERE mine.owner_id = ? AND mine.run = ? AND mine.row_key LIKE 'row:%'",
                (owner_id, row[0]),
            ):
                held.setdefault(key, set()).add((holder, int(run)))
            groups: dict[tuple[tuple[str, int], ...], int] = {}
            for pairs in held.values():
                key_pairs = tuple(sorted(pairs | {(owner_id, 0)}))
                groups[key_pairs] = groups.get(key_pairs, 0) + 1
            out[owner_id] = [
                (
                    n,
                    spent_held(conn, list(pairs), None, None, "-1 day"),
                    spent_held(conn, list(pairs), None, None, None),
                )
                for pairs, n in groups.items()
            ]
        return out
    except sqlite3.Error as exc:
        raise ConfigError(f"ledger {path}: not a readable privfed ledger ({exc})") from exc
    finally:
        conn.close()
