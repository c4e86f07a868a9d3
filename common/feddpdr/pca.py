"""Analyze-Gauss DP-PCA: the dimensionality-reduction phase of FedDPDR-DPML (SPEC §7).

Seed paper 004 (Wang, Zhang, Liang, Wang, Liu, CMC 2024), Algorithm 2 ``DPDR(D_i, eps1, delta, k)``:
perturb the second-moment matrix ``M_i = X_i^T X_i`` (Eq. 5) with a symmetric Gaussian matrix and keep
the top-k eigenvectors. The mechanism is Algorithm 1 of Dwork, Talwar, Thakurta, Zhang, "Analyze
Gauss", STOC 2014.

Neighbouring relation
---------------------
With every row ``||x|| <= 1``, adding or removing one row moves ``X^T X`` by ``x x^T``, whose
Frobenius norm is ``||x||^2 <= 1``; the noise is drawn on the upper triangle including the diagonal, a
vector whose L2 change is at most that Frobenius norm. So the L2 sensitivity is **1 under
add/remove-one** (the default here, as in SPEC §7). Under replace-one,
``||x x^T - x' x'^T||_F^2 = ||x||^4 + ||x'||^4 - 2 (x^T x')^2 <= 2``, so the sensitivity is
``sqrt(2)``: pass ``neighbouring="replace-one"``. The seed's Lemma 4.1 speaks of rows that "differ in
the t-th row" (replace-one) yet bounds only ``||x x^T||``, which is the add/remove argument; the
objective-perturbed SVM of phase 2 (Chaudhuri et al. 2011) is proved for replace-one. A run that wants
one relation for both phases should use ``neighbouring="replace-one"`` here.

Floating point: the Gaussian is sampled in doubles by numpy (Mironov 2012, SPEC §12 applies); the
released object is an eigenbasis, not the noisy matrix, but no snapping is done.

References
----------
C. Dwork, K. Talwar, A. Thakurta, L. Zhang, "Analyze Gauss: optimal bounds for privacy-preserving
principal component analysis", STOC 2014 (Algorithm 1).
B. Balle, Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy", ICML 2018 (Thm 8).
T. Wang et al., CMC 78(3), 2024 (seed 004: Algorithm 2, Lemma 4.1, Theorem 4.1).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg
from scipy.special import log_ndtr, ndtr

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.choices import DEFAULT_ROW_SCALING, ROW_SCALINGS
from privfed.common.mechanisms.gaussian import GaussianMechanism, standard_normal
from privfed.common.validation import check_choice, check_fraction, check_int, check_positive, check_real

NEIGHBOURING_SENSITIVITY = {"add-remove": 1.0, "replace-one": math.sqrt(2.0)}
"""L2 sensitivity of ``X^T X`` for rows in the unit ball, per neighbouring relation."""

SIGMA_METHODS = ("analytic", "classic")
NORM_TOLERANCE = 1e-9
"""Rows may exceed norm 1 by this much (float round-off) before a function refuses them."""


def _check_epsilon_delta(epsilon: object, delta: object) -> tuple[float, float]:
    eps = check_positive(epsilon, name="epsilon", allow_inf=True, fix="inf asks for no privacy")
    dlt = check_real(delta, name="delta")
    if eps != math.inf:
        dlt = check_fraction(dlt, name="delta", fix="the seed uses 1e-4, privfed defaults to 1e-5")
    return eps, dlt


def clip_rows_to_unit_ball(A: np.ndarray) -> np.ndarray:
    """Row-wise ``a <- a / max(1, ||a||)`` (SPEC §7), returning a new float array."""
    A = np.asarray(A, dtype=np.float64)
    norms = np.linalg.norm(A, axis=-1, keepdims=True)
    return A / np.maximum(1.0, norms)


def scale_rows_to_unit_ball(X: np.ndarray, bounds: Bounds) -> np.ndarray:
    """Map raw rows into the unit L2 ball using only the public bounds.

    ``a = (x - (lo + hi)/2) / R`` with ``R = sqrt(sum(((hi - lo)/2)^2))``, the largest norm a centred
    in-bounds row can have, so every in-bounds row lands in the ball; then ``a <- a / max(1, ||a||)``
    anyway so out-of-bounds rows cannot break the sensitivity bound of §7/§8. Nothing is computed
    from the rows (SPEC §4).

    Parameters
    ----------
    X : ndarray of shape (n, d)
    bounds : Bounds with ``bounds.d == d``

    Returns
    -------
    ndarray of shape (n, d), every row norm <= 1.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != bounds.d:
        raise ConfigError(f"rows must have shape (n, {bounds.d}) to match the bounds, got {X.shape}")
    half = (bounds.hi - bounds.lo) / 2.0
    radius = float(np.sqrt(np.sum(half**2)))
    return clip_rows_to_unit_ball((X - (bounds.lo + bounds.hi) / 2.0) / radius)


