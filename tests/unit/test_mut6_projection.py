"""Cleaning without a confidential map (common/nullspace/projection.py, :class:`StageProjection`): behaviours the
mutation round 6 found untested (the class was exercised only through ``owner.query.clean_queries``).

- ``x̃ = (1 − β) P_d x`` with ``β = sqrt(ε / ‖A_dᵀx‖²)``: ``e_utility = ε`` exactly, ``ε = 0`` keeps every desired
  score, ``ε >= ‖A_dᵀx‖²`` sends 0; for one desired label (``s`` has one singular value: a mutant indexed
  ``s[1]``), for a first stage of any scale (a mutant kept no direction of an ``A_d`` with ``σ_max <= 1``), and a
  1-D row gives a 1-D row (a mutant returned it 2-D).
- The numerical rank of ``A_d``: a rank-deficient ``A_d`` (a desired label that is a combination of others) must
  not gain rounding-level directions, along which the row sent would carry parts of ``x`` the model never reads.
- The trace (:class:`CleaningResult`) has one component per row: coefficient 1 of shape (n, 1) (mutants gave
  (F, 1), (n, 0) and (n, 2)).
- The box is checked coordinate by coordinate: one bad value (NaN, inf, a > 0, b < 0) among good ones, or one
  of the two ends of another length, is refused; ends at 0 (a <= 0 <= b) are accepted.
- :func:`box_row` (the row sent when the projection leaves the box): where the box has the scores, the least-norm
  such row (:func:`box_projection`, not just any row BVLS lands on: a mutant of the feasibility check returned
  that); where it has not, the box's row of the nearest scores (for one score, the interval's end).
- An unfitted projection is refused as a ConfigError.
"""

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.nullspace import StageProjection, e_utility
from privfed.common.nullspace.projection import box_projection, box_row


@pytest.mark.parametrize("scale", [1e-3, 0.5, 40.0])
@pytest.mark.parametrize("m_d", [1, 3])
def test_the_projection_spends_exactly_epsilon_on_one_or_several_labels_at_any_scale(scale, m_d, rng):
    F = 6
    A_d = rng.normal(size=(F, m_d)) * scale / np.sqrt(F)
    Q = np.linalg.qr(A_d)[0]
    X = rng.normal(size=(30, F))
    s_total = np.sum((X @ A_d) ** 2, axis=1)
    for eps in (0.0, float(np.median(s_total))):
        proj = StageProjection(epsilon=eps).fit(A_d[:, 0] if m_d == 1 else A_d)
        assert proj.basis_.shape == (F, m_d)
        res = proj.transform_with_details(X)
        partial = eps < s_total
        beta = np.sqrt(eps / s_total[partial])
        np.testing.assert_allclose(res.x_clean[partial], (1 - beta)[:, None] * (X[partial] @ Q @ Q.T), atol=1e-12)
        assert np.all(res.x_clean[~partial] == 0.0)
        # the trace in CleaningResult form: one component per row (P_d x, coefficient 1, cost ‖A_dᵀx‖²)
        np.testing.assert_array_equal(res.coef, np.ones((30, 1)))
        np.testing.assert_allclose(res.delta, s_total[:, None], rtol=1e-12)
        np.testing.assert_array_equal(res.t, np.where(partial, 0, 1))
        np.testing.assert_allclose(res.alpha[partial], beta, rtol=1e-12)
        assert np.all(res.alpha[~partial] == 0.0) and np.all(res.alpha_closed[~partial] == 0.0)
        np.testing.assert_array_equal(res.alpha_closed, res.alpha)
        np.testing.assert_allclose(res.e_utility, np.where(partial, eps, s_total), rtol=1e-12)
        np.testing.assert_allclose(e_utility(A_d, X[partial], res.x_clean[partial]), eps, atol=1e-12 * s_total.max())
        row = proj.transform(X[0])
        assert row.shape == (F,)
        np.testing.assert_allclose(row, res.x_clean[0], rtol=1e-12, atol=1e-15)


def test_a_stage_that_reads_nothing_has_an_empty_basis():
    """A_d = 0 has numerical rank 0 (``basis_``: F x r); every row is then sent as 0."""
    proj = StageProjection(epsilon=0.0).fit(np.zeros((4, 2)))
    assert proj.basis_.shape == (4, 0)
    assert np.all(proj.transform(np.ones((3, 4))) == 0.0)


