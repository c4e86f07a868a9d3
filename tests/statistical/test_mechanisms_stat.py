"""Statistical tests of the LDP mechanisms at n = 10^6 (SPEC §0-3).

Tolerances come from standard errors computed from the same sample, at 5 s.e. For
per-report variance we use ``V_hat = mean((t* - t)^2)`` (the input is known), whose s.e. is
``sd((t* - t)^2) / sqrt(M)``: about ``sqrt((kappa - 1) / M)`` relative, i.e. <= 0.25% at
M = 10^6 for the kurtoses here (Laplace: kappa = 6), so 5 s.e. sits well inside the 5% the
brief allows; each test also asserts that 5 s.e. < 5% so it keeps its power.

The float-safe release (SPEC §12) rounds a continuous report to its grid ``L`` and clamps it: the
mean may shift by the mechanism's ``bias_bound`` and ``E(t* - t)^2`` by at most
``2 L sqrt(V) + L^2``; both allowances are added explicitly and are far below the s.e.
"""

import itertools
import math

import numpy as np
import pytest

from privfed.common.mechanisms import (
    Duchi1D,
    DuchiMultidim,
    HybridMechanism,
    KaryRandomizedResponse,
    LaplaceMechanism,
    PiecewiseMechanism,
    PiecewiseMultidim,
)
from privfed.common.mechanisms.piecewise_multidim import sample_subsets

pytestmark = pytest.mark.slow

M = 1_000_000
Z = 5.0
T5 = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])


def assert_moments(mech, t_row, rng, n=M):
    """Unbiasedness and per-report variance of every coordinate, rows all equal to ``t_row``."""
    t_row = np.asarray(t_row, dtype=np.float64)
    reports = mech.privatize(np.broadcast_to(t_row, (n, t_row.size)), rng)
    lo, hi = mech.output_bounds
    assert np.all((reports >= lo) & (reports <= hi))
    v = mech.variance(t_row)
    grid = mech.output_grid.grid if hasattr(mech, "output_grid") else 0.0
    err = reports - t_row
    mean_err = err.mean(axis=0)
    assert np.all(np.abs(mean_err) <= Z * np.sqrt(v / n) + getattr(mech, "bias_bound", 0.0)), (mean_err, np.sqrt(v / n))
    sq = err * err
    v_hat = sq.mean(axis=0)
    se = sq.std(axis=0) / math.sqrt(n)
    assert np.all(Z * se < 0.05 * v), "test lost its power: 5 s.e. exceeds 5% of V"
    allowance = Z * se + 2 * grid * np.sqrt(v) + grid**2 + 1e-10 * v  # + float rounding of constant reports
    assert np.all(np.abs(v_hat - v) <= allowance), (v_hat, v, se)
    return reports


def log_ratio_se(k1, k2, n1, n2):
    """s.e. of ``log(k1/n1) - log(k2/n2)`` for binomial counts (delta method)."""
    p1, p2 = k1 / n1, k2 / n2
    return math.sqrt((1 - p1) / (n1 * p1) + (1 - p2) / (n2 * p2))


def assert_binned(samples, edges, probs):
    """Bin counts against exact bin probabilities: every |z| <= 5, empty where probability 0."""
    counts, _ = np.histogram(samples, bins=edges)
    n = samples.size
    probs = np.asarray(probs)
    assert np.all(counts[probs == 0] == 0)
    pos = probs > 0
    z = (counts[pos] - n * probs[pos]) / np.sqrt(n * probs[pos] * (1 - probs[pos]))
    assert np.max(np.abs(z)) <= Z, np.max(np.abs(z))
    assert probs.sum() == pytest.approx(1.0, abs=1e-9)
    return counts


# --- moments -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mech",
    [
        LaplaceMechanism(epsilon=1.0, d=5),
        Duchi1D(epsilon=1.0, d=5),
        PiecewiseMechanism(epsilon=1.0, d=5),
        PiecewiseMechanism(epsilon=4.0, d=5),
        HybridMechanism(epsilon=1.0, d=5),
        HybridMechanism(epsilon=0.5, d=5),
    ],
    ids=repr,
)
def test_coordinatewise_moments(mech, rng):
    assert_moments(mech, T5, rng)


