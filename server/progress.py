"""A job's progress on the coordinator's terminal: a tqdm bar of owners on stderr, or one that shows nothing (a
coordinator that shows no progress never imports tqdm; an owner node never does: ``tests/unit/test_owner_imports.py``)."""

from __future__ import annotations

import os
import sys
from contextlib import AbstractContextManager
from typing import Any


def bar_shape() -> dict[str, int]:
    """Columns and rows for a progress bar on stderr. tqdm reads the terminal's size, and a
    pseudo-terminal that has none set (``script``, CI runners, ``docker run -t``, a pty a test
    opens) reports 0 x 0, from which tqdm draws nothing at all; there the bar gets 80 x 24."""
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError):
        return {}
    return {} if size.columns > 0 and size.lines > 0 else {"ncols": 80, "nrows": 24}


class _NoBar:
    """A progress bar that shows nothing (a coordinator without one never imports tqdm)."""

    n = 0

    def update(self, k: int) -> None:
        self.n += k

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


#: A bar is drawn once its batch has run this long (tqdm's ``delay``): the many short batches of a job (a ring's
#: hops, one owner each) would each flash a bar that is gone before it can be read.
DELAY_S = 0.5


def progress_bar(show: bool, total: int, desc: str) -> AbstractContextManager[Any]:
    """A tqdm bar of ``total`` owners on stderr, drawn from :data:`DELAY_S` on, or, when not ``show``, one that
    shows nothing."""
    if not show:
        return _NoBar()
    from tqdm import tqdm  # here: a coordinator that shows no progress never loads it

    return tqdm(total=total, desc=desc, leave=False, unit="owner", delay=DELAY_S, **bar_shape())
