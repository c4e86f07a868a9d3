"""Decision stumps from weighted cross tables: SPEC §6 example, tie rules, owner shares, invalid input."""

import json
import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.stump import (
    Stump,
    binarize,
    cross_tables,
    select_stump,
    table_errors,
    thresholds,
)
from privfed.common.learners.stump_encodings import stump_aggregate, stump_share
from privfed.common.mechanisms import make_mechanism

W1 = [[0.20, 0.05, 0.05], [0.10, 0.35, 0.25]]
W2 = [[0.28, 0.02, 0.05], [0.02, 0.38, 0.25]]


def test_thresholds_are_data_independent_grid():
    bounds = Bounds(np.array([0.0, -1.0]), np.array([10.0, 1.0]))
    np.testing.assert_allclose(thresholds(bounds, 4), [[2.5, 5.0, 7.5], [-0.5, 0.0, 0.5]])
    np.testing.assert_allclose(thresholds(bounds, 2), [[5.0], [0.0]])


def test_binarize_column_order():
    bounds = Bounds(np.array([0.0, -1.0]), np.array([10.0, 1.0]))
    X = np.array([[2.5, 0.7], [9.0, -1.0], [0.0, 0.0]])
    expected = [[1, 0, 0, 1, 1, 1], [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 0]]  # x >= theta (ties go up)
    np.testing.assert_array_equal(binarize(X, bounds, 4), np.array(expected, dtype=bool))


def test_cross_tables_match_definition(rng):
    Xbin = rng.random((40, 5)) < 0.5
    y = rng.integers(0, 3, 40)
    w = rng.random(40)
    W = cross_tables(Xbin, y, w, 3)
    assert W.shape == (5, 2, 3)
    for a in range(5):
        for v in range(2):
            for k in range(3):
                assert W[a, v, k] == pytest.approx(w[(Xbin[:, a] == v) & (y == k)].sum())


def test_spec_example_errors_and_pick():
    tables = np.array([W1, W2])
    np.testing.assert_allclose(table_errors(tables), [0.45, 0.34], atol=1e-12)
    stump = select_stump(tables, bounds=Bounds.of(0.0, 1.0, 2), n_bins=2)
    assert stump.attribute == 1  # "attribute 2" in the SPEC's 1-based numbering
    assert stump.threshold_index == 1 and stump.threshold == 0.5
    assert stump.leaves == (0, 1)
    assert stump.error == pytest.approx(0.34)
    first = select_stump(np.array([W1]), bounds=Bounds.of(0.0, 1.0, 1), n_bins=2)
    assert first.leaves == (0, 1) and first.error == pytest.approx(0.45)


def test_ties_lowest_attribute_then_threshold():
    bounds = Bounds.of(0.0, 1.0, 3)
    tables = np.tile(np.array(W1), (3 * 3, 1, 1))  # every (feature, threshold) has the same error
    stump = select_stump(tables, bounds=bounds, n_bins=4)
    assert (stump.attribute, stump.threshold_index) == (0, 1)
    tables[4] = W2  # feature 1, threshold 2 is best; feature 2's thresholds copy it later
    tables[7] = W2
    stump = select_stump(tables, bounds=bounds, n_bins=4)
    assert (stump.attribute, stump.threshold_index, stump.threshold) == (1, 2, 0.5)


def test_leaf_ties_go_to_lowest_class():
    stump = select_stump(np.array([[[0.2, 0.2, 0.1], [0.1, 0.3, 0.3]]]), bounds=Bounds.of(0.0, 1.0, 1), n_bins=2)
    assert stump.leaves == (0, 1)


def test_noisy_tables_used_as_they_are():
    tables = np.array([[[-0.3, 0.1], [0.2, -0.1]], [[0.5, -0.2], [-0.1, 0.4]]])
    stump = select_stump(tables, bounds=Bounds.of(0.0, 1.0, 2), n_bins=2)
    assert (stump.attribute, stump.leaves) == (1, (0, 1))
    assert math.isfinite(stump.error)
    negative = select_stump(-np.abs(tables), bounds=Bounds.of(0.0, 1.0, 2), n_bins=2)
    assert math.isnan(negative.error)


def test_stump_predict_matches_binarized_attribute(rng):
    bounds = Bounds.of(-2.0, 2.0, 3)
    X = rng.uniform(-2, 2, size=(100, 3))
    stump = Stump(
        attribute=2, threshold_index=3, threshold=float(thresholds(bounds, 5)[2, 2]), leaves=(1, 0), error=0.2
    )
    side = binarize(X, bounds, 5)[:, 2 * 4 + 2]
    np.testing.assert_array_equal(stump.predict(X), np.where(side, 0, 1))
    assert Stump.from_dict(json.loads(json.dumps(stump.to_dict()))) == stump
    with pytest.raises(ConfigError):
        stump.predict(X[:, :2])


def owners_data(rng, n_owners=4, n=30, d=3, k=3):
    y = rng.integers(0, k, n_owners * n)
    X = rng.normal(size=(n_owners * n, d)) + y[:, None] * 0.8
    w = rng.random(n_owners * n)
    return X, y, w, np.array_split(np.arange(n_owners * n), n_owners)


