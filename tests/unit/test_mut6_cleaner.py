"""Null-space cleaning (common/nullspace/cleaner.py): behaviours the mutation round 6 found untested.

- A singular ``M = B_c + ηI`` at a user-given η is refused as a ConfigError that names the remedy (the
  documented ``Raises``), not an unbound-name crash.
- The "subspace" method's numerical rank of ``[A_d, A_c]``: when the confidential map reads nothing the desired
  one does not (``A_c``'s columns inside span(A_d), e.g. a confidential label that is a linear function of the
  desired ones), ``[A_d, A_c]`` is rank-deficient and its rounding-level singular values must not become span
  directions (their ``1/s`` blows x̃ up and breaks Theorem 1).
- The Σδ calibration: ``S_total`` is exactly ``‖A_dᵀx‖²``, so a budget just above it cleans to ``x̃ = 0`` and one
  just below it is spent (Theorem 1), also where the uncalibrated Σδ is ~1e-8 off (generalised method, singular
  ``B_c``) and for rows of any scale.
- A row the desired model reads as exactly 0 (``A_dᵀx = 0``, every δ = 0) costs nothing to clean entirely: x̃ = 0,
  whatever ε; nothing of x survives.
- The documented ``gamma_ >= 0`` (and so δ >= 0, S_t non-decreasing) when ``A_d`` is ill-conditioned but of full
  numerical rank: eigh then returns some of its tiny eigenvalues as -1e-17-ish, which the clip must catch.
"""

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.nullspace import METHODS, NullSpaceCleaner, e_utility

A_D = np.array([[2.0, 0.0], [0.0, 1.0], [0.0, 0.0]])


def test_a_numerically_singular_m_at_a_given_regularization_is_refused():
    # B_c = 1 1ᵀ has rank 1; η = 1e-300 vanishes next to it, so M's Cholesky meets an exact zero pivot
    with pytest.raises(ConfigError, match=r"numerically singular.*method='subspace' or a larger regularization"):
        NullSpaceCleaner(epsilon=0.1, regularization=1e-300).fit(A_D, np.ones((3, 1)))
    cl = NullSpaceCleaner(epsilon=0.1, regularization=1e-3).fit(A_D, np.ones((3, 1)))  # a usable η is accepted
    assert cl.eta_ == 1e-3


def test_subspace_cleaning_when_the_confidential_map_lies_in_the_desired_span(rng):
    """[A_d, A_c] of rank m_d: x̃ stays of x's size, in span(A_d), and Theorem 1 holds (1e-9 relative)."""
    checked = 0
    for _ in range(60):
        F, m_d = int(rng.integers(3, 9)), int(rng.integers(1, 3))
        A_d = rng.normal(size=(F, m_d))
        A_c = A_d @ rng.normal(size=(m_d, int(rng.integers(1, 4))))
        X = rng.normal(size=(30, F))
        cl = NullSpaceCleaner(epsilon=0.0, method="subspace").fit(A_d, A_c)
        assert cl.span_.shape[1] == m_d  # the span [A_d, A_c] is A_d's
        s_total = np.sum((X @ A_d) ** 2, axis=1)
        cl.epsilon = float(np.median(s_total))
        X_clean = cl.transform(X)
        assert np.max(np.abs(X_clean)) <= 10 * np.max(np.abs(X))
        partial = cl.epsilon < s_total
        np.testing.assert_allclose(e_utility(A_d, X, X_clean)[partial], cl.epsilon, rtol=1e-9)
        checked += partial.sum()
    assert checked > 500


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("scale", [1e-3, 10.0])
def test_a_budget_at_the_total_cost_cleans_everything_and_just_below_it_is_spent(method, scale, rng):
    """ε = S_total (1 + 1e-10): t = k, x̃ = 0 exactly, e_utility = S_total; ε = S_total (1 - 1e-10): a partial
    clean that spends ε. B_c is singular (m_c < F), so for "generalized" η > 0 and the raw Σγc² differs from
    ‖A_dᵀx‖² by ~1e-8 relative: only the calibration makes the branch exact."""
    for _ in range(15):
        F = int(rng.integers(3, 9))
        A_d = rng.normal(size=(F, int(rng.integers(1, 4))))
        A_c = rng.normal(size=(F, int(rng.integers(1, F))))
        X = rng.normal(size=(20, F)) * scale
        cl = NullSpaceCleaner(epsilon=0.0, method=method).fit(A_d, A_c)
        for x in X:
            s_total = float(cl.transform_with_details(x).s_total[0])
            assert s_total == pytest.approx(float(np.sum((x @ A_d) ** 2)), rel=1e-12)
            cl.epsilon = s_total * (1 + 1e-10)
            res = cl.transform_with_details(x)
            assert res.t[0] == cl.gamma_.size and np.all(res.x_clean == 0.0) and res.e_utility[0] == s_total
            cl.epsilon = s_total * (1 - 1e-10)
            res = cl.transform_with_details(x)
            assert res.t[0] < cl.gamma_.size and res.e_utility[0] == cl.epsilon
            # "generalized" with η ≈ 1e-8 tr(B_c)/F: Theorem 1 to ~1e-8 there (module docstring)
            assert e_utility(A_d, x, res.x_clean[0]) == pytest.approx(cl.epsilon, rel=1e-6)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("epsilon", [0.0, 0.5])
