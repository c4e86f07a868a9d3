"""Noise of the DP class sums (privfed.common.feddpdr.centroid): i.i.d. N(0, sigma^2) per entry with
sigma from the analytic Gaussian mechanism at sensitivity 1, and the coordinator's sum of N releases
has variance N sigma^2 per entry. Tolerances are 4 standard errors (SPEC §0)."""

import math

import numpy as np
import pytest
from scipy import stats

from privfed.common.feddpdr.centroid import class_sums_release, class_sums_sigma, dp_class_sums, exact_class_sums
from privfed.common.feddpdr.model import aggregate_classifier
from privfed.common.mechanisms.gaussian import analytic_gaussian_delta

pytestmark = pytest.mark.slow

DRAWS = 4000


def _rows(rng, n=30, k=4, K=3):
    Z = rng.standard_normal((n, k))
    Z /= np.maximum(1.0, np.linalg.norm(Z, axis=1, keepdims=True))
    return Z, rng.integers(0, K, n)


def _releases(Z, y, K, draws, *, epsilon, delta, rng):
    """``draws`` independent releases of ``dp_class_sums(Z, y, K)``, shape (draws, K, k + 1), drawn in one call.

    ``dp_class_sums`` is its mechanism (``class_sums_release``, element-wise i.i.d. noise) applied to the exact
    sums: checked here first, release for release, from the same generator states. The mechanism applied once
    to the exact sums stacked ``draws`` times then gives ``draws`` releases of the same joint law as ``draws``
    calls (about 0.5 ms each, the time of these tests, which is spent rebuilding the mechanism and the sums)."""
    exact = exact_class_sums(Z, y, K)
    release = class_sums_release(epsilon, delta)
    seen = []
    for seed in range(3):
        one, other = (np.random.Generator(np.random.PCG64(seed)) for _ in range(2))
        seen.append(dp_class_sums(Z, y, K, epsilon=epsilon, delta=delta, rng=one))
        assert np.array_equal(seen[-1], release.privatize(exact, other))
        assert not any(np.array_equal(seen[-1], before) for before in seen[:-1])  # fresh noise per generator state
    return release.privatize(np.broadcast_to(exact, (draws, *exact.shape)), rng)


@pytest.mark.parametrize("epsilon, delta", [(0.3, 1e-5), (1.25, 5e-6), (4.0, 1e-6)])
def test_noise_is_gaussian_with_the_calibrated_sigma(rng, epsilon, delta):
    Z, y = _rows(rng)
    exact = exact_class_sums(Z, y, 3)
    sigma = class_sums_sigma(epsilon, delta)
    # the calibration itself: the smallest sigma whose exact delta (Balle & Wang Thm 8) is <= delta
    assert analytic_gaussian_delta(sigma, epsilon, 1.0) <= delta < analytic_gaussian_delta(0.999 * sigma, epsilon, 1.0)
    noise = _releases(Z, y, 3, DRAWS, epsilon=epsilon, delta=delta, rng=rng) - exact
    flat = noise.reshape(DRAWS, -1)
    m = flat.shape[1]
    assert abs(flat.mean()) < 4 * sigma / math.sqrt(DRAWS * m)
    var = flat.var(axis=0, ddof=1).mean()
    assert abs(var / sigma**2 - 1) < 4 * math.sqrt(2 / ((DRAWS - 1) * m))
    assert stats.kstest(flat[:, 0] / sigma, "norm").pvalue > 1e-3
    corr = np.corrcoef(flat[:, :3].T)
    assert np.all(np.abs(corr[np.triu_indices(3, 1)]) < 4 / math.sqrt(DRAWS))


def test_summed_releases_have_n_times_the_variance_and_the_model_knows_it(rng):
    """The coordinator's total noise is N sigma^2 per entry, the variance centroid_coef debiases with."""
    parts = [_rows(rng, n=40) for _ in range(5)]
    eps, delta = 0.8, 1e-5
    sigma = class_sums_sigma(eps, delta)
    exact_total = sum(exact_class_sums(Z, y, 3) for Z, y in parts)
    # one call per owner: the owners' noises come from separate releases, as the coordinator's do
    totals = sum(_releases(Z, y, 3, DRAWS, epsilon=eps, delta=delta, rng=rng) for Z, y in parts)
    flat = (totals - exact_total).reshape(DRAWS, -1)
    m = flat.shape[1]
    assert abs(flat.var(axis=0, ddof=1).mean() / (5 * sigma**2) - 1) < 4 * math.sqrt(2 / ((DRAWS - 1) * m))


