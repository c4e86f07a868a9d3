"""Mutation round 5 (common/learners/naive_bayes.py): the owner's (feature, bin, class) report and its inputs.

``cells`` refuses labels outside ``0..K-1``: a label ``-1`` or ``K`` would put the owner's report into another
(bin, class) cell (``bin * K + y``), a count the debiasing then credits to the wrong class. The tests refused a
label that was the only one, where ``min`` and ``max`` agree: checking ``max() < 0`` or ``min() >= K`` passed.
Now one bad label among good ones is refused, each side.
"""

import numpy as np
import pytest
from scipy.stats import hypergeom

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.naive_bayes import NaiveBayesEncoding

BOUNDS = Bounds.of(0.0, 3.0, 2)


@pytest.mark.parametrize("labels", [[0, 2, -1], [-1, 0, 1], [0, 1, 3], [3, 2, 2]])
def test_one_label_outside_the_classes_among_good_ones_is_refused(labels):
    enc = NaiveBayesEncoding(epsilon=1.0, bounds=BOUNDS, n_classes=3)
    X = np.array([[0.5, 2.5], [1.5, 0.2], [2.9, 2.0]])
    with pytest.raises(ConfigError, match="class indices"):
        enc.cells(X, np.array(labels))
    with pytest.raises(ConfigError, match="class indices"):
        enc.share(X, np.array(labels), np.random.default_rng(0))


@pytest.mark.parametrize("owners", [[0, 1, -1], [0, 1], [0, 0, 1, 1]])
def test_an_owner_index_below_zero_or_a_map_of_another_length_is_refused(owners):
    enc = NaiveBayesEncoding(epsilon=1.0, bounds=BOUNDS, n_classes=3)
    X, y = np.array([[0.5, 2.5], [1.5, 0.2], [2.9, 2.0]]), np.array([0, 1, 2])
    with pytest.raises(ConfigError, match="owner_of_row"):
        enc.share(X, y, np.random.default_rng(0), owner_of_row=np.array(owners))


def test_an_owner_index_without_a_row_is_refused_and_no_rows_make_no_report():
    """Owner 1 of ``[0, 2, 2]`` holds no row: refused, where ``any`` for ``all`` let it report the next owner's
    first row. No rows at all: no owner, no report (``m = 0``), not a refusal."""
    enc = NaiveBayesEncoding(epsilon=1.0, bounds=BOUNDS, n_classes=3)
    X, y = np.array([[0.5, 2.5], [1.5, 0.2], [2.9, 2.0]]), np.array([0, 1, 2])
    with pytest.raises(ConfigError, match="must hold a row"):
        enc.share(X, y, np.random.default_rng(0), owner_of_row=np.array([0, 2, 2]))
    j, reports = enc.share(X[:0], y[:0], np.random.default_rng(0))
    assert j.shape == (0,) and len(reports) == 0


@pytest.mark.parametrize("features", [[0, 1, -1], [-1, 0, 0], [0, 1, 2], [2, 1, 1]])
def test_the_coordinator_refuses_one_sampled_feature_outside_the_features_among_good_ones(features):
    """A report's feature travels in the clear from an owner: ``-1`` would be credited to the last feature
    (``np.add.at`` wraps it), ``d`` fails later; checked with ``max() < 0`` or ``min() >= d`` neither was refused."""
    enc = NaiveBayesEncoding(epsilon=1.0, bounds=BOUNDS, n_classes=3, oracle="krr")
    reports = enc.frequency_oracle.privatize(np.array([0, 4, 5]), np.random.default_rng(0))
    with pytest.raises(ConfigError, match="sampled features"):
        enc.counts(np.array(features), reports)


def test_an_owner_of_several_rows_reports_each_of_them_with_equal_probability():
    """The owner draws one of its rows uniformly (module docstring): at ε = ∞ the reports are the drawn rows' exact
    cells, so each of an owner's three rows (distinct cells in both features) is reported a third of the time
    (5 s.e.). ``U / count`` for ``U * count`` reported the first row always."""
    enc = NaiveBayesEncoding(epsilon=np.inf, bounds=BOUNDS, n_classes=3)
    rows, labels = np.array([[0.5, 0.5], [1.5, 1.5], [2.5, 2.5]]), np.array([0, 1, 2])
    owners = 30_000
    X, y = np.tile(rows, (owners, 1)), np.tile(labels, owners)
    j, reports = enc.share(X, y, np.random.default_rng(5), owner_of_row=np.repeat(np.arange(owners), 3))
    cells = enc.cells(rows, labels)  # (3, d): row r's cell of feature f
    which = np.argmax(reports[:, None] == cells[:, j].T, axis=1)  # the row whose cell was reported
    assert np.all(reports == cells[which, j])
    freq = np.bincount(which, minlength=3) / owners
    assert np.all(np.abs(freq - 1 / 3) <= 5 * np.sqrt((1 / 3) * (2 / 3) / owners)), freq


