"""Cleaning query rows without a confidential map: keep what the served model's first stage reads, then
shrink (:class:`StageProjection`; the ``"projection"`` method of ``privfed query``), inside the model's
public box when one is given (:func:`box_projection`)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.errors import ConfigError
from privfed.common.nullspace.cleaner import CleaningResult, NullSpaceCleaner
from privfed.common.nullspace.linear_map import as_matrix, as_rows


class StageProjection:
    """Clean query rows without any confidential map: keep only what ``A_d`` reads, then shrink.

    ``x̃ = (1 − β)·P_d x`` with ``P_d`` the orthogonal projector onto ``span(A_d)`` and
    ``β = sqrt(ε / ‖A_dᵀx‖²)`` (β = 1, ``x̃ = 0``, when ``ε ≥ ‖A_dᵀx‖²``). Since ``A_dᵀP_d = A_dᵀ``,
    ``e_utility = β²‖A_dᵀx‖² = ε`` exactly, as in Theorem 1; ``ε = 0`` keeps every desired score.

    What ``x̃`` depends on: ``A_dᵀx`` and ``A_d``, nothing else (write ``A_d = Q_d R`` with ``Q_d``
    orthonormal and ``R`` of full row rank; then ``P_d x = Q_d (Rᵀ)⁺ A_dᵀx``). Any row that keeps
    the desired scores reveals ``A_dᵀx`` (the reader computes ``A_dᵀx̃``), so at ε = 0 this is the
    least a query can reveal; and unlike :class:`NullSpaceCleaner` no statistic of anyone's
    training rows shapes it. Against the paper's *fixed* linear adversary ``A_c`` it is weaker than null-space
    cleaning (``A_cᵀP_d x ≠ 0`` in general), but at ε = 0 both send a function of ``A_dᵀx``
    alone, so an adversary who knows the method learns exactly the same about ``x`` from either.

    **Inside a box.** A served model clips its input to its public bounds, so a cleaned row outside them
    is read as another row and may get another label. With ``box = (a, b)`` (the bounds minus the centre,
    ``a ≤ 0 ≤ b``) a row whose projection leaves the box is replaced by the least-norm row of the box
    with the same scores, :func:`box_projection`; a function of ``A_dᵀx`` and public values alone as
    well, and equal to ``P_d x`` whenever that lies inside. A query row outside the box may have scores
    no row of the box has: the row sent then has the box's scores nearest to them
    (:func:`box_row`), a function of ``A_dᵀx`` and public values too. The raw rows are not
    clipped to the box first: the box is the coordinator's word (the model's bounds), and clipping at
    its edges made the row sent a function of ``A_dᵀ clip(x)``, which tells rows of equal scores apart
    by where they cross edges it chose (audit 18: a narrow box around a threshold on each feature of a
    rank-1 stage read ten such bits per row, 0.69 advantage on pairs of equal scores;
    ``tests/adversary/test_query_box_attack.py``). Such a row's label is then the model's for a row of
    its scores (or the nearest reachable ones), not for the row clipped.

    Parameters
    ----------
    epsilon : float ≥ 0, the requested e_utility per row.
    box : (a, b) pair of (F,) arrays with a ≤ 0 ≤ b, or None (no box: the plain projection).

    Attributes
    ----------
    basis_ : (F, r) orthonormal basis of ``span(A_d)`` (r = numerical rank of A_d).
    n_features_in_ : int, F.
    """

    def __init__(self, *, epsilon: float, box: tuple[ArrayLike, ArrayLike] | None = None):
        self.epsilon = epsilon
        self.box = box

    def fit(self, A_d: ArrayLike) -> StageProjection:
        NullSpaceCleaner(epsilon=self.epsilon)._validate_params()
        A_d = as_matrix("A_d", A_d, rows_name="F features", cols_name="m_d desired labels")
        U, s, _ = np.linalg.svd(A_d, full_matrices=False)
        r = int(np.count_nonzero(s > s[0] * max(A_d.shape) * np.finfo(float).eps)) if s[0] > 0 else 0
        self.basis_ = U[:, :r]
        self._A_d = A_d
        self.n_features_in_ = A_d.shape[0]
        return self

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Clean query rows: ``(n, F) → (n, F)`` (a 1-D row gives a 1-D row)."""
        result = self.transform_with_details(X)
        return result.x_clean[0] if np.ndim(X) == 1 else result.x_clean

    def transform_with_details(self, X: ArrayLike) -> CleaningResult:
        """The trace in :class:`CleaningResult` form, one component per row (``P_d x``)."""
        if not hasattr(self, "basis_"):
            raise ConfigError("this StageProjection is not fitted yet; call fit(A_d) first")
        NullSpaceCleaner(epsilon=self.epsilon)._validate_params()
        X = as_rows("X", X, self.n_features_in_)
        eps = float(self.epsilon)
        box = self._checked_box()
        projected = (X @ self.basis_) @ self.basis_.T
        s_total = np.sum((X @ self._A_d) ** 2, axis=1)
        partial = eps < s_total
        with np.errstate(divide="ignore", invalid="ignore"):
            beta = np.where(partial, np.sqrt(eps / np.where(partial, s_total, 1.0)), 1.0)
        x_clean = (1.0 - beta)[:, None] * projected
        x_clean[~partial] = 0.0
        if box is not None:  # the scores of x̃, (1 − β)A_dᵀx (or the box's nearest), by the least-norm row of the box
            outside = np.any((x_clean < box[0]) | (x_clean > box[1]), axis=1)
            for i in np.flatnonzero(outside):
                x_clean[i] = box_row(self._A_d, self._A_d.T @ x_clean[i], *box)
        n = X.shape[0]
        return CleaningResult(
            x_clean=x_clean,
            coef=np.ones((n, 1)),
            delta=s_total[:, None],
            t=np.where(partial, 0, 1),
            alpha=np.where(partial, beta, 0.0),
            alpha_closed=np.where(partial, beta, 0.0),
            s_total=s_total,
            e_utility=np.where(partial, eps, s_total),
        )

    def _checked_box(self) -> tuple[np.ndarray, np.ndarray] | None:
        if self.box is None:
            return None
        a, b = (np.asarray(v, dtype=np.float64) for v in self.box)
        F = self.n_features_in_
        if a.shape != (F,) or b.shape != (F,) or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            raise ConfigError(f"box must be two finite vectors of length F = {F}")
        if np.any(a > 0) or np.any(b < 0):
            raise ConfigError("box must contain the centre: a <= 0 <= b")
        return a, b


