"""The privacy loss of the one-budget multiclass objective perturbation, computed exactly per output
(privfed.common.feddpdr.multiclass; issue 21).

For a tiny data set D and D' = D plus one row, each output F of the mechanism (the exact minimiser,
before AMP's output noise) has density ``nu(B_D(F)) det(Lambda I + sum_D H_i(F))`` under D, so its
privacy loss ``log p_D(F) / p_D'(F)`` can be evaluated exactly. The theorem says the loss exceeds
``epsilon_J + epsilon_B`` with probability at most delta, in both directions; here it is sampled,
with a delta large enough to see (SPEC §0: the bound is checked to 3 standard errors), and the
loss must come close to the bound somewhere (the calibration is not vacuous).
"""

import math

import numpy as np
import pytest

from privfed.common.feddpdr import multiclass as mc
from privfed.common.mechanisms.objective import minimise_perturbed
from privfed.common.mechanisms.objective_gaussian import GRADIENT_NORM_SQ

pytestmark = pytest.mark.slow

K, DRAWS = 3, 300


def _log_density(F, X, y, loss, Lambda, sigma):
    """log of nu(B_D(F)) |det J| up to the constant of nu."""
    B = -(mc.perturbed_objective(F.ravel(), X, y, loss, Lambda, np.zeros_like(F))[1].reshape(F.shape))
    A = Lambda * np.eye(F.size) + sum(np.kron(mc.score_hessian(F @ x, yy, loss), np.outer(x, x)) for x, yy in zip(X, y))
    return -np.sum(B**2) / (2 * sigma**2) + np.linalg.slogdet(A)[1]


@pytest.mark.parametrize("loss", mc.LOSSES)
def test_privacy_loss_exceeds_epsilon_with_probability_at_most_delta(loss):
    rng = np.random.default_rng(10)
    epsilon, delta = 1.0, 0.1
    X = np.array([[0.6, 0.2, 0.5], [-0.3, 0.7, 0.5], [0.1, -0.8, 0.5], [0.5, 0.5, 0.5]]) / math.sqrt(1.5)
    y = np.array([0, 1, 2, 0])
    extra_x, extra_y = np.array([-0.7, -0.4, 0.5]) / math.sqrt(1.5), 1
    mech = mc.mechanism(epsilon, delta, K, loss)
    sigma, Lambda = mech.sigma, mech.Lambda
    bound = mech.epsilon_J + mech.epsilon_B
    D = (X, y)
    D2 = (np.vstack([X, extra_x]), np.append(y, extra_y))
    losses = []
    for source, other in ((D, D2), (D2, D)):
        for _ in range(DRAWS):
            B = rng.standard_normal((K, X.shape[1])) * sigma
            n = len(source[1])
            F = minimise_perturbed(
                lambda G, S=source: mc.perturbed_objective(G.ravel(), *S, loss, 0.0, np.zeros_like(G))[1].reshape(
                    G.shape
                ),
                B,
                reg=Lambda,
                divisor=1.0,
                curvature=mc.CURVATURE_BOUND[loss] * n,
                gradient_bound=n * math.sqrt(GRADIENT_NORM_SQ),
                radius=1e-8,
            )
            losses.append(_log_density(F, *source, loss, Lambda, sigma) - _log_density(F, *other, loss, Lambda, sigma))
    losses = np.array(losses)
    exceed = float(np.mean(losses > bound))
    assert exceed <= delta + 3 * math.sqrt(delta / losses.size)
    assert np.max(np.abs(losses)) > 0.3 * bound  # the loss reaches a real fraction of the bound
