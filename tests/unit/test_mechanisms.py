"""Unit tests of the LDP mechanisms: SPEC §1-3 table values, validation, reproducibility, support."""

import math
import warnings

import numpy as np
import pytest

from privfed.common.errors import ConfigError, EpsilonOutOfRange
from privfed.common.mechanisms import (
    HM_EPSILON_STAR,
    MECHANISMS,
    Duchi1D,
    DuchiMultidim,
    HybridMechanism,
    IdentityMechanism,
    KaryRandomizedResponse,
    LaplaceMechanism,
    Mechanism,
    PiecewiseMechanism,
    PiecewiseMultidim,
    duchi_constant,
    duchi_multidim_constant,
    estimate_mean,
    make_mechanism,
    pm_constant,
    snap,
)
from privfed.common.mechanisms.piecewise_multidim import sample_subsets
from privfed.common.mechanisms.snapping import EPSILON_CEILING, EPSILON_FLOOR

ALL_BUILDERS = {
    "laplace": lambda eps, d: LaplaceMechanism(epsilon=eps, d=d),
    "duchi1d": lambda eps, d: Duchi1D(epsilon=eps, d=d),
    "duchi": lambda eps, d: DuchiMultidim(epsilon=eps, d=d),
    "pm1d": lambda eps, d: PiecewiseMechanism(epsilon=eps, d=d),
    "hm": lambda eps, d: HybridMechanism(epsilon=eps, d=d),
    "pm": lambda eps, d: PiecewiseMultidim(epsilon=eps, d=d),
    "pm-hm": lambda eps, d: PiecewiseMultidim(epsilon=eps, d=d, base="hm"),
}
CONTINUOUS = {"laplace", "pm1d", "pm"}


def _rows(rng, n, d):
    return rng.uniform(-1.0, 1.0, size=(n, d))


# --- SPEC tables ----------------------------------------------------------------------------


@pytest.mark.parametrize("eps, b, v", [(0.5, 4, 32), (1, 2, 8), (2, 1, 2)])
def test_laplace_table(eps, b, v):
    mech = LaplaceMechanism(epsilon=eps, d=1)
    assert mech.scale == pytest.approx(b, rel=1e-15)
    assert mech.variance(0.3) == pytest.approx(v, rel=1e-15)
    # the float-safe release clamps 40 scales beyond [-1, 1], rounded down to its grid (SPEC §12)
    grid = mech.output_grid.grid
    assert mech.output_bounds == (-math.floor((1 + 40 * b) / grid) * grid, math.floor((1 + 40 * b) / grid) * grid)


def test_laplace_splits_budget_over_d():
    mech = LaplaceMechanism(epsilon=1.0, d=4)
    assert mech.scale == pytest.approx(8.0)  # b = 2d/eps
    np.testing.assert_allclose(mech.variance(np.zeros(4)), 8 * 16 / 1.0)  # 8 d^2 / eps^2


@pytest.mark.parametrize(
    "eps, c, p_half, v0, v1",
    [
        (0.5, 4.082988, 0.561230, 16.670792, 15.670792),
        (1, 2.163953, 0.615529, 4.682694, 3.682694),
        (2, 1.313035, 0.690399, 1.724062, 0.724062),
        (4, 1.037315, 0.741007, 1.076022, 0.076022),
    ],
)
def test_duchi_1d_table(eps, c, p_half, v0, v1):
    mech = Duchi1D(epsilon=eps)
    assert mech.constant == pytest.approx(c, abs=1e-6)
    # P[+ | t] = 1/2 + t (e^eps - 1)/(2 e^eps + 2), written as (1 + t/C_D)/2
    assert (1 + 0.5 / mech.constant) / 2 == pytest.approx(p_half, abs=1e-6)
    np.testing.assert_allclose(mech.variance(np.array([0.0, 1.0, -1.0])), [v0, v1, v1], atol=1e-6)
    assert mech.output_bounds == (-mech.constant, mech.constant)


