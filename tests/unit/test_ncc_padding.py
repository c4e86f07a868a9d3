"""``public_count_rows``: an owner's rows padded (or subsampled) to the public count, every pass over that count.

The definition it must keep: the kept rows in order, then ``m - n`` dummies (the bounds' midpoint, weight 0, labels
drawn uniformly or ⊥). A label is drawn for each of the ``m`` reports, the real rows' unused, so the draws are as
many whatever ``n`` is; the dummies take the last ``m - n`` of them."""

from __future__ import annotations

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.learners.ncc_padding import dummies, public_count_rows
from privfed.common.work_rows import release_rows, work_rows

BOUNDS = Bounds(np.array([-1.0, 0.0, 2.0]), np.array([1.0, 4.0, 3.0]))
K = 3


def by_definition(X, y, w, bound, rng, dummy_label):
    keep, m_dummies = release_rows(X.shape[0], bound, rng)
    middle, labels, zeros = dummies(keep.size + m_dummies, bounds=BOUNDS, n_classes=K, rng=rng, dummy_label=dummy_label)
    dummy = slice(keep.size, None)
    return (
        np.concatenate([X[keep], middle[dummy]]),
        np.concatenate([y[keep], labels[dummy]]),
        np.concatenate([w[keep], zeros[dummy]]),
    )


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8, 37, 64, 100])
@pytest.mark.parametrize("bound", [None, 1, 6, 40])
@pytest.mark.parametrize("dummy_label", [None, K])
def test_the_rows_labels_and_weights_are_the_definitions(n, bound, dummy_label):
    data = np.random.default_rng(n)
    X, y, w = data.uniform(-1, 4, (n, 3)), data.integers(0, K, n), data.uniform(0, 1, n)
    got = public_count_rows(
        X, y, w, bound=bound, bounds=BOUNDS, n_classes=K, rng=np.random.default_rng(9), dummy_label=dummy_label
    )
    expected = by_definition(X, y, w, bound, np.random.default_rng(9), dummy_label)
    assert got[0].shape == (work_rows(n, bound), 3)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e)
    assert got[1].dtype == np.int64


@pytest.mark.parametrize("bound", [None, 6, 40])
def test_the_draws_do_not_follow_n_within_its_cell(bound):
    """Owners of 33 and 64 rows (one cell) leave the generator in the same state: as many draws whatever ``n``."""
    states = set()
    for n in (33, 40, 64):
        rng = np.random.default_rng(3)
        public_count_rows(
            np.zeros((n, 3)), np.zeros(n, dtype=np.int64), None, bound=bound, bounds=BOUNDS, n_classes=K, rng=rng
        )
        states.add(rng.integers(0, 2**62))
    assert len(states) == 1


def test_no_weights_is_weight_one_for_each_row():
    X, y = np.random.default_rng(1).uniform(0, 1, (5, 3)), np.arange(5) % K
    got = public_count_rows(X, y, None, bound=None, bounds=BOUNDS, n_classes=K, rng=np.random.default_rng(2))
    np.testing.assert_array_equal(got[2], [1.0] * 5 + [0.0] * 3)
