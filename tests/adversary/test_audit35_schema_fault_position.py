"""Audit 35 (A35-1): the time of a node's load, and of its ``schema_mismatch``, must not tell where in its file a
fault lies.

A node with ``--data`` and no ``--schema`` reads its rows by the coordinator's schema after it registers, and the
coordinator times the gap to the node's first call (``pad_load_work``, audits 26/27: the work is its owners'
cells', whatever the row count). The coordinator chooses the schema: a categorical feature whose categories leave
out one of the rows' values (a column of 0, 1 and 2 read as categories ``[0, 1]``) makes the first row holding a 2
a fault. The cell-by-cell reader stopped each column at its first bad cell (walkthrough 11's W11-10 made each
column, not only the first, read to its own first fault), the C reader's one-hot too, and the padding's copies
fail where the rows did: the load's work counted the rows before the first row of a 2 (twice), so the time of
``schema_mismatch`` told the coordinator where that row is, one number about the rows per node, where the README
promises "one bit per node ... with no row, label, line or count". A quoted cell's line (``_fast``'s first look)
stopped the look at the first such line the same way, on a file the schema accepts.

Counted here, no clock: every line of the project's Python code run (per file) and every call (per function)
while two nodes of 10 owners over 3000 rows each (cells of 512) load their rows after registration, their files
alike but for the line of the fault (line 10 against line 2900).
"""

from __future__ import annotations

import gc
import sys
from collections import Counter

import numpy as np
import pytest
from differential import _traced
from nodeload import offline_node

from privfed.common.errors import ConfigError
from privfed.common.ledger import Ledger
from privfed.common.schema import FederationSchema
from privfed.owner.main import hosted_owners

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

SCHEMA = """features = ["a", "b", "c"]
classes = [0, 1]
header = true
label = "label"
[bounds]
lo = 0
hi = 2
"""
#: A schema that fills a missing b.
FILLED = SCHEMA + "[fill]\nb = 0.5\n"
#: The coordinator's hostile schema: feature a read as categories 0 and 1, leaving out the rows' 2.
CATEGORIES = SCHEMA + '[categories]\na = ["0", "1"]\n'
N_ROWS = 3000


def _write(path, fault_at: int, shape: str) -> None:
    rng = np.random.default_rng(7)  # the same rows for both nodes, but for the fault's line
    a, x, y = rng.integers(0, 2, N_ROWS), rng.uniform(0.0, 1.0, (N_ROWS, 2)), rng.integers(0, 2, N_ROWS)
    lines = [f"{ai},{v[0]:.6f},{v[1]:.6f},{label}" for ai, v, label in zip(a, x, y)]
    if shape == "category":  # a value the coordinator's categories leave out
        lines[fault_at] = "2," + lines[fault_at].split(",", 1)[1]
    elif shape == "missing":  # a missing cell: filled by a schema that declares a fill, else a fault
        a_cell, _, rest = lines[fault_at].partition(",")
        lines[fault_at] = f"{a_cell},NA,{rest.split(',', 1)[1]}"
    elif shape == "quoted":  # a quoted cell: read cell by cell, accepted
        lines[fault_at] = '"' + lines[fault_at].replace(",", '",', 1)
    path.write_text("a,b,c,label\n" + "\n".join(lines) + "\n")


def _traced_load(tmp_path, fault_at: int, shape: str, schema_text: str) -> tuple[Counter, Counter, bool]:
    """The work of a node of 10 owners loading its rows by ``schema_text`` after its registration: the project's
    Python lines run, per file, and its calls, per function; and whether the schema refused the rows."""
    path = tmp_path / f"rows-{fault_at}-{shape}.csv"
    _write(path, fault_at, shape)
    config = offline_node(tmp_path, path, f"node-{fault_at}", f"node-{fault_at}-{shape}.sqlite")
    deferred = hosted_owners(config)
    schema = FederationSchema.parse(schema_text, source="the coordinator's schema")
    lines: Counter = Counter()
    calls: Counter = Counter()

    def tracer(frame, event, arg):
        where = _traced(frame.f_code.co_filename)
        if where is None or where.startswith("numpy/"):
            return None
        if event == "call" and not frame.f_code.co_name.startswith("<"):
            calls[(where, frame.f_code.co_name)] += 1
        elif event == "line":
            lines[where] += 1
        return tracer

    refused = False
    with Ledger(config.ledger, epsilon_budget=1.0) as ledger:
        gc.collect()
        gc.disable()
        sys.settrace(tracer)
        try:
            deferred.load(schema, ledger)
        except ConfigError:
            refused = True
        finally:
            sys.settrace(None)
            gc.enable()
    return lines, calls, refused


def _differences(a: Counter, b: Counter) -> dict:
    return {k: (a[k], b[k]) for k in sorted(set(a) | set(b), key=str) if a[k] != b[k]}


def _same_work(tmp_path, shape: str, schema: str, refused: bool) -> None:
    (tmp_path / "warm").mkdir()
    _traced_load(tmp_path / "warm", 100, shape, schema)  # numpy's first calls import what they need
    early_lines, early_calls, early_refused = _traced_load(tmp_path, 10, shape, schema)
    late_lines, late_calls, late_refused = _traced_load(tmp_path, 2900, shape, schema)
    assert early_refused == late_refused == refused
    assert _differences(early_calls, late_calls) == {}
    assert _differences(early_lines, late_lines) == {}


def test_a_refusal_by_the_coordinators_categories_does_not_count_the_rows_before_the_fault(tmp_path):
    """A35-1: the coordinator's categories leave out a value of column a; the node's load (its rows and their
    padding's copies) must do the same work wherever the first row of that value lies."""
    _same_work(tmp_path, "category", CATEGORIES, True)


@pytest.mark.parametrize(
    ("shape", "schema", "refused"),
    [("quoted", SCHEMA, False), ("missing", FILLED, False), ("missing", SCHEMA, True)],
    ids=["quoted-cell", "filled-cell", "missing-cell-refused"],
)
def test_a_cell_read_cell_by_cell_does_not_tell_its_line(tmp_path, shape, schema, refused):
    """A35-2: a quoted cell's or a missing cell's line, in a file the coordinator's schema accepts (the missing cell
    filled) or refuses (no fill): the fast reader's try and the copies' take the same branches wherever it lies
    (numpy's C parser, which stops at a missing number, is not traced here)."""
    _same_work(tmp_path, shape, schema, refused)
