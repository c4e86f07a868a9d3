"""Float safety of the noisy releases (issue 20 item 3; SPEC §12; Mironov, CCS 2012).

The continuous releases are driven by one full-precision uniform and a bit per value, and are monotone
in the uniform, so their *exact* output distribution in floating point is computable:
:func:`cell_probabilities` bisects over the bit patterns of the doubles. The tests below use it at the
most extreme ε allowed (floor and ceiling), over a grid of inputs that includes the bounds, to show that

* every grid cell between the clamps is reachable from every input (the set of reachable outputs does
  not depend on the input): exhaustively near both clamps, around the inputs and at random cells, and
  over every cell for the full-enumeration cases;
* the ε-ratio of the float implementation's own cell probabilities is within ``2^-25`` of ε;
* the float release's mean and variance match the closed forms within the documented bias bound.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.errors import EpsilonOutOfRange
from privfed.common.mechanisms import (
    EPSILON_CEILING,
    EPSILON_FLOOR,
    GaussianMechanism,
    LaplaceMechanism,
    PiecewiseMechanism,
    PiecewiseMultidim,
    check_epsilon_range,
)
from privfed.common.mechanisms.laplace import laplace_from_uniform
from privfed.common.mechanisms.piecewise import pm_from_uniform, pm_variance
from privfed.common.mechanisms.snapping import (
    WIRE_GRID,
    OutputGrid,
    cell_probabilities,
    full_uniform,
    grid_for,
)

INPUTS = np.array([-1.0, -1.0 + 2.0**-40, -0.5, 0.0, 1.0 / 3.0, 0.75, 1.0])
EXCESS = 2.0**-25  # the documented bound on the float implementation's excess over epsilon


class _Words:
    """A stand-in bit generator that hands out the given 64-bit words (``full_uniform`` reads only these)."""

    def __init__(self, words):
        self.words = [np.uint64(w) for w in words]

    def random_raw(self, n):
        out, self.words = self.words[:n], self.words[n:]
        return np.array(out, dtype=np.uint64)


class _Rng:
    def __init__(self, words):
        self.bit_generator = _Words(words)


# --- the pieces ------------------------------------------------------------------------------------


def test_full_uniform_takes_its_bits_exactly():
    mantissa = 0xABCDE12345678  # 52 bits
    top = mantissa << 12
    words = [  # one word per value, then one further word per value (read by every value, used where its 11 bits
        # were all zero: the same work whatever it draws), then the continuations of those whose further word was 0
        top | (1 << 11) | 0b100_0000_0000,  # sign bit set, exponent bits 1xxxxxxxxxx: U in [1/2, 1)
        top | 0b000_0000_0001,  # 10 leading zeros: U in [2^-11, 2^-10)
        top,  # 11 zero bits, continued below
        top,  # 11 zero bits, continued below
        0,  # value 0's further word: unused (its 11 bits were not all zero), so not continued either
        12345,  # value 1's: unused
        1 << 60,  # value 2: 3 more leading zeros, 14 in all: U in [2^-15, 2^-14)
        0,  # value 3: 64 more ...
        0,  # ... and 64 more ...
        1 << 63,  # ... and none: 11 + 128 zeros
    ]
    u, sign = full_uniform(_Rng(words), (4,))
    frac = 1.0 + mantissa * 2.0**-52
    assert u.tolist() == [frac / 2, frac * 2.0**-11, frac * 2.0**-15, frac * 2.0**-140]
    assert sign.tolist() == [-1.0, 1.0, 1.0, 1.0]


def test_full_uniform_is_uniform_with_geometric_binades(rng):
    u, sign = full_uniform(rng, (400_000,))
    assert u.min() > 0 and u.max() < 1
    z = -np.frexp(u)[1]  # u in [2^-(z+1), 2^-z)
    counts = np.bincount(z, minlength=12)[:12]
    expected = u.size * 2.0 ** -(np.arange(12) + 1.0)
    assert np.all(np.abs(counts - expected) <= 5 * np.sqrt(expected))
    assert np.all(np.abs(sign) == 1.0) and abs(np.mean(sign < 0) - 0.5) < 5 * math.sqrt(0.25 / u.size)
    # within a binade the mantissa is uniform: the mean of the binade [1/2, 1) is 3/4
    top = u[u >= 0.5]
    assert abs(top.mean() - 0.75) < 5 * math.sqrt(1 / 48 / top.size)


def test_numpy_log_is_within_four_ulp_of_the_correctly_rounded_log(rng):
    """The privacy argument (snapping.py) assumes np.log errs by at most 4 ulp; check it on this numpy."""
    u, _ = full_uniform(rng, (20_000,))
    u = np.concatenate([u, 2.0 ** -rng.uniform(0, 1021, 2000), 1.0 - 2.0 ** -rng.uniform(1, 53, 2000)])
    ours = np.log(u)
    exact = np.array([math.log(x) for x in u])
    assert np.all(np.abs(ours - exact) <= 4 * np.spacing(np.abs(exact)))


def test_grid_grows_with_the_noise_scale_and_stays_on_the_wire_grid():
    for scale in [1e-9, 0.01, 0.5, 1.0, 2.0, 3.0, 1e3, 2e5, 1e10]:
        grid = grid_for(scale)
        assert math.frexp(grid)[0] == 0.5  # a power of two
        assert grid >= WIRE_GRID and (grid == WIRE_GRID or scale * 2.0**-12 <= grid < scale * 2.0**-11)
    grid = OutputGrid.for_noise(2.0, 81.3)
    assert grid.bound == math.floor(81.3 / grid.grid) * grid.grid and grid.bound <= 81.3


def test_input_far_from_zero_is_added_exactly_on_the_grid():
    grid = OutputGrid.for_noise(1.0, 2.0**30)
    x = np.array([2.0**29 + 0.3, -(2.0**29) - 0.3, 12345.678])
    out = grid.add(x, np.zeros(3))  # no noise: the input rounded to the grid, however large
    np.testing.assert_array_equal(out, np.rint(x / grid.grid) * grid.grid)


@pytest.mark.parametrize("eps", [EPSILON_FLOOR * 0.999, EPSILON_CEILING * 1.001, 1e-300, 1e300])
def test_epsilon_outside_floor_and_ceiling_is_refused(eps):
    with pytest.raises(EpsilonOutOfRange, match="outside"):
        check_epsilon_range(eps)
    with pytest.raises(EpsilonOutOfRange):
        GaussianMechanism(epsilon=eps, delta=1e-5, sigma=1.0)


def test_gaussian_sigma_is_capped_by_the_floor_and_bounded_below():
    GaussianMechanism(epsilon=1.0, delta=1e-5, sigma=3.73)
    with pytest.raises(ValueError, match="sigma"):
        GaussianMechanism(epsilon=1.0, delta=1e-5, sigma=0.1)  # below sensitivity / 8
    with pytest.raises(ValueError, match="sigma"):
        GaussianMechanism(epsilon=1.0, delta=1e-5, sigma=1e7)  # above the classic scale at the floor


# --- reachability and the epsilon ratio, from exact cell probabilities ------------------------------


def laplace_release(mech, t):
    return lambda u, sign: laplace_from_uniform(np.full(u.shape, t), u.copy(), sign * mech.scale, grid=mech.output_grid)


def pm_release(mech, t):
    eps = mech.attribute_epsilon if isinstance(mech, PiecewiseMultidim) else mech.epsilon
    scale = mech.scale if isinstance(mech, PiecewiseMultidim) else 1.0
    return lambda u, sign: pm_from_uniform(np.full(u.shape, t), u.copy(), sign, eps, mech.output_grid, scale)


def window_cells(grid: OutputGrid, centre_scale: float, rng, width=300, random=1500):
    """Cells next to both clamps, around every input's report and zero, and random cells in between."""
    n = round(grid.bound / grid.grid)
    centres = np.append(np.rint(INPUTS * centre_scale / grid.grid), 0).astype(np.int64)
    idx = np.concatenate(
        [np.arange(-n, -n + width), np.arange(n - width + 1, n + 1), rng.integers(-n, n + 1, random)]
        + [np.arange(c - width // 2, c + width // 2) for c in centres]
    )
    return np.unique(np.clip(idx, -n, n)) * grid.grid


MECHANISMS = {
    "laplace-d1": (lambda eps: LaplaceMechanism(epsilon=eps, d=1), laplace_release, lambda m: m.epsilon),
    "laplace-d3": (lambda eps: LaplaceMechanism(epsilon=eps, d=3), laplace_release, lambda m: m.epsilon / 3),
    "pm": (lambda eps: PiecewiseMechanism(epsilon=eps), pm_release, lambda m: m.epsilon),
    "pm-alg4-d3": (lambda eps: PiecewiseMultidim(epsilon=eps, d=3), pm_release, lambda m: m.attribute_epsilon),
    "pm-alg4-d12-k1": (
        lambda eps: PiecewiseMultidim(epsilon=eps, d=12, attributes=1),  # LDP gradient descent's reports
        pm_release,
        lambda m: m.attribute_epsilon,
    ),
}


@pytest.mark.parametrize("eps", [EPSILON_FLOOR, 1.0, EPSILON_CEILING], ids=["floor", "1", "ceiling"])
@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_every_input_reaches_every_cell_and_the_ratio_holds(name, eps):
    build, release, coordinate_eps = MECHANISMS[name]
    mech = build(eps)
    centre_scale = mech.scale if isinstance(mech, PiecewiseMultidim) else 1.0
    cells = window_cells(mech.output_grid, centre_scale, np.random.default_rng(5))
    probs = np.array([cell_probabilities(release(mech, t), cells) for t in INPUTS])
    assert np.all(probs > 0), f"cells unreachable from some input: {cells[np.any(probs == 0, axis=0)][:5]}"
    log_ratio = np.log(probs.max(axis=0)) - np.log(probs.min(axis=0))
    assert log_ratio.max() <= coordinate_eps(mech) + EXCESS
    if eps < EPSILON_CEILING:  # at the ceiling PM's centre is narrower than one cell of the wire's grid
        assert log_ratio.max() >= coordinate_eps(mech) * (1 - 1e-3)  # attained: the clamp cells
    # outputs are on the mechanism's grid and the wire's 2^-20 grid, inside the public clamp
    assert np.all(np.abs(cells) <= mech.output_grid.bound) and np.all(cells / WIRE_GRID == np.rint(cells / WIRE_GRID))


@pytest.mark.parametrize("eps", [EPSILON_FLOOR, 1.0, 4.0])
@pytest.mark.parametrize("name", ["pm", "pm-alg4-d3"])
def test_pm_exact_distribution_has_the_closed_form_moments(name, eps):
    """Every cell enumerated (a few thousand): total mass 1, none empty, mean within bias_bound, variance."""
    build, release, _ = MECHANISMS[name]
    mech = build(eps)
    n = round(mech.output_grid.bound / mech.output_grid.grid)
    cells = np.arange(-n, n + 1) * mech.output_grid.grid
    scale = mech.scale if isinstance(mech, PiecewiseMultidim) else 1.0
    attr_eps = mech.attribute_epsilon if isinstance(mech, PiecewiseMultidim) else mech.epsilon
    for t in (-1.0, 0.3, 1.0):
        p = cell_probabilities(release(mech, t), cells)
        assert p.sum() == pytest.approx(1.0, abs=1e-12) and np.all(p > 0)
        mean = float(p @ cells)
        assert abs(mean - scale * t) <= mech.bias_bound
        var = float(p @ (cells - scale * t) ** 2)
        assert var == pytest.approx(scale**2 * float(pm_variance(np.array(t), attr_eps)), rel=1e-5)


def test_laplace_exact_distribution_has_the_closed_form_moments():
    """Every one of the ~2^18 cells of a Laplace report at eps = 30 (the ceiling) for one input."""
    mech = LaplaceMechanism(epsilon=EPSILON_CEILING, d=1)
    n = round(mech.output_grid.bound / mech.output_grid.grid)
    cells = np.arange(-n, n + 1) * mech.output_grid.grid
    t = 1.0 / 3.0
    p = cell_probabilities(laplace_release(mech, t), cells)
    assert p.sum() == pytest.approx(1.0, abs=1e-12) and np.all(p > 0)
    assert abs(float(p @ cells) - t) <= mech.bias_bound
    assert float(p @ (cells - t) ** 2) == pytest.approx(2 * mech.scale**2, rel=1e-6)


def test_gaussian_reaches_every_cell_within_its_reach_from_both_neighbours():
    """Box-Muller at angle 0 and pi is monotone in the radius' uniform: the cells of x +- up to 37 sigma are
    reached from x and from a neighbour x + sensitivity alike (every cell in the window, exactly)."""
    mech = GaussianMechanism(epsilon=EPSILON_CEILING, delta=1e-3, sigma=0.19)
    grid = mech.output_grid
    for x in (0.3, 1.3, 2.0**20 + 0.3):

        def release(u, sign, x=x):
            z = np.sqrt(-2.0 * np.log(u)) * sign  # cos(0) = 1, cos(pi) = -1
            return grid.add(np.full(u.shape, x), z * mech.sigma)

        k = round(x / grid.grid)
        reach = int(36 * mech.sigma / grid.grid)
        idx = np.concatenate(
            [np.arange(k - reach, k - reach + 200), np.arange(k - 100, k + 100), np.arange(k + reach - 200, k + reach)]
        )
        assert np.all(cell_probabilities(release, idx * grid.grid) > 0)


def test_the_check_finds_the_gaps_a_53_bit_uniform_leaves():
    """Negative control: the same release fed a textbook 53-bit uniform (Mironov's setting) leaves cells
    near the clamps unreachable, and which ones depends on the input."""
    mech = LaplaceMechanism(epsilon=EPSILON_FLOOR, d=1)

    def coarse(t):
        full = laplace_release(mech, t)
        return lambda u, sign: full(np.maximum(np.floor(u * 2.0**53), 1.0) * 2.0**-53, sign)

    cells = window_cells(mech.output_grid, 1.0, np.random.default_rng(5))
    probs = np.array([cell_probabilities(coarse(t), cells) for t in (-1.0, 1.0)])
    assert np.any(probs == 0)
    assert np.any((probs[0] == 0) != (probs[1] == 0))
