"""Mutation round 3 (common/mechanisms/gaussian.py): the analytic sigma meets its delta for every (eps, delta).

A mutant that let ``gaussian_sigma``'s first bracket stop at ``delta(hi) <= 2 delta`` passed every test: the
tests checked the bisection's result at ``delta = 1e-5`` only, where the doubled bracket happens to meet
``delta`` anyway. At ``eps = 10, delta = 1e-3`` that mutant returned sigma = 0.4, whose exact delta
(Balle & Wang 2018, Thm 8) is 1.3e-3: a release under-noised for the delta the ledger debits. So the result
is checked on a grid of (eps, delta, sensitivity): it meets delta, and it is the smallest sigma that does.
"""

import math

import pytest

from privfed.common.mechanisms.gaussian import analytic_gaussian_delta, calibrated_gaussian, gaussian_sigma


@pytest.mark.parametrize("sensitivity", [1.0, 2.5])
@pytest.mark.parametrize("delta", [1e-2, 1e-3, 1e-4, 1e-6, 1e-8])
@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0])
def test_analytic_sigma_meets_its_delta_and_is_the_smallest_that_does(epsilon, delta, sensitivity):
    sigma = gaussian_sigma(epsilon, delta, sensitivity)
    assert analytic_gaussian_delta(sigma, epsilon, sensitivity) <= delta
    assert analytic_gaussian_delta(sigma * (1 - 1e-9), epsilon, sensitivity) > delta * (1 - 1e-6)


@pytest.mark.parametrize("epsilon", [0.5, 20.0, 30.0])
def test_calibrated_gaussian_is_built_at_the_epsilon_and_delta_asked(epsilon):
    """A mutant building the mechanism at 2 eps passed: it only refused eps in (15, 30], a range allowed."""
    mech = calibrated_gaussian(epsilon, 1e-5, 2.0)
    assert (mech.epsilon, mech.delta, mech.sensitivity) == (epsilon, 1e-5, 2.0)
    assert mech.sigma == gaussian_sigma(epsilon, 1e-5, 2.0)


@pytest.mark.parametrize("sensitivity", [0.5, 2.0**0.5, 3.0])
def test_the_classic_sigma_grows_with_the_sensitivity(sensitivity):
    """A mutant dividing the classic scale by the sensitivity passed (the tests took sensitivity 1 only): DP-PCA
    under replace-one neighbours (L2 sensitivity sqrt 2) with method='classic' then drew half the noise."""
    epsilon, delta = 0.5, 1e-5
    want = math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon  # Dwork & Roth 2014, Thm A.1
    assert gaussian_sigma(epsilon, delta, sensitivity, method="classic") == pytest.approx(want, rel=1e-12)
