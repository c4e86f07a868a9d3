"""One command's quiet logging: ``privfed simulate`` and ``privfed experiment`` run owners and a coordinator in
process, whose INFO lines (one per owner batch) would bury the command's own output; they keep them for ``-v``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_unless(verbose: bool) -> Iterator[None]:
    """privfed's loggers at WARNING while the block runs, unless ``verbose``; their level is put back after it, so a
    caller in the same process (a test) keeps its own (walkthrough 12's change left them at WARNING for good, and
    later tests in that process read no INFO line)."""
    logger = logging.getLogger("privfed")
    level = logger.level
    if not verbose:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)
