"""Stump share encodings (signs, cells, pair, table): defaults, exact decoding without noise, row picking, invalid use."""

import dataclasses
import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.stump import binarize, cross_tables, select_stump
from privfed.common.learners.stump_encodings import (
    default_encoding,
    make_stump_encoding,
    stump_aggregate,
    stump_share,
    stump_shares,
)
from privfed.common.learners.stump_row_encoding import owner_tables
from privfed.common.learners.stump_sampled_encoding import SampledEncoding, SampledReports, _pick_rows
from privfed.common.mechanisms import make_mechanism

BOUNDS = Bounds.of(-3.0, 5.0, 3)
HUGE_EPS = 30.0  # the ceiling (SPEC §12): k-RR keeps the value with probability 1 - 1e-13, decoding is exact


def data(rng, n=60, k=2):
    y = rng.integers(0, k, n)
    X = rng.normal(size=(n, 3)) + y[:, None] * 0.8
    return X, y


def test_default_encoding_by_classes_and_mechanism(rng):
    X, y = data(rng)
    w = np.full(y.shape, 1.0 / y.size)
    assert default_encoding(2) == "signs" and default_encoding(3) == "cells"
    args = dict(bounds=BOUNDS, n_bins=2, n_classes=2, weight_bound=1.0, rng=rng)
    legacy = stump_share(X, y, w, mechanism=make_mechanism("pm", epsilon=1.0, d=12), **args)
    assert isinstance(legacy, np.ndarray) and legacy.shape == (12,)
    share = stump_share(X, y, w, epsilon=1.0, **args)
    assert isinstance(share, SampledReports) and share.encoding == "signs" and len(share) == 1
    X3, y3 = data(rng, k=3)
    share3 = stump_share(X3, y3, w, epsilon=1.0, **dict(args, n_classes=3))
    assert share3.encoding == "cells"


@pytest.mark.parametrize("eps, m", [(1.0, 1), (2.0, 2), (3.0, 3), (5.0, 5)])
def test_sampled_count_grows_with_epsilon(eps, m):
    """The docstring's values for signs with A = 20: variance-optimal m."""
    enc = SampledEncoding(kind="signs", epsilon=eps, n_attributes=20, n_classes=2, weight_bound=1.0)
    assert enc.n_sampled == m
    noise = [enc._noise_factor(j) for j in range(1, 9)]
    assert noise[m - 1] == min(noise)


@pytest.mark.parametrize("kind, k", [("signs", 2), ("cells", 2), ("cells", 3)])
def test_sampled_decoding_is_exact_without_noise(kind, k, rng):
    """Every coordinate sampled, owners of one row at the full weight bound, eps huge: exact statistics."""
    X, y = data(rng, k=k)
    n = y.size
    xbin = binarize(X, BOUNDS, 2)
    exact = cross_tables(xbin, y, np.full(n, 2.0), k)
    m = 4 if kind == "signs" else 3
    reports = stump_shares(
        X, y, np.full(n, 2.0), np.arange(n), n, bounds=BOUNDS, n_bins=2, n_classes=k, weight_bound=2.0,
        rng=rng, encoding=kind, epsilon=HUGE_EPS, n_sampled=m,
    )  # fmt: skip
    tables = stump_aggregate(reports, weight_bound=2.0, n_attributes=3, n_classes=k)
    if kind == "cells":
        np.testing.assert_allclose(tables, exact, atol=1e-6)
    else:
        np.testing.assert_allclose(tables[..., 0] - tables[..., 1], exact[..., 0] - exact[..., 1], atol=1e-6)
        np.testing.assert_allclose(tables.sum(axis=(1, 2)), 2.0 * n)
    got, want = select_stump(tables, bounds=BOUNDS, n_bins=2), select_stump(exact, bounds=BOUNDS, n_bins=2)
    assert dataclasses.replace(got, error=want.error) == want and got.error == pytest.approx(want.error, abs=1e-9)


def test_pair_without_noise_gives_class_differences(rng):
    X, y = data(rng)
    n = y.size
    w = rng.random(n)
    reports = stump_shares(
        X, y, w, np.arange(n) % 4, 4, bounds=BOUNDS, n_bins=3, n_classes=2, weight_bound=20.0, rng=rng,
        encoding="pair", mechanism=make_mechanism("pm", epsilon=math.inf, d=12),
    )  # fmt: skip
    assert reports.shape == (4, 12) and np.all(np.abs(reports) <= 1.0)
    tables = stump_aggregate(reports, weight_bound=20.0, n_attributes=6, n_classes=2, encoding="pair")
    exact = cross_tables(binarize(X, BOUNDS, 3), y, w, 2)
    np.testing.assert_allclose(tables[..., 0] - tables[..., 1], exact[..., 0] - exact[..., 1], atol=1e-9)
    stump = select_stump(tables, bounds=BOUNDS, n_bins=3)
    assert stump.attribute * 2 + stump.threshold_index - 1 == int(np.argmax(exact.max(axis=2).sum(axis=1)))


def test_owner_tables_clip_each_owner(rng):
    X, y = data(rng, n=30)
    w = np.ones(30)
    owners = np.arange(30) % 3
    tables = owner_tables(binarize(X, BOUNDS, 2), y, w, owners, 3, n_classes=2, weight_bound=4.0)
    assert tables.shape == (3, 3, 2, 2)
    np.testing.assert_allclose(tables.sum(axis=(2, 3)), 4.0)  # 10 rows each, scaled to 4
    for o in range(3):
        want = cross_tables(binarize(X[owners == o], BOUNDS, 2), y[owners == o], np.full(10, 0.4), 2)
        np.testing.assert_allclose(tables[o], want)