def box_row(A: np.ndarray, s: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The least-norm row ``z`` of the box ``a ≤ z ≤ b`` with the scores ``Aᵀz = s`` (:func:`box_projection`) if the
    box has one; else the row of the box whose scores are nearest to ``s`` (bounded least squares, scipy's
    ``lsq_linear`` by BVLS; their scores are the projection of ``s`` onto the box's image, a convex polytope; for
    one score the interval's end). Deterministic, and its inputs are ``s`` and public values alone."""
    from scipy.optimize import lsq_linear

    A = np.asarray(A, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    nearest = np.clip(lsq_linear(A.T, s, bounds=(a, b), method="bvls").x, a, b)
    if np.linalg.norm(A.T @ nearest - s) <= 1e-9 * max(1.0, float(np.linalg.norm(s))):
        return box_projection(A, s, a, b)  # the box has the scores
    return nearest


def box_projection(A: np.ndarray, s: np.ndarray, a: np.ndarray, b: np.ndarray, *, max_iter: int = 200) -> np.ndarray:
    """The least-norm ``z`` in the box ``a ≤ z ≤ b`` with ``Aᵀz = s`` (``A`` (F, m), ``s`` (m,), feasible).

    The dual of ``min ½‖z‖²`` s.t. ``Aᵀz = s`` over the box is the concave, piecewise-quadratic
    ``g(μ) = ½‖z(μ)‖² − μᵀ(Aᵀz(μ) − s)`` with ``z(μ) = clip(Aμ, a, b)`` and gradient ``s − Aᵀz(μ)``;
    semismooth Newton on it (the free coordinates' ``AᵀDA`` as the Hessian, backtracking on ``g``) from
    the unconstrained solution ends at an active set, on which the free coordinates are solved exactly.
    Every step reads only ``A``, ``s`` and the box, so ``z`` is a function of ``s = Aᵀx`` and public values.
    """
    A = np.asarray(A, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    mu = _least_norm_solve(A.T @ A, s)

    def dual(m: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        z = np.clip(A @ m, a, b)
        return float(0.5 * z @ z - m @ (A.T @ z - s)), z, s - A.T @ z

    value, z, grad = dual(mu)
    for _ in range(max_iter):
        free = (z > a) & (z < b)
        hessian = A[free].T @ A[free]
        scale = np.trace(hessian)
        step = _least_norm_solve(hessian + 1e-12 * scale * np.eye(len(s)), grad) if scale > 0 else grad
        t = 1.0
        while True:
            trial, z_t, grad_t = dual(mu + t * step)
            if trial >= value - 1e-15 * abs(value) or t < 1e-12:
                break
            t /= 2.0
        mu, value, z, grad = mu + t * step, trial, z_t, grad_t
        if float(np.linalg.norm(grad)) <= 1e-13 * max(1.0, float(np.linalg.norm(s))):
            break
    free = (z > a) & (z < b)
    if np.any(free):  # polish: the free coordinates' least-norm solution given the clipped ones
        rest = s - A[~free].T @ z[~free]
        z[free] = np.clip(A[free] @ _least_norm_solve(A[free].T @ A[free], rest), a[free], b[free])
    return z


def _least_norm_solve(M: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``M⁺v`` for the small symmetric systems of :func:`box_projection`, by the SVD (:func:`numpy.linalg.pinv`, with
    :func:`numpy.linalg.lstsq`'s cutoff ``eps·max(M.shape)·σ_max``). Not ``lstsq`` itself: LAPACK's ``gelsd`` takes a
    subnormal operand on every system of two or more columns, a slow path in the gap a coordinator times
    (``tests/adversary/test_underflow_parameters.py``), which the null-space rows kept in the model's box would
    take (walkthrough 8, W8-8)."""
    return np.linalg.pinv(M, rcond=np.finfo(float).eps * max(M.shape)) @ v
