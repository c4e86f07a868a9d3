"""Run one function in a fresh interpreter: a launcher's heavy steps, kept out of its own memory.

``privfed simulate`` is a coordinator as well as a launcher. What it needs around its jobs (the data
splits, the non-private reference fits with scikit-learn and scipy, the matplotlib plot) would hold
~160 MB in its process for the rest of the run (issue 27, item 2): :func:`call_in_child` runs such a
step in a new ``python -m privfed.deploy.child`` process, which exits when it is done.

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
    request = pickle.dumps((function, args))
    done = subprocess.run(
        [sys.executable, "-m", "privfed.deploy.child"], input=request, stdout=subprocess.PIPE, check=False
    )
    if done.returncode != 0 or not done.stdout:
        raise ChildFailed(f"{function} failed in its child process (exit {done.returncode}); see above")
    status, value = pickle.loads(done.stdout)
    if status == "error":
        raise value
    return value


def main() -> int:
    """The child: read the call from stdin, write ``("ok", result)`` or ``("error", exception)`` to stdout."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # anything the function prints goes to the log, not into the result
    name, args = pickle.loads(sys.stdin.buffer.read())
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
