"""The releases moved under common/mechanisms (issue 25 item 6), tested as mechanisms: exact output
distributions where the release is driven by one full-precision uniform (boosting's Laplace evaluation
pair, SPEC §12), exact report probabilities where it is discrete (the joint (label, sign) k-RR), and the
noises of objective perturbation recovered from real releases against their closed-form variances.

Tolerances from standard errors (SPEC §0); the exact checks use the float implementation's own cell
probabilities (:func:`~privfed.common.mechanisms.snapping.cell_probabilities`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.errors import ConfigError, EpsilonOutOfRange
from privfed.common.mechanisms import (
    EPSILON_CEILING,
    EPSILON_FLOOR,
    ErrorPairLaplace,
    ErrorPairResponse,
    LabelSignResponse,
    noisy_count,
)
from privfed.common.mechanisms.amp import AMP_FRACTION, AMP_RADIUS, AmpOutputNoise, norm_laplace_variance
from privfed.common.mechanisms.objective import ObjectivePerturbation
from privfed.common.mechanisms.objective_gaussian import GaussianObjectivePerturbation
from privfed.common.mechanisms.snapping import WIRE_GRID, cell_probabilities

EXCESS = 2.0**-25  # the float implementation's documented excess over epsilon (mechanisms/snapping.py)


def _coordinate_release(mech: ErrorPairLaplace, pair: tuple[float, float], j: int):
    """Coordinate ``j`` of the release of ``pair`` as a function of the uniform and its sign (SPEC §12)."""

    def release(u: np.ndarray, sign: np.ndarray) -> np.ndarray:
        pairs = np.tile(np.asarray(pair, dtype=np.float64), (u.size, 1))
        uu = np.stack([u.ravel()] * 2, axis=1)
        signed = np.stack([sign.ravel() * mech.unit_scale] * 2, axis=1)
        return mech.from_uniform(pairs, uu, signed)[:, j].reshape(u.shape)

    return release


def _cells(mech: ErrorPairLaplace, centres: list[float], rng: np.random.Generator, width: int = 200) -> np.ndarray:
    """Cells next to both clamps, around each input and at random, in weight units."""
    half = mech.row_bound / 2.0
    grid = mech.output_grid.grid * half
    n = math.floor(mech.bound / grid)
    idx = np.concatenate(
        [np.arange(-n, -n + width), np.arange(n - width + 1, n + 1), rng.integers(-n, n + 1, 1000)]
        + [np.arange(round(c / grid) - width // 2, round(c / grid) + width // 2) for c in centres]
    )
    return np.unique(np.clip(idx, -n, n)) * grid


@pytest.mark.parametrize("eps", [EPSILON_FLOOR, 1.0, EPSILON_CEILING], ids=["floor", "1", "ceiling"])
@pytest.mark.parametrize("max_rows", [1, 50])
def test_an_evaluation_pair_reaches_the_same_cells_from_neighbours_and_spends_its_epsilon(eps, max_rows):
    """Inputs of an owner's pair on a grid (its possible sums, ends included). Inputs one row apart (each
    coordinate moved by at most b) reach the same cells -- every cell, for a one-row owner, whose possible
    inputs are all neighbours; for a larger owner every cell within 700 noise scales of both, beyond which
    the uniform stops (ErrorPairLaplace's float-safety note: probability below e^-700, counted as delta) --
    and their probabilities differ by at most e^(eps/2) per coordinate, e^eps for the pair: the Laplace
    argument; the clamp cells attain it."""
    b = 1.5
    mech = ErrorPairLaplace(epsilon=eps, row_bound=b, max_rows=max_rows)
    inputs = [0.0, b / 3, b, b * max_rows / 2, b * max_rows - b, b * max_rows]
    cells = _cells(mech, inputs, np.random.default_rng(3))
    assert np.all(np.abs(cells) <= mech.bound) and np.all(cells / WIRE_GRID == np.rint(cells / WIRE_GRID))
    for j in (0, 1):
        pair = lambda v: (v, b * max_rows) if j == 0 else (0.0, v)  # noqa: E731 - the other coordinate fixed
        probs = np.array([cell_probabilities(_coordinate_release(mech, pair(v), j), cells) for v in inputs])
        if max_rows == 1:
            assert np.all(probs > 0), "some output is unreachable from some input"
        for v, w, p, q in zip(inputs, inputs[1:], probs, probs[1:]):
            if w - v > b:
                continue  # not neighbours
            near = np.maximum(np.abs(cells - v), np.abs(cells - w)) <= 700 * mech.scale
            assert np.all(p[near] > 0) and np.all(q[near] > 0), "neighbours reach different outputs"
            ratio = np.abs(np.log(p[near]) - np.log(q[near])).max()
            assert ratio <= eps / 2 + EXCESS
            assert ratio >= eps / 2 * (w - v) / b - 2 * EXCESS  # attained at the clamps


def test_an_evaluation_pair_has_the_closed_form_moments_exactly():
    """Every cell of one coordinate enumerated at the ceiling ε: mass 1, mean the input (the clamp does
    not bind inside the public range), variance ``variance()``'s ``8 b^2 / eps^2``; bias() is zero there."""
    mech = ErrorPairLaplace(epsilon=EPSILON_CEILING, row_bound=2.0, max_rows=1)
    half = mech.row_bound / 2.0
    n = round(mech.output_grid.bound / mech.output_grid.grid)
    cells = np.arange(-n, n + 1) * mech.output_grid.grid * half
    pair = (0.5, 2.0)
    p = cell_probabilities(_coordinate_release(mech, pair, 0), cells)
    assert p.sum() == pytest.approx(1.0, abs=1e-12) and np.all(p > 0)
    grid = mech.output_grid.grid * half
    assert abs(float(p @ cells) - pair[0]) <= grid**2 / (4 * mech.scale) + 1e-12
    assert float(p @ (cells - pair[0]) ** 2) == pytest.approx(mech.variance([pair])[0, 0], rel=1e-5)
    assert np.all(mech.bias([pair]) == 0.0)


@pytest.mark.parametrize(
    "kw, error",
    [
        (dict(epsilon=EPSILON_FLOOR / 2), EpsilonOutOfRange),
        (dict(epsilon=EPSILON_CEILING * 2), EpsilonOutOfRange),
        (dict(epsilon=0.0), ConfigError),
        (dict(row_bound=-1.0), ConfigError),
        (dict(max_rows=0), ConfigError),
        (dict(epsilon="1"), TypeError),
    ],
)
@pytest.mark.parametrize("mechanism", [ErrorPairLaplace, ErrorPairResponse])
def test_evaluation_mechanisms_refuse_bad_public_parameters(mechanism, kw, error):
    with pytest.raises(error):
        mechanism(**(dict(epsilon=1.0, row_bound=1.0, max_rows=1) | kw))


def test_a_laplace_evaluation_whose_grid_cannot_be_built_is_refused_before_any_row():
    """A public row bound too wide for the grid (2^55 cells at eps = 30) used to pass the owner's validate, be
    debited, then fail inside ``privatize`` (and in its fallback): refused ``internal`` after the debit. The
    grid is public, so it is built, and refused, when the mechanism is."""
    with pytest.raises(ConfigError, match="cells"):
        ErrorPairLaplace(epsilon=EPSILON_CEILING, row_bound=1.0, max_rows=2**40)
    wide = ErrorPairLaplace(epsilon=EPSILON_CEILING, row_bound=1.0, max_rows=2**35)  # 2^51 cells: built, releases
    assert np.all(np.abs(wide.privatize(np.array([[1.0, 2.0]]), np.random.default_rng(1))) <= wide.bound)


def test_the_randomized_evaluation_reports_only_its_four_values_with_their_probabilities():
    """The 3-ary release's exact distribution: for every input on a grid, the probability of each released
    pair is q + (p - q) P[category] (the k-RR of a sampled category), every value is reachable from every
    input, and the ratio between any two inputs is at most e^eps (owner-level LDP); Monte Carlo agrees."""
    eps, b, rows = 1.2, 1.0, 2
    mech = ErrorPairResponse(epsilon=eps, row_bound=b, max_rows=rows)
    rr, B = mech.oracle, mech.owner_bound
    inputs = [(0.0, 0.0), (0.0, 2.0), (1.0, 1.5), (2.0, 2.0)]
    exact = []
    for e, w in inputs:
        category = np.array([e / B, (w - e) / B, 1 - w / B])
        exact.append(rr.q + (rr.p - rr.q) * category)  # P[report = miss, hit, nothing]
    exact = np.array(exact)
    assert np.all(exact > 0) and np.log(exact.max(axis=0) / exact.min(axis=0)).max() <= eps + 1e-12
    rng = np.random.default_rng(8)
    n = 60_000
    values = B / (rr.p - rr.q) * np.array([[1 - rr.q, 1 - 2 * rr.q], [-rr.q, 1 - 2 * rr.q], [-rr.q, -2 * rr.q]])
    for pair, probs in zip(inputs, exact):
        out = mech.privatize(np.tile(pair, (n, 1)), rng)
        freq = np.array([np.mean(np.all(np.isclose(out, v), axis=1)) for v in values])
        assert freq.sum() == pytest.approx(1.0)
        assert np.all(np.abs(freq - probs) <= 5 * np.sqrt(probs * (1 - probs) / n))
        assert np.all(np.abs(out) <= mech.output_bounds[1])


# --- the joint (label, sign) response of boosted NCC ----------------------------------------------------
def _rows(rng: np.random.Generator, n: int = 300, k: int = 3, d: int = 4):
    t = rng.uniform(-1.0, 1.0, (n, d))
    y = rng.integers(0, k, n)
    u = rng.uniform(0.0, 1.0, n)
    return t, y, u


@pytest.mark.parametrize("eps", [EPSILON_FLOOR, 0.5, 5.0, EPSILON_CEILING])
def test_the_joint_response_is_epsilon_ldp_between_any_rows_exactly(eps):
    """P[j, r | row] computed exactly for extreme rows (corners, every label, weights 0 and 1): every ratio
    is at most e^eps, the largest reaches it, and the distribution sums to one."""
    mech = LabelSignResponse(epsilon=eps, n_classes=3, d=4)
    rows = [(np.full(4, s), c, u) for s in (-1.0, 1.0) for c in range(3) for u in (0.0, 1.0)]
    probs = np.array([mech.report_probabilities(t, c, u) for t, c, u in rows])
    assert np.allclose(probs.sum(axis=(1, 2)), 1.0)
    log_ratio = np.log(probs.max(axis=0)) - np.log(probs.min(axis=0))
    assert log_ratio.max() <= eps + 1e-12 and log_ratio.max() == pytest.approx(eps, rel=1e-4)  # k-RR's q in floats
    assert mech.output_bounds == (0.0, 6.0)


def test_the_joint_response_is_unbiased_with_its_closed_form_variance():
    """Over R draws of the same rows: S (K, d) and U (K,) within 4 s.e. of the truth, sample variances
    within 15 % of ``variance()`` (chi-square(R-1)/(R-1) has sd 0.045), ``bias()`` zero."""
    gen = np.random.Generator(np.random.PCG64(11))
    reps, k = 800, 3
    t, y, u = _rows(gen, k=k)
    mech = LabelSignResponse(epsilon=2.0, n_classes=k, d=4)
    true_sums = np.array([(u[:, None] * t)[y == c].sum(axis=0) for c in range(k)])
    true_counts = np.array([u[y == c].sum() for c in range(k)])
    est = [mech.class_sums(*mech.privatize(t, y, gen, u)) for _ in range(reps)]
    sums, counts = np.stack([e[0] for e in est]), np.stack([e[1] for e in est])
    var_sums, var_counts = mech.variance(t, y, u)
    for values, truth, var in ((sums, true_sums, var_sums), (counts, true_counts, var_counts)):
        se = values.std(axis=0, ddof=1) / math.sqrt(reps)
        assert np.all(np.abs(values.mean(axis=0) - truth) < 4 * se)
        np.testing.assert_allclose(values.var(axis=0, ddof=1) / var, 1.0, atol=0.15)
    assert all(np.all(b == 0.0) for b in mech.bias(t, y, u))


def test_the_joint_response_refuses_reports_and_rows_outside_its_domain(rng):
    mech = LabelSignResponse(epsilon=1.0, n_classes=3, d=4)
    j, r = mech.privatize(np.zeros((5, 4)), np.array([0, 1, 2, 0, 1]), rng)
    assert j.shape == r.shape == (5, 1) and r.dtype == j.dtype == np.int64
    for coords, reports in (([[4]], [[0]]), ([[0]], [[7]]), ([[-1]], [[0]])):
        with pytest.raises(ConfigError):
            mech.class_sums(coords, reports)
    with pytest.raises(ConfigError):
        mech.privatize(np.full((1, 4), 2.0), [0], rng)  # outside [-1, 1]
    with pytest.raises(ConfigError):
        mech.privatize(np.zeros((1, 4)), [3], rng)  # no such class
    with pytest.raises(ConfigError):
        mech.privatize(np.zeros((1, 4)), [0], rng, weights=[1.5])


# --- objective perturbation and AMP: the noise a real release adds --------------------------------------
def test_objective_perturbation_adds_noise_of_its_closed_form_variance():
    """With a zero loss the perturbed objective's minimiser is ``-b / (m reg)`` exactly, so each release
    gives back its noise ``b`` (up to AMP's output noise, r = 1e-6): E b_j = 0 and Var b_j = variance(),
    ``(d + 1) / rate^2``, within 5 s.e. (SPEC §0; the radius is Gamma(d, 1/rate))."""
    d, m, lam = 3, 50, 0.5
    mech = ObjectivePerturbation(epsilon=2.0, lam=lam, curvature=1.0, d=d, rows=m, problems=4)
    rate, Delta = mech.adjustment
    rng = np.random.default_rng(4)
    zero = np.zeros_like  # a zero loss's gradient
    b = np.concatenate([-m * (lam + Delta) * mech.privatize(zero, 64, rng) for _ in range(1500)])
    var = mech.variance()
    assert var == norm_laplace_variance(d, 2 * rate) == pytest.approx((d + 1) / rate**2)
    draws = b.size
    assert np.all(np.abs(b.mean(axis=0)) <= 5 * math.sqrt(var / b.shape[0]))
    kurtosis = 3.0 * (d + 3) / (d + 1)  # E b_j^4 = E r^4 E u_j^4 = 3 (d + 1)(d + 3) theta^4
    assert abs(float(np.mean(b**2)) - var) <= 5 * var * math.sqrt((kurtosis - 1) / draws)
    exact = ObjectivePerturbation(epsilon=math.inf, lam=lam, curvature=1.0, d=d, rows=m)
    assert np.all(exact.privatize(zero, 64, rng) == 0.0) and exact.variance() == 0.0


def test_gaussian_objective_perturbation_adds_noise_of_variance_sigma_squared():
    """Zero loss: the release is ``-B / Lambda`` plus AMP's noise, so ``-Lambda F`` recovers B, whose entries
    have variance ``variance() = sigma^2`` (5 s.e.)."""
    mech = GaussianObjectivePerturbation(epsilon=1.5, delta=1e-5, n_classes=3, trace_bound=1.0)
    rng = np.random.default_rng(6)
    zero = np.zeros_like  # a zero loss's gradient
    B = np.concatenate([(-mech.Lambda * mech.privatize(zero, (3, 4), 0, rng)).ravel() for _ in range(800)])
    amp = AmpOutputNoise(epsilon=mech.epsilon_out, radius=AMP_RADIUS, d=12)
    var = mech.variance() + mech.Lambda**2 * amp.variance()
    assert mech.epsilon_out == AMP_FRACTION * 1.5 and mech.variance() == mech.sigma**2
    assert abs(B.mean()) <= 5 * math.sqrt(var / B.size)
    assert abs(float(np.mean(B**2)) - var) <= 5 * var * math.sqrt(2 / B.size)


@pytest.mark.parametrize("kw", [dict(epsilon=EPSILON_FLOOR / 10), dict(epsilon=100.0), dict(delta=0.0)])
def test_gaussian_objective_perturbation_refuses_what_it_cannot_release(kw):
    with pytest.raises(ConfigError):
        GaussianObjectivePerturbation(**(dict(epsilon=1.0, delta=1e-5, n_classes=3, trace_bound=1.0) | kw))


def test_the_dp_count_is_exact_only_at_infinite_epsilon(rng):
    assert noisy_count(7, epsilon=math.inf, rng=rng) == 7
    draws = [noisy_count(7, epsilon=1.0, rng=rng) for _ in range(400)]
    assert len(set(draws)) > 3 and all(isinstance(v, int) for v in draws)