@pytest.mark.parametrize(
    "eps, t_row",
    [
        (0.5, [1.0, -0.2]),
        (1.0, [-1.0, 0.4, 0.0]),
        (1.0, [-1.0, -0.3, 0.5, 1.0]),
        (2.0, [1.0, 0.9, -0.1, 0.0, -0.7]),
        (1.0, [0.2, -0.4, 0.6, 1.0, -1.0, 0.0]),
    ],
)
def test_duchi_multidim_moments(eps, t_row, rng):
    assert_moments(DuchiMultidim(epsilon=eps, d=len(t_row)), t_row, rng)


@pytest.mark.parametrize(
    "eps, d, base, n",
    [
        (1.0, 5, "pm", M),  # k = 1
        (10.0, 10, "pm", M),  # k = 4, Floyd subsets
        (6.0, 5, "hm", M),  # k = 2
        (10.0, 4, "hm", M),  # k = d
        (30.0, 40, "pm", 200_000),  # k = 12 at the ceiling of epsilon
    ],
)
def test_algorithm4_moments(eps, d, base, n, rng):
    mech = PiecewiseMultidim(epsilon=eps, d=d, base=base)
    reports = assert_moments(mech, np.linspace(-1.0, 1.0, d), rng, n=n)
    nonzero = np.count_nonzero(reports, axis=1)
    assert nonzero.max() <= mech.k


@pytest.mark.parametrize("eps, d, base", [(5.0, 4, "pm"), (6.0, 4, "hm")])
def test_algorithm4_with_fixed_attributes_moments(eps, d, base, rng):
    mech = PiecewiseMultidim(epsilon=eps, d=d, base=base, attributes=1)  # the paper's rule: k = 2
    assert (mech.k, mech.attribute_epsilon) == (1, eps)
    reports = assert_moments(mech, np.linspace(-1.0, 1.0, d), rng)
    assert np.count_nonzero(reports, axis=1).max() == 1


# --- output distributions and the epsilon ratio ---------------------------------------------


def pm_cdf(x, t, eps):
    """CDF of the PM output written from SPEC §3.1's density (independent of the sampler)."""
    h = math.exp(eps / 2)
    c = (h + 1) / (h - 1)
    p = (math.exp(eps) - h) / (2 * h + 2)
    left = (c + 1) / 2 * t - (c - 1) / 2
    right = left + c - 1
    x = np.asarray(x, dtype=np.float64)
    return (
        p / math.exp(eps) * (np.clip(x, -c, left) + c)
        + p * (np.clip(x, left, right) - left)
        + p / math.exp(eps) * (np.clip(x, right, c) - right)
    )


@pytest.mark.parametrize("eps", [1.0, 3.0])
def test_pm_distribution_and_ratio(eps, rng):
    mech = PiecewiseMechanism(epsilon=eps)
    c = mech.constant
    edges = np.linspace(-c, c, 61)
    edges[0], edges[-1] = -c - 1e-6, c + 1e-6  # snapped extremes stay inside
    outputs = {}
    for t in (-1.0, 0.3, 1.0):
        outputs[t] = mech.privatize(np.full((M, 1), t), rng)[:, 0]
        assert_binned(outputs[t], edges, np.diff(pm_cdf(edges, t, eps)))
    # On [1, C] the density is p for t = 1 and p / e^eps for t = -1: the ratio e^eps is attained.
    k1 = np.count_nonzero(outputs[1.0] >= 1.0)
    k2 = np.count_nonzero(outputs[-1.0] >= 1.0)
    assert k1 / M == pytest.approx(mech.p_centre, abs=Z * math.sqrt(0.25 / M))
    assert abs(math.log(k1 / k2) - eps) <= Z * log_ratio_se(k1, k2, M, M)
    # and it is never exceeded, bin by bin
    c1, _ = np.histogram(outputs[1.0], bins=edges)
    c2, _ = np.histogram(outputs[-1.0], bins=edges)
    ses = np.sqrt(1 / c1 + 1 / c2)
    assert np.all(np.log(c1 / c2) <= eps + Z * ses) and np.all(np.log(c2 / c1) <= eps + Z * ses)


