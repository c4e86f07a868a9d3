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
"""

import numpy as np
import pytest

from privfed.common.mechanisms.amp import AMP_RADIUS
from privfed.common.mechanisms.objective import minimise_perturbed


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
