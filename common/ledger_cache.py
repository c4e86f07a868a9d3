"""What a :class:`~privfed.common.ledger.Ledger` connection last read or committed of each owner's
record and each row account, so that a debit does not read an owner's whole history again (issue 27).

The cache is only a copy of the file: it is trusted while no other connection has written the file,
which SQLite's ``PRAGMA data_version`` tells (it changes when another connection commits; a
connection's own commits leave it as is). The ledger reads the version before each use (inside the
debit's write transaction, so the check and the debit see the same file) and drops the whole cache
when it changed. A debit that does not commit clears it as well, and the cache learns a debit only
after its COMMIT returned, so it never holds a release the file does not.

Its size is bounded (:data:`MAX_OWNERS`): a node hosting more owners reads each batch's records
from the file, as before the cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from privfed.common.ledger import Budget

#: Owners (and row accounts) kept at most; past it the cache starts over.
MAX_OWNERS = 4096


@dataclass
class OwnerRecord:
    """One owner's record: its stored budget (None until its first debit stores it), the ε and δ
    of its releases, and their release ids."""

    budget: Budget | None
    epsilons: list[float]
    deltas: list[float]
    release_ids: set[str]


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

    def committed(self, owners: dict[str, OwnerRecord], accounts: dict[str, tuple[float, float]]) -> None:
        """What a debit's COMMIT just wrote: the new records of its owners and sums of its accounts."""
        self.keep_owners(owners)
        self.keep_accounts(accounts)