def test_laplace_distribution_and_ratio(rng):
    eps, d = 2.0, 2
    mech = LaplaceMechanism(epsilon=eps, d=d)
    b = mech.scale
    edges = np.concatenate([[-np.inf], np.linspace(-8.0, 8.0, 41), [np.inf]])

    def cdf(x, t):
        z = (x - t) / b
        return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0)), 1 - 0.5 * np.exp(-np.maximum(z, 0)))

    out = mech.privatize(np.broadcast_to([1.0, -1.0], (M, 2)), rng)
    assert_binned(out[:, 0], edges, np.diff(cdf(edges, 1.0)))
    assert_binned(out[:, 1], edges, np.diff(cdf(edges, -1.0)))
    # P[t* > 1 | t = 1] = 1/2, P[t* > 1 | t = -1] = exp(-2/b)/2: ratio e^(eps/d) per coordinate.
    k1, k2 = np.count_nonzero(out[:, 0] > 1.0), np.count_nonzero(out[:, 1] > 1.0)
    assert abs(math.log(k1 / k2) - eps / d) <= Z * log_ratio_se(k1, k2, M, M)


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_duchi_1d_ratio(eps, rng):
    mech = Duchi1D(epsilon=eps)
    out = mech.privatize(np.repeat([[1.0], [-1.0]], M, axis=0), rng)[:, 0]
    plus1, plus2 = np.count_nonzero(out[:M] > 0), np.count_nonzero(out[M:] > 0)
    assert abs(math.log(plus1 / plus2) - eps) <= Z * log_ratio_se(plus1, plus2, M, M)
    minus1, minus2 = M - plus1, M - plus2
    assert abs(math.log(minus2 / minus1) - eps) <= Z * log_ratio_se(minus2, minus1, M, M)


def duchi_exact(t, eps):
    """P(z | t) for every vertex z of {-1,1}^d (SPEC §2.2, ties at half weight), by enumeration."""
    d = len(t)
    p = math.exp(eps) / (math.exp(eps) + 1)
    vertices = np.array(list(itertools.product([-1, 1], repeat=d)))
    probs = np.zeros(len(vertices))
    for v in vertices:
        pv = np.prod((1 + v * np.asarray(t)) / 2)
        if pv == 0:
            continue
        s = vertices @ v
        w_plus = np.where(s > 0, 2.0 ** (1 - d), np.where(s == 0, 2.0**-d, 0.0))
        w_minus = np.where(s < 0, 2.0 ** (1 - d), np.where(s == 0, 2.0**-d, 0.0))
        probs += pv * (p * w_plus + (1 - p) * w_minus)
    return vertices, probs


def vertex_index(reports):
    """Index of each report's sign pattern in itertools.product([-1, 1], repeat=d) order."""
    d = reports.shape[1]
    return ((reports > 0) * (1 << np.arange(d - 1, -1, -1))).sum(axis=1)