def normalise_rows(X: np.ndarray, bounds: Bounds) -> np.ndarray:
    """``u = (x - lo) / (hi - lo)`` clipped to ``[0, 1]``, then ``u / ||u||`` (``0`` stays ``0``).

    Uses only the public bounds and the row itself; every returned row has norm 1 or 0.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != bounds.d:
        raise ConfigError(f"rows must be (n, {bounds.d}) to match the bounds, got shape {X.shape}")
    U = np.clip((X - bounds.lo) / (bounds.hi - bounds.lo), 0.0, 1.0)
    norms = np.linalg.norm(U, axis=1, keepdims=True)
    return clip_rows_to_unit_ball(np.divide(U, norms, out=np.zeros_like(U), where=norms > 0))


def scale_rows(X: np.ndarray, bounds: Bounds, scaling: str = DEFAULT_ROW_SCALING) -> np.ndarray:
    """Rows into the unit ball by one of :data:`ROW_SCALINGS`."""
    if scaling == "ball":
        return scale_rows_to_unit_ball(X, bounds)
    if scaling == "normalise":
        return normalise_rows(X, bounds)
    raise ConfigError(f"row scaling must be one of {ROW_SCALINGS}, got {scaling!r}")


def check_unit_rows(X: np.ndarray, what: str) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ConfigError(f"{what} must be a 2-D array of rows, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ConfigError(f"{what} contains non-finite values")
    worst = float(np.max(np.linalg.norm(X, axis=1), initial=0.0))
    if worst > 1.0 + NORM_TOLERANCE:
        raise ConfigError(
            f"{what} has a row of norm {worst:.6g} > 1, which voids the sensitivity bound; "
            "scale with scale_rows_to_unit_ball(X, bounds) first"
        )
    return clip_rows_to_unit_ball(X)


def analytic_gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """Exact delta of the Gaussian mechanism (Balle & Wang, ICML 2018, Theorem 8).

    ``delta(sigma) = Phi(D/(2 sigma) - eps sigma/D) - e^eps Phi(-D/(2 sigma) - eps sigma/D)``; the
    second term is evaluated as ``exp(eps + log Phi(.))`` so large ``eps`` does not overflow.
    """
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return float(ndtr(a - b) - np.exp(epsilon + log_ndtr(-a - b)))


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0, *, method: str = "analytic") -> float:
    """Noise scale of the (epsilon, delta) Gaussian mechanism for L2 sensitivity ``sensitivity``.

    ``method="analytic"`` (default): the smallest sigma meeting the exact condition of the analytic
    Gaussian mechanism (Balle & Wang 2018, Thm 8, see :func:`analytic_gaussian_delta`), found by
    bisection on ``log sigma`` to relative width 1e-13 and returned from the safe side. It is valid for
    every epsilon > 0 and never larger than the classic scale, so privfed uses it for all epsilon
    (SPEC §7 asks for it at least for epsilon >= 1).

    ``method="classic"``: ``sqrt(2 ln(1.25/delta)) * sensitivity / epsilon`` (Dwork & Roth 2014,
    Thm A.1; the seed's Algorithm 2 and Theorem 4.1). Its proof needs epsilon < 1, so it refuses
    epsilon >= 1.

    Parameters
    ----------
    epsilon : float > 0, ``inf`` gives 0 (no noise).
    delta : float in (0, 1).
    sensitivity : float > 0, L2 sensitivity (1 for ``X^T X`` under add/remove-one, see module doc).
    method : {"analytic", "classic"}

    Raises
    ------
    ConfigError
        For an out-of-range value, or ``method="classic"`` with epsilon >= 1.

    References
    ----------
    B. Balle, Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy: analytical
    calibration and optimal denoising", ICML 2018.
    """
    epsilon, delta = _check_epsilon_delta(epsilon, delta)
    sensitivity = check_positive(sensitivity, name="sensitivity")
    check_choice(method, name="method", allowed=SIGMA_METHODS)
    if epsilon == math.inf:
        return 0.0
    classic = math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon
    if method == "classic":
        if epsilon >= 1.0:
            raise ConfigError(
                f"the classic Gaussian calibration needs epsilon < 1, got {epsilon}; use method='analytic'"
            )
        return classic
    lo = hi = classic if epsilon < 1.0 else sensitivity / epsilon
    while analytic_gaussian_delta(hi, epsilon, sensitivity) > delta:
        hi *= 2.0
    while analytic_gaussian_delta(lo, epsilon, sensitivity) <= delta:
        lo /= 2.0
    while hi / lo > 1.0 + 1e-13:
        mid = math.sqrt(lo * hi)
        if analytic_gaussian_delta(mid, epsilon, sensitivity) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def symmetric_gaussian_noise(d: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """``E`` of shape (d, d): upper triangle incl. diagonal i.i.d. N(0, sigma^2), mirrored (SPEC §7).

    Drawn by the float-safe sampler :func:`~privfed.common.mechanisms.gaussian.standard_normal`; a
    release adds it through :class:`~privfed.common.mechanisms.gaussian.GaussianMechanism` instead
    (:func:`noisy_covariance`), which also rounds and clamps."""
    upper = np.triu_indices(d)
    E = np.zeros((d, d))
    E[upper] = standard_normal(rng, upper[0].shape) * sigma  # the draws, in the order the release takes them
    return E + np.triu(E, 1).T


def covariance_release(
    epsilon: float, delta: float, *, neighbouring: str = "add-remove", method: str = "analytic"
) -> GaussianMechanism | None:
    """The Gaussian mechanism of :func:`noisy_covariance` (None at ``epsilon = inf``: no noise). Built from
    public parameters only, so an owner builds it before reading a row; ConfigError (its ε floor and
    ceiling, its σ bounds) refuses the task there."""
    if neighbouring not in NEIGHBOURING_SENSITIVITY:
        raise ConfigError(f"neighbouring must be one of {tuple(NEIGHBOURING_SENSITIVITY)}, got {neighbouring!r}")
    sensitivity = NEIGHBOURING_SENSITIVITY[neighbouring]
    sigma = gaussian_sigma(epsilon, delta, sensitivity, method=method)
    if sigma == 0.0:
        return None
    return GaussianMechanism(epsilon=epsilon, delta=delta, sigma=sigma, sensitivity=sensitivity)


def noisy_covariance(
    X_unit: np.ndarray,
    *,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    neighbouring: str = "add-remove",
    method: str = "analytic",
) -> np.ndarray:
    """``X^T X + E``, the (epsilon, delta)-DP second-moment matrix (seed 004 Alg. 2 lines 3-4; SPEC §7).

    Released float-safely by :class:`~privfed.common.mechanisms.gaussian.GaussianMechanism` (SPEC §12:
    epsilon in ``[1e-5, 30]``, noise from full-precision uniforms, entries rounded to a grid ``2^-12``
    of sigma and clamped); the checks run before the rows are read.

    Parameters
    ----------
    X_unit : ndarray (n, d), every row norm <= 1 (see :func:`scale_rows_to_unit_ball`).
    epsilon, delta : privacy parameters; ``epsilon=inf`` adds no noise (non-private bypass).
    rng : numpy Generator (a cryptographic stream for real releases, SPEC §13).
    neighbouring : {"add-remove", "replace-one"}, sets the sensitivity (1 or sqrt 2).
    method : sigma calibration, see :func:`gaussian_sigma`.

    Raises
    ------
    ConfigError
        A row of norm > 1, or invalid privacy parameters.
    """
    release = covariance_release(epsilon, delta, neighbouring=neighbouring, method=method)
    X = check_unit_rows(X_unit, "X_unit")
    C = X.T @ X
    return C if release is None else release.privatize_symmetric(C, rng)


def top_k_eigenvectors(C: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k eigenpairs of a symmetric matrix, eigenvalues descending.

    ``scipy.linalg.eigh`` returns ascending order, so the last k are taken and reversed (SPEC §7).
    """
    d = C.shape[0]
    k = check_int(k, name="k", minimum=1, maximum=d, fix="k is at most the dimension")
    values, vectors = scipy.linalg.eigh(C, subset_by_index=[d - k, d - 1])
    return vectors[:, ::-1], values[::-1]


def dp_pca(
    X_unit: np.ndarray,
    k: int,
    *,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    neighbouring: str = "add-remove",
    method: str = "analytic",
) -> np.ndarray:
    """Analyze-Gauss DP-PCA: top-k eigenvectors of ``X^T X + E`` (seed 004 Alg. 2; SPEC §7).

    Returns
    -------
    U : ndarray (d, k), orthonormal columns, by decreasing noisy eigenvalue. (epsilon, delta)-DP
        under the chosen neighbouring relation; ``epsilon=inf`` is plain uncentred PCA.
    """
    C = noisy_covariance(X_unit, epsilon=epsilon, delta=delta, rng=rng, neighbouring=neighbouring, method=method)
    U, _ = top_k_eigenvectors(C, k)
    return U


def owner_pca_release(
    X: np.ndarray,
    bounds: Bounds,
    k: int,
    epsilon1: float,
    delta: float,
    rng: np.random.Generator,
    *,
    neighbouring: str = "add-remove",
    scaling: str = DEFAULT_ROW_SCALING,
) -> tuple[np.ndarray, int]:
    """Owner side of FedDPDR-DPML phase 1 (seed 004 Alg. 1 lines 2-3): what an owner releases.

    Scales the raw local rows with the public bounds (``scaling``, :data:`ROW_SCALINGS`), runs :func:`dp_pca` at ``(epsilon1, delta)`` and
    returns ``(U_i, n_i)``. ``n_i`` is the exact local count and stays at the owner: the seed
    releases it in the clear for the weights ``w_i = n_i / sum n``, here only a DP count leaves
    (the two-sided geometric mechanism at ``PcaShareTask.count_epsilon``, debited; issue 9,
    contract 7; ``privfed.owner.kinds.feddpdr``).
    """
    X_unit = scale_rows(X, bounds, scaling)
    U = dp_pca(X_unit, k, epsilon=epsilon1, delta=delta, rng=rng, neighbouring=neighbouring)
    return U, int(X_unit.shape[0])
