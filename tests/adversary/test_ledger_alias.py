"""One owner node per ledger, whatever path names it (wt-redteam3).

``privfed owner`` holds its ledger's writer lock (``privfed.common.files.sole_writer``): an owner's
policy reads the ledger before the debit's transaction, so two node processes on one ledger could
both pass the same limit at once. The lock was a file named after the path as given
(``PATH.lock``), so a second node given a symbolic link to the ledger took a lock of its own and
served beside the first, on the same SQLite file (SQLite follows the link). Now the lock is named
after the file the path resolves to, and the second node exits 2 naming the holder, as it does for
the same path (tests/integration/test_owner_guards.py).

A hard link is another name for the same file, and resolving it finds no other path: the second
node took ``LINK.lock`` and served beside the first (wt-redteam4). Worse, SQLite names its WAL and
shared-memory files after the name it was opened by, so the two nodes did not even share a journal
(SQLite's "How To Corrupt An SQLite Database File", 2.4). A ledger file with more than one name is now
refused by every node, the first one included if it restarts while the second name exists.
"""

import subprocess

import numpy as np
import pytest
from hostile import owner_command, write_rows

X = np.array([[0.2, 0.7], [0.6, 0.1]])
Y = np.array([0, 1])


def _second_node(tmp_path, coordinator, certs, ledger) -> subprocess.CompletedProcess:
    cmd = owner_command(
        coordinator.port,
        "owner-1",
        data=write_rows(tmp_path / "rows.csv", X, Y),
        n_owners=2,
        ledger=ledger,
        certs=certs,
    )
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait()
        return subprocess.CompletedProcess(cmd, proc.returncode, "", proc.stdout.read())


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_second_node_on_a_link_to_a_ledger_in_use_exits(tmp_path, coordinator, certs, owners, link):
    """A symbolic link finds the first node's lock; a hard link (a name no resolving finds, with a journal
    of its own) is refused as a second name of the ledger file."""
    first = owners("owner-0", X, Y)
    alias = tmp_path / f"{link}-alias.sqlite"
    if link == "symbolic":
        alias.symlink_to(first.ledger)
        expected = f"is in use by another owner node (pid {first.proc.pid})"
    else:
        alias.hardlink_to(first.ledger)
        expected = "has 2 names"
    second = _second_node(tmp_path, coordinator, certs, alias)
    assert second.returncode == 2, second.stderr[-2000:]
    assert expected in second.stderr, second.stderr[-2000:]
    assert "Traceback" not in second.stderr
    assert first.alive()