def test_shares_aggregate_to_exact_tables_without_noise(rng):
    bounds, n_bins, k = Bounds.of(-3.0, 5.0, 3), 6, 3
    X, y, w, parts = owners_data(rng)
    weight_bound = 40.0
    mech = make_mechanism("pm", epsilon=math.inf, d=3 * 5 * 2 * k)
    reports = np.stack(
        [
            stump_share(
                X[p],
                y[p],
                w[p],
                bounds=bounds,
                n_bins=n_bins,
                n_classes=k,
                weight_bound=weight_bound,
                mechanism=mech,
                rng=rng,
            )
            for p in parts
        ]
    )
    assert np.all(np.abs(reports) <= 1.0)
    total = stump_aggregate(reports, weight_bound=weight_bound, n_attributes=15, n_classes=k)
    np.testing.assert_allclose(total, cross_tables(binarize(X, bounds, n_bins), y, w, k), atol=1e-12)
    stump = select_stump(total, bounds=bounds, n_bins=n_bins)
    miss = stump.predict(X) != y
    assert np.dot(w, miss) / w.sum() == pytest.approx(stump.error, abs=1e-12)


def test_perturbed_tables_are_unbiased():
    """One owner's tables through PM, decoded by stump_aggregate: within 4 s.e. over R runs (SPEC §0)."""
    gen = np.random.Generator(np.random.PCG64(11))
    bounds, k, reps = Bounds.of(-3.0, 5.0, 3), 2, 2000
    X, y, w, _ = owners_data(gen, n_owners=1, k=k)
    mech = make_mechanism("pm", epsilon=2.0, d=3 * 2 * 2 * k)
    reports = np.stack(
        [
            stump_share(X, y, w, bounds=bounds, n_bins=3, n_classes=k, weight_bound=30.0, mechanism=mech, rng=gen)
            for _ in range(reps)
        ]
    )
    lo, hi = mech.output_bounds
    assert np.all((reports >= lo) & (reports <= hi))
    decoded = np.stack([stump_aggregate(r[None, :], weight_bound=30.0, n_attributes=6, n_classes=k) for r in reports])
    se = decoded.std(axis=0, ddof=1) / math.sqrt(reps)
    truth = cross_tables(binarize(X, bounds, 3), y, w, k)
    assert np.all(np.abs(decoded.mean(axis=0) - truth) < 4 * se)
    np.testing.assert_allclose(
        stump_aggregate(reports, weight_bound=30.0, n_attributes=6, n_classes=k), decoded.sum(axis=0), rtol=1e-10
    )


def test_share_scales_owner_weights_down_to_the_bound(rng):
    bounds, k = Bounds.of(-3.0, 5.0, 3), 3
    X, y, w, _ = owners_data(rng, n_owners=1)
    mech = make_mechanism("pm", epsilon=math.inf, d=3 * 1 * 2 * k)
    report = stump_share(X, y, w * 10, bounds=bounds, n_bins=2, n_classes=k, weight_bound=2.0, mechanism=mech, rng=rng)
    total = stump_aggregate(report[None, :], weight_bound=2.0, n_attributes=3, n_classes=k)
    np.testing.assert_allclose(total, cross_tables(binarize(X, bounds, 2), y, w * 2.0 / w.sum(), k), atol=1e-12)
    assert total[0].sum() == pytest.approx(2.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(weight_bound=0.0),
        dict(weight_bound=math.inf),
        dict(weight_bound=True),
        dict(n_bins=1),
        dict(n_classes=1),
        dict(d_mech=17),
    ],
)
def test_share_invalid(rng, kwargs):
    X, y, w, _ = owners_data(rng, n_owners=1)
    args = dict(bounds=Bounds.of(-3.0, 5.0, 3), n_bins=2, n_classes=3, weight_bound=10.0)
    d_mech = kwargs.pop("d_mech", 18)
    args.update(kwargs)
    with pytest.raises(ConfigError):
        stump_share(X, y, w, **args, mechanism=make_mechanism("pm", epsilon=math.inf, d=d_mech), rng=rng)


def test_invalid_tables_and_inputs():
    bounds = Bounds.of(0.0, 1.0, 2)
    with pytest.raises(ConfigError):
        select_stump(np.zeros((3, 2, 2)), bounds=bounds, n_bins=2)
    with pytest.raises(ConfigError):
        select_stump(np.zeros((2, 3, 2)), bounds=bounds, n_bins=2)
    with pytest.raises(ConfigError):
        stump_aggregate(np.zeros((2, 7)), weight_bound=1.0, n_attributes=2, n_classes=2)
    with pytest.raises(ConfigError):
        cross_tables(np.zeros((3, 2), bool), np.array([0, 1, 2]), np.ones(3), 2)
    with pytest.raises(ConfigError):
        cross_tables(np.zeros((3, 2), bool), np.array([0, 1, 1]), np.array([1.0, -1.0, 1.0]), 2)
    with pytest.raises(ConfigError):
        binarize(np.zeros((3, 3)), bounds, 2)
