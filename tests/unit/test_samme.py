"""SAMME: SPEC §5 table and worked example, stop rules, post-update identity, boosted model."""

import json
import math

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.ensemble import AdaBoostClassifier

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, PrivfedError
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.learners.samme import (
    E0,
    BoostedModel,
    SammeBoost,
    SammeStep,
    samme_alpha,
    samme_decide,
    samme_reweight,
    samme_update,
)
from privfed.common.learners.stump import Stump, binarize, cross_tables, select_stump


@pytest.mark.parametrize(
    ("k", "err", "alpha"), [(2, 0.3, 0.847298), (3, 0.4, 1.098612), (4, 0.1, 3.295837), (10, 0.85, 0.462624)]
)
def test_alpha_spec_table(k, err, alpha):
    assert samme_alpha(err, k) == pytest.approx(alpha, abs=1e-6)


@pytest.mark.parametrize(("k", "err"), [(10, 0.9), (10, 0.95), (2, 0.5), (3, 2 / 3), (2, 1.0)])
def test_alpha_rejects_no_better_than_chance(k, err):
    assert samme_alpha(err, k) is None


@pytest.mark.parametrize("err", [0.0, -1e-3])
def test_alpha_zero_error_uses_e0(err):
    assert samme_alpha(err, 3) == pytest.approx(math.log((1 - E0) / E0) + math.log(2), rel=1e-12)


@pytest.mark.parametrize(
    ("err", "k"), [(math.nan, 2), (math.inf, 2), (1.5, 2), ("0.3", 2), (0.3, 1), (0.3, 2.0), (0.3, True)]
)
def test_alpha_invalid(err, k):
    with pytest.raises(ConfigError):
        samme_alpha(err, k)


def test_worked_example():
    w = np.full(10, 0.1)
    miss = np.zeros(10, dtype=bool)
    miss[:3] = True
    err = float(np.dot(w, miss) / w.sum())
    assert err == pytest.approx(0.3)
    alpha = samme_alpha(err, 3)
    assert alpha == pytest.approx(1.540445, abs=1e-6)
    new = samme_update(w, miss, alpha)
    np.testing.assert_allclose(new[:3], 0.222222, atol=1e-6)
    np.testing.assert_allclose(new[3:], 0.047619, atol=1e-6)
    assert new.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("k", [2, 3, 5, 10])
def test_post_update_identity(rng, k):
    """After the update, the just-fitted learner's weighted error is exactly (K-1)/K."""
    for _ in range(20):
        w = rng.random(200)
        miss = rng.random(200) < rng.uniform(0.05, 1 - 1 / k - 0.05)
        alpha = samme_alpha(float(np.dot(w, miss) / w.sum()), k)
        if alpha is None or not miss.any():  # the identity needs 0 < err < (K-1)/K
            continue
        new = samme_update(w, miss, alpha)
        assert np.dot(new, miss) / new.sum() == pytest.approx((k - 1) / k, rel=1e-12)


def test_update_with_external_total_matches_split_owners(rng):
    w = rng.random(30)
    miss = rng.random(30) < 0.3
    alpha = 0.7
    parts = np.array_split(np.arange(30), 3)  # three owners: reweight locally, secure-sum the totals
    local = [samme_reweight(w[p], miss[p], alpha) for p in parts]
    total = sum(float(x.sum()) for x in local)
    split = np.concatenate([samme_update(w[p], miss[p], alpha, total=total) for p in parts])
    np.testing.assert_allclose(split, samme_update(w, miss, alpha), rtol=1e-13)


@pytest.mark.parametrize(
    ("w", "miss", "total"),
    [
        ([0.5, -0.1], [1, 0], None),
        ([0.5, np.nan], [1, 0], None),
        ([0.5, 0.5], [1], None),
        ([0.5, 0.5], [1, 0], 0.0),
        ([0.5, 0.5], [1, 0], math.inf),
    ],
)
def test_update_invalid(w, miss, total):
    with pytest.raises(ConfigError):
        samme_update(w, miss, 1.0, total=total)


