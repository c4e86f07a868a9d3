"""Linear maps of the null-space cleaning paper (Xu et al. AAAI 2017, Algorithm 1 step 1; SPEC §10): the
least-squares (or ridge) maps ``A`` with ``Y ≈ XA``, the prediction changes ``e_utility`` and ``e_privacy``
a cleaning is measured by, and the array checks the cleaners share."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.errors import ConfigError
from privfed.common.validation import check_non_negative


def as_matrix(name: str, value: ArrayLike, *, rows_name: str = "rows", cols_name: str = "columns") -> np.ndarray:
    """``value`` as a finite float 2-D array; a 1-D array is read as one column."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name} must be a numeric array, got {type(value).__name__}: {exc}") from exc
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.size == 0:
        raise ConfigError(f"{name} must be a non-empty 2-D array ({rows_name} × {cols_name}), got shape {arr.shape}")
    bad = int(np.count_nonzero(~np.isfinite(arr)))
    if bad:
        raise ConfigError(f"{name} has {bad} non-finite value(s) (NaN or inf); drop or impute them before cleaning")
    return arr


def as_rows(name: str, X: ArrayLike, n_features: int) -> np.ndarray:
    """Query rows as a finite (n, F) array; a 1-D ``X`` is one row."""
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name} must be a numeric array, got {type(X).__name__}: {exc}") from exc
    arr2 = arr[None, :] if arr.ndim == 1 else arr
    if arr2.ndim != 2 or arr2.shape[1] != n_features:
        raise ConfigError(
            f"{name} has shape {arr.shape} but A_d and A_c have F = {n_features} rows (features); "
            f"pass rows of length {n_features}, shape (n, {n_features})"
        )
    bad = int(np.count_nonzero(~np.isfinite(arr2)))
    if bad:
        raise ConfigError(f"{name} has {bad} non-finite value(s) (NaN or inf); drop or impute them before cleaning")
    return arr2


RIDGE_GRID = np.concatenate([[0.0], np.logspace(-8, 1, 37)])
"""Candidate ridge penalties for ``alpha="gcv"``, relative to the largest squared singular value of the
centred ``X`` (so the grid is scale-free); 0 is plain least squares."""


def fit_linear_map(X: ArrayLike, Y: ArrayLike, *, center: bool = True, alpha: float | str = 0.0) -> np.ndarray:
    """Least-squares (or ridge) linear map ``A`` (F×m) with ``Y ≈ XA`` (Algorithm 1, step 1).

    Intercept handling: with ``center=True`` (default) ``X`` and ``Y`` are centred by their column
    means and ``A`` is fitted without intercept, so the model predicts
    ``ŷ = Ȳ + Aᵀ(x − X̄)``; clean the *centred* query ``x − X̄`` and add ``X̄`` back. The mean
    feature vector then predicts ``Ȳ`` exactly, and ``A`` is the model's linear first stage.
    With ``center=False`` the map has no intercept (``ŷ = Aᵀx``). Rank-deficient ``X`` gets the
    minimum-norm solution, which is zero on directions the data never visit.

    ``alpha`` is the ridge penalty: ``A = argmin ‖Y − XA‖² + alpha‖A‖²``. ``alpha="gcv"`` picks it from
    :data:`RIDGE_GRID` (times ``s_max²``) by generalised cross-validation, ``GCV = (‖Y − XA‖²/n) /
    (1 − tr(H)/n)²`` with ``H = X(XᵀX + alpha I)⁻¹Xᵀ`` (Golub, Heath, Wahba, Technometrics 1979), one SVD
    for the whole grid. This is how the null-space experiment's adversary estimates ``A_c``: the
    paper's unregularised fit with F = 103 yeast features predicts held-out confidential labels
    *worse* than their mean for most label splits, so "complete privacy" would credit the
    adversary's own over-fitting to whatever mechanism is measured.

    Parameters
    ----------
    X : array_like (n, F)
    Y : array_like (n,) or (n, m); 1-D means one label.
    center : bool
    alpha : float ≥ 0 or "gcv"

    Returns
    -------
    A : ndarray (F, m)
    """
    X = as_matrix("X", X, rows_name="n rows", cols_name="F features")
    Y = as_matrix("Y", Y, rows_name="n rows", cols_name="m labels")
    if X.shape[0] != Y.shape[0]:
        raise ConfigError(f"X has {X.shape[0]} rows but Y has {Y.shape[0]}; pass one label row per feature row")
    if alpha != "gcv":
        alpha = check_non_negative(alpha, name="alpha", fix="or 'gcv' to choose it by generalised cross-validation")
    if center:
        X = X - X.mean(axis=0)
        Y = Y - Y.mean(axis=0)
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    rank = int(np.count_nonzero(s > s[0] * max(X.shape) * np.finfo(float).eps)) if s[0] > 0 else 0
    U, s, Vt = U[:, :rank], s[:rank], Vt[:rank]
    UtY = U.T @ Y
    if alpha == "gcv":
        n = X.shape[0]
        outside = float(np.sum(Y**2) - np.sum(UtY**2))  # residual outside span(X), the same for every alpha
        best = (math.inf, 0.0)
        for a in RIDGE_GRID * (s[0] ** 2 if rank else 1.0):
            shrink = s**2 / (s**2 + a)
            residual = outside + float(np.sum(((1.0 - shrink)[:, None] * UtY) ** 2))
            dof = float(np.sum(shrink))
            score = residual / n / (1.0 - dof / n) ** 2 if dof < n else math.inf
            best = min(best, (score, float(a)))
        alpha = best[1]
    return Vt.T @ ((s / (s**2 + float(alpha)))[:, None] * UtY)


def e_utility(A_d: ArrayLike, x: ArrayLike, x_clean: ArrayLike) -> np.ndarray:
    """Per-row ``‖A_dᵀ(x − x̃)‖²`` (SPEC §10); scalar for a single 1-D row."""
    return _prediction_change("A_d", A_d, x, x_clean)


def e_privacy(A_c: ArrayLike, x: ArrayLike, x_clean: ArrayLike) -> np.ndarray:
    """Per-row ``‖A_cᵀ(x − x̃)‖²`` (SPEC §10); scalar for a single 1-D row."""
    return _prediction_change("A_c", A_c, x, x_clean)


def _prediction_change(name: str, A: ArrayLike, x: ArrayLike, x_clean: ArrayLike) -> np.ndarray:
    A = as_matrix(name, A, rows_name="F features", cols_name="m labels")
    rows = as_rows("x", x, A.shape[0])  # first: np.ndim raises numpy's own error on a ragged list (mutation round 6)
    single = np.ndim(x) == 1
    x, x_clean = rows, as_rows("x_clean", x_clean, A.shape[0])
    if x.shape != x_clean.shape:
        raise ConfigError(f"x has shape {x.shape} but x_clean has {x_clean.shape}; pass the cleaned rows of x")
    out = np.sum(((x - x_clean) @ A) ** 2, axis=1)
    return out[0] if single else out
