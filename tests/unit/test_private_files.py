"""Ledger and journal files are the owner's alone (issue 20, item 9): created 0600, and an older
file left readable by group or others is tightened when opened. (From creation, under the audit
hook: tests/adversary/test_key_files.py.)"""

import os
import sqlite3
import stat

import pytest

from privfed.common.errors import ConfigError
from privfed.common.files import private_sqlite_file, sole_writer
from privfed.common.ledger import Ledger
from privfed.server.journal import Journal


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_an_older_readable_ledger_and_its_wal_are_tightened_when_opened(tmp_path):
    path = tmp_path / "old.sqlite"
    old = os.umask(0o022)
    try:
        Ledger(path, epsilon_budget=1.0).close()  # a ledger of older code, which made its files 0644:
        os.chmod(path, 0o644)
        conn = sqlite3.connect(path)  # SQLite makes the -wal file with the file's mode
        conn.execute("INSERT INTO meta (name, value) VALUES ('older', 'code')")
        conn.commit()
        assert _mode(path) == 0o644 and _mode(f"{path}-wal") == 0o644  # what SQLite alone makes
        with Ledger(path, epsilon_budget=1.0):
            assert _mode(path) == _mode(f"{path}-wal") == _mode(f"{path}-shm") == 0o600
        conn.close()
    finally:
        os.umask(old)


def test_a_new_journal_is_0600_under_umask_022(tmp_path):
    old = os.umask(0o022)
    try:
        with Journal(tmp_path / "journal.sqlite") as journal:
            journal.begin(fingerprint="f", owner_ids=["owner-0.o00000"], run_id="run", resume=False)
        assert _mode(tmp_path / "journal.sqlite") == 0o600
    finally:
        os.umask(old)


def test_memory_and_missing_directories_are_left_to_sqlite(tmp_path):
    private_sqlite_file(":memory:")
    private_sqlite_file(tmp_path / "missing" / "ledger.sqlite")
    assert not (tmp_path / "missing").exists()


def test_a_ledger_has_one_writer_and_its_lock_is_private(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with sole_writer(path):
        assert _mode(f"{path}.lock") == 0o600
        assert (tmp_path / "ledger.sqlite.lock").read_text() == f"{os.getpid()}\n"
        with pytest.raises(ConfigError, match=rf"in use by another owner node \(pid {os.getpid()}\)"):
            with sole_writer(path):
                pass
    with sole_writer(path):  # released when the block ends
        pass
    with sole_writer(":memory:"), sole_writer(":memory:"):
        pass
    with pytest.raises(ConfigError, match="does its directory exist"):
        with sole_writer(tmp_path / "missing" / "ledger.sqlite"):
            pass


def test_a_ledger_with_a_second_name_is_refused(tmp_path):
    path = tmp_path / "ledger.sqlite"
    path.write_bytes(b"")
    (tmp_path / "other.sqlite").hardlink_to(path)
    for name in (path, tmp_path / "other.sqlite"):
        with pytest.raises(ConfigError, match="has 2 names"):
            with sole_writer(name):
                pass
    (tmp_path / "other.sqlite").unlink()
    with sole_writer(path):
        pass


def test_a_file_system_that_cannot_lock_gets_a_warning_not_a_refusal(tmp_path, monkeypatch, caplog):
    import errno
    import fcntl

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with sole_writer(tmp_path / "ledger.sqlite"):
        pass
    assert "cannot be locked (No locks available)" in caplog.text


def test_a_lock_file_planted_as_a_link_is_not_followed(tmp_path):
    """Someone who can write to the ledger's directory (a shared one) links ``LEDGER.lock`` to a file of
    the owner's: the node truncated it and wrote its pid there (wt-redteam4). Now it refuses the link."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "ledger.sqlite.lock").symlink_to(victim)
    with pytest.raises(ConfigError, match="lock file"):
        with sole_writer(tmp_path / "ledger.sqlite"):
            pass
    assert victim.read_text() == "keep me\n"
