"""The cyclic garbage collector's thresholds in privfed's long-lived processes: owner nodes and coordinators.

Both allocate containers by the million (decoded tasks and results, secure-sum machines, boxes), almost
none of them in a cycle, and every live one is scanned again at each full collection. At CPython's
thresholds (700, 10, 10) a 10^4-owner BDT node spent 1.6 s of its 24 s of CPU in the collector (9 full
collections of ~0.13 s), 0.5 s at 20 000; that job's coordinator 0.94 of its 9.7 s. The young generation
is then at most 20 000 objects (a few MB), and cycles are still collected.

The thresholds are the whole interpreter's: :func:`privfed.deploy.cli.main` raises them for the commands
that run such a process, for the command's duration, and gives an in-process caller (a test) its own back.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: ``gc.set_threshold``'s arguments in an owner node's or a coordinator's process.
GC_THRESHOLDS = (20_000, 10, 10)


@contextmanager
def raised_gc_thresholds() -> Iterator[None]:
    """Run the block with the collector at :data:`GC_THRESHOLDS`, then restore the thresholds it had."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
