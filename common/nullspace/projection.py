"""Cleaning query rows without a confidential map: keep what the served model's first stage reads, then
shrink (:class:`StageProjection`; the ``"projection"`` method of ``privfed query``)."""

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

    Parameters
    ----------
    epsilon : float ≥ 0, the requested e_utility per row.

    Attributes
    ----------
    basis_ : (F, r) orthonormal basis of ``span(A_d)`` (r = numerical rank of A_d).
    n_features_in_ : int, F.
    """

    def __init__(self, *, epsilon: float):
        self.epsilon = epsilon

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
        projected = (X @ self.basis_) @ self.basis_.T
        s_total = np.sum((X @ self._A_d) ** 2, axis=1)
        partial = eps < s_total
        with np.errstate(divide="ignore", invalid="ignore"):
            beta = np.where(partial, np.sqrt(eps / np.where(partial, s_total, 1.0)), 1.0)
        x_clean = (1.0 - beta)[:, None] * projected
        x_clean[~partial] = 0.0
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