@pytest.mark.parametrize(
    "d, b05, b1, b2, v0",
    [
        (1, 4.082988, 2.163953, 1.313035, 4.682694),
        (2, 8.165976, 4.327907, 2.626071, 18.730778),
        (3, 8.165976, 4.327907, 2.626071, 18.730778),
        (4, 10.887968, 5.770542, 3.501427, 33.299160),
        (5, 10.887968, 5.770542, 3.501427, 33.299160),
        (6, 13.065562, 6.924651, 4.201713, 47.950790),
    ],
)
def test_duchi_multidim_table(d, b05, b1, b2, v0):
    for eps, b in [(0.5, b05), (1, b1), (2, b2)]:
        assert DuchiMultidim(epsilon=eps, d=d).constant == pytest.approx(b, abs=1e-6)
    mech = DuchiMultidim(epsilon=1, d=d)
    np.testing.assert_allclose(mech.variance(np.zeros(d)), v0, atol=1e-6)
    np.testing.assert_allclose(mech.variance(np.ones(d)), v0 - 1, atol=1e-6)


@pytest.mark.parametrize("d", [1, 2, 7, 64, 1000, 20001, 20002])
def test_duchi_constant_matches_exact_binomial(d):
    m = (d - 1) // 2
    exact = duchi_constant(1.0) * ((1 << (d - 1)) / math.comb(d - 1, m))  # big-int division, correctly rounded
    # gammaln(d) ~ d ln d carries an absolute error ~ 1e-16 d ln d, which becomes B's relative error.
    assert duchi_multidim_constant(d, 1.0) == pytest.approx(exact, rel=1e-14 + 1e-15 * d * math.log(d + 1))


def test_duchi_constant_large_d_grows_like_sqrt_d():
    # binom(d-1, (d-1)/2) ~ 2^(d-1) sqrt(2 / (pi (d-1))), so B ~ C_D sqrt(pi (d-1) / 2).
    for d in (10**5 + 1, 10**7 + 1):
        b = duchi_multidim_constant(d, 1.0)
        assert math.isfinite(b)
        assert b / (duchi_constant(1.0) * math.sqrt(math.pi * (d - 1) / 2)) == pytest.approx(1.0, rel=1e-5)


@pytest.mark.parametrize(
    "eps, c, p, p_centre, l0, v0, v1",
    [
        (0.5, 8.041623, 0.079836, 0.562177, -3.520812, 17.701757, 21.222569),
        (1, 4.082988, 0.201901, 0.622459, -1.541494, 3.682103, 5.223597),
        (2, 2.163953, 0.628082, 0.731059, -0.581977, 0.645588, 1.227565),
        (4, 1.313035, 2.813731, 0.880797, -0.156518, 0.084836, 0.241354),
    ],
)
def test_pm_table(eps, c, p, p_centre, l0, v0, v1):
    mech = PiecewiseMechanism(epsilon=eps)
    assert mech.constant == pytest.approx(c, abs=1e-6)
    assert mech.p == pytest.approx(p, abs=1e-6)
    assert mech.p_centre == pytest.approx(p_centre, abs=1e-6)
    left, right = mech.centre_interval(0.0)
    assert left == pytest.approx(l0, abs=1e-6)
    assert right - left == pytest.approx(mech.constant - 1, abs=1e-12)
    assert (right - left) * mech.p == pytest.approx(mech.p_centre, rel=1e-12)  # centre mass
    np.testing.assert_allclose(mech.variance(np.array([0.0, 1.0, -1.0])), [v0, v1, v1], atol=1e-6)
    lo, hi = mech.output_bounds  # C rounded down to the grid (SPEC §12)
    assert hi == -lo and mech.constant - mech.output_grid.grid < hi <= mech.constant


@pytest.mark.parametrize(
    "d, eps, k, base, v0, v1",
    [
        (5, 1, 1, "pm", 18.410517, 30.117987),
        (5, 1, 1, "hm", 21.444962, 25.444962),
        (5, 6, 2, "pm", 0.514326, 2.732368),
        (10, 5, 2, "pm", 1.744207, 7.751963),
        (10, 10, 4, "pm", 0.872104, 3.375981),
        (4, 10, 4, "hm", 0.647049, 0.647049),
    ],
)
def test_algorithm4_table(d, eps, k, base, v0, v1):
    mech = PiecewiseMultidim(epsilon=eps, d=d, base=base)
    assert mech.k == k
    assert mech.attribute_epsilon == pytest.approx(eps / k)
    np.testing.assert_allclose(mech.variance(np.zeros(d)), v0, atol=1e-6)
    np.testing.assert_allclose(mech.variance(np.ones(d)), v1, atol=1e-6)