def test_a_row_the_desired_model_reads_as_zero_is_cleaned_to_zero(method, epsilon):
    """A_d = e1, A_c = I: x = (0, 3) has A_dᵀx = 0 and every δ = 0, so removing everything costs nothing."""
    cl = NullSpaceCleaner(epsilon=epsilon, method=method).fit([[1.0], [0.0]], np.eye(2))
    res = cl.transform_with_details([[0.0, 3.0], [2.0, 3.0]])
    np.testing.assert_array_equal(res.x_clean[0], [0.0, 0.0])
    assert res.t[0] == 2 and res.e_utility[0] == 0.0 and res.s_total[0] == 0.0
    assert e_utility([[1.0], [0.0]], [2.0, 3.0], res.x_clean[1]) == pytest.approx(min(epsilon, 4.0), abs=1e-12)


def test_generalised_eigenvalues_and_costs_are_non_negative_for_an_ill_conditioned_desired_map(rng):
    """A_d with singular values spread over 1 .. 1e-15 (above matrix_rank's tolerance, so not zeroed as null
    space): γ ≥ 0, δ ≥ 0 and S non-decreasing, as documented, and Theorem 1 still holds."""
    for _ in range(100):
        F = int(rng.integers(2, 8))
        m = int(rng.integers(1, F + 1))
        U = np.linalg.qr(rng.normal(size=(F, F)))[0]
        W = np.linalg.qr(rng.normal(size=(m, m)))[0]
        s = np.sort(10.0 ** rng.uniform(-15, 0, size=m))[::-1]
        s[0] = 1.0
        A_d = (U[:, :m] * s) @ W
        A_c = rng.normal(size=(F, F + 1))  # B_c positive definite: η = 0
        X = rng.normal(size=(10, F))
        cl = NullSpaceCleaner(epsilon=0.0).fit(A_d, A_c)
        assert np.all(cl.gamma_ >= 0.0) and np.all(cl.utility_weights_ >= 0.0)
        cl.epsilon = float(np.median(np.sum((X @ A_d) ** 2, axis=1)))
        res = cl.transform_with_details(X)
        assert np.all(res.delta >= 0.0)
        partial = res.t < cl.gamma_.size
        np.testing.assert_allclose(e_utility(A_d, X, res.x_clean)[partial], cl.epsilon, rtol=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_epsilon_zero_removes_exactly_the_null_components(method, rng):
    """Module docstring: "α = 0 when S_t = ε (so ε = 0 removes exactly the γ = 0 components)": at ε = 0 every
    row has t = #(γ = 0) (its desired scores are not 0) and α = 0, not the quadratic's other (rounding) root."""
    rows = 0
    for _ in range(40):
        F = int(rng.integers(2, 9))
        A_d = rng.normal(size=(F, int(rng.integers(1, 4))))
        A_c = rng.normal(size=(F, int(rng.integers(1, 9))))
        X = rng.normal(size=(20, F))
        cl = NullSpaceCleaner(epsilon=0.0, method=method).fit(A_d, A_c)
        res = cl.transform_with_details(X)
        np.testing.assert_array_equal(res.t, np.count_nonzero(cl.gamma_ == 0.0))
        np.testing.assert_array_equal(res.alpha, 0.0)
        rows += X.shape[0]
    assert rows == 800
