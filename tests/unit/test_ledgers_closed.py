"""ledgers_closed: privfed simulate reads a node's ledger once the node let go of its writer lock, while the
node's process may still be exiting (issue 27), and terminates a node that holds the lock past the timeout."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from privfed.deploy.simulation_nodes import ledgers_closed

#: A stand-in node: takes the ledger's writer lock as ``privfed owner`` does, says so, lets go of it when
#: told (a line on stdin; never, with "hold"), then stays alive a minute, as a node tearing down its heap.
NODE = """
import sys, time
from privfed.common.files import sole_writer
with sole_writer(sys.argv[1]):
    print("locked", flush=True)
    if sys.argv[2] == "hold":
        time.sleep(60)
    sys.stdin.readline()
print("released", flush=True)
time.sleep(60)
"""


def _node(ledger: Path, mode: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", NODE, str(ledger), mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_the_ledger_is_read_once_its_node_let_go_of_it_not_once_the_node_exited(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    node = _node(ledger, "release")
    try:
        done = threading.Event()
        waiter = threading.Thread(target=lambda: (ledgers_closed([node], [ledger], timeout=60), done.set()))
        waiter.start()
        assert not done.wait(0.5)  # the node still holds its ledger
        assert node.stdin is not None
        node.stdin.write("go\n")
        node.stdin.flush()
        waiter.join(30)
        assert done.is_set()
        assert node.poll() is None  # read while the node is still running (its minute of "exit")
    finally:
        node.kill()
        node.wait()


def test_a_node_that_keeps_its_ledger_past_the_timeout_is_terminated(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    node = _node(ledger, "hold")
    try:
        ledgers_closed([node], [ledger], timeout=0.5)
        assert node.poll() is not None  # terminated: the kernel dropped its lock
    finally:
        node.kill()
        node.wait()