@pytest.mark.parametrize("d, eps, k", [(3, 30, 3), (10, 2, 1), (10, 2.5, 1), (10, 4.99, 1), (10, 5, 2), (64, 0.1, 1)])
def test_algorithm4_k(d, eps, k):
    assert PiecewiseMultidim(epsilon=eps, d=d).k == k


@pytest.mark.parametrize("base", ["pm", "hm"])
def test_algorithm4_refuses_an_attribute_epsilon_below_the_floor(base):
    """Each of the k attributes is released at eps/k; the float argument's excess (2^-25 per release, SPEC §12)
    stays a small share of eps only above the floor, so a fixed k that puts eps/k below it is refused when the
    mechanism is built (public parameters), as a whole row's eps below the floor is."""
    with pytest.raises(EpsilonOutOfRange):
        PiecewiseMultidim(epsilon=1e-5, d=20, attributes=10, base=base)
    assert PiecewiseMultidim(epsilon=1e-4, d=20, attributes=10, base=base).attribute_epsilon == pytest.approx(1e-5)


@pytest.mark.parametrize("eps, v", [(1, 4.288992), (2, 1.042336), (4, 0.218979)])
def test_hm_table(eps, v):
    mech = HybridMechanism(epsilon=eps)
    np.testing.assert_allclose(mech.variance(np.array([-1.0, -0.3, 0.0, 0.8, 1.0])), v, atol=1e-6)
    assert mech.alpha == pytest.approx(1 - math.exp(-eps / 2))


def test_hm_below_threshold_is_duchi():
    assert HM_EPSILON_STAR == pytest.approx(0.6093524930, abs=1e-10)
    mech = HybridMechanism(epsilon=0.5)
    assert mech.alpha == 0.0
    t = np.linspace(-1, 1, 7)
    np.testing.assert_allclose(mech.variance(t), Duchi1D(epsilon=0.5).variance(t))
    assert mech.output_bounds == Duchi1D(epsilon=0.5).output_bounds


@pytest.mark.parametrize("eps, k", [(1.0, 2), (1.0, 5), (3.0, 10)])
def test_kary_rr_probabilities(eps, k):
    rr = KaryRandomizedResponse(epsilon=eps, n_classes=k)
    assert rr.p == pytest.approx(math.exp(eps) / (math.exp(eps) + k - 1), rel=1e-14)
    assert rr.q == pytest.approx(1 / (math.exp(eps) + k - 1), rel=1e-14)
    assert rr.p / rr.q == pytest.approx(math.exp(eps), rel=1e-12)
    assert rr.p + (k - 1) * rr.q == pytest.approx(1.0, rel=1e-14)


def test_kary_rr_debias_inverts_expected_counts():
    rr = KaryRandomizedResponse(epsilon=1.0, n_classes=4)
    true = np.array([[100.0, 0.0, 250.0, 50.0], [1.0, 2.0, 3.0, 4.0]])
    total = true.sum(axis=1, keepdims=True)
    expected_reports = true * rr.p + (total - true) * rr.q
    np.testing.assert_allclose(rr.debias_counts(expected_reports), true, atol=1e-9)
    assert rr.count_variance(true).shape == true.shape


# --- large epsilon stays finite ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
@pytest.mark.parametrize("eps", [20.0, EPSILON_CEILING])
def test_large_epsilon_is_finite_and_quiet(name, eps, rng):
    mech = ALL_BUILDERS[name](eps, 3)
    t = _rows(rng, 200, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = mech.privatize(t, rng)
        var = mech.variance(t)
        lo, hi = mech.output_bounds
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(var)) and np.all(var >= 0)
    assert np.all((out >= lo) & (out <= hi))


