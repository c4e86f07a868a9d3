"""Audit 28, A28-6: null-space rows kept in the model's box (6d74808, 0fd143f) against two owners whose query rows
differ only in a direction the model does not read (the confidential one).

``clean_queries`` with the tool's defaults (the score grid on, the model's bounds): the rows sent must be the same
bytes, the rows moved into the box and the rows left outside the same, and, at ε = 0, every row sent (moved or
not) must hide the local confidential score ``A_cᵀ(x̃ − c)``. The box is narrow enough that most cleaned rows leave
it, so :func:`null_space_rows_in_box` is exercised both ways. Control: a difference the model reads changes the rows.
In process, the real cleaning code; the wire's float64 rows are the arrays' bytes."""

from __future__ import annotations

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.owner.query_cleaning import DEFAULT_SCORE_BITS, clean_queries, public_centre


def _setting(seed: int, F: int = 6):
    """F = 6: most cleaned rows leave the box and a row of it keeps both scores (moved inside); F = 3: the two
    desired and one confidential score fix the row, so one that leaves the box is sent as cleaned, outside."""
    rng = np.random.Generator(np.random.PCG64(seed))
    read = F - 2 if F > 3 else 2
    A_d = np.zeros((F, 2))
    A_d[:read] = rng.standard_normal((read, 2))  # the model reads the first columns
    X_own = rng.uniform(0.0, 1.0, (200, F))
    Y_conf = (X_own[:, -1] - 0.7 * X_own[:, read] + 0.3 * X_own[:, 0] > 0.1).astype(float)[:, None]
    bounds = Bounds(np.zeros(F), np.ones(F))
    X0 = rng.choice([0.05, 0.95], (120, F))  # rows near the box's corners: their cleaned rows often leave it
    hidden = np.zeros(F)
    hidden[read:] = (1.0, -0.7)[: F - read]  # the confidential label's direction, outside what the model reads
    X1 = X0 + rng.uniform(-0.5, 0.5, 120)[:, None] * hidden
    return A_d, X_own, Y_conf, bounds, X0, X1


@pytest.mark.parametrize("method", ["subspace", "generalized"])
@pytest.mark.parametrize("epsilon", [0.0, 0.05])
@pytest.mark.parametrize("seed, F", [(1, 6), (2, 6), (3, 3), (4, 3)])
def test_rows_that_differ_in_the_confidential_direction_go_out_as_the_same_bytes(method, epsilon, seed, F):
    A_d, X_own, Y_conf, bounds, X0, X1 = _setting(seed, F)
    centre = public_centre(bounds)
    out = [
        clean_queries(
            X,
            A_d,
            X_own,
            Y_conf,
            centre=centre,
            epsilon=epsilon,
            method=method,
            bounds=bounds,
            score_bits=DEFAULT_SCORE_BITS,
        )  # fmt: skip
        for X in (X0, X1)
    ]
    assert out[0].rows.tobytes() == out[1].rows.tobytes()
    assert out[0].projected == out[1].projected
    sent = out[0].rows
    outside = np.any((sent < bounds.lo) | (sent > bounds.hi), axis=1)
    assert np.count_nonzero(outside) == out[0].projected
    if epsilon == 0.0 and method == "subspace":  # Algorithm 1's complete privacy, every row sent
        conf = np.abs((sent - centre) @ out[0].A_c)[:, 0]
        assert np.all(conf <= 1e-8 * max(1.0, float(np.max(np.abs(out[0].centred @ out[0].A_c))))), conf.max()


def test_control_a_difference_the_model_reads_changes_the_rows():
    A_d, X_own, Y_conf, bounds, X0, _ = _setting(1)
    X1 = X0.copy()
    X1[:, 0] += 0.2
    rows = [
        clean_queries(
            X,
            A_d,
            X_own,
            Y_conf,
            centre=public_centre(bounds),
            epsilon=0.0,
            method="subspace",
            bounds=bounds,
            score_bits=DEFAULT_SCORE_BITS,
        ).rows  # fmt: skip
        for X in (X0, X1)
    ]
    assert rows[0].tobytes() != rows[1].tobytes()
