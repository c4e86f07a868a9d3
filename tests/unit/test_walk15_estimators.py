"""Walkthrough 15: the in-process estimators on a researcher's own table.

``LdpNearestCentroid`` / ``LdpLogisticRegression`` take public ``bounds`` and clip the rows to them. The README says
of public bounds that "values outside them are clipped and counted in the log"; a federation's owner does count them.
The estimators clip in silence: bounds of (0, 1) on a feature that reaches 60 (a unit slip, or bounds meant for
scaled rows given raw rows) fit, score and predict with no warning and no log line, and the model is quietly
another one. A researcher comparing with scikit-learn then blames the privacy for what was a wrong bound.

Fixed: ``fit`` warns (``UserWarning``) with the count of values outside the bounds; rows inside them fit in silence.
"""

import logging
import warnings

import numpy as np
import pytest

import privfed


def _rows():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(0, 1, 400), rng.uniform(0, 60, 400)])  # the second feature up to 60
    y = (X[:, 1] > 30).astype(int)
    return X, y


@pytest.mark.parametrize("estimator", [privfed.LdpNearestCentroid, privfed.LdpLogisticRegression])
def test_fit_on_rows_far_outside_the_bounds_says_so(estimator, caplog):
    X, y = _rows()
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO):
        warnings.simplefilter("always")
        estimator(epsilon=4.0, bounds=(0.0, 1.0), random_state=0).fit(X, y)
    said = [str(w.message) for w in caught] + [r.getMessage() for r in caplog.records]
    assert any("clip" in s.lower() or "outside" in s.lower() for s in said), said


@pytest.mark.parametrize("estimator", [privfed.LdpNearestCentroid, privfed.LdpLogisticRegression])
def test_fit_on_rows_inside_the_bounds_says_nothing_of_clipping(estimator):
    X, y = _rows()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the fit
        estimator(epsilon=4.0, bounds=((0.0, 0.0), (1.0, 60.0)), random_state=0).fit(X, y)


@pytest.mark.parametrize("estimator", [privfed.LdpNearestCentroid, privfed.LdpLogisticRegression])
def test_a_fit_no_better_than_the_majority_class_on_its_rows_says_so_and_one_that_learns_does_not(estimator):
    """Walkthrough 15, W15-8: ``LdpLogisticRegression(n_owners=10)`` always answered one class, in silence, where
    ``privfed simulate`` warns. A fit to labels that are noise cannot beat the majority class on its rows (whatever
    the noise draw); a fit at a large epsilon to labels its rows decide beats it without a word."""
    X, _ = _rows()
    X = X[:, :1]  # one feature in [0, 1]: inside the bounds
    noise = np.random.default_rng(1).integers(0, 2, X.shape[0])
    with pytest.warns(UserWarning, match="no better than always answering the most common class"):
        estimator(epsilon=0.5, bounds=(0.0, 1.0), random_state=0).fit(X, noise)
    learnable = (X[:, 0] > 0.5).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert estimator(epsilon=20.0, bounds=(0.0, 1.0), random_state=0).fit(X, learnable).score(X, learnable) > 0.8
