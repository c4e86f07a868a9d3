"""Audit 26: a node's load of its own rows after its registration is the work of its owners' cells on every path.

``pad_load_work`` (``owner/data.py``) pads the deferred load with copies of rows up to the owners' public row
cells, so the gap between a node's registration and its first call does not tell its row count. The schema reads
a clean file with numpy's C parser, and a file with a missing (filled) cell or a quoted cell cell by cell, ~5 us a
row slower (``common/schema/table.py``: ``_fast``, ``_slow``). Before audit 26 the padding copied the file's last
line alone: a file with a missing cell in any other line was read cell by cell and its padding by the C parser, so
the load's time again grew with the real rows (in process, 2600 rows took 26 ms and 4000 rows 33 ms, both in
cells of 512 over 10 owners; a clean file: 16 ms and 16 ms). And a file the coordinator's schema refuses (a class
the schema leaves out: the coordinator chooses the schema) was read to its end with no padding at all, so the
node's ``schema_mismatch`` came after a gap that counted its rows (3.3 ms against 4.9 ms).

Counted here, no clock: the rows each of the schema's two readers reads, for two nodes whose owners hold
different row counts in the same cells, on a clean file, a file with a filled cell, a file with a quoted cell,
and a file the coordinator's schema refuses.
"""

from __future__ import annotations

import numpy as np
import pytest
from nodeload import offline_node

from privfed.common.errors import ConfigError
from privfed.common.ledger import Ledger
from privfed.common.schema import FederationSchema
from privfed.common.schema import table as schema_table
from privfed.owner.main import hosted_owners

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

SCHEMA = """features = ["a", "b", "c"]
classes = [0, 1]
header = true
label = "label"
[bounds]
lo = 0
hi = 1
[fill]
a = 0.5
"""
#: The coordinator's hostile schema: a class list without the rows' class 1, so the rows do not fit it.
REFUSING = SCHEMA.replace("classes = [0, 1]", "classes = [0, 7]")
#: The schema's two readers, as the module defines them (each load below wraps these, not an earlier wrapper).
FAST, SLOW = schema_table._fast, schema_table._slow


def _write(path, n_rows: int, shape: str) -> None:
    rng = np.random.default_rng(n_rows)
    x, y = rng.uniform(0.0, 1.0, (n_rows, 3)), rng.integers(0, 2, n_rows)
    y[7] = 1  # at least one row of class 1 (the refusing schema's missing class)
    lines = [f"{v[0]:.6f},{v[1]:.6f},{v[2]:.6f},{label}" for v, label in zip(x, y)]
    if shape == "filled":  # a missing cell the schema fills, in a line other than the last
        lines[5] = "NA," + lines[5].split(",", 1)[1]
    elif shape == "quoted":
        lines[3] = '"' + lines[3].replace(",", '",', 1)
    path.write_text("a,b,c,label\n" + "\n".join(lines) + "\n")


def _load(tmp_path, monkeypatch, n_rows: int, shape: str, schema_text: str) -> dict[str, int]:
    """The rows the C parser and the cell-by-cell reader read when a node of 10 owners over ``n_rows`` rows loads
    them by the coordinator's ``schema_text`` (after its registration)."""
    path = tmp_path / f"rows-{n_rows}-{shape}.csv"
    _write(path, n_rows, shape)
    counted = {"fast": 0, "slow": 0}
    fast, slow = FAST, SLOW

    def counting_fast(schema, body, *args):
        out = fast(schema, body, *args)  # raises _SlowPath when it cannot read the file as is: nothing read
        counted["fast"] += len(body)
        return out

    def counting_slow(schema, body, *args):
        counted["slow"] += len(body)
        return slow(schema, body, *args)

    monkeypatch.setattr(schema_table, "_fast", counting_fast)
    monkeypatch.setattr(schema_table, "_slow", counting_slow)
    config = offline_node(tmp_path, path, f"node-{n_rows}", f"node-{n_rows}-{shape}.sqlite")
    deferred = hosted_owners(config)  # no local schema: nothing read before the registration
    assert counted == {"fast": 0, "slow": 0}
    with Ledger(config.ledger, epsilon_budget=1.0) as ledger:
        try:
            deferred.load(FederationSchema.parse(schema_text, source="the coordinator's schema"), ledger)
        except ConfigError:
            assert schema_text == REFUSING
        else:
            assert schema_text != REFUSING
    return counted


@pytest.mark.parametrize(
    ("shape", "schema"),
    [("clean", SCHEMA), ("filled", SCHEMA), ("quoted", SCHEMA), ("clean", REFUSING)],
    ids=["clean", "filled-cell", "quoted-cell", "refused-by-the-schema"],
)
def test_two_nodes_with_rows_in_the_same_cells_read_alike_on_every_path(tmp_path, monkeypatch, shape, schema):
    small = _load(tmp_path, monkeypatch, 2600, shape, schema)  # 260 rows an owner: cells of 512
    large = _load(tmp_path, monkeypatch, 4000, shape, schema)  # 400 rows an owner: cells of 512
    assert small == large, (small, large)
    assert sum(small.values()) >= 10 * 512 - 1, small  # the cells' rows (a refused file's header counted as a row)
