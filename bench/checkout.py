"""Running a benchmark's processes from another checkout (``--pythonpath DIR``: a baseline commit beside this one).

This repository's ``privfed`` package is its top-level folders (``privfed.common`` is ``common/``, ...), which
the editable install maps. ``PYTHONPATH=DIR`` alone lends a child only ``DIR/privfed/__init__.py``: every
subpackage still comes from this venv's install, so a "baseline" ran this checkout's code. And a child
started with ``-m`` or ``-c`` puts its working directory first on ``sys.path``, where this checkout's
``privfed/`` shadows ``PYTHONPATH``. :func:`checkout_env` lays ``DIR`` out whole and the children must run
from a directory outside any checkout (``cwd=into``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def package_root(checkout: Path, into: Path) -> Path:
    """A directory whose ``privfed`` package is ``checkout``'s, whole: its ``privfed/__init__.py`` and, as
    ``privfed/common``, ``privfed/owner``..., links to the checkout's top-level folders. A checkout that already
    holds them under ``privfed/`` is used as it is."""
    if not (checkout / "proto").is_dir() or (checkout / "privfed" / "proto").exists():
        return checkout
    package = into / "privfed"
    package.mkdir(parents=True, exist_ok=True)
    for part in ("__init__.py", *(p.name for p in checkout.iterdir() if (p / "__init__.py").is_file())):
        if part != "privfed" and not (package / part).exists():
            (package / part).symlink_to((checkout / "privfed" / part) if part == "__init__.py" else checkout / part)
    return into


def checkout_env(checkout: str | Path | None, into: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``PYTHONPATH`` on ``checkout``'s whole package, laid out
    under ``into``; unchanged when ``checkout`` is None (this checkout's install). Start the children with
    ``cwd=into`` (module docstring)."""
    env = dict(os.environ if base is None else base)
    if checkout is not None:
        env["PYTHONPATH"] = str(package_root(Path(checkout).resolve(), into / "checkout"))
    return env
