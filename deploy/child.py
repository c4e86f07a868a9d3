"""Run one function in a fresh interpreter: a launcher's heavy steps, kept out of its own memory.

``privfed simulate`` is a coordinator as well as a launcher. What it needs around its jobs (the data
splits, the non-private reference fits with scikit-learn and scipy, the matplotlib plot) would hold
~160 MB in its process for the rest of the run (issue 27, item 2): :func:`call_in_child` runs such a
step in a new ``python -m privfed.deploy.child`` process, which exits when it is done
(:func:`start_in_child`: while the caller goes on).

The function is named ``"package.module:function"`` (so the parent never imports its module), and
its arguments and result travel pickled over the child's stdin and stdout: both ends are this same
program, run by the same user. Its log and warnings go
to the parent's stderr. A :class:`PrivfedError` or ``OSError`` it raises is raised again in the
parent, as it was (one line at the command line); anything else is a traceback on stderr and a
:class:`ChildFailed` here.
"""

from __future__ import annotations

import importlib
import os
import pickle
import subprocess
import sys
from typing import Any

from privfed.common.errors import PrivfedError


class ChildFailed(RuntimeError):
    """The child process died without a result (its traceback is on stderr)."""


def call_in_child(function: str, *args: Any) -> Any:
    """``function(*args)`` for ``function`` named ``"module:name"``, computed in a new interpreter
    (module docstring)."""
    return start_in_child(function, *args).result()


def reference_in_child(config: Any) -> dict[str, Any]:
    """A coordinator's (or a service's job's) report's non-private reference for the job ``config``, fitted once
    training is over in a child process (issue 27, item 2): the coordinator never holds the reference's learners
    and data."""
    reference: dict[str, Any] = call_in_child("privfed.deploy.reference:coordinator_reference", config)
    return reference


def start_in_child(function: str, *args: Any, niceness: int = 0) -> ChildCall:
    """:func:`call_in_child` without waiting: the child computes while the caller goes on (``privfed
    simulate``'s non-private reference beside its federation); :meth:`ChildCall.result` waits. The child
    runs ``niceness`` steps below the caller's priority (``os.nice``): work that should take only the
    cycles the caller's other processes leave."""
    return ChildCall(function, args, niceness)


class ChildCall:
    """A call running in its child process (:func:`start_in_child`)."""

    def __init__(self, function: str, args: tuple[Any, ...], niceness: int = 0) -> None:
        self.function = function
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "privfed.deploy.child"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self._proc.stdin is not None
        with self._proc.stdin:  # the child reads all of it before it computes
            self._proc.stdin.write(pickle.dumps((function, args, niceness)))
        self._reply: tuple[str, Any] | None = None

    def result(self) -> Any:
        """The function's value (waiting for the child), or its exception raised again; the same on
        every call."""
        if self._reply is None:
            assert self._proc.stdout is not None
            with self._proc.stdout:
                out = self._proc.stdout.read()
            code = self._proc.wait()
            if code != 0 or not out:
                raise ChildFailed(f"{self.function} failed in its child process (exit {code}); see above")
            self._reply = pickle.loads(out)
        status, value = self._reply
        if status == "error":
            raise value
        return value

    def __enter__(self) -> ChildCall:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """End the child if it is still computing (its caller failed and will not read it)."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                pipe.close()


def main() -> int:
    """The child: read the call from stdin, write ``("ok", result)`` or ``("error", exception)`` to stdout."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # anything the function prints goes to the log, not into the result
    name, args, niceness = pickle.loads(sys.stdin.buffer.read())
    if niceness:
        os.nice(niceness)
    module, _, attribute = name.partition(":")
    function = getattr(importlib.import_module(module), attribute)
    try:
        reply = ("ok", function(*args))
    except (PrivfedError, OSError) as exc:
        reply = ("error", exc)
    out.write(pickle.dumps(reply))
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