# --- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
@pytest.mark.parametrize(
    "eps, exc",
    [
        ("1", TypeError),
        (None, TypeError),
        (True, TypeError),
        (1 + 0j, TypeError),
        ([1.0], TypeError),
        (0, ConfigError),
        (-1.0, ConfigError),
        (math.nan, ConfigError),
        (math.inf, ConfigError),
    ],
)
def test_invalid_epsilon(name, eps, exc):
    with pytest.raises(exc, match="epsilon"):
        ALL_BUILDERS[name](eps, 2)


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
@pytest.mark.parametrize(
    "d, exc", [(2.0, TypeError), ("3", TypeError), (True, TypeError), (0, ConfigError), (-2, ConfigError)]
)
def test_invalid_d(name, d, exc):
    with pytest.raises(exc, match="d must be an int"):
        ALL_BUILDERS[name](1.0, d)


def test_numpy_scalars_accepted():
    mech = DuchiMultidim(epsilon=np.float32(0.5), d=np.int64(3))
    assert type(mech.epsilon) is float and type(mech.d) is int
    assert mech.epsilon == 0.5 and mech.d == 3


def test_infinite_epsilon_message_points_to_make_mechanism():
    with pytest.raises(ConfigError, match="make_mechanism"):
        PiecewiseMultidim(epsilon=math.inf, d=2)


def test_mechanisms_are_frozen_and_keyword_only():
    mech = LaplaceMechanism(epsilon=1.0, d=2)
    with pytest.raises(AttributeError):
        mech.epsilon = 2.0
    with pytest.raises(TypeError):
        LaplaceMechanism(1.0, 2)
    with pytest.raises(TypeError):
        Mechanism(epsilon=1.0, d=2)  # abstract


def test_algorithm4_invalid_base():
    with pytest.raises(ConfigError, match="base"):
        PiecewiseMultidim(epsilon=1.0, d=2, base="duchi")
    with pytest.raises(TypeError, match="base"):
        PiecewiseMultidim(epsilon=1.0, d=2, base=None)


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
def test_privatize_rejects_bad_input(name, rng):
    mech = ALL_BUILDERS[name](1.0, 3)
    good = np.zeros((4, 3))
    with pytest.raises(TypeError, match="Generator"):
        mech.privatize(good, None)
    with pytest.raises(TypeError, match="Generator"):
        mech.privatize(good, np.random.RandomState(0))
    with pytest.raises(ConfigError, match=r"shape \(n, 3\)"):
        mech.privatize(np.zeros(3), rng)
    with pytest.raises(ConfigError, match=r"shape \(n, 3\)"):
        mech.privatize(np.zeros((4, 2)), rng)
    with pytest.raises(ConfigError, match="to_unit"):
        mech.privatize(np.full((4, 3), 1.001), rng)
    with pytest.raises(ConfigError, match=r"\[-1, 1\]"):
        mech.privatize(np.array([[0.0, np.nan, 0.0]]), rng)
    with pytest.raises(ConfigError, match=r"\[-1, 1\]"):
        mech.privatize(np.array([[0.0, -np.inf, 0.0]]), rng)
    with pytest.raises(TypeError, match="real-valued"):
        mech.privatize(np.array([["a", "b", "c"]]), rng)
    with pytest.raises(TypeError, match="real-valued"):
        mech.privatize(np.ones((2, 3), dtype=bool), rng)
    with pytest.raises(ConfigError):
        mech.variance(np.array([2.0]))


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
def test_privatize_tolerates_rounding_outside_unit_interval(name, rng):
    mech = ALL_BUILDERS[name](1.0, 2)
    out = mech.privatize(np.array([[1.0 + 1e-13, -1.0 - 1e-13], [0.5, 0.0]]), rng)
    assert out.shape == (2, 2) and np.all(np.isfinite(out))
    np.testing.assert_array_equal(mech.variance(np.array([1.0 + 1e-13])), mech.variance(np.array([1.0])))


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
def test_privatize_empty_and_integer_input(name, rng):
    mech = ALL_BUILDERS[name](1.0, 2)
    assert mech.privatize(np.zeros((0, 2)), rng).shape == (0, 2)
    assert mech.privatize(np.array([[1, -1], [0, 1]]), rng).dtype == np.float64


