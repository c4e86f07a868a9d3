"""A SIGTERM sets the process's stop event without taking the event's lock in the thread it interrupts.

Walkthrough 11 (W11-11): an owner node daemon, told SIGTERM while it retried to register with a stopped service,
never exited (it was found 30 minutes later, and a test's teardown timed out on it). Its handler was
``lambda *_: node.stop_event.set()``: Python runs a handler in the main thread between two bytecodes, and
``Event.set`` takes the event's lock, which the main thread held when the signal came inside its own
``stop_event.wait(delay)`` (a condition's lock, not reentrant): the handler waited for itself. gdb showed the main
thread in ``lock.acquire()`` under ``_PyErr_CheckSignalsTstate``. The same handler stopped ``privfed serve``,
``privfed coordinator --load-model`` and the enrolment signer. The test holds the event's lock as ``Event.wait``
does, sends the signal to itself, and needs the event set and the process done within seconds.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import importlib, os, signal, sys, threading

    set_on_signals = importlib.import_module(sys.argv[1]).set_on_signals
    ev = threading.Event()
    set_on_signals(ev, (signal.SIGTERM, signal.SIGINT))
    for sig in (signal.SIGTERM, signal.SIGINT):
        with ev._cond:  # the main thread holds the event's lock, as inside Event.wait
            os.kill(os.getpid(), sig)
            for _ in range(1000):  # the handler runs at a bytecode boundary in here
                pass
        print("set" if ev.wait(5) else "not set", flush=True)
        ev.clear()
    """
)


def test_a_signal_sets_the_stop_event_while_the_interrupted_thread_holds_its_lock():
    """The one handler of ``privfed owner``, ``privfed coordinator --load-model``, ``privfed serve`` and the signer
    (each command sets it on the event it passes down); before the fix the process hung here until the timeout
    killed it."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, "privfed.deploy.signals"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["set", "set"], done.stdout
