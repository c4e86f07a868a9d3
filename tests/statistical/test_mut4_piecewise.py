"""Mutation round 4 (common/mechanisms/piecewise.py, arithmetic): the centre interval and the bias bound.

``PiecewiseMechanism.centre_interval`` was checked at ``t = 0`` only, so mutants that changed its slope in
``t`` (``(c - 1) / 2 * t`` or ``(c + 1) * 2 * t`` for ``(c + 1) / 2 * t``) passed every test. It is now checked
against the closed form ``l(t) = (C + 1) t / 2 - (C - 1) / 2`` at inputs away from 0, and against the sampler:
the reports of ``t`` fall inside ``[l(t), r(t)]`` with the centre probability ``e^(eps/2) / (e^(eps/2) + 1)``.

``pm_bias_bound`` (the reported ``|E[report] - scale t|`` bound, :attr:`bias_bound`) had no test of its value:
six mutants of its tail density ``p`` and of ``2 L^2 p / scale`` passed. It is now checked against the
closed form ``min(L, 2 L^2 p / scale)`` with PM's centre density ``p = (e^eps - e^(eps/2)) / (2 e^(eps/2) + 2)``.
"""

import math

import numpy as np
import pytest

from privfed.common.mechanisms import PiecewiseMechanism, PiecewiseMultidim
from privfed.common.mechanisms.piecewise import pm_bias_bound, pm_grid


@pytest.mark.parametrize("eps", [0.5, 2.0, 6.0])
def test_centre_interval_is_the_closed_form_away_from_zero(eps):
    mech = PiecewiseMechanism(epsilon=eps)
    c = (math.exp(eps / 2) + 1) / (math.exp(eps / 2) - 1)
    t = np.array([-1.0, -0.35, 0.0, 0.6, 1.0])
    left, right = mech.centre_interval(t)
    np.testing.assert_allclose(left, (c + 1) * t / 2 - (c - 1) / 2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(right, (c + 1) * t / 2 + (c - 1) / 2, rtol=1e-12, atol=1e-12)


def test_reports_fall_in_the_centre_interval_with_the_centre_probability():
    mech = PiecewiseMechanism(epsilon=2.0)
    rng = np.random.Generator(np.random.PCG64(20261129))
    n = 100_000
    p = 1 / (1 + math.exp(-1.0))  # e^(eps/2) / (e^(eps/2) + 1)
    for t in (-0.8, 0.7):
        left, right = mech.centre_interval(np.array([t]))
        reports = mech.privatize(np.full((n, 1), t), rng)[:, 0]
        inside = np.mean((reports >= left[0]) & (reports <= right[0]))
        # 5.5 s.e. (two-sided false failure < 4e-8) plus the grid: reports are rounded to 2^-12 of C - 1,
        # which moves at most two cells' mass (< 2 * p_density * L = 4e-4) across the ends.
        assert abs(inside - p) <= 5.5 * math.sqrt(p * (1 - p) / n) + 1e-3, (t, inside, p)


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5, 8.0, 30.0])
@pytest.mark.parametrize("scale", [1.0, 3.0])
def test_pm_bias_bound_is_its_closed_form(eps, scale):
    grid = pm_grid(eps, scale).grid
    p = (math.exp(eps) - math.exp(eps / 2)) / (2 * math.exp(eps / 2) + 2)  # PM's centre density
    expected = min(grid, 2 * grid**2 * p / scale)
    assert pm_bias_bound(eps, scale) == pytest.approx(expected, rel=1e-12)
    assert PiecewiseMechanism(epsilon=eps).bias_bound == pytest.approx(pm_bias_bound(eps), rel=1e-15)
    if scale == 3.0 and eps >= 1.0:
        mech = PiecewiseMultidim(epsilon=eps, d=3, attributes=1)
        assert mech.bias_bound == pytest.approx(pm_bias_bound(eps, 3.0), rel=1e-15)