def test_pick_rows_by_weight(rng):
    """Per group g: owner 3g holds rows of weight 0.2 and 0.5 (bound 1: nothing w.p. 0.3), owner 3g+1
    no row, owner 3g+2 one row at the bound."""
    g = 50_000
    w = np.tile([0.2, 1.0, 0.5], g)
    owners = (np.repeat(np.arange(g), 3) * 3 + np.tile([0, 2, 0], g)).astype(np.int64)
    picks = _pick_rows(w, owners, 3 * g, 1.0, rng).reshape(g, 3)
    first = picks[:, 0]
    picked = first >= 0
    freq = np.array([np.mean(~picked), np.mean(picked & (first % 3 == 0)), np.mean(picked & (first % 3 == 2))])
    want = np.array([0.3, 0.2, 0.5])
    assert np.all(np.abs(freq - want) <= 5 * np.sqrt(want * (1 - want) / g)), freq
    assert np.all(first[first >= 0] // 3 == np.flatnonzero(first >= 0))  # an owner picks its own rows
    assert np.all(picks[:, 1] == -1)
    np.testing.assert_array_equal(picks[:, 2], np.arange(g) * 3 + 1)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(encoding="pair", n_classes=3, mechanism=make_mechanism("pm", epsilon=1.0, d=6)),
        dict(encoding="signs", n_classes=3, epsilon=1.0),
        dict(encoding="signs", epsilon=1.0, oracle="oue"),
        dict(encoding="cells", epsilon=1.0, oracle="rappor"),
        dict(encoding="cells", epsilon=1.0, n_sampled=4),
        dict(encoding="cells", epsilon=1.0, n_sampled=0),
        dict(encoding="cells", mechanism=make_mechanism("pm", epsilon=1.0, d=12), epsilon=1.0),
        dict(encoding="cells"),
        dict(encoding="huffman", epsilon=1.0),
        dict(encoding="table", mechanism=make_mechanism("pm", epsilon=1.0, d=6)),
        dict(encoding="table"),
        dict(encoding="signs", epsilon=0.0),
        dict(encoding="signs", epsilon=1.0, weight_bound=0.0),
    ],
)
def test_share_invalid(kwargs, rng):
    X, y = data(rng, n=10)
    args = dict(bounds=BOUNDS, n_bins=2, n_classes=2, weight_bound=1.0)
    args.update(kwargs)
    with pytest.raises(ConfigError):
        stump_share(X, y, np.ones(10) / 10, rng=rng, **args)


def test_aggregate_rejects_mismatched_reports(rng):
    X, y = data(rng, n=10)
    share = stump_share(
        X, y, np.ones(10) / 10, bounds=BOUNDS, n_bins=2, n_classes=2, weight_bound=1.0, rng=rng, epsilon=2.0
    )
    with pytest.raises(ConfigError):
        stump_aggregate(share, weight_bound=1.0, n_attributes=3, n_classes=2, encoding="cells")
    with pytest.raises(ConfigError):
        stump_aggregate(np.zeros((2, 6)), weight_bound=1.0, n_attributes=3, n_classes=2, encoding="signs")
    bad = SampledReports("signs", "krr", 2.0, share.coordinates + 10, share.reports)
    with pytest.raises(ConfigError):
        stump_aggregate(bad, weight_bound=1.0, n_attributes=3, n_classes=2)
    twice = SampledReports("signs", "krr", 2.0, np.repeat(share.coordinates[:, :1], 2, axis=1), share.reports)
    with pytest.raises(ConfigError):
        stump_aggregate(twice, weight_bound=1.0, n_attributes=3, n_classes=2)
    other = stump_share(
        X, y, np.ones(10) / 10, bounds=BOUNDS, n_bins=2, n_classes=2, weight_bound=1.0, rng=rng, epsilon=5.0
    )
    with pytest.raises(ConfigError):
        SampledReports.concat([share, other])
    both = SampledReports.concat([share, share])
    assert len(both) == 2
    with pytest.raises(ConfigError):
        make_stump_encoding("signs", n_attributes=3, n_classes=2, weight_bound=1.0)


@pytest.mark.parametrize("kind", ["signs", "cells"])
def test_a_sampled_share_draws_as_much_whether_its_row_is_picked(kind):
    """An owner's row is picked with probability weight / bound, so a pick that hits a row or misses follows its
    SAMME weights: the generator's state after the share must not (the filler bits of a miss are drawn either way)."""
    X, y = np.zeros((1, 3)), np.zeros(1, dtype=np.int64)
    states = set()
    for weight in (1e-12, 2.0):  # the pick misses, or hits: the weight bound
        rng = np.random.default_rng(8)
        stump_shares(
            X, y, np.full(1, weight), np.zeros(1, dtype=np.int64), 1, bounds=BOUNDS, n_bins=2, n_classes=2,
            weight_bound=2.0, rng=rng, encoding=kind, epsilon=1.0, n_sampled=2,
        )  # fmt: skip
        states.add(rng.integers(0, 2**62))
    assert len(states) == 1
