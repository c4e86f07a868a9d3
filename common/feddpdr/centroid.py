"""DP class sums: the one-budget multiclass classifier of privfed's FedDPDR-DPML (issue 13.1).

An owner releases its **class sums** ``S_i = Y_i^T [Z_i, 1] / sqrt(2)`` (K x (k + 1): per class, the sum
of its projected rows and, in the last column, its row count over sqrt 2) through the Gaussian
mechanism, one release for all K classes at ``(epsilon, delta)``. The coordinator **sums** the owners'
releases and turns the total into a nearest-centroid linear model (:func:`centroid_coef`).

Privacy (add/remove-one neighbours, like DP-PCA's default, :mod:`privfed.common.feddpdr.pca`). Rows are
mapped into the unit ball by the public scaling and projected onto the public ``U_global``, so
``||z|| <= 1`` and ``||[z, 1]/sqrt 2|| <= 1``. Adding or removing one row ``(z, y)`` changes ``S`` by
``e_y [z, 1]^T / sqrt 2``, whose Frobenius norm is at most 1, whatever K is: the L2 sensitivity is 1 and
the budget is **not** divided by K (one-vs-rest pays ``epsilon/K`` per class, seed 004 Alg. 3). With
``sigma = gaussian_sigma(epsilon, delta, 1)`` (the analytic Gaussian mechanism of
:mod:`privfed.common.mechanisms.gaussian`, Balle & Wang ICML 2018 Thm 8, released float-safely there) the
release is ``(epsilon, delta)``-DP for each owner (Dwork & Roth 2014 Thm A.1 for the mechanism). The coordinator's size-weighted sum (:func:`combine_class_sums`) and everything after it are
post-processing.

Why sums and not models. Each owner's release has the same privacy as before, but the coordinator adds
N independent noises of variance ``sigma^2`` to a signal that grows with ``sum_i n_i``: the relative error
of a class mean is ``sqrt(N) sigma / (sum n_c)`` instead of the ``sigma / n_{i,c}`` of every
owner's own model, and nothing non-linear happens to an owner's noise before it is averaged away. The
score ``<z, m_c>`` sees the noise only through ``<z, e>``, of standard deviation ``sigma ||z|| <= sigma``
independently of the dimension, so the classifier also works without dimensionality reduction.
Measured on MNIST-5k (800 rows per party, N = 5, d = 784, K = 10, eps = 1.25, the paper's n*eps): issue
13's replace-one objective-perturbed softmax averaged over 5 owners reached 0.26 on the exact top-20
subspace (the one-budget models of :mod:`privfed.common.feddpdr.multiclass` do better, README); these class sums with the whole budget reach 0.66 / 0.77 / 0.78
on the first 20 / 50 / 100 columns of the public DCT basis (non-private 0.72 / 0.78 / 0.82; 2 runs of
``privfed experiment feddpdr-k``) and 0.76 in the full space (:mod:`privfed.common.feddpdr.basis`), but
only 0.2-0.36 on a DP-PCA subspace that took part of the budget.

Model. With the summed class sums ``S`` (noise variance ``v = N sigma^2`` per entry),
``m_c = S_c[:k] / S_c[k]`` estimates the class mean and ``S_c[k] sqrt 2`` the class count (clipped to at
least one row). Each coordinate of ``m_c`` carries noise of variance ``v / S_c[k]^2``, so
``||m_c||^2 - k v / S_c[k]^2`` is an unbiased estimate of the squared norm of the class mean. The model
scores ``<z, m_c> - ||m_c||^2 / 2`` (nearest centroid; LDA with identity covariance and equal priors),
written as coefficients on ``[z, 1]/sqrt 2`` for :func:`privfed.common.feddpdr.model.predict_linear`.

References
----------
C. Dwork, A. Roth, "The algorithmic foundations of differential privacy", 2014 (Thm A.1).
B. Balle, Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy", ICML 2018 (Thm 8).
T. Wang et al., CMC 78(3), 2024 (seed 004): the two-phase FedDPDR-DPML this classifier plugs into.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.feddpdr.pca import check_unit_rows
from privfed.common.mechanisms.gaussian import GaussianMechanism, calibrated_gaussian, gaussian_sigma
from privfed.common.work_rows import pad_rows, work_rows, zero_padding

CLASS_SUMS_SENSITIVITY = 1.0
"""L2 (Frobenius) sensitivity of ``Y^T [Z, 1]/sqrt 2`` under add/remove-one, rows ``||z|| <= 1``."""


def class_sums_sigma(epsilon: float, delta: float) -> float:
    """Noise scale of one owner's :func:`dp_class_sums` release; public (the coordinator recomputes it)."""
    return gaussian_sigma(epsilon, delta, CLASS_SUMS_SENSITIVITY)


