"""A ``labels="rr"`` NCC share must not show its owner's row count by its length (a value channel).

The attack: a coordinator sends the same rr ``ncc_share`` task to two owners and reads each reply's number of
reports. Before :mod:`privfed.common.learners.ncc_rr` an rr share was one report per row, so owners of 37 and 40
rows answered 37 and 40 reports: the private count, exactly, outside any ledger. Now both answer the public
``work_rows(n, max_owner_rows)`` reports (64 here, the cell of both, or the job's bound inside the cell), dummies
labelled ⊥ through a ``K + 1``-ary k-RR; with one row per owner (``max_owner_rows == 1``) the K-ary k-RR is kept
and no dummy is sent. Real owner cores (``differential.owner_core``), their replies through the wire's serde.
"""

from __future__ import annotations

import numpy as np
import pytest
from differential import BOUNDS, D, K, owner_core, skeleton

from privfed.common.tasks import NccShareTask, Result, Task
from privfed.proto import serde

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process


def _rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.Generator(np.random.PCG64(seed))
    return rng.uniform(0.0, 1.0, (n, D)), rng.integers(0, K, n)


def _reply(n: int, spec: NccShareTask, seed: int = 0):
    """What a real owner core of ``n`` rows answers ``spec``, and that answer on the wire."""
    owner, core = owner_core(*_rows(n, seed))
    (result,) = core.answer([Task("t", owner.owner_id, "run-1", spec)]).results
    return result.payload, serde.result_to_proto(Result("t", owner.owner_id, result.payload))


@pytest.mark.parametrize(
    ("bound", "length"),
    [(None, 64), (1000, 64), (38, 38)],  # the cell of 37 and 40 rows; a job's bound inside it
)
@pytest.mark.parametrize("mechanism", ["pm", "duchi", "laplace"])
def test_owners_of_37_and_40_rows_answer_as_many_reports(bound, length, mechanism):
    spec = NccShareTask(mechanism, 1.0, "rr", 0.5, K, BOUNDS, max_owner_rows=bound)
    (a, wire_a), (b, wire_b) = _reply(37, spec), _reply(40, spec)
    assert a.reports.shape == b.reports.shape == (length, D), (a.reports.shape, b.reports.shape)
    assert a.labels.shape == b.labels.shape == (length,)
    # the wire skeleton (differential.py): every length, shape and scalar but the released values
    assert skeleton(wire_a) == skeleton(wire_b)
    assert spec.label_values() == K + 1  # ⊥ is a possible report, of a real row or of a dummy
    assert set(np.unique(np.concatenate([a.labels, b.labels]))) <= set(range(K + 1))


def test_the_dummies_are_not_last():
    """The padded share is shuffled after the reports: the ⊥ dummies of 37 rows in 64 are not its tail."""
    spec = NccShareTask("pm", 30.0, "rr", 30.0, K, BOUNDS)  # at ε = 30 nearly every label is its input
    share, _ = _reply(37, spec)
    bottom = np.flatnonzero(share.labels == K)
    assert bottom.size >= 20 and not np.array_equal(bottom, np.arange(64 - bottom.size, 64)), bottom


def test_one_row_per_owner_keeps_the_k_ary_response_and_sends_no_dummy():
    spec = NccShareTask("pm", 1.0, "rr", 0.5, K, BOUNDS, max_owner_rows=1)
    assert spec.label_values() == K and spec.label_response().n_classes == K
    labels = []
    for seed in range(40):
        share, _ = _reply(1, spec, seed)
        assert share.reports.shape == (1, D)
        labels.append(int(share.labels[0]))
    assert set(labels) == set(range(K))  # both classes come out, never a ⊥ = K
    empty, _ = _reply(0, spec)  # a shard left empty: one report too, a dummy of a uniform class
    assert empty.reports.shape == (1, D) and 0 <= int(empty.labels[0]) < K