@pytest.mark.parametrize("d", [2, 3, 4])
def test_duchi_multidim_vertex_probabilities_and_ratio(d, rng):
    eps = 1.0
    mech = DuchiMultidim(epsilon=eps, d=d)
    inputs = [np.ones(d), -np.ones(d), np.array([1.0, -1.0] * (d // 2) + [1.0] * (d % 2)), np.linspace(-0.6, 0.3, d)]
    freqs = []
    for t in inputs:
        vertices, exact = duchi_exact(t, eps)
        assert exact.sum() == pytest.approx(1.0)
        counts = np.bincount(vertex_index(mech.privatize(np.broadcast_to(t, (M, d)), rng)), minlength=2**d)
        z = (counts - M * exact) / np.sqrt(M * exact * (1 - exact))
        assert np.max(np.abs(z)) <= Z, (t, counts / M, exact)
        freqs.append(counts)
    # The ratio e^eps is attained at z = (1, ..., 1) for t = (1, ..., 1) against t = -(1, ..., 1) ...
    top = 2**d - 1
    k1, k2 = freqs[0][top], freqs[1][top]
    assert abs(math.log(k1 / k2) - eps) <= Z * log_ratio_se(k1, k2, M, M)
    # ... and never exceeded over all vertex outputs and these inputs,
    for a, b in itertools.permutations(freqs, 2):
        assert np.all(np.log(a / b) <= eps + Z * np.sqrt(1 / a + 1 / b))
    # while, exactly, the maximum over all pairs of vertex inputs (where it is attained:
    # P(z | t) is affine in each t_j) is e^eps.
    table = np.array([duchi_exact(v, eps)[1] for v in itertools.product([-1.0, 1.0], repeat=d)])
    ratio = (table[:, None, :] / table[None, :, :]).max()
    assert ratio == pytest.approx(math.exp(eps), rel=1e-12)


def test_algorithm4_ratio(rng):
    eps = 1.0
    mech = PiecewiseMultidim(epsilon=eps, d=2)  # k = 1: one attribute with the whole eps
    out = mech.privatize(np.repeat([[1.0, 0.0], [-1.0, 0.0]], M, axis=0), rng)
    region = mech.scale * 1.0  # (d/k) * [1, C]: PM's centre piece for t = 1
    k1, k2 = np.count_nonzero(out[:M, 0] >= region), np.count_nonzero(out[M:, 0] >= region)
    assert k1 / M == pytest.approx(0.5 * PiecewiseMechanism(epsilon=eps).p_centre, abs=Z * math.sqrt(0.25 / M))
    assert abs(math.log(k1 / k2) - eps) <= Z * log_ratio_se(k1, k2, M, M)


def test_hm_atoms(rng):
    eps, t = 1.0, 0.4
    mech = HybridMechanism(epsilon=eps)
    out = mech.privatize(np.full((M, 1), t), rng)[:, 0]
    c_d = Duchi1D(epsilon=eps).constant
    expected = (1 - mech.alpha) * (1 + t / c_d) / 2  # P[t* = +C_D]
    k = np.count_nonzero(out == c_d)
    assert abs(k / M - expected) <= Z * math.sqrt(expected * (1 - expected) / M)


@pytest.mark.parametrize("d, k", [(5, 1), (10, 4), (40, 20), (8, 7)])
def test_subsets_uniform(d, k, rng):
    n = 200_000
    idx = sample_subsets(n, d, k, rng)
    member = np.zeros((n, d), dtype=bool)
    np.put_along_axis(member, idx, True, axis=1)
    assert np.all(member.sum(axis=1) == k)
    p1 = k / d
    z1 = (member.sum(axis=0) - n * p1) / math.sqrt(n * p1 * (1 - p1))
    assert np.max(np.abs(z1)) <= Z
    if k >= 2:
        pairs = (member[:, :, None] & member[:, None, :]).sum(axis=0)[np.triu_indices(d, 1)]
        p2 = k * (k - 1) / (d * (d - 1))
        z2 = (pairs - n * p2) / math.sqrt(n * p2 * (1 - p2))
        assert np.max(np.abs(z2)) <= Z


def test_kary_rr_distribution_and_debias(rng):
    eps, k = 1.0, 4
    rr = KaryRandomizedResponse(epsilon=eps, n_classes=k)
    counts = {}
    for label in (0, 1):
        out = rr.privatize(np.full(M, label), rng)
        counts[label] = np.bincount(out, minlength=k)
        expected = np.full(k, rr.q)
        expected[label] = rr.p
        z = (counts[label] - M * expected) / np.sqrt(M * expected * (1 - expected))
        assert np.max(np.abs(z)) <= Z
    k1, k2 = counts[0][0], counts[1][0]
    assert abs(math.log(k1 / k2) - eps) <= Z * log_ratio_se(k1, k2, M, M)
    true = np.array([500_000, 300_000, 150_000, 50_000])
    labels = np.repeat(np.arange(k), true)
    est = rr.debias_counts(np.bincount(rr.privatize(labels, rng), minlength=k))
    assert np.all(np.abs(est - true) <= Z * np.sqrt(rr.count_variance(true)))
