"""What a :class:`~privfed.common.ledger.Ledger` connection last read or committed of each owner's
record and each row account, so that a debit or a read costs the same however long the owner's
history is (issue 27).

An owner's record keeps its spent ε and δ as running exact sums (:class:`~privfed.common.ledger_sum.ExactSum`,
equal bit for bit to ``math.fsum`` over every release) and its release ids in debit order; a debit
batch keeps its own additions apart (:class:`PendingRecord`) and merges them into the record only
after its COMMIT returned, so a batch that does not commit leaves the cache as it was, and nothing
of the history is copied to check or extend it. A standing hands out a :class:`ReleaseIds` view of
the ids recorded at that moment instead of a copy.

The cache is only a copy of the file: it is trusted while no other connection has written the file,
which SQLite's ``PRAGMA data_version`` tells (it changes when another connection commits; a
connection's own commits leave it as is). The ledger reads the version before each use (inside the
debit's write transaction, so the check and the debit see the same file) and drops the whole cache
when it changed; each owner is then read back from the file in full once (O(its history) once per
change of the file by another writer, not per debit or read).

Its size is bounded (:data:`MAX_OWNERS`): a node hosting more owners reads each batch's records
from the file, as before the cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

from privfed.common.ledger_sum import ExactSum

if TYPE_CHECKING:
    from privfed.common.ledger_records import Budget

#: Owners (and row accounts) kept at most; past it the cache starts over.
MAX_OWNERS = 4096


class ReleaseIds(AbstractSet[str]):
    """The release ids an owner had recorded when its standing was read, without copying them: a view
    of the first ``count`` ids of the record's debit-ordered index (ids recorded later have larger
    positions, so the view does not change when the record grows). Membership and ``len`` are O(1);
    iterating (an audit listing) is O(the ids) and only happens there."""

    __slots__ = ("_order", "_count")

    def __init__(self, order: dict[str, int], count: int) -> None:
        self._order = order
        self._count = count

    def __contains__(self, release_id: object) -> bool:
        return isinstance(release_id, str) and self._order.get(release_id, self._count) < self._count

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[str]:
        return iter(list(islice(self._order, self._count)))  # a copy: the record may grow meanwhile

    def __hash__(self) -> int:
        return self._hash()

    def __repr__(self) -> str:
        return f"ReleaseIds({set(self)!r})"


@dataclass
class OwnerRecord:
    """One owner's record: its stored budget (None until its first debit stores it), the exact sums
    of the ε and δ of its releases, and their release ids, each mapped to its position in debit
    order (insertion order of the dict)."""

    budget: Budget | None
    epsilon: ExactSum
    delta: ExactSum
    release_ids: dict[str, int]

    def ids_now(self) -> ReleaseIds:
        """The ids recorded at this moment, as a view (:class:`ReleaseIds`)."""
        return ReleaseIds(self.release_ids, len(self.release_ids))

    def add_release(self, release_id: str, epsilon: float, delta: float) -> None:
        """One release read from the file."""
        self.release_ids[release_id] = len(self.release_ids)
        self.epsilon.add(epsilon)
        self.delta.add(delta)


class PendingRecord:
    """A debit batch's view of one owner: its record as the file held it at the batch's start plus the
    batch's own accepted entries, kept apart until :meth:`merge` (after COMMIT). O(1) to create and per
    entry: the exact sums are copied (a few partials), the record's ids are looked up, not copied."""

    __slots__ = ("record", "budget", "epsilon", "delta", "new_ids")

    def __init__(self, record: OwnerRecord) -> None:
        self.record = record
        self.budget = record.budget
        self.epsilon = record.epsilon.copy()
        self.delta = record.delta.copy()
        self.new_ids: dict[str, None] = {}

    def has(self, release_id: str) -> bool:
        """Whether the owner recorded ``release_id`` before the batch or earlier in it."""
        return release_id in self.record.release_ids or release_id in self.new_ids

    def spent(self) -> tuple[float, float]:
        """(ε, δ) of the owner's own releases, the batch's accepted ones included (exact-rounded)."""
        return self.epsilon.value(), self.delta.value()

    def add(self, release_id: str, epsilon: float, delta: float) -> None:
        """One accepted entry of the batch."""
        self.new_ids[release_id] = None
        self.epsilon.add(epsilon)
        self.delta.add(delta)

    def merge(self) -> OwnerRecord:
        """The record with the batch's entries in it; call only once the batch committed."""
        record = self.record
        record.budget = self.budget
        record.epsilon, record.delta = self.epsilon, self.delta
        for release_id in self.new_ids:
            record.release_ids[release_id] = len(record.release_ids)
        return record


class RecordCache:
    def __init__(self) -> None:
        self.owners: dict[str, OwnerRecord] = {}
        self.accounts: dict[str, tuple[float, float]] = {}  # row account key -> (ε, δ) recorded
        self._version: int | None = None

    def validate(self, version: int) -> None:
        """Drop everything if another connection wrote the file since the last call (``version``:
        the connection's ``PRAGMA data_version`` now)."""
        if version != self._version:
            self.clear()
            self._version = version

    def clear(self) -> None:
        self.owners.clear()
        self.accounts.clear()

    def keep_owners(self, read: dict[str, OwnerRecord]) -> None:
        """Keep records just read from the file (if they fit)."""
        if len(self.owners) + len(read) > MAX_OWNERS:
            self.owners.clear()
        if len(read) <= MAX_OWNERS:
            self.owners.update(read)

    def keep_accounts(self, read: dict[str, tuple[float, float]]) -> None:
        """Keep row-account sums just read from the file (if they fit)."""
        if len(self.accounts) + len(read) > MAX_OWNERS * 64:
            self.accounts.clear()
        if len(read) <= MAX_OWNERS * 64:
            self.accounts.update(read)

    def committed(self, owners: dict[str, PendingRecord], accounts: dict[str, tuple[float, float]]) -> None:
        """What a debit's COMMIT just wrote: its owners' entries and its accounts' sums."""
        self.keep_owners({o: p.merge() for o, p in owners.items()})
        self.keep_accounts(accounts)
