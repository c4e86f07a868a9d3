"""A signal sent to one thread of another process other than its main thread (``tgkill``).

The kernel hands a process's signal to any of its threads that does not block it; CPython runs the
Python handler in the main thread only. A process whose main thread waits without a timeout then
never runs its handler when another thread takes the signal (``privfed.deploy.signals``): under
load this happened about 1 SIGTERM in 40. Sending the signal to a chosen thread makes that case
happen every time instead of by luck.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)


def _other_threads(pid: int) -> list[int]:
    try:
        return [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir() if int(t.name) != pid]
    except FileNotFoundError:  # the process is gone
        return []


def signal_a_worker_thread(pid: int, sig: int, timeout: float = 60.0) -> int:
    """Send ``sig`` to a thread of process ``pid`` other than its main thread, once it has one (within
    ``timeout`` seconds); return that thread's id."""
    deadline = time.monotonic() + timeout
    while not (threads := _other_threads(pid)):
        assert time.monotonic() < deadline, f"process {pid} started no thread besides its main one"
        time.sleep(0.05)
    if _libc.tgkill(pid, threads[0], sig) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return threads[0]
