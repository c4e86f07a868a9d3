"""Files only their owner may read: ledgers and journals (issue 20, item 9); files written whole or not at all
(:func:`replace_file`).

A ledger says which releases each owner made and when; a journal holds a job's rounds. SQLite
creates a missing database with mode ``0666 & ~umask`` (0644 under the usual umask 022), and its
``-wal``, ``-shm`` and ``-journal`` files with the database file's mode. So the database file is
made here first, 0600 from its creation (the mode is set by ``open`` itself; the umask can only
remove bits), and SQLite's companion files follow it.

A ledger has one writer process (:func:`sole_writer`): an owner's policy reads the ledger before the
debit's transaction, so a second node process on the same ledger could pass the same check at the
same moment.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from privfed.common.errors import ConfigError

log = logging.getLogger("privfed.ledger")

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


@contextmanager
def sole_writer(
    path: str | Path,
    *,
    what: str = "ledger",
    user: str = "owner node",
    instead: str = "give this node a ledger of its own",
) -> Iterator[None]:
    """Hold ``path``'s writer lock (an exclusive ``flock`` on ``PATH.lock``, 0600, holding the pid) while
    the block runs; a second holder, in this process or another, gets a :class:`ConfigError` naming the
    holding pid. The kernel drops the lock when its process exits, however it exits. Readers (``privfed
    ledger show``, SQLite read-only connections) take no lock. ``":memory:"`` takes none either, nor does a
    file system that cannot lock (a warning says so).

    A separate file because closing any descriptor of the database itself would drop SQLite's own
    POSIX locks on it (SQLite's "posix advisory locks are broken" note); named after the path with
    its symbolic links resolved, so a link to a ledger in use finds its lock. A hard link is a name
    no resolving finds, and SQLite names its WAL and shared-memory files after the name it opens, so
    two names of one file are two journals of one database ("How To Corrupt An SQLite Database File",
    2.4): a ledger file with more than one name (``st_nlink``) is refused, whoever holds which name.

    ``what``, ``user`` and ``instead`` name the file, its kind of writer and the other way out in the errors
    (a ledger's by default; ``privfed serve`` locks its job store the same way).
    """
    if str(path) == ":memory:":
        yield
        return
    lock = Path(f"{Path(path).resolve()}.lock")  # the file's, whatever link names it (SQLite follows links)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)  # a planted link is refused, not truncated
    except FileNotFoundError:
        raise ConfigError(f"{what} {path}: cannot open; does its directory exist?") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot create its lock file {lock} ({exc.strerror})") from None
    try:
        _one_name(path, what, user, instead)  # before the lock: a file system without locks refuses a second name too
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):  # a file system without locks (some network ones)
                log.warning(
                    "%s %s cannot be locked (%s): make sure no other %s uses it", what, path, exc.strerror, user
                )
                yield
                return
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise ConfigError(
                f"{what} {path} is in use by another {user} (pid {holder}); stop it first, or {instead}"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # drops the lock


def _one_name(path: str | Path, what: str, user: str, instead: str) -> None:
    """ConfigError if the file at ``path`` has other names (hard links); none yet is fine."""
    try:
        names = os.stat(path).st_nlink
    except FileNotFoundError:
        return
    if names > 1:
        raise ConfigError(
            f"{what} {path} has {names} names (hard links): another {user} could use it under another "
            f"name, beside this one; remove the other names, or {instead}"
        )


#: What :func:`file_state` saw of a file: its device, inode, size and modification time, or why it cannot be read.
FileState = tuple[int, int, int, int] | str


def file_state(path: Path) -> FileState:
    """A ``stat`` of ``path`` (cheap: the file is not read) that changes when the file is replaced or edited; a
    missing or unreadable file reads as the reason, in words."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "it no longer exists"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def replace_file(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` whole or not at all: into a temporary file beside it, synced, then renamed over it,
    and the folder synced, so a machine that stops comes back to the old file or the new one. The temporary file
    is removed when a step fails, and the error raised. Walkthrough 9, W9-1: on a full disk a job's ``model.json``
    and ``report.json`` were truncated in place, and the model its owners had paid for was lost."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    sync_dir(path.parent)
    return path


def sync_dir(d: Path) -> None:
    """Sync the directory ``d``'s entries (a rename in it); a file system that cannot sync a directory is left as is."""
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
