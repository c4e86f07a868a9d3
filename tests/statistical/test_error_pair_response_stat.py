"""Moments of the randomized-response evaluation release of federated boosting (:class:`ErrorPairResponse`,
common/mechanisms/randomized_response.py): unbiased for the owner's pair (or for its scaling, as ``bias()`` says,
for an owner beyond ``max_rows``), with the closed-form ``variance()``, inside ``output_bounds``.

The unit tests check its four output values' exact probabilities and its owner-level e^eps ratio
(tests/unit/test_release_mechanisms.py); nothing compared the released pairs' mean with the pair or their
variance with ``variance()``, the numbers the coordinator's boosting relies on. M = 10^6 releases per input;
tolerances 5 standard errors from the closed form (mean) or from the sample's squared deviations (variance).
"""

import math

import numpy as np
import pytest

from privfed.common.mechanisms import ErrorPairResponse

pytestmark = pytest.mark.slow

M = 1_000_000
Z = 5.0
B_ROW, MAX_ROWS = 1.0, 2  # owner bound B = 2
PAIRS = [(0.0, 0.0), (0.5, 1.5), (2.0, 2.0), (0.3, 0.4), (3.0, 5.0)]  # the last beyond B: scaled by 2/5


@pytest.mark.parametrize("eps", [0.3, 1.2, 5.0])
@pytest.mark.parametrize("pair", PAIRS, ids=str)
def test_release_is_unbiased_with_the_closed_form_variance_and_in_range(eps, pair, rng):
    mech = ErrorPairResponse(epsilon=eps, row_bound=B_ROW, max_rows=MAX_ROWS)
    pairs = np.tile(pair, (M, 1))
    out = mech.privatize(pairs, rng)
    lo, hi = mech.output_bounds
    assert np.all((out >= lo) & (out <= hi))
    target = np.asarray(pair) + mech.bias([pair])[0]  # the pair, or its scaling to w = B
    var = mech.variance([pair])[0]
    assert np.all(np.abs(out.mean(axis=0) - target) <= Z * np.sqrt(var / M)), (out.mean(axis=0), target)
    sq = (out - target) ** 2
    v_hat, se = sq.mean(axis=0), sq.std(axis=0) / math.sqrt(M)
    assert np.all(Z * se < 0.1 * var), "lost power: 5 s.e. above 10 % of the variance"
    assert np.all(np.abs(v_hat - var) <= Z * se), (v_hat, var, se)


def test_an_owner_beyond_max_rows_is_biased_exactly_as_bias_says():
    mech = ErrorPairResponse(epsilon=1.0, row_bound=B_ROW, max_rows=MAX_ROWS)
    np.testing.assert_allclose(mech.bias([(3.0, 5.0)]), [[1.2 - 3.0, 2.0 - 5.0]])
    assert np.all(mech.bias([(0.5, 1.5)]) == 0.0)