def test_debiased_class_mean_norm_is_unbiased(rng):
    """centroid_coef subtracts k v / count^2 from ||m_c||^2 (v = N sigma^2): over many federations the
    mean of its estimate matches the exact class-mean norm, and the raw (not debiased) norm does not."""
    k, K, eps, delta = 50, 2, 2.0, 1e-5
    centres = rng.standard_normal((K, k))
    centres *= 0.5 / np.linalg.norm(centres, axis=1, keepdims=True)
    parts = []
    for _ in range(5):
        y = rng.integers(0, K, 100)
        Z = centres[y] + 0.05 * rng.standard_normal((100, k))
        parts.append((Z / np.maximum(1.0, np.linalg.norm(Z, axis=1, keepdims=True)), y))
    exact_total = sum(exact_class_sums(Z, y, K) for Z, y in parts)
    target = 0.5 * np.sum((exact_total[:, :k] / exact_total[:, k:]) ** 2, axis=1)
    draws = 1000
    by_owner = [_releases(Z, y, K, draws, epsilon=eps, delta=delta, rng=rng) for Z, y in parts]
    releases = [[owner[i] for owner in by_owner] for i in range(draws)]
    coefs = np.stack(
        [aggregate_classifier(r, np.ones(5), model="centroid", epsilon=eps, delta=delta) for r in releases]
    )
    half_sq = -coefs[:, :, k] / math.sqrt(2.0)
    se = half_sq.std(axis=0, ddof=1) / math.sqrt(draws)
    assert np.all(np.abs(half_sq.mean(axis=0) - target) < 4 * se + 0.01 * target)  # 1 %: the noisy count's ratio bias
    raw = np.stack([0.5 * np.sum((sum(r)[:, :k] / sum(r)[:, k:]) ** 2, axis=1) for r in releases])
    assert np.all(raw.mean(axis=0) - target > 10 * se)  # without the correction the norm is biased up


def _hockey_stick(releases_d1: np.ndarray, mean_d0: np.ndarray, mean_d1: np.ndarray, sigma: float, eps: float):
    """Monte-Carlo ``delta(eps) = E_{S ~ M(D1)} [max(0, 1 - e^eps p_D0(S) / p_D1(S))]`` with the
    Gaussian densities of scale ``sigma`` around the two exact releases; returns (estimate, standard error)."""
    diff = (mean_d1 - mean_d0).ravel()
    centred = releases_d1.reshape(len(releases_d1), -1) - mean_d1.ravel()
    log_ratio = (centred @ diff) / sigma**2 + diff @ diff / (2 * sigma**2)  # log p_D1(S) - log p_D0(S)
    terms = np.maximum(0.0, 1.0 - np.exp(eps - log_ratio))
    return float(terms.mean()), float(terms.std(ddof=1) / math.sqrt(len(terms)))


@pytest.mark.parametrize("epsilon, delta", [(0.3, 0.05), (1.0, 0.01)])
def test_release_on_neighbours_meets_epsilon_delta_and_the_bound_is_tight(rng, epsilon, delta):
    """End to end on the worst-case neighbours (D1 = D0 plus one row on the unit sphere): releases drawn
    by dp_class_sums on D1 give a hockey-stick divergence to D0's output distribution of at most delta
    (within 4 standard errors), and a 20 % smaller sigma would exceed it (the test can fail)."""
    Z, y = _rows(rng, n=20, k=4, K=3)
    extra = rng.standard_normal(4)
    Z1, y1 = np.vstack([Z, extra / np.linalg.norm(extra)]), np.append(y, 2)
    S0, S1 = exact_class_sums(Z, y, 3), exact_class_sums(Z1, y1, 3)
    assert math.isclose(np.linalg.norm(S1 - S0), 1.0)  # the sensitivity is reached
    sigma = class_sums_sigma(epsilon, delta)
    draws = _releases(Z1, y1, 3, 40000, epsilon=epsilon, delta=delta, rng=rng)
    estimate, se = _hockey_stick(draws, S0, S1, sigma, epsilon)
    assert estimate <= delta + 4 * se
    assert estimate > 0.5 * delta  # the analytic calibration is tight, not loose
    tighter = S1 + (draws - S1) * 0.8  # the same draws at 0.8 sigma
    over, se_over = _hockey_stick(tighter, S0, S1, 0.8 * sigma, epsilon)
    assert over > delta + 4 * se_over