def test_a_rank_deficient_stage_keeps_nothing_the_model_does_not_read(rng):
    """A_d = [a, 2a, b − a, b]: rank 2. The basis has 2 columns, and a row orthogonal to a and b is sent as 0."""
    for _ in range(50):
        F = int(rng.integers(3, 9))
        a, b = rng.normal(size=F), rng.normal(size=F)
        A_d = np.column_stack([a, 2 * a, b - a, b])
        proj = StageProjection(epsilon=0.0).fit(A_d)
        assert proj.basis_.shape == (F, 2)
        x = rng.normal(size=F)
        Q = np.linalg.qr(np.column_stack([a, b]))[0]
        unread = x - Q @ (Q.T @ x)
        assert np.max(np.abs(proj.transform(unread))) <= 1e-12 * np.max(np.abs(x))
        np.testing.assert_allclose(proj.transform(x), Q @ (Q.T @ x), atol=1e-12 * np.max(np.abs(x)))


def test_an_unfitted_projection_is_refused():
    with pytest.raises(ConfigError, match="not fitted yet"):
        StageProjection(epsilon=0.1).transform(np.ones(3))


GOOD = (-np.ones(3), np.ones(3))


@pytest.mark.parametrize(
    "box, match",
    [
        ((-np.ones(2), np.ones(3)), "two finite vectors"),
        ((-np.ones(3), np.ones(4)), "two finite vectors"),
        ((np.array([-1.0, np.nan, -1.0]), np.ones(3)), "two finite vectors"),
        ((-np.ones(3), np.array([1.0, 1.0, np.inf])), "two finite vectors"),
        ((np.array([-1.0, 0.5, -1.0]), np.ones(3)), "contain the centre"),
        ((-np.ones(3), np.array([1.0, -0.5, 1.0])), "contain the centre"),
    ],
)
def test_one_bad_coordinate_of_the_box_is_refused(box, match):
    A_d = np.array([[1.0], [2.0], [0.5]])
    for good in (GOOD, (np.array([-1.0, 0.0, -1.0]), np.array([1.0, 1.0, 0.0]))):  # a <= 0 <= b, ends at 0 too
        row = StageProjection(epsilon=0.0, box=good).fit(A_d).transform(np.array([0.1, 0.2, 0.3]))
        assert row.shape == (3,) and np.all(row >= good[0]) and np.all(row <= good[1])
    with pytest.raises(ConfigError, match=match):
        StageProjection(epsilon=0.0, box=box).fit(A_d).transform(np.array([0.1, 0.2, 0.3]))


def test_box_row_is_the_least_norm_row_with_the_scores_or_the_nearest_scores(rng):
    """Scores of rows near the box's corners (some narrow sides): there the least-norm row has active bounds and
    BVLS's own solution of the scores is another row (checked: about 1 in 100 of these differs by ~1e-2)."""
    for i in range(300):
        F, m = int(rng.integers(3, 8)), int(rng.integers(1, 3))
        A = rng.standard_normal((F, m)) * rng.lognormal(0.0, 2.0)
        a, b = -rng.uniform(0.01, 2.0, F), rng.uniform(0.01, 2.0, F)
        x = rng.uniform(a, b) if i % 3 == 0 else 0.99 * np.where(rng.random(F) < 0.5, a, b)
        s = A.T @ x  # scores the box has (x is in it)
        z = box_row(A, s, a, b)
        np.testing.assert_allclose(z, box_projection(A, s, a, b), atol=1e-9 * np.max(np.abs(b - a)))
        np.testing.assert_allclose(A.T @ z, s, atol=1e-9 * max(1.0, float(np.linalg.norm(s))))
        assert np.all((z >= a) & (z <= b))
    A = np.array([[1.0], [2.0], [-1.0]])
    a, b = -np.ones(3), np.array([1.0, 0.5, 2.0])
    reach = float(A[:, 0] @ np.where(A[:, 0] > 0, b, a))  # the largest score of the box: 3
    np.testing.assert_allclose(box_row(A, np.array([reach + 5.0]), a, b), [1.0, 0.5, -1.0], atol=1e-12)
    np.testing.assert_allclose(box_row(A, np.array([-10.0]), a, b), [-1.0, -1.0, 2.0], atol=1e-12)