def class_sums_release(epsilon: float, delta: float) -> GaussianMechanism | None:
    """The Gaussian mechanism of :func:`dp_class_sums` (None at ``epsilon = inf``), from public parameters
    only: an owner builds it before reading a row (its ε floor and ceiling and σ bounds refuse there)."""
    return calibrated_gaussian(epsilon, delta, CLASS_SUMS_SENSITIVITY)


def exact_class_sums(Z_unit: np.ndarray, y: np.ndarray, n_classes: int, n: int | None = None) -> np.ndarray:
    """``Y^T [Z, 1] / sqrt 2``, shape (n_classes, k + 1); the quantity :func:`dp_class_sums` perturbs. ``n``: the
    real rows when ``Z_unit`` and ``y`` are padded already (zero rows after the first ``n``, whose bias column is
    zeroed); ``None``: every row is real."""
    Z = check_unit_rows(Z_unit, "Z_unit")
    y = np.asarray(y)
    K = int(n_classes)
    if K < 2 or y.shape != (Z.shape[0],):
        raise ConfigError(f"need n_classes >= 2 and one label per row; got {n_classes!r} and labels {y.shape}")
    if not np.issubdtype(y.dtype, np.integer) or np.any((y < 0) | (y >= K)):
        raise ConfigError(f"labels must be integers in [0, {K})")
    n = Z.shape[0] if n is None else int(n)
    rows = work_rows(Z.shape[0])  # zero rows after the bias column: the work of n's public grid cell
    Zb = pad_rows(zero_padding(np.hstack([Z, np.ones((Z.shape[0], 1))]) / math.sqrt(2.0), n), rows)
    S = np.zeros((K, Zb.shape[1]))
    np.add.at(S, pad_rows(y, rows, axis=-1), Zb)
    return S


def dp_class_sums(
    Z_unit: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    *,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    n: int | None = None,
) -> np.ndarray:
    """(epsilon, delta)-DP class sums: :func:`exact_class_sums` plus i.i.d. ``N(0, sigma^2)`` per entry.

    ``sigma = class_sums_sigma(epsilon, delta)`` (sensitivity 1, module docstring), released float-safely
    by :class:`~privfed.common.mechanisms.gaussian.GaussianMechanism` (SPEC §12); ``epsilon = inf``
    adds no noise (the non-private reference). ``n``: :func:`exact_class_sums`'.
    """
    release = class_sums_release(epsilon, delta)
    S = exact_class_sums(Z_unit, y, n_classes, n)
    return S if release is None else release.privatize(S, rng)


def combine_class_sums(releases: Sequence[np.ndarray], sigma: float) -> tuple[np.ndarray, float]:
    """``(S_w, v)``: the owners' class sums weighted by their own (noisy) row counts, and the noise
    variance of each entry of ``S_w``; the input of :func:`centroid_coef`.

    A plain sum adds every owner's noise ``sigma`` whatever its size, so on uneven owners it can be
    worse than the biggest owner alone (MNIST-5k, the paper's uneven set 2 scaled: 2409 of 3997 rows in
    one owner, SNR ``2409 / sigma`` alone against ``3997 / (sqrt 5 sigma)`` summed). With weights
    ``w_i``, a class mean has signal ``sum_i w_i n_ic`` and noise ``sigma sqrt(sum_i w_i^2)``; by
    Cauchy-Schwarz ``w_i ~ n_i`` maximises the ratio, to ``sqrt(sum_i n_i^2) / sigma >= max_i n_i / sigma``:
    never worse than any single owner, and exactly the plain sum when the sizes are equal. ``n_i`` is
    read from the release itself (its count column, ``sqrt 2 sum_c S_i[c, k]``, clipped to >= 1), so
    this is post-processing of the releases; ``w_i = N n_i / sum_j n_j`` and ``v = sigma^2 sum_i w_i^2``.
    The weights share the releases' noise (relative error ``sigma sqrt(2K) / n_i``, 2 % for 800 rows
    at eps = 1.25), which ``v`` ignores.
    """
    total = ClassSumsTotal()
    total.add(releases)
    return total.combined(sigma)


