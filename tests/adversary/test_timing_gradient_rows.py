"""Audit 10: an LR gradient's work follows its owners' public row cell, not their counts.

``lr_gradient`` (LDP gradient descent, issue 22) averages the logistic gradient over an owner's rows. Its
computation took the owner's ``n`` rows as they were, and a node computed its co-hosted owners together only
when they held *exactly* as many rows (``np.stack`` needs one shape): a coordinator timing a node's answer
learned how many distinct row counts its owners have (``--shards 3`` of 1000 rows: 334, 333, 333, two batched
calls; of 999 rows, one), and one owner's gradient pass grew with ``n`` inside a cell. Now owners are batched
by :func:`~privfed.common.work_rows.work_rows`' cell and each gradient runs on the cell's rows, the padding
masked out of the mean (:func:`~privfed.common.learners.ldp_gd.gradient_shares`, ``counts``).

Checked without clocks, on real owner cores: every call of the per-row gradient (``logistic_gradients``) is
recorded with the shape it works on; nodes of owners of (300, 300), (300, 299) and (270, 257) rows, and lone
owners of 300 and 270 rows, must make the same calls. The release itself is checked against the plain mean
of the real rows at ε = ∞ (no noise).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.learners import ldp_gd
from privfed.common.ledger import Ledger
from privfed.common.tasks import LrGradientTask, Refusal, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

D, K = 3, 2
BOUNDS = Bounds.of(-2.0, 2.0, D)
THETA = np.array([[0.3, -0.5, 0.2, 0.7]])


def _owners(counts: tuple[int, ...]) -> list[LocalOwner]:
    owners = []
    for i, n in enumerate(counts):
        rng = np.random.Generator(np.random.PCG64(100 * i + n))
        X, y = rng.uniform(-2, 2, (n, D)), rng.integers(0, K, n)
        owners.append(
            LocalOwner(
                f"node-0.o{i:05d}",
                X,
                y,
                np.random.Generator(np.random.PCG64(i)),
                K,
                BOUNDS,
                row_keys=tuple(row_digests(X, y)),
            )
        )
    return owners


def _answer(counts: tuple[int, ...], monkeypatch, epsilon: float = 1.0) -> tuple[list[tuple[int, ...]], list]:
    """The shapes every per-row gradient call of a node's answer worked on, and the results."""
    shapes: list[tuple[int, ...]] = []
    real = ldp_gd.logistic_gradients

    def traced(theta, T, y, n_classes):
        shapes.append(np.shape(T))
        return real(theta, T, y, n_classes)

    owners = _owners(counts)
    core = OwnerCore(owners, Ledger(":memory:", epsilon_budget=math.inf, delta_budget=1e-3))
    spec = LrGradientTask("pm", epsilon, THETA, 4.0, K, BOUNDS)
    with monkeypatch.context() as m:
        m.setattr(ldp_gd, "logistic_gradients", traced)
        results = core.answer([Task(f"t{i}", o.owner_id, "run-1", spec) for i, o in enumerate(owners)]).results
    assert not any(isinstance(r.payload, Refusal) for r in results), results
    return shapes, results


@pytest.mark.parametrize("counts", [((300, 300), (300, 299), (270, 257)), ((300,), (270,))], ids=["node", "alone"])
def test_the_gradient_works_on_the_cell_whatever_the_counts(monkeypatch, counts):
    traces = [_answer(c, monkeypatch)[0] for c in counts]
    assert traces[0], "no gradient call recorded"
    assert all(t == traces[0] for t in traces[1:]), traces
    assert all(shape[0] % 512 == 0 for shape in traces[0]), traces[0]


def test_the_padded_gradient_is_the_mean_of_the_real_rows(monkeypatch):
    """At ε = ∞ the report is the clipped mean gradient itself: the padding adds nothing to it."""
    owners = _owners((300, 299))
    _, results = _answer((300, 299), monkeypatch, epsilon=math.inf)
    for owner, result in zip(owners, results, strict=True):
        rows = ldp_gd.logistic_gradients(THETA, BOUNDS.to_unit(owner.X), owner.y, K)
        np.testing.assert_allclose(result.payload.reports[0], np.clip(rows.mean(axis=0), -1, 1), atol=1e-6)
