"""The ``K + 1``-ary k-RR of a padded ``labels="rr"`` NCC share (common/learners/ncc_rr.py): ε-LDP, unbiased with
⊥ dummies, and as noisy as its closed form says.

* The label response's output distribution, for every pair of inputs (classes and ⊥), has a largest ratio of
  exactly ``e^ε``, and the implementation's draws follow it (chi-square per input, 20 000 draws).
* An owner of 20 rows (padded to 32 reports) and one of 33 (64), through the owner kind's own path: over
  R = 3000 releases, the coordinator's debiased class sums and counts (``ncc_class_sums``, ⊥ dropped) lie within
  4.5 standard errors of the real rows' exact sums and counts, whatever the dummies.
* Their variance across the releases matches ``class_total_variance`` (within 12 %, about 5 standard errors of a
  sample variance of 3000 draws at these kurtoses), and it exceeds the unpadded ``K``-ary share's closed form:
  the dummies' cost, reported in the assertion message.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privfed.common.bounds import Bounds
from privfed.common.learners.ncc import NccShare, ncc_class_sums
from privfed.common.learners.ncc_rr import class_total_variance
from privfed.common.mechanisms import KaryRandomizedResponse, mechanism_of
from privfed.common.tasks import NccShareTask, Task
from privfed.owner.kinds import kind_of
from privfed.owner.local import LocalOwner

D, K, R = 3, 3, 3000
BOUNDS = Bounds.of(-2.0, 2.0, D)


@pytest.mark.parametrize("epsilon", [0.5, 2.0, 6.0])
def test_the_label_response_over_k_plus_bottom_is_exactly_epsilon_ldp(epsilon):
    spec = NccShareTask("pm", 1.0, "rr", epsilon, K, BOUNDS)
    rr = spec.label_response()
    assert rr is not None and rr.n_classes == K + 1
    inputs = np.arange(K + 1)
    matrix = np.where(inputs[:, None] == inputs[None, :], rr.p, rr.q)  # P[output | input]
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    ratio = max(matrix[:, o].max() / matrix[:, o].min() for o in inputs)
    assert math.isclose(ratio, math.exp(epsilon), rel_tol=1e-12), (ratio, math.exp(epsilon))
    rng = np.random.Generator(np.random.PCG64(7))
    for v in inputs:  # the draws follow the matrix (a ⊥ input too)
        observed = np.bincount(rr.privatize(np.full(20_000, v), rng), minlength=K + 1)
        assert stats.chisquare(observed, 20_000 * matrix[v]).pvalue > 1e-4, (v, observed)


def _releases(n: int, spec: NccShareTask, seed: int):
    """R releases of one owner of ``n`` rows through the owner kind (padding, k-RR, shuffle), the rows in the
    unit space and their labels."""
    rng = np.random.Generator(np.random.PCG64(seed))
    X, y = rng.uniform(-2.5, 2.5, (n, D)), rng.integers(0, K, n)  # some outside the bounds: clipped
    owner = LocalOwner("node-0.o00000", X, y, rng, K, BOUNDS)
    kind, task = kind_of(spec), Task("t", owner.owner_id, "run-1", spec)
    return [kind.compute(task, spec, owner) for _ in range(R)], BOUNDS.to_unit(X), y


@pytest.mark.parametrize(("n", "m"), [(20, 32), (33, 64)])
def test_the_debiased_class_totals_are_unbiased_with_dummies_and_as_noisy_as_the_closed_form(n, m):
    spec = NccShareTask("pm", 2.4, "rr", 1.6, K, BOUNDS)  # ε = 4 split 0.6 / 0.4
    releases, t, y = _releases(n, spec, seed=n)
    assert {r.reports.shape for r in releases} == {(m, D)}
    rr = spec.label_response()
    draws = np.array(
        [
            np.concatenate(
                [np.ravel(a) for a in ncc_class_sums(NccShare(r.reports, r.labels), n_classes=K, d=D, label_rr=rr)]
            )
            for r in releases
        ]
    )
    onehot = (y[:, None] == np.arange(K)[None, :]).astype(float)
    exact = np.concatenate([np.ravel(onehot.T @ t), onehot.sum(axis=0)])
    se = draws.std(axis=0, ddof=1) / np.sqrt(R)
    z = np.abs(draws.mean(axis=0) - exact) / se
    assert np.all(z < 4.5), np.round(z, 2)

    mechanism = mechanism_of(spec.mechanism, spec.epsilon, D)
    dummies = m - n
    padded = class_total_variance(
        rr, mechanism, np.vstack([t, np.zeros((dummies, D))]), np.concatenate([y, np.full(dummies, K)]), K
    )
    closed = np.concatenate([np.ravel(padded[0]), padded[1]])
    ratio = draws.var(axis=0, ddof=1) / closed
    assert np.all(np.abs(ratio - 1) < 0.12), np.round(ratio, 3)
    k_ary = KaryRandomizedResponse(epsilon=spec.label_epsilon, n_classes=K)
    unpadded = class_total_variance(k_ary, mechanism, t, y, K)
    unpadded_flat = np.concatenate([np.ravel(unpadded[0]), unpadded[1]])
    assert np.all(closed > unpadded_flat), (closed / unpadded_flat).round(2)  # the cost of the dummies
