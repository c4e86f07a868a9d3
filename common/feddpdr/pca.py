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

Noise: the Gaussian mechanism of :mod:`privfed.common.mechanisms.gaussian` (the analytic calibration of
Balle & Wang 2018, :func:`~privfed.common.mechanisms.gaussian.calibrated_gaussian`, and its float-safe
release: full-precision uniforms, entries rounded to a grid that grows with sigma and clamped, SPEC §12);
this module states the sensitivity and draws through it.

References
----------
C. Dwork, K. Talwar, A. Thakurta, L. Zhang, "Analyze Gauss: optimal bounds for privacy-preserving
principal component analysis", STOC 2014 (Algorithm 1).
B. Balle, Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy", ICML 2018 (Thm 8).
T. Wang et al., CMC 78(3), 2024 (seed 004: Algorithm 2, Lemma 4.1, Theorem 4.1).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.linalg

from privfed.common.bounds import Bounds, box_scale, flush_tiny
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.choices import DEFAULT_ROW_SCALING, ROW_SCALINGS
from privfed.common.mechanisms.gaussian import GaussianMechanism, calibrated_gaussian
from privfed.common.validation import check_int
from privfed.common.work_rows import pad_rows, work_rows, zero_padding

NEIGHBOURING_SENSITIVITY = {"add-remove": 1.0, "replace-one": math.sqrt(2.0)}
"""L2 sensitivity of ``X^T X`` for rows in the unit ball, per neighbouring relation."""

NORM_TOLERANCE = 1e-9
"""Rows may exceed norm 1 by this much (float round-off) before a function refuses them."""


#: Scaled values are clamped to ``+-SCALED_LIMIT`` (:func:`scale_rows_to_unit_ball`): finite, and their squares'
#: sum over any row of fewer than 2^23 features too.
SCALED_LIMIT = 2.0**500


def clip_rows_to_unit_ball(A: np.ndarray) -> np.ndarray:
    """Row-wise ``a <- a / max(1, ||a||)`` (SPEC §7), returning a new float array.

    Values below :data:`~privfed.common.bounds.TINY` read as 0, before the norm and after its division: the norm
    squares each value, and a value below 2^-511 squares below the normal range, the CPU's slow path. Rows reach
    here scaled by public maps the coordinator may choose (wide schema bounds, audit 36, A36-1; its basis ``U``,
    audit 37, A37-1), which could otherwise place the band of raw values that take it. A function of each value
    alone (:func:`~privfed.common.bounds.flush_tiny`), so no sensitivity bound changes."""
    A = flush_tiny(A)
    norms = np.linalg.norm(A, axis=-1, keepdims=True)
    return flush_tiny(A / np.maximum(1.0, norms))


def scale_rows_to_unit_ball(X: np.ndarray, bounds: Bounds) -> np.ndarray:
    """Map raw rows into the unit L2 ball using only the public bounds.

    ``a = (x - (lo + hi)/2) / R`` with ``R = sqrt(sum(((hi - lo)/2)^2))``, the largest norm a centred
    in-bounds row can have, so every in-bounds row lands in the ball; then ``a <- a / max(1, ||a||)``
    anyway so out-of-bounds rows cannot break the sensitivity bound of §7/§8. Nothing is computed
    from the rows (SPEC §4). A centred value beyond :data:`SCALED_LIMIT` radii (a finite raw value far
    outside narrow bounds, whose scaling overflowed to inf and then, divided by an infinite norm, to NaN)
    is clamped there first: no row makes a release raise part-way and fall back sooner (``docs/owner-limits.md``,
    "Limits", "Timing").

    Parameters
    ----------
    X : ndarray of shape (n, d)
    bounds : Bounds with ``bounds.d == d``

    Returns
    -------
    ndarray of shape (n, d), every row norm <= 1.
    """
    radius = float(np.sqrt(np.sum(((bounds.hi - bounds.lo) / 2.0) ** 2)))
    return _centred_into_ball(X, bounds, lambda centred: centred / radius)


def scale_rows_to_unit_box(X: np.ndarray, bounds: Bounds) -> np.ndarray:
    """Map raw rows into the unit L2 ball feature by feature, using only the public bounds (row scaling ``"box"``).

    ``a_j = (x_j - (lo_j + hi_j)/2) / (h_j sqrt(d))`` with ``h_j = (hi_j - lo_j)/2`` the feature's own half-width:
    each feature's public range is mapped onto ``[-1/sqrt(d), 1/sqrt(d)]``, so every in-bounds row has norm at
    most ``sqrt(d * (1/sqrt(d))^2) = 1``; then ``a <- a / max(1, ||a||)`` anyway, so out-of-bounds rows cannot
    break the sensitivity bound of §7/§8, with values beyond :data:`SCALED_LIMIT` clamped first as in
    :func:`scale_rows_to_unit_ball`. A feature of zero width maps to 0.

    Why: ``"ball"`` divides every feature by one radius ``R = ||(hi - lo)/2||``, so one feature with a wide public
    range (anes96's population in thousands beside 1-7 scales; breast cancer's areas to 4254 beside ratios
    below 1) holds nearly all of ``R`` and leaves every other feature near the centre, under the DP noise
    (walkthrough 13, W13-3). Here every feature counts by its documented range, not by its unit.

    Privacy (SPEC §4): the map is fixed by the public bounds before any row is read: it reads nothing from
    the rows (no statistic of them, not even the row's own norm), so it is a fixed preprocessing step and
    neighbouring data sets stay neighbouring; with every output row of norm ``<= 1`` the sensitivity
    arguments of DP-PCA and of phase 2 (§7, §8) hold unchanged. It is affine, ``a = D (x - c)`` with the
    public diagonal ``D = diag(`` :func:`box_scale` ``)`` and centre ``c`` (before the norm clip, which leaves
    in-bounds rows alone), so a served model's first stage stays linear in data space: ``D U``
    (:func:`privfed.server.models.model_linear_stage`), and ``privfed query`` can clean against it.

    Returns
    -------
    ndarray of shape (n, d), every row norm <= 1.
    """
    return _centred_into_ball(X, bounds, lambda centred: centred * box_scale(bounds))


