"""Statistical tests of the stump share encodings: the aggregated estimates are unbiased, their
variance matches each encoding's closed form, reports stay in range, and the e^eps ratio holds.

One owner of four weighted rows (total 1.8 > bound 1.5: the clip is exercised, and a sampled
encoding reports nothing with probability 0 but picks rows by weight) is replicated over
R = 2000 batches of 100 owners; tolerances are 5 standard errors (SPEC §0).
"""

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.learners.stump import binarize
from privfed.common.learners.stump_encodings import make_stump_encoding, stump_shares
from privfed.common.learners.stump_row_encoding import RowEncoding, owner_tables
from privfed.common.learners.stump_sampled_encoding import SampledReports
from privfed.common.mechanisms import make_mechanism

pytestmark = pytest.mark.slow

BOUNDS = Bounds.of(0.0, 1.0, 3)
X = np.array([[0.2, 0.7, 0.9], [0.8, 0.1, 0.6], [0.6, 0.6, 0.2], [0.1, 0.9, 0.4]])
Y2 = np.array([0, 1, 1, 0])
Y3 = np.array([0, 2, 1, 0])
W = np.array([0.3, 0.6, 0.5, 0.4])
BOUND = 1.5
R, BATCH = 2000, 100
Z = 5.0

CASES = [
    ("signs", 2, dict(epsilon=2.0)),  # m = 2
    ("signs", 2, dict(epsilon=1.0, n_sampled=3)),
    ("cells", 2, dict(epsilon=2.0, oracle="krr", n_sampled=2)),
    ("cells", 3, dict(epsilon=1.0, oracle="oue", n_sampled=1)),
    ("cells", 3, dict(epsilon=3.0, oracle="olh", n_sampled=2)),
    ("pair", 2, dict(mechanism="pm", epsilon=2.0)),
    ("table", 3, dict(mechanism="duchi", epsilon=2.0)),
]


def build(kind, k, kw):
    kw = dict(kw)
    if kind in ("pair", "table"):
        d = 3 * 2 * (k if kind == "table" else 1)
        kw = dict(mechanism=make_mechanism(kw["mechanism"], epsilon=kw["epsilon"], d=d))
    return kw


@pytest.mark.parametrize("kind, k, kw", CASES, ids=lambda c: str(c))
def test_unbiased_with_closed_form_variance(kind, k, kw, rng):
    kw = build(kind, k, kw)
    y = Y2 if k == 2 else Y3
    n = R * BATCH
    owners = np.repeat(np.arange(n), X.shape[0])
    reports = stump_shares(
        np.tile(X, (n, 1)), np.tile(y, n), np.tile(W, n), owners, n, bounds=BOUNDS, n_bins=2, n_classes=k,
        weight_bound=BOUND, rng=rng, encoding=kind, **kw,
    )  # fmt: skip
    enc = make_stump_encoding(kind, n_attributes=3, n_classes=k, weight_bound=BOUND, **kw)
    tables = owner_tables(
        binarize(X, BOUNDS, 2), y, W, np.zeros(4, dtype=np.int64), 1, n_classes=k, weight_bound=BOUND
    )[0]
    stat, var = enc.statistic(tables), enc.variance(tables)
    assert np.all(var > 0)
    if isinstance(enc, RowEncoding):
        lo, hi = enc.mechanism.output_bounds
        assert np.all((reports >= lo) & (reports <= hi))
        sums = np.stack([enc.estimate(reports[b * BATCH : (b + 1) * BATCH]) for b in range(R)])
    else:
        assert reports.coordinates.min() >= 0 and reports.coordinates.max() < enc.n_coordinates
        assert all(len(set(row)) == row.size for row in reports.coordinates[:1000])  # without replacement
        sums = np.stack(
            [
                enc.estimate(
                    SampledReports(
                        reports.encoding, reports.oracle, reports.epsilon,
                        reports.coordinates[b * BATCH : (b + 1) * BATCH], reports.reports[b * BATCH : (b + 1) * BATCH],
                    )
                )
                for b in range(R)
            ]
        )  # fmt: skip
    want, want_var = BATCH * stat, BATCH * var
    assert np.all(np.abs(sums.mean(axis=0) - want) <= Z * np.sqrt(want_var / R)), (sums.mean(axis=0), want)
    sq = (sums - want) ** 2
    v_hat, se = sq.mean(axis=0), sq.std(axis=0) / math.sqrt(R)
    assert np.all(Z * se < 0.5 * want_var), "lost power"
    assert np.all(np.abs(v_hat - want_var) <= Z * se), (v_hat / want_var, se / want_var)


@pytest.mark.parametrize("kind", ["signs", "cells"])
def test_epsilon_ratio(kind, rng):
    """Two one-row owners at the weight bound with opposite rows: the report that is most likely
    under the first is e^eps times as likely as under the second, whatever coordinates were sampled."""
    eps, n = 2.0, 400_000
    a, b = np.array([[0.9, 0.9, 0.9]]), np.array([[0.1, 0.1, 0.1]])
    # signs: (x = 1, class 0) has every sign +1 (pattern 3), (x = 1, class 1) every sign -1 (pattern 0);
    # cells: (x = 1, class 0) is cell (1, 1, 0) = 3 * 2 + 0 = 6, (x = 0, class 0) is cell 0.
    rows = (("a", a, 0), ("b", a, 1)) if kind == "signs" else (("a", a, 0), ("b", b, 0))
    out = {}
    for name, row, label in rows:
        rep = stump_shares(
            np.repeat(row, n, axis=0), np.full(n, label), np.ones(n), np.arange(n), n,
            bounds=BOUNDS, n_bins=2, n_classes=2, weight_bound=1.0, rng=rng, encoding=kind, epsilon=eps, n_sampled=2,
        )  # fmt: skip
        out[name] = rep.reports[:, 0]
    top = 3 if kind == "signs" else 6
    k1, k2 = np.count_nonzero(out["a"] == top), np.count_nonzero(out["b"] == top)
    se = math.sqrt((1 - k1 / n) / k1 + (1 - k2 / n) / k2)
    assert abs(math.log(k1 / k2) - eps) <= Z * se
    for v in range(4 if kind == "signs" else 9):  # never exceeded, report by report
        c1, c2 = np.count_nonzero(out["a"] == v), np.count_nonzero(out["b"] == v)
        assert abs(math.log(c1 / c2)) <= eps + Z * math.sqrt(1 / c1 + 1 / c2)
