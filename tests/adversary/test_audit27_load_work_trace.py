"""Audit 27: a node's whole load of its rows after its registration, counted without a clock, is the same work for
two row counts in the same public cells.

Audit 26 padded the reading and the digests of a node's rows (``pad_load_work``, ``owner/data.py``) and still
measured 4-6 % (1-2 ms) more for 4000 rows than for 2600 rows over 10 owners (cells of 512), which it did not
trace. Traced here over the whole ``DeferredOwners.load``, with ``sys.settrace`` and no clock: every line of the
project's and numpy's Python code that runs, counted per file, and every call, counted per function with the
leading sizes of the arrays it is handed (the O(n) work numpy does in C shows up there). Before audit 27 the
steps after the reading went over the real rows alone: the split into owners (``partition``: a permutation and
``array_split``), each owner's ``flush_tiny`` (``LocalOwner``), and the count of values outside the bounds
(``check_owner_rows``), so those functions were handed 2600 rows for one node and 4000 for the other. The Python
lines balanced only by chance (the padding's loop over its copies' lines against ``build_owners``' loop over the
rows' digests).

A dataclass's generated ``__init__`` (it only stores references) and the frames of comprehensions (their lines
are counted, and a generator's every resumption is a call) are left out of the per-function counts.
"""

from __future__ import annotations

import gc
import sys
from collections import Counter

import numpy as np
import pytest
from differential import _traced
from nodeload import offline_node
from test_audit26_load_pad_paths import SCHEMA, _write

from privfed.common.ledger import Ledger
from privfed.common.schema import FederationSchema
from privfed.owner.main import hosted_owners

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process


def _traced_load(tmp_path, n_rows: int, shape: str, work_rows: int | None = None) -> tuple[Counter, Counter]:
    """The work of loading a node of 10 owners over ``n_rows`` rows after its registration: Python lines run per
    file, and per function its calls and the leading sizes of the arrays handed to it."""
    path = tmp_path / f"rows-{n_rows}-{shape}.csv"
    _write(path, n_rows, shape)
    config = offline_node(tmp_path, path, f"node-{n_rows}", f"node-{n_rows}-{shape}.sqlite", work_rows=work_rows)
    deferred = hosted_owners(config)
    schema = FederationSchema.parse(SCHEMA, source="the coordinator's schema")
    lines: Counter = Counter()
    calls: Counter = Counter()

    def tracer(frame, event, arg):
        where = _traced(frame.f_code.co_filename)
        if where is None:
            return None
        name = frame.f_code.co_name
        if event == "call" and not name.startswith("<"):
            calls[(where, name, "calls")] += 1
            for value in frame.f_locals.values():
                if isinstance(value, np.ndarray) and value.ndim:
                    calls[(where, name, "array rows")] += int(value.shape[0])
        elif event == "line":
            lines[where] += 1
        return tracer

    with Ledger(config.ledger, epsilon_budget=1.0) as ledger:
        gc.collect()
        gc.disable()
        sys.settrace(tracer)
        try:
            owners = deferred.load(schema, ledger)
        finally:
            sys.settrace(None)
            gc.enable()
    assert sum(o.n_rows for o in owners) == n_rows
    return lines, calls


def _differences(a: Counter, b: Counter) -> dict:
    return {k: (a[k], b[k]) for k in sorted(set(a) | set(b), key=str) if a[k] != b[k]}


@pytest.mark.parametrize(
    ("shape", "work_rows"),
    [("clean", None), ("filled", None), ("quoted", None), ("clean", 1024)],
    ids=["clean", "filled-cell", "quoted-cell", "work-rows"],
)
def test_the_whole_load_is_the_cells_work_whatever_the_rows(tmp_path, shape, work_rows):
    (tmp_path / "warm").mkdir()
    _traced_load(tmp_path / "warm", 3000, shape, work_rows)  # numpy's first calls import what they need
    small_lines, small_calls = _traced_load(tmp_path, 2600, shape, work_rows)  # 260 rows an owner: cells of 512
    large_lines, large_calls = _traced_load(tmp_path, 4000, shape, work_rows)  # 400 rows an owner: cells of 512
    assert _differences(small_calls, large_calls) == {}
    assert _differences(small_lines, large_lines) == {}
