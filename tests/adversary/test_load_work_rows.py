"""A node's load of its own rows, after its registration, is the work of its owners' public row cells.

A node given ``--data`` registers first and then reads its rows by the federation schema the coordinator sent
(:func:`privfed.owner.main.hosted_owners`, the deferred load): parse, check, digest. The coordinator sees the
gap between the registration and the node's first call, and the load took ~7.5 us a row (12 ms for 100 rows,
30 ms for 3000, 226 ms for 30000, measured over real processes), so the gap told the node's row count, which
the federation keeps to each owner's public cell (``privfed.common.work_rows``). Now the load reads and
digests copies of a row up to the cells' sum (:func:`privfed.owner.data.pad_load_work`): two nodes whose owners
hold different row counts in the same cells do the same work, counted here row by row in the two steps that
follow the rows (a differential test, no clock); over processes, 2600 and 4000 rows over 10 owners (cells of
512) both took 40 ms.

In process, as ``privfed owner`` loads its owners.
"""

import numpy as np
import pytest
from nodeload import offline_node

from privfed.common.ledger import Ledger
from privfed.common.schema import FederationSchema
from privfed.owner import data
from privfed.owner.main import hosted_owners

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process


def _load(tmp_path, monkeypatch, n_rows: int, shards: int, work_rows: int | None = None):
    """Load a node of ``shards`` owners over a file of ``n_rows`` rows; the rows the schema read and the rows
    digested, counted, and the owners."""
    rng = np.random.default_rng(n_rows)
    path = tmp_path / f"rows-{n_rows}.csv"
    rows = rng.uniform(0.0, 1.0, (n_rows, 3))
    labels = rng.integers(0, 2, n_rows)
    path.write_text("a,b,c,label\n" + "".join(f"{x[0]},{x[1]},{x[2]},{y}\n" for x, y in zip(rows, labels)))
    read, digested = [], []
    load, digests = FederationSchema.load, data.row_digests
    monkeypatch.setattr(
        FederationSchema, "load", lambda self, raw, *a, **k: read.append(len(raw.lines)) or load(self, raw, *a, **k)
    )
    monkeypatch.setattr(data, "row_digests", lambda X, y: digested.append(len(X)) or digests(X, y))
    config = offline_node(
        tmp_path, path, f"node-{n_rows}", f"node-{n_rows}.sqlite", bounds="0:1", shards=str(shards), work_rows=work_rows
    )
    deferred = hosted_owners(config)
    read.clear()  # the local --bounds check before the node dials out: not seen by the coordinator
    with Ledger(config.ledger, epsilon_budget=1.0) as ledger:
        owners = deferred.load(None, ledger)  # after the registration: the coordinator sent no schema
    return sum(read), sum(digested), owners


@pytest.mark.parametrize(
    ("small", "large", "shards", "work_rows"), [(300, 500, 1, None), (2600, 4000, 10, None), (40, 90, 2, 64)]
)
def test_two_nodes_with_rows_in_the_same_cells_do_the_same_work(tmp_path, monkeypatch, small, large, shards, work_rows):
    low = _load(tmp_path, monkeypatch, small, shards, work_rows)
    high = _load(tmp_path, monkeypatch, large, shards, work_rows)
    cells = shards * (work_rows or 1 << (-(-large // shards) - 1).bit_length())
    header = 1
    assert low[:2] == high[:2] == (2 * header + cells, cells), (low[:2], high[:2])  # the real and the padding pass
    assert sum(o.n_rows for o in low[2]) == small and sum(o.n_rows for o in high[2]) == large  # nothing added


def test_the_padding_leaves_the_owners_rows_as_they_were(tmp_path, monkeypatch):
    import privfed.owner.main as main

    (tmp_path / "padded").mkdir()
    (tmp_path / "unpadded").mkdir()
    *_, padded = _load(tmp_path / "padded", monkeypatch, 300, 3)
    monkeypatch.setattr(main, "pad_load_work", lambda *args, **kw: None)
    *_, unpadded = _load(tmp_path / "unpadded", monkeypatch, 300, 3)
    for p, u in zip(padded, unpadded, strict=True):
        assert p.owner_id == u.owner_id and p.row_keys == u.row_keys
        assert np.array_equal(p.X, u.X) and np.array_equal(p.y, u.y)