def _centred_into_ball(X: np.ndarray, bounds: Bounds, scale: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The rows centred at the bounds' midpoint, ``scale`` d (a public map), values beyond :data:`SCALED_LIMIT`
    clamped (an overflow keeps the row's direction), then clipped to the unit ball: the steps the affine row
    scalings share (``ball``, ``box``). A NaN (``inf * 0`` of a zero-width feature) carries nothing: 0."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != bounds.d:
        raise ConfigError(f"rows must have shape (n, {bounds.d}) to match the bounds, got {X.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        centred = scale(X - (bounds.lo + bounds.hi) / 2.0)
    centred = np.where(np.isnan(centred), 0.0, centred)
    # the clip reads values below TINY as 0 (audit 36, A36-1): bounds as wide as Bounds accepts (a half-width to
    # ~1.3e154, a coordinator's schema) scale a row value x with 0 < |x| < 1.5e-154 h sqrt(d) below 2^-511
    return clip_rows_to_unit_ball(np.clip(centred, -SCALED_LIMIT, SCALED_LIMIT))


def normalise_rows(X: np.ndarray, bounds: Bounds) -> np.ndarray:
    """``u = (x - lo) / (hi - lo)`` clipped to ``[0, 1]``, then ``u / ||u||`` (``0`` stays ``0``).

    Uses only the public bounds and the row itself; every returned row has norm 1 or 0.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != bounds.d:
        raise ConfigError(f"rows must be (n, {bounds.d}) to match the bounds, got shape {X.shape}")
    with np.errstate(over="ignore"):  # a value far beyond the bounds overflows to inf, clipped to 1
        U = np.clip((X - bounds.lo) / (bounds.hi - bounds.lo), 0.0, 1.0)
    U = flush_tiny(U)  # bounds up to ~1e154 wide put a value near lo below 2^-511, its square below normal (A36-1)
    norms = np.linalg.norm(U, axis=1, keepdims=True)
    return clip_rows_to_unit_ball(np.divide(U, norms, out=np.zeros_like(U), where=norms > 0))


def scale_rows(X: np.ndarray, bounds: Bounds, scaling: str = DEFAULT_ROW_SCALING) -> np.ndarray:
    """Rows into the unit ball by one of :data:`ROW_SCALINGS`."""
    if scaling == "ball":
        return scale_rows_to_unit_ball(X, bounds)
    if scaling == "box":
        return scale_rows_to_unit_box(X, bounds)
    if scaling == "normalise":
        return normalise_rows(X, bounds)
    raise ConfigError(f"row scaling must be one of {ROW_SCALINGS}, got {scaling!r}")


def check_unit_rows(X: np.ndarray, what: str) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ConfigError(f"{what} must be a 2-D array of rows, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ConfigError(f"{what} contains non-finite values")
    X = flush_tiny(X)  # the norm squares each value: none below 2^-511 (clip_rows_to_unit_ball; audit 37, A37-1)
    worst = float(np.max(np.linalg.norm(X, axis=1), initial=0.0))
    if worst > 1.0 + NORM_TOLERANCE:
        raise ConfigError(
            f"{what} has a row of norm {worst:.6g} > 1, which voids the sensitivity bound; "
            "scale with scale_rows_to_unit_ball(X, bounds) first"
        )
    return clip_rows_to_unit_ball(X)


def covariance_release(
    epsilon: float, delta: float, *, neighbouring: str = "add-remove", method: str = "analytic"
) -> GaussianMechanism | None:
    """The Gaussian mechanism of :func:`noisy_covariance` (None at ``epsilon = inf``: no noise). Built from
    public parameters only, so an owner builds it before reading a row; ConfigError (its ε floor and
    ceiling, its σ bounds) refuses the task there."""
    if neighbouring not in NEIGHBOURING_SENSITIVITY:
        raise ConfigError(f"neighbouring must be one of {tuple(NEIGHBOURING_SENSITIVITY)}, got {neighbouring!r}")
    return calibrated_gaussian(epsilon, delta, NEIGHBOURING_SENSITIVITY[neighbouring], method=method)


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
    method : sigma calibration, see :func:`~privfed.common.mechanisms.gaussian.gaussian_sigma`.

    Raises
    ------
    ConfigError
        A row of norm > 1, or invalid privacy parameters.
    """
    release = covariance_release(epsilon, delta, neighbouring=neighbouring, method=method)
    X = check_unit_rows(X_unit, "X_unit")
    X = pad_rows(X, work_rows(X.shape[0]))  # zero rows add exact zeros: the work of n's public grid cell
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

    Timing: the rows are padded to ``n``'s public grid cell (:mod:`privfed.common.work_rows`) *before* they are
    scaled, and the padding's scaled rows are zeroed (:func:`~privfed.common.work_rows.zero_padding`): every pass
    over the rows works on the cell, and only :func:`~privfed.common.work_rows.pad_rows`' copy on the ``n`` rows (audit 11,
    ``tests/adversary/test_differential_row_work.py``; the scaling and the norm checks were O(n) passes before).
    """
    n = int(np.asarray(X).shape[0])
    X_unit = zero_padding(scale_rows(pad_rows(X, work_rows(n)), bounds, scaling), n)  # exact zeros in X^T X
    U = dp_pca(X_unit, k, epsilon=epsilon1, delta=delta, rng=rng, neighbouring=neighbouring)
    return U, n
