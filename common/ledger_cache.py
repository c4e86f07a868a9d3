"""What a :class:`~privfed.common.ledger.Ledger` connection last read or committed of each owner's
record and each row account, so that a debit or a read costs the same however long the owner's
history is (issue 27).

An owner's record is O(1) in size: its stored budget, its spent ε and δ as running exact sums
(:class:`~privfed.common.ledger_sum.ExactSum`, equal bit for bit to ``math.fsum`` over every
release), the same per run it debited in (``privfed.common.ledger_file``, schema 6: what an owner policy counts
for a row, ``Ledger.spent_by_holdings``; O(the runs)) and how many releases it has. Its release ids stay in the file, whose unique index on
(owner, release id) answers whether an id was used in O(log n) (``privfed.common.ledger_file``,
:class:`~privfed.common.ledger_file.ReleaseIds`). A debit batch keeps its own additions apart
(:class:`PendingRecord`) and merges them into the record only after its COMMIT returned, so a batch
that fails before COMMIT leaves the cache as it was (the ledger drops it if the COMMIT itself fails:
the file may hold the batch or not), and nothing of the history is copied to check or extend it.

The cache is only a copy of the file: it is trusted while no other connection has written the file,
which SQLite's ``PRAGMA data_version`` tells (it changes when another connection commits; a
connection's own commits leave it as is). The ledger reads the version before each use (inside the
debit's write transaction, so the check and the debit see the same file) and drops the whole cache
when it changed; each owner is then read back from the file in full once (O(its history) once per
change of the file by another writer, not per debit or read).

Its size is bounded (:data:`MAX_OWNERS` records of a few hundred bytes, :data:`MAX_ACCOUNTS` row
accounts): a node hosting more owners reads each batch's records from the file, as before the cache.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from privfed.common.ledger_file import CHUNK
from privfed.common.ledger_records import Budget
from privfed.common.ledger_sum import ExactSum

#: Owner records kept at most (~0.5 kB each); past it the cache starts over.
MAX_OWNERS = 32768
#: Row accounts kept at most; past it they start over.
MAX_ACCOUNTS = 4096 * 64


@dataclass(slots=True)
class OwnerRecord:
    """One owner's record: its stored budget (None until its first debit stores it), the exact sums
    of the ε and δ of its releases, and how many releases it has."""

    budget: Budget | None
    epsilon: ExactSum
    delta: ExactSum
    count: int = 0
    #: The exact sums of the ε and δ of its releases per run (run 0: before ledger schema 6).
    runs: dict[int, tuple[ExactSum, ExactSum]] = field(default_factory=dict)

    def add_release(self, epsilon: float, delta: float, run: int) -> None:
        """One release read from the file."""
        self.count += 1
        self.epsilon.add(epsilon)
        self.delta.add(delta)
        self.add_to_run(run, epsilon, delta)

    def add_to_run(self, run: int, epsilon: float, delta: float) -> None:
        eps, dlt = self.runs.setdefault(run, (ExactSum(), ExactSum()))
        eps.add(epsilon)
        dlt.add(delta)

    def in_run(self, run: int) -> tuple[ExactSum, ExactSum]:
        """Copies of the exact sums of the owner's releases in ``run`` (zero: none)."""
        eps, dlt = self.runs.get(run, (ExactSum(), ExactSum()))
        return eps.copy(), dlt.copy()


