"""Files only their owner may read: ledgers and journals (issue 20, item 9).

A ledger says which releases each owner made and when; a journal holds a job's rounds. SQLite
creates a missing database with mode ``0666 & ~umask`` (0644 under the usual umask 022), and its
``-wal``, ``-shm`` and ``-journal`` files with the database file's mode. So the database file is
made here first, 0600 from its creation (the mode is set by ``open`` itself; the umask can only
remove bits), and SQLite's companion files follow it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: SQLite's files beside a database: write-ahead log, its shared-memory index, rollback journal.
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def private_sqlite_file(path: str | Path) -> None:
    """Create the SQLite database file ``path`` with mode 0600 if missing; take the group and other
    bits off an existing one and off its companion files (made by an older version).

    ``":memory:"`` and a missing directory are left alone (SQLite reports the latter).
    """
    if str(path) == ":memory:":
        return
    path = Path(path)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        return
    except FileExistsError:
        pass
    except FileNotFoundError:
        return
    for file in [path, *(path.with_name(path.name + s) for s in SQLITE_COMPANIONS)]:
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
            if mode & 0o077 and file.is_file():
                os.chmod(file, mode & 0o700)
        except FileNotFoundError:
            continue