@pytest.mark.parametrize("cells", [[0, 4, -1], [-1, 3, 3], [0, 4, 9], [9, 2, 2]])
def test_the_coordinator_refuses_one_exact_report_outside_the_cells_among_good_ones(cells):
    """At ε = ∞ a report is the owner's cell in ``0..B K - 1`` (here 9 cells): ``-1`` among good reports would be
    credited to the last cell, ``9`` is no cell; both refused (the checks with min and max swapped, or ``> B K``,
    let them through)."""
    enc = NaiveBayesEncoding(epsilon=np.inf, bounds=BOUNDS, n_classes=3)
    with pytest.raises(ConfigError, match="exact reports"):
        enc.counts(np.array([0, 1, 1]), np.array(cells))


@pytest.mark.parametrize("oracle", ["krr", "oue", "olh"])
@pytest.mark.parametrize("epsilon", [0.5, 3.0])
def test_one_owners_count_variance_is_the_bernoulli_variance_of_its_support(oracle, epsilon):
    """One owner, ``d`` features: its support of cell ``c`` is Bernoulli(p) for its own cell and Bernoulli(q) for
    the others, so ``Var z_c = p(1-p)/(p-q)^2`` or ``q(1-q)/(p-q)^2``, and the d-scaled count ``d z_c 1[j = f]`` has
    variance ``d (Var z_c + a) - a`` (``a = 1[c = v]``). The realised scaling of one owner who drew feature 0 is
    ``Var z_c`` there (no sampling variance: fpc 0) and 0 elsewhere. ``1 - p + q`` for ``1 - p - q`` (within the
    statistical test's tolerance at 8 owners) and ``n_owners - 1`` unfloored (NaN for one owner) passed."""
    for d in (1, 3):
        enc = NaiveBayesEncoding(epsilon=epsilon, bounds=Bounds.of(0.0, 3.0, d), n_classes=2, oracle=oracle)
        p, q = enc.frequency_oracle.p, enc.frequency_oracle.q
        v = np.array([[3] * d])  # the owner's cell of every feature: bin 1, class 1
        a = (np.arange(enc.domain) == 3).astype(float)
        var_z = np.where(a == 1.0, p * (1 - p), q * (1 - q)) / (p - q) ** 2
        want = np.tile(d * (var_z + a) - a, (d, 1)).reshape(d, enc.n_bins, enc.n_classes)
        np.testing.assert_allclose(enc.count_variance(v, scaling="d"), want, rtol=1e-12)
        drawn = np.eye(d, dtype=int)[0]
        realised = enc.count_variance(v, scaling="realised", drawn=drawn).reshape(d, -1)
        np.testing.assert_allclose(realised[0], var_z, rtol=1e-12)
        assert np.all(realised[1:] == 0.0)


def test_the_realised_scalings_sampling_variance_is_the_hypergeometric_one():
    """At ε = ∞ the realised count of a cell is ``(N / n) H``, ``H`` the owners of the cell among the ``n`` who drew
    the feature: a uniform sample without replacement of the ``N``, so ``H`` is hypergeometric(N, h, n) and the
    variance ``(N / n)^2 Var H`` (SciPy's). ``(N - n) / N`` or ``/ (N - 2)`` for the correction ``/ (N - 1)`` passed."""
    enc = NaiveBayesEncoding(epsilon=np.inf, bounds=Bounds.of(0.0, 3.0, 2), n_classes=2)
    X = np.array([[0.5, 2.5]] * 5 + [[1.5, 0.5]] * 3 + [[2.5, 1.5]] * 2)  # N = 10 owners
    y = np.array([0] * 5 + [1] * 3 + [0] * 2)
    cells = enc.cells(X, y)
    N, drawn = 10, np.array([4, 6])
    got = enc.count_variance(cells, scaling="realised", drawn=drawn).reshape(2, -1)
    for f, n in enumerate(drawn):
        h = np.bincount(cells[:, f], minlength=enc.domain)
        with np.errstate(divide="ignore", invalid="ignore"):  # SciPy's higher moments of k = 0, not used
            want = (N / n) ** 2 * np.array([hypergeom(N, k, n).var() for k in h])
        np.testing.assert_allclose(got[f], want, rtol=1e-12, atol=1e-12)
        assert np.any(want > 0)
    # two owners, one on each feature: H is 0 or 1 with probability 1/2 each, Var = 1/4, times (N / n)^2 = 4
    two = enc.count_variance(cells[[0, 5]], scaling="realised", drawn=[1, 1]).reshape(2, -1)
    np.testing.assert_allclose(two[0][[cells[0, 0], cells[5, 0]]], [1.0, 1.0], rtol=1e-12)