def test_make_mechanism():
    assert MECHANISMS == ("pm", "hm", "duchi", "laplace")
    assert isinstance(make_mechanism("pm", epsilon=6.0, d=5), PiecewiseMultidim)
    assert make_mechanism("pm", epsilon=6.0, d=5).k == 2
    hm = make_mechanism("hm", epsilon=6.0, d=5)  # the same attribute sampling, HM for each attribute
    assert isinstance(hm, PiecewiseMultidim) and hm.base == "hm" and hm.k == 2
    assert make_mechanism("pm", epsilon=6.0, d=5).base == "pm"
    assert isinstance(make_mechanism("duchi", epsilon=1.0, d=5), DuchiMultidim)
    lap = make_mechanism("laplace", epsilon=2.0, d=5)
    assert isinstance(lap, LaplaceMechanism) and lap.scale == pytest.approx(5.0)
    with pytest.raises(ConfigError, match="choose one of"):
        make_mechanism("gaussian", epsilon=1.0, d=2)
    with pytest.raises(TypeError, match="str"):
        make_mechanism(3, epsilon=1.0, d=2)
    with pytest.raises(TypeError):
        make_mechanism("pm", epsilon="1", d=2)
    with pytest.raises(ConfigError):
        make_mechanism("pm", epsilon=0.0, d=2)
    with pytest.raises(ConfigError):
        make_mechanism("pm", epsilon=math.inf, d=0)


@pytest.mark.parametrize("name", MECHANISMS)
def test_infinite_epsilon_is_identity(name, rng):
    mech = make_mechanism(name, epsilon=math.inf, d=3)
    assert isinstance(mech, IdentityMechanism) and mech.epsilon == math.inf
    t = _rows(rng, 50, 3)
    out = mech.privatize(t, rng)
    np.testing.assert_array_equal(out, t)
    assert out is not t
    np.testing.assert_array_equal(mech.variance(t), np.zeros_like(t))
    assert mech.output_bounds == (-1.0, 1.0)
    with pytest.raises(ConfigError, match="inf"):
        IdentityMechanism(epsilon=1.0, d=3)


