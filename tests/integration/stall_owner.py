"""The owner CLI, which stops itself (SIGSTOP) before answering a batch with a release task once the file named by
``PRIVFED_TEST_STALL`` exists (it removes the file first): a node that took part in a job's accept round and then
stalls in the job's first batch, as a node a test SIGSTOPs does, for tests of a service stopped mid-batch (before
the accept round, a node stopped beforehand was simply left out of the job). A file that says ``join`` makes it stop
before answering the accept round's batch instead (a node that blips as a job starts). Run as ``python
stall_owner.py owner ...`` (the owner CLI's arguments). Without the file it is the owner CLI. Test-only."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from privfed.common.tasks import JoinTask, Task
from privfed.deploy.cli import main
from privfed.owner.core import OwnerCore

_answer = OwnerCore.answer


def _stalling_answer(self, items, **kwargs):
    items = list(items)
    trigger = Path(os.environ.get("PRIVFED_TEST_STALL", "/nonexistent"))
    at_join = trigger.exists() and trigger.read_text().strip() == "join"
    if trigger.exists() and any(isinstance(t, Task) and isinstance(t.spec, JoinTask) == at_join for t in items):
        trigger.unlink()
        os.kill(os.getpid(), signal.SIGSTOP)  # the test sends SIGCONT
    return _answer(self, items, **kwargs)


if __name__ == "__main__":
    OwnerCore.answer = _stalling_answer  # type: ignore[method-assign]
    sys.exit(main(sys.argv[1:]))
