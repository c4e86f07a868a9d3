"""Audit 11: ``--shards A:B`` on a node's own file cannot make two nodes serve the same rows.

With ``--data``, a node's partition is of its own file: ``--shards K`` splits the file among K owners, and
``--shards A:B`` hosted owners A..B-1 of a partition into B (``--n-owners`` is for built-in data sets and
was ignored). An operator who split one file between two nodes as the built-in data sets are split
(``--shards 0:2`` and ``--shards 2:4``, as ``deploy/owner_entry.py`` gives nodes their slots) got a first node
holding *every* row (owners 0 and 1 of two) and a second holding half of them again: each node has its own
ledger (``privfed.common.files.sole_writer``), so every row of the second node had two budgets (README, "Budgets
follow the rows": rows are linked only within one node's ledger). Now ``--shards A:B`` with ``--data`` and
``A > 0`` is refused when the node starts, before it dials out; ``0:K`` is ``K``.

In process, as ``privfed owner`` loads its owners (:func:`privfed.owner.main.hosted_owners` and the deferred
load, each node on its own ledger file).
"""

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.ledger import Ledger
from privfed.owner.main import OwnerConfig, hosted_owners

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process


def _rows_hosted(tmp_path, name, shards):
    """The rows node ``name`` hosts with ``--shards shards`` on the shared file, each as bytes."""
    config = OwnerConfig(
        coordinator="127.0.0.1:1",
        name=name,
        ledger=tmp_path / f"{name}.sqlite",
        epsilon_budget=1.0,
        data=str(tmp_path / "rows.csv"),
        bounds="0:1",
        shards=shards,
    )
    deferred = hosted_owners(config)
    ledger = Ledger(config.ledger, epsilon_budget=1.0)
    try:
        owners = deferred.load(None, ledger)  # the coordinator sent no schema: --bounds 0:1's
    finally:
        ledger.close()
    return {row.tobytes() for o in owners for row in o.X}


def test_two_nodes_given_slots_of_one_file_never_both_serve_a_row(tmp_path):
    X = np.random.default_rng(0).uniform(0, 1, (40, 2))
    (tmp_path / "rows.csv").write_text("".join(f"{a!r},{b!r},{i % 2}\n" for i, (a, b) in enumerate(X.tolist())))
    first = _rows_hosted(tmp_path, "owner-0", "0:2")
    assert len(first) == 40  # 0:2 is 2: the file's rows, split between two owners
    try:
        second = _rows_hosted(tmp_path, "owner-1", "2:4")
    except ConfigError as exc:
        assert "--shards '2:4' with --data" in str(exc)
        return
    both = first & second
    assert not both, f"{len(both)} of the file's rows are served by both nodes, each with a ledger of its own"


def test_a_count_and_zero_based_range_still_host_every_row(tmp_path):
    X = np.random.default_rng(1).uniform(0, 1, (10, 2))
    (tmp_path / "rows.csv").write_text("".join(f"{a!r},{b!r},{i % 2}\n" for i, (a, b) in enumerate(X.tolist())))
    assert (
        _rows_hosted(tmp_path, "owner-0", "3") == _rows_hosted(tmp_path, "owner-1", "0:3") == {r.tobytes() for r in X}
    )
    with pytest.raises(ConfigError, match="--shards"):
        _rows_hosted(tmp_path, "owner-2", "1:3")