def test_estimate_mean():
    reports = np.array([[1.0, -2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(estimate_mean(reports), [2.0, 1.0])
    with pytest.raises(ConfigError):
        estimate_mean(np.zeros((0, 2)))
    with pytest.raises(ConfigError):
        estimate_mean(np.zeros(3))
    with pytest.raises(ConfigError):
        estimate_mean(np.array([[np.inf, 0.0]]))
    with pytest.raises(TypeError):
        estimate_mean(np.array([["x"]]))


def test_kary_rr_validation(rng):
    with pytest.raises(ConfigError, match="n_classes"):
        KaryRandomizedResponse(epsilon=1.0, n_classes=1)
    with pytest.raises(TypeError, match="n_classes"):
        KaryRandomizedResponse(epsilon=1.0, n_classes=2.0)
    with pytest.raises(TypeError, match="n_classes"):
        KaryRandomizedResponse(epsilon=1.0, n_classes=True)
    with pytest.raises(TypeError, match="epsilon"):
        KaryRandomizedResponse(epsilon="1", n_classes=3)
    with pytest.raises(ConfigError, match="epsilon"):
        KaryRandomizedResponse(epsilon=0.0, n_classes=3)
    with pytest.raises(ConfigError, match="epsilon"):
        KaryRandomizedResponse(epsilon=math.inf, n_classes=3)
    rr = KaryRandomizedResponse(epsilon=1.0, n_classes=3)
    with pytest.raises(TypeError, match="integer"):
        rr.privatize(np.array([0.0, 1.0]), rng)
    with pytest.raises(TypeError, match="integer"):
        rr.privatize(np.array([True, False]), rng)
    with pytest.raises(ConfigError, match="0..2"):
        rr.privatize(np.array([0, 3]), rng)
    with pytest.raises(ConfigError, match="0..2"):
        rr.privatize(np.array([-1, 0]), rng)
    with pytest.raises(TypeError, match="Generator"):
        rr.privatize(np.array([0, 1]), None)
    with pytest.raises(ConfigError, match="one count per class"):
        rr.debias_counts(np.array([1.0, 2.0]))


# --- sampling: reproducibility and support ----------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
def test_seeded_reproducibility(name):
    mech = ALL_BUILDERS[name](2.0, 5)
    t = _rows(np.random.default_rng(1), 3000, 5)
    a = mech.privatize(t, np.random.Generator(np.random.PCG64(7)))
    b = mech.privatize(t, np.random.Generator(np.random.PCG64(7)))
    c = mech.privatize(t, np.random.Generator(np.random.PCG64(8)))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
@pytest.mark.parametrize("eps, d", [(0.5, 1), (1.0, 4), (6.0, 5)])
def test_output_support(name, eps, d, rng):
    mech = ALL_BUILDERS[name](eps, d)
    t = _rows(rng, 20000, d)
    t[:100] = 1.0
    t[100:200] = -1.0
    out = mech.privatize(t, rng)
    assert out.shape == t.shape and out.dtype == np.float64
    lo, hi = mech.output_bounds
    assert np.all((out >= lo) & (out <= hi)) and np.all(np.isfinite(out))
    np.testing.assert_array_equal(mech.bias(t), np.zeros_like(t))
    if name in ("duchi1d", "duchi"):
        assert set(np.unique(np.abs(out))) == {hi}
    if name in CONTINUOUS:
        np.testing.assert_array_equal(out, snap(out.copy()))  # on the 2**-20 grid
    if name == "pm1d":
        assert out.min() < lo + 0.05 and out.max() > hi - 0.05  # tails reached
    if name in ("pm", "pm-hm"):
        nonzero = np.count_nonzero(out, axis=1)
        assert nonzero.max() <= mech.k and nonzero.mean() > mech.k - 0.01
        assert out.min() < lo + 0.05 * mech.scale and out.max() > hi - 0.05 * mech.scale


def test_snap_grid():
    x = np.array([0.0, 1e-9, -0.3, 2.0**-21, 3 * 2.0**-22, 12345.678, -1e6 / 3])
    y = snap(x.copy())
    assert np.all(np.abs(y - x) <= 2.0**-21)
    np.testing.assert_array_equal(y * 2**20, np.rint(y * 2**20))
    np.testing.assert_array_equal(snap(y.copy()), y)


def test_duchi_large_d_is_linear_time(rng):
    # 2^1000 vertices: only an O(d) sampler can do this.
    mech = DuchiMultidim(epsilon=1.0, d=1000)
    t = _rows(rng, 200, 1000)
    out = mech.privatize(t, rng)
    b = mech.constant
    assert math.isfinite(b) and b == duchi_multidim_constant(1001, 1.0)
    assert set(np.unique(out)) <= {-b, b}


def test_duchi_even_d_equals_padded_odd_d(rng):
    t = _rows(rng, 5, 4)
    assert DuchiMultidim(epsilon=1.0, d=4).constant == DuchiMultidim(epsilon=1.0, d=5).constant
    np.testing.assert_allclose(DuchiMultidim(epsilon=1.0, d=4).variance(t), DuchiMultidim(epsilon=1.0, d=5).variance(t))


@pytest.mark.parametrize("d, k", [(5, 1), (5, 4), (40, 3), (40, 20), (40, 39)])
def test_sample_subsets_distinct(d, k, rng):
    idx = sample_subsets(2000, d, k, rng)
    assert idx.shape == (2000, k) and idx.min() >= 0 and idx.max() < d
    assert np.all(np.sort(idx, axis=1)[:, 1:] != np.sort(idx, axis=1)[:, :-1])


def test_kary_rr_output(rng):
    rr = KaryRandomizedResponse(epsilon=1.0, n_classes=4)
    labels = rng.integers(0, 4, size=(50, 3))
    out = rr.privatize(labels, rng)
    assert out.shape == labels.shape and out.dtype == np.int64
    assert out.min() >= 0 and out.max() <= 3
    np.testing.assert_array_equal(
        rr.privatize(labels, np.random.Generator(np.random.PCG64(3))),
        rr.privatize(labels, np.random.Generator(np.random.PCG64(3))),
    )
    assert rr.privatize(np.zeros(0, dtype=int), rng).shape == (0,)
    assert math.isfinite(pm_constant(1.0))


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
def test_memory_layout_does_not_change_reports(name):
    mech = ALL_BUILDERS[name](3.0, 6)
    t = _rows(np.random.default_rng(2), 5000, 6)
    expected = mech.privatize(t, np.random.Generator(np.random.PCG64(11)))
    for layout in (np.asfortranarray(t), np.repeat(t, 2, axis=1)[:, ::2], np.broadcast_to(t, (2, *t.shape))[1]):
        np.testing.assert_array_equal(mech.privatize(layout, np.random.Generator(np.random.PCG64(11))), expected)


# --- ε too small for the wire (issue 9, item 7) and the geometric count mechanism -------------


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
@pytest.mark.parametrize("eps", [1e-300, 5e-324, 1e-13, EPSILON_FLOOR * 0.99, EPSILON_CEILING * 1.01, 1000.0, 1e300])
def test_epsilon_outside_the_floor_and_ceiling_is_refused_when_built(name, eps):
    with pytest.raises(EpsilonOutOfRange, match="outside \\[1e-05, 30\\]"):
        ALL_BUILDERS[name](eps, 8)


@pytest.mark.parametrize("name, d", [("laplace", 10**6), ("pm", 2 * 10**7), ("pm-hm", 3 * 10**7)])
def test_epsilon_whose_reports_leave_the_wire_range_is_refused_when_built(name, d):
    # at the floor the reports of a very wide row no longer fit the wire's int64 indices on 2^-20
    with pytest.raises(ConfigError, match="2\\^42"):
        ALL_BUILDERS[name](EPSILON_FLOOR, d)


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
@pytest.mark.parametrize("eps", [EPSILON_FLOOR, EPSILON_CEILING])
def test_floor_and_ceiling_are_accepted(name, eps, rng):
    mech = ALL_BUILDERS[name](eps, 4)
    out = mech.privatize(_rows(rng, 100, 4), rng)
    assert np.all(np.isfinite(out)) and np.all(np.abs(out) <= mech.max_abs_output)


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
def test_small_but_usable_epsilon_is_accepted_and_its_reports_fit(name, rng):
    from privfed.common.mechanisms.base import REPORT_LIMIT

    mech = ALL_BUILDERS[name](1e-4, 8)
    assert mech.max_abs_output < REPORT_LIMIT
    out = mech.privatize(rng.uniform(-1, 1, (200, 8)), rng)
    assert np.all(np.isfinite(out)) and np.max(np.abs(out)) <= mech.max_abs_output


def test_geometric_mechanism_is_unbiased_integer_noise_with_its_variance(rng):
    from privfed.common.mechanisms import GeometricMechanism

    mech = GeometricMechanism(epsilon=0.5)
    out = mech.privatize(np.full(100_000, 40, dtype=np.int64), rng)
    assert out.dtype == np.int64
    se = math.sqrt(mech.variance() / out.size)
    assert abs(out.mean() - 40) < 5 * se
    assert abs(out.var() / mech.variance() - 1) < 0.05
    assert math.isclose(mech.variance(), 2 * math.exp(-0.5) / (1 - math.exp(-0.5)) ** 2)
    # the epsilon-ratio of neighbouring counts: P[n* = 40] / P[n* = 40 | n = 41] = e^eps
    p40 = np.mean(out == 40)
    p40_from_41 = np.mean(mech.privatize(np.full(100_000, 41, dtype=np.int64), rng) == 40)
    assert abs(math.log(p40 / p40_from_41) - 0.5) < 0.1


@pytest.mark.parametrize(
    "eps,exc",
    [
        (0.0, ConfigError),
        (-1.0, ConfigError),
        (math.inf, ConfigError),
        (math.nan, ConfigError),
        (1e-12, ConfigError),
        ("1", TypeError),
    ],
)
def test_geometric_mechanism_validates_epsilon(eps, exc):
    from privfed.common.mechanisms import GeometricMechanism

    with pytest.raises(exc):
        GeometricMechanism(epsilon=eps)


def test_geometric_mechanism_rejects_float_counts(rng):
    from privfed.common.mechanisms import GeometricMechanism

    with pytest.raises(TypeError, match="integers"):
        GeometricMechanism(epsilon=1.0).privatize(np.array([1.5]), rng)
