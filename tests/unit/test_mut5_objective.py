"""Mutation round 5 (common/mechanisms/objective.py): the solver's start and its public start distance.

AMP's privacy (:mod:`privfed.common.mechanisms.amp`) needs the solver's point within ``r`` of the exact minimiser
*whatever the noise*: ``minimise_perturbed`` starts at ``-noise / (divisor reg)``, where ``grad J`` is the loss's
gradient alone, so the start is within ``gradient_bound / reg`` of the minimiser and the public step count
follows. Two mutants passed every test: the start at ``+noise / (divisor reg)`` (twice the noise's reach away)
and the start distance ``gradient_bound * reg`` (too few steps when ``reg < 1``). The tests' noises and losses
converged well inside the bound. Here the loss is the worst case of its class: ``L'(F) = clip(c F, -G, G)``
(curvature ``c``, gradient at most ``G``), with noise that puts the minimiser on the saturated part, at exactly
``G / reg`` from the start; the exact minimiser has a closed form, and the returned point must be within ``r``
of it for every noise, large or small.

``ObjectivePerturbation``'s construction (public parameters, before any row) passed with its range check at
``2 epsilon`` (every ε above 15 refused) and with ``d``, ``rows`` or ``problems`` of 0 accepted (refused only
later, inside the release). Now the range's ends are accepted and zero sizes refused at construction.
"""

import math

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.amp import AMP_RADIUS
from privfed.common.mechanisms.objective import ObjectivePerturbation, minimise_perturbed
from privfed.common.mechanisms.snapping import EPSILON_CEILING, EPSILON_FLOOR, EpsilonOutOfRange


def exact_minimiser(shift, reg, c, G):
    """``argmin L(F) + (reg/2) F^2 + shift F`` with ``L' = clip(c F, -G, G)``: ``-shift / (c + reg)`` where
    ``|c F| <= G``, else ``-(shift - G sign(shift)) / reg`` (the saturated, linear part)."""
    inner = -shift / (c + reg)
    return np.where(np.abs(c * inner) <= G, inner, -(shift - G * np.sign(shift)) / reg)


@pytest.mark.parametrize(
    ("reg", "c", "G"),
    [(1e-3, 1.0, 1.0), (0.02, 5.0, 2.0), (0.3, 1.0, 0.5), (2.0, 1.0, 1.0), (1.0, 1.0, 1e-5), (0.1, 2.0, 1e-4)],
)
def test_the_solver_point_is_within_the_radius_of_the_exact_minimiser_for_any_noise(reg, c, G):
    divisor = 7.0
    # one problem a row; minimisers up to 1e7 (a float's spacing there, 2e-9, is far below r)
    shift = reg * np.array([1e7, -3e5, 2.5e3, -20.0, 3.0, 0.0, 1e-2, -400.0, 0.7])[:, None]
    noise = shift * divisor
    F = minimise_perturbed(
        lambda F: np.clip(c * F, -G, G), noise, reg=reg, divisor=divisor, curvature=c, gradient_bound=G
    )
    target = exact_minimiser(shift, reg, c, G)
    assert np.all(np.abs(F - target) <= AMP_RADIUS), np.abs(F - target).max()
    # the noises of the saturated part sit exactly G / reg from the start (the public bound is attained)
    saturated = np.abs(c * target) > G
    assert saturated.sum() >= 3
    np.testing.assert_allclose(
        np.abs(target - (-shift / reg))[saturated], G / reg, rtol=1e-6, atol=1e-8
    )  # cancellation at 1e7: a few ulp


def test_the_mechanism_refuses_at_construction_what_it_cannot_release_and_accepts_its_whole_epsilon_range():
    """Built from public parameters before a row is read (SPEC §12): the ε range's ends are accepted (the ceiling
    was refused when the check saw ``2 epsilon``), just outside them refused, and no zero size or count passes."""
    base = dict(lam=0.1, curvature=1.0, d=3, rows=10)
    for eps in (EPSILON_FLOOR, 1.0, 16.0, EPSILON_CEILING, math.inf):
        assert ObjectivePerturbation(epsilon=eps, **base).epsilon == eps
    for eps in (EPSILON_FLOOR * 0.99, EPSILON_CEILING * 1.01):
        with pytest.raises(EpsilonOutOfRange):
            ObjectivePerturbation(epsilon=eps, **base)
    for key in ("d", "rows", "problems"):
        with pytest.raises(ConfigError, match=key):
            ObjectivePerturbation(epsilon=1.0, **(base | {key: 0}))


def test_the_mechanism_reports_a_symmetric_unbounded_noise_and_refuses_an_empty_row_bound():
    """``b`` and AMP's noise are symmetric and the release is a minimiser plus noise: bias 0 (with a zero loss the
    release is ``-b / (m reg)``, whose mean is checked here at 5 s.e.), bounds ``(-inf, inf)``; ``max_rows``, the
    public bound the solver's steps follow, is at least 1."""
    mech = ObjectivePerturbation(epsilon=1.0, lam=0.5, curvature=1.0, d=2, rows=5, problems=2000)
    assert mech.bias() == 0.0 and mech.output_bounds == (-math.inf, math.inf)
    F = mech.privatize(np.zeros_like, 8, np.random.default_rng(3))
    assert np.all(np.abs(F.mean(axis=0)) <= 5 * math.sqrt(mech.variance() / F.shape[0]) / (5 * mech.reg))
    with pytest.raises(ConfigError, match="max_rows"):
        mech.privatize(np.zeros_like, 0, np.random.default_rng(3))