def test_decide_rules():
    assert samme_decide(0.3, 1.0, 3, n_kept=0).step is SammeStep.KEEP
    d = samme_decide(0.0, 2.0, 3, n_kept=0)
    assert d.step is SammeStep.KEEP_AND_STOP and d.alpha == pytest.approx(samme_alpha(0.0, 3))
    assert samme_decide(0.7, 1.0, 3, n_kept=2).step is SammeStep.DISCARD_AND_STOP
    assert samme_decide(1.0, math.inf, 3, n_kept=1).step is SammeStep.DISCARD_AND_STOP
    assert samme_decide(0.0, 0.0, 3, n_kept=1).step is SammeStep.DISCARD_AND_STOP
    assert samme_decide(0.2, 0.5, 2, n_kept=1).error == pytest.approx(0.4)
    with pytest.raises(PrivfedError, match="no better than chance"):
        samme_decide(0.7, 1.0, 3, n_kept=0)
    with pytest.raises(PrivfedError):
        samme_decide(0.0, 0.0, 3, n_kept=0)


# --- in-process boosting with exact (non-private) stumps ---

BOUNDS = Bounds.of(-4.0, 4.0, 3)
N_BINS = 8


def exact_stump(X, y, w, n_classes):
    return select_stump(cross_tables(binarize(X, BOUNDS, N_BINS), y, w, n_classes), bounds=BOUNDS, n_bins=N_BINS)


class StumpEstimator(ClassifierMixin, BaseEstimator):
    """scikit-learn wrapper of the exact stump, so AdaBoostClassifier can boost the same learner."""

    def fit(self, X, y, sample_weight=None):
        self.classes_ = np.unique(y)
        self.stump_ = exact_stump(X, np.searchsorted(self.classes_, y), sample_weight, self.classes_.shape[0])
        return self

    def predict(self, X):
        return self.classes_[self.stump_.predict(X)]


def blobs(rng, n=300, k=3):
    y = rng.integers(0, k, n)
    X = rng.normal(size=(n, 3)) + np.array([[0, 0, 0], [1.5, 0, 0], [0, 1.5, 0.5]])[y]
    return np.clip(X, -4, 4), y


def test_samme_boost_matches_sklearn_adaboost(rng):
    X, y = blobs(rng)
    ours = SammeBoost(lambda X_, y_, w, m: exact_stump(X_, y_, w, 3), n_estimators=15, n_classes=3).fit(X, y)
    ref = AdaBoostClassifier(StumpEstimator(), n_estimators=15).fit(X, y)
    assert ours.stop_reason_ == "n_estimators"
    np.testing.assert_allclose(ours.model_.alphas, ref.estimator_weights_, rtol=1e-9)
    np.testing.assert_allclose(ours.errors_, ref.estimator_errors_, rtol=1e-9)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    single = ours.model_.learners[0].predict(X)
    assert ours.model_.score(X, y) > np.mean(single == y)


def test_samme_boost_stops_on_zero_error():
    X = np.array([[-2.0, 0, 0], [-1.0, 0, 0], [1.0, 0, 0], [2.0, 0, 0]])
    y = np.array([0, 0, 1, 1])
    boost = SammeBoost(lambda X_, y_, w, m: exact_stump(X_, y_, w, 2), n_estimators=5, n_classes=2).fit(X, y)
    assert boost.stop_reason_ == "zero_error"
    assert len(boost.model_.learners) == 1
    assert boost.model_.alphas[0] == pytest.approx(samme_alpha(0.0, 2))
    np.testing.assert_array_equal(boost.predict(X), y)


class Fixed:
    """A learner that predicts given class indices for the training rows."""

    def __init__(self, pred):
        self.pred = np.asarray(pred)

    def predict(self, X):
        return self.pred


def test_samme_boost_discards_and_stops(rng):
    X, y = blobs(rng, k=2)
    calls = []

    def base_fit(X_, y_, w, m):
        calls.append(m)
        return exact_stump(X_, y_, w, 2) if m == 0 else Fixed(1 - y_)

    boost = SammeBoost(base_fit, n_estimators=5, n_classes=2).fit(X, y)
    assert calls == [0, 1]
    assert boost.stop_reason_ == "no_better_than_chance"
    assert len(boost.model_.learners) == 1
    assert boost.errors_[1] == pytest.approx(1.0)