class PendingRecord:
    """A debit batch's view of one owner: its record as the file held it at the batch's start plus the
    batch's own accepted entries, kept apart until :meth:`merge` (after COMMIT). O(1) to create and per
    entry: the exact sums are copied (a few partials)."""

    __slots__ = ("record", "budget", "epsilon", "delta", "new_ids", "run", "added")

    def __init__(self, record: OwnerRecord, run: int) -> None:
        self.record = record
        self.budget = record.budget
        self.epsilon = record.epsilon.copy()
        self.delta = record.delta.copy()
        self.new_ids: dict[str, None] = {}
        self.run = run  # the run the batch debits in
        self.added: list[tuple[float, float]] = []

    def used_in_batch(self, release_id: str) -> bool:
        """Whether an earlier entry of the batch recorded ``release_id`` (the file knows the others)."""
        return release_id in self.new_ids

    def spent(self) -> tuple[float, float]:
        """(ε, δ) of the owner's own releases, the batch's accepted ones included (exact-rounded)."""
        return self.epsilon.value(), self.delta.value()

    def add(self, release_id: str, epsilon: float, delta: float) -> None:
        """One accepted entry of the batch."""
        self.new_ids[release_id] = None
        self.epsilon.add(epsilon)
        self.delta.add(delta)
        self.added.append((epsilon, delta))

    def merge(self) -> OwnerRecord:
        """The record with the batch's entries in it; call only once the batch committed."""
        record = self.record
        record.budget = self.budget
        record.epsilon, record.delta = self.epsilon, self.delta
        record.count += len(self.new_ids)
        for epsilon, delta in self.added:
            record.add_to_run(self.run, epsilon, delta)
        return record


class RecordCache:
    def __init__(self) -> None:
        self.owners: dict[str, OwnerRecord] = {}
        self.accounts: dict[str, tuple[float, float]] = {}  # row account key -> (ε, δ) recorded
        self._version: int | None = None

    def validate(self, conn: sqlite3.Connection) -> None:
        """Drop everything if another connection wrote the file since the last call (the connection's
        ``PRAGMA data_version`` tells)."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self.clear()
            self._version = version

    def clear(self) -> None:
        self.owners.clear()
        self.accounts.clear()

    def read(self, conn: sqlite3.Connection, owners: list[str]) -> dict[str, OwnerRecord]:
        """Each owner's stored budget (None: not stored yet), exact sums of its recorded ε and δ, and
        number of releases: from the cache while no other connection has written the file (``PRAGMA
        data_version``), else read in full, O(the owner's history) once (call :meth:`validate`
        first). Callers change a record only through :class:`PendingRecord` after a COMMIT."""
        missing = [o for o in owners if o not in self.owners]
        read = {o: OwnerRecord(None, ExactSum(), ExactSum()) for o in missing}
        for start in range(0, len(missing), CHUNK):
            chunk = missing[start : start + CHUNK]
            marks = ",".join("?" * len(chunk))
            for o, e, d in conn.execute(
                f"SELECT owner_id, epsilon_budget, delta_budget FROM owners WHERE owner_id IN ({marks})", chunk
            ):
                read[o].budget = Budget(e, d)
            for o, e, d, run in conn.execute(
                f"SELECT owner_id, epsilon, delta, run FROM releases WHERE owner_id IN ({marks})", chunk
            ):
                read[o].add_release(e, d, run)
        self.keep_owners(read)
        return {o: read[o] if o in read else self.owners[o] for o in owners}

    def keep_owners(self, read: dict[str, OwnerRecord]) -> None:
        """Keep records just read from the file (if they fit)."""
        if len(self.owners) + len(read) > MAX_OWNERS:
            self.owners.clear()
        if len(read) <= MAX_OWNERS:
            self.owners.update(read)

    def keep_accounts(self, read: dict[str, tuple[float, float]]) -> None:
        """Keep row-account sums just read from the file (if they fit)."""
        if len(self.accounts) + len(read) > MAX_ACCOUNTS:
            self.accounts.clear()
        if len(read) <= MAX_ACCOUNTS:
            self.accounts.update(read)

    def committed(self, owners: dict[str, PendingRecord], accounts: dict[str, tuple[float, float]]) -> None:
        """What a debit's COMMIT just wrote: its owners' entries and its accounts' sums."""
        self.keep_owners({o: p.merge() for o, p in owners.items()})
        self.keep_accounts(accounts)