class ClassSumsTotal:
    """The sums :func:`combine_class_sums` needs, added batch by batch as the releases come (issue 27):
    ``sum_i n_i S_i``, ``sum_i n_i``, ``sum_i n_i^2`` and N. Then ``S_w = N sum_i n_i S_i / sum_j n_j``
    and ``v = sigma^2 N^2 sum_i n_i^2 / (sum_j n_j)^2``."""

    def __init__(self) -> None:
        self.weighted: np.ndarray | None = None
        self.sizes = 0.0
        self.squares = 0.0
        self.count = 0

    def add(self, releases: Sequence[np.ndarray]) -> None:
        arrays = [np.asarray(r, dtype=np.float64) for r in releases]
        shape = self.weighted.shape if self.weighted is not None else arrays[0].shape if arrays else None
        if any(a.shape != shape or a.ndim != 2 or a.shape[1] < 2 for a in arrays):
            raise ConfigError(f"class sums must be (K, k + 1) matrices of one shape, got {[a.shape for a in arrays]}")
        if not arrays:
            return
        sizes = np.array([max(1.0, math.sqrt(2.0) * float(np.sum(a[:, -1]))) for a in arrays])
        part = np.tensordot(sizes, np.stack(arrays), axes=1)
        self.weighted = part if self.weighted is None else self.weighted + part
        self.sizes += float(sizes.sum())
        self.squares += float(np.sum(sizes**2))
        self.count += len(arrays)

    def combined(self, sigma: float) -> tuple[np.ndarray, float]:
        """``(S_w, v)`` of everything added (:func:`combine_class_sums`)."""
        if self.weighted is None:
            raise ConfigError("class sums must be (K, k + 1) matrices of one shape, got none")
        n = self.count
        return n * self.weighted / self.sizes, float(sigma**2 * n**2 * self.squares / self.sizes**2)


def centroid_coef(S_total: np.ndarray, noise_variance: float) -> np.ndarray:
    """Nearest-centroid coefficients (K, k + 1) on ``[z, 1]/sqrt 2`` from summed class sums.

    Parameters
    ----------
    S_total : (K, k + 1) sum of the owners' :func:`dp_class_sums` releases.
    noise_variance : public variance of each entry's total noise, ``N * class_sums_sigma(eps, delta)^2``.
    """
    S = np.asarray(S_total, dtype=np.float64)
    if S.ndim != 2 or S.shape[1] < 2 or not np.all(np.isfinite(S)):
        raise ConfigError(f"class sums must be a finite (K, k + 1) matrix, got shape {S.shape}")
    if not (math.isfinite(noise_variance) and noise_variance >= 0):
        raise ConfigError(f"noise_variance must be finite and >= 0, got {noise_variance!r}")
    k = S.shape[1] - 1
    half_counts = np.maximum(S[:, k], 1.0 / math.sqrt(2.0))  # at least one row per class
    means = S[:, :k] / half_counts[:, None]
    sq_norms = np.maximum(np.sum(means**2, axis=1) - k * noise_variance / half_counts**2, 0.0)
    return math.sqrt(2.0) * np.hstack([means, -0.5 * sq_norms[:, None]])


__all__ = [
    "CLASS_SUMS_SENSITIVITY",
    "centroid_coef",
    "ClassSumsTotal",
    "combine_class_sums",
    "class_sums_sigma",
    "dp_class_sums",
    "exact_class_sums",
]