def test_samme_boost_first_learner_worse_than_chance_raises(rng):
    X, y = blobs(rng, k=2)
    with pytest.raises(PrivfedError, match="no better than chance"):
        SammeBoost(lambda X_, y_, w, m: Fixed(1 - y_), n_estimators=3, n_classes=2).fit(X, y)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(n_estimators=0, n_classes=2),
        dict(n_estimators=2, n_classes=1),
        dict(n_estimators=1.5, n_classes=2),
        dict(n_estimators=2, n_classes=2, base_fit=3),
    ],
)
def test_samme_boost_invalid(kwargs):
    kwargs.setdefault("base_fit", lambda *a: None)
    with pytest.raises(ConfigError):
        SammeBoost(**kwargs)


def test_samme_boost_invalid_labels():
    boost = SammeBoost(lambda *a: None, n_estimators=2, n_classes=2)
    with pytest.raises(ConfigError):
        boost.fit(np.zeros((3, 3)), np.array([0, 1, 2]))
    with pytest.raises(ConfigError):
        boost.fit(np.zeros((3, 3)), np.array([0.0, 1.0, 1.0]))


# --- the boosted model ---


def test_vote_ties_go_to_lowest_class():
    a = Stump(0, 1, 0.0, (2, 2), 0.1)
    b = Stump(0, 1, 0.0, (1, 1), 0.1)
    model = BoostedModel([a, b], [0.5, 0.5], classes=np.array(["x", "y", "z"]))
    assert model.predict(np.zeros((2, 1))).tolist() == ["y", "y"]
    model = BoostedModel([a, b], [0.5, 0.6], n_classes=3)
    assert model.predict(np.zeros((1, 1))).tolist() == [1]


def test_weighted_vote_sums_alphas():
    learners = [Stump(0, 1, 0.0, (0, 1), 0.1), Stump(0, 1, 0.5, (1, 0), 0.1), Stump(0, 1, 0.5, (1, 0), 0.1)]
    model = BoostedModel(learners, [1.0, 0.6, 0.6], n_classes=2)
    X = np.array([[-1.0], [0.2], [1.0]])
    np.testing.assert_allclose(model.votes(X), [[1.0, 1.2], [0.0, 2.2], [1.2, 1.0]])
    np.testing.assert_array_equal(model.predict(X), [1, 1, 0])


def test_to_dict_round_trip_mixed_learners(rng):
    bounds = Bounds.of(-1.0, 1.0, 2)
    learners = [
        Stump(1, 2, 0.25, (0, 2), 0.3),
        NearestCentroidModel([[-0.5, 0.0], [0.5, 0.0], [0.0, 0.5]]),
        LinearModel([[1.0, -1.0], [0.0, 1.0], [-1.0, 0.0]], [0.0, 0.1, -0.1], bounds),
    ]
    model = BoostedModel(learners, [0.9, 0.4, 0.7], classes=np.array([3, 5, 7]))
    restored = BoostedModel.from_dict(json.loads(json.dumps(model.to_dict())))
    X = rng.uniform(-1, 1, size=(200, 2))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
    np.testing.assert_array_equal(restored.votes(X), model.votes(X))


@pytest.mark.parametrize(
    "data", [{"kind": "other"}, {"kind": "samme", "classes": [0, 1], "alphas": [1.0], "learners": [{"kind": "tree"}]}]
)
def test_from_dict_rejects_unknown(data):
    with pytest.raises(ConfigError):
        BoostedModel.from_dict(data)


def test_boosted_model_invalid():
    with pytest.raises(ConfigError):
        BoostedModel([Stump(0, 1, 0.0, (0, 1), 0.1)], [1.0, 2.0], n_classes=2)
    with pytest.raises(ConfigError):
        BoostedModel([Stump(0, 1, 0.0, (0, 1), 0.1)], [math.nan], n_classes=2)
    with pytest.raises(ConfigError):
        BoostedModel([], [])
