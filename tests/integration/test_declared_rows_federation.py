"""``privfed owner --work-rows P`` over real processes and sockets (tests/adversary/test_declared_rows.py checks the
work itself, in process, with no clock).

Two owner nodes of different row counts (300 and 75: cells 512 and 128) answer an NCC job's padded shares, the one
release whose length is a row count: with ``--work-rows 512`` both carry 512 reports, which the coordinator accepts
(a power of two: ``NccShareTask.check_public_count``); without it each carries its own cell's. A declared count
that is not a power of two, or below the node's rows (a partition's, or its own file's), stops the node at its start
with a one-line error (exit 2), before it reaches the coordinator.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from fedharness import Federation, owner_cmd

from privfed.common.identity import owner_id
from privfed.common.tasks import Refusal
from privfed.owner.data import federation_split
from privfed.server.strategies import make_strategy

pytestmark = pytest.mark.slow

#: 300 training rows: node owner-0 hosts them all as one owner, owner-1 a quarter of them (75 rows).
SPLIT = ["--dataset", "synthetic", "--n-samples", "400", "--seed", "3", "--test-fraction", "0.25"]
NODES = {"owner-0": ("1", 300), "owner-1": ("4", 75)}  # node -> (--n-owners, the one hosted owner's rows)


def _lengths(tmp_path, extra: list[str]) -> list[int]:
    """The reports each node's owner carried in its NCC share (joint labels: padded), in node order."""
    _, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=400)
    strategy = make_strategy("ncc", mechanism="pm", epsilon=2.0, labels="joint", n_classes=2, bounds=test.bounds)
    owners = [owner_id(node, 0) for node in NODES]
    fed = Federation(tmp_path)
    try:
        for node, (n_owners, _) in NODES.items():
            fed.spawn(node, n_owners=int(n_owners), shards="0:1", budget=5.0, dataset=SPLIT, extra=extra)
        fed.server.dispatcher.wait_for_owners(2, 60)
        result = fed.server.dispatcher.run(strategy.configure(owners, "r1"), timeout=60)
    finally:
        fed.close()
    payloads = {r.owner_id: r.payload for r in result.results.values()}
    assert not any(isinstance(p, Refusal) for p in payloads.values()), payloads
    return [int(np.size(payloads[o].reports)) for o in owners]


def test_owners_of_other_cells_send_the_declared_count_of_reports(tmp_path):
    assert _lengths(tmp_path / "declared", ["--work-rows", "512"]) == [512, 512]


def test_positive_control_without_it_each_sends_its_cell(tmp_path):
    assert _lengths(tmp_path / "cells", []) == [512, 128]


@pytest.mark.parametrize(
    ("rows", "message"),
    [("100", "--work-rows must be a power of two"), ("256", "--work-rows 256 is below an owner's 300 rows")],
)
def test_a_declared_count_that_cannot_hold_the_rows_stops_the_node(tmp_path, rows, message):
    cmd = owner_cmd(
        1, "owner-0", n_owners=1, shards="0:1", ledger=tmp_path / "l.sqlite", budget=1.0, certs=None, dataset=SPLIT
    )
    done = subprocess.run([*cmd, "--work-rows", rows], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_an_own_file_above_the_declared_count_stops_the_node_before_it_dials_out(tmp_path):
    """200 rows of a file, read before the node registers: ``--work-rows 128`` stops it with the error, not with
    the unreachable coordinator's (port 1); split among 2 owners (100 rows each) the same count is accepted."""
    rng = np.random.default_rng(0)
    rows = [
        f"{a:.3f},{b:.3f},{c}"
        for a, b, c in zip(rng.uniform(0, 1, 200), rng.uniform(0, 1, 200), rng.integers(0, 2, 200))
    ]
    data = tmp_path / "a.csv"
    data.write_text("x0,x1,label\n" + "\n".join(rows) + "\n")

    def start(*extra: str) -> subprocess.CompletedProcess:
        cmd = [
            *owner_cmd(
                1,
                "owner-0",
                n_owners=1,
                shards="1",
                ledger=tmp_path / f"l{len(extra)}.sqlite",
                budget=1.0,
                certs=None,
                dataset=["--data", str(data), "--bounds", "0:1"],
            ),
            "--work-rows",
            "128",
            "--connect-timeout",  # the last given counts: the accepted node gives up on port 1 at once
            "1",
            *extra,
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    alone = start()
    assert alone.returncode == 2 and "--work-rows 128 is below an owner's 200 rows" in alone.stderr, alone.stderr
    assert "unreachable" not in alone.stderr
    halves = start("--shards", "2")
    assert "--work-rows" not in halves.stderr and "unreachable" in halves.stderr, halves.stderr
