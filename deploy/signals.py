"""The main thread's waits for what a signal handler does: timed, so the handler runs.

CPython runs a Python-level signal handler in the main thread only, but the kernel may hand a process's
signal to any of its threads. When another thread takes it, the main thread learns of it only when it
next takes the GIL (CPython 3.11, bpo-40010): a main thread blocked in an untimed wait (``Event.wait()``,
a future's ``result()``) never does, so the handler never runs and SIGTERM is ignored until the wait
ends by itself. ``privfed reproduce`` ignored SIGTERM this way about 1 run in 40 on a loaded box (strace
showed the signal taken by a worker thread; ``tests/integration/test_reproduce.py``). A wait in slices of
:data:`POLL` seconds takes the GIL after each, so a handler runs within one slice.

Imports only the standard library.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from types import FrameType
from typing import TypeVar

#: Seconds the main thread blocks at a time: a signal's handler runs at most this late.
POLL = 0.2

T = TypeVar("T")


def wait_for(event: threading.Event) -> None:
    """Until ``event`` is set (by a signal handler, say)."""
    while not event.wait(POLL):
        pass


def results(futures: Sequence[Future[T]]) -> list[T]:
    """Every future's result in order, as ``list(pool.map(...))`` gives them: the first error raised as
    soon as it happens."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=POLL, return_when=FIRST_EXCEPTION)
        for future in done:
            future.result()
    return [future.result() for future in futures]


def set_on_signals(event: threading.Event, signals: Iterable[signal.Signals] = (signal.SIGTERM,)) -> None:
    """Set ``event`` when the process receives any of ``signals``, from a thread the handler starts: Python runs
    the handler in the main thread between two bytecodes, and ``Event.set`` takes the event's lock (a condition
    over a plain lock, not reentrant), which the main thread holds for a few bytecodes inside its own
    ``Event.wait``; a handler calling ``set`` there waits for itself, for good (walkthrough 11, W11-11: an owner
    node daemon told SIGTERM while it retried to register never exited). The one handler of every command: ``privfed
    owner`` and ``privfed coordinator --load-model`` pass the event down (``run_owner``, ``serve_saved_model``)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=event.set, name="privfed-stop-signal", daemon=True).start()

    for sig in signals:
        signal.signal(sig, handler)
