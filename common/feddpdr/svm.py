"""The seed's objective-perturbed Huber SVM, and what an owner releases in FedDPDR-DPML phase 2 (SPEC §8).

Seed paper 004 (Wang, Zhang, Liang, Wang, Liu, CMC 2024), Algorithm 3 ``DPDR-DPML`` (Eqs. 7-9), which
is Algorithm 2 of Chaudhuri, Monteleoni, Sarwate, "Differentially private empirical risk minimization",
JMLR 12 (2011), with the Huber hinge loss. Their Theorem 9 is for **replace-one** neighbours, where the row
count ``n`` in the objective is public; privfed keeps an owner's row count private, so the objective takes a
public count ``m`` in its place (``rows``: the owner's DP count from phase 1) and the calibration is Theorem 9's
argument under add/remove-one (:func:`privfed.common.mechanisms.objective.privacy_adjustment`); epsilon-DP
provided every row has ``||x|| <= 1``, labels are +-1 and the minimiser is exact.

The seed states the hinge loss ``max(0, 1 - y x^T beta)``; Theorem 9 needs a twice-differentiable loss
with ``|l''| <= c``, which is why Algorithm 3 (and this module) use the Huber hinge with h = 0.5, c = 1.

Choices
-------
* **Intercept.** Theorem 9 regularises every coordinate, so there is no free intercept. One-vs-rest
  models work on ``[x, 1] / sqrt(2)`` (:func:`~privfed.common.feddpdr.model.add_bias_feature`): the
  constant feature carries the bias, is regularised like the others, and the row norm stays <= 1.
* **Multi-class.** One-vs-rest over K classes spends epsilon/K on each of the K binary problems
  (sequential composition: they all read the same rows); for K = 2 a single binary problem gets the
  whole epsilon. The per-problem epsilons are returned so a ledger can record them.
* **Exact minimiser, totality (AMP).** Theorem 9 is about the exact minimiser; a solver gives an
  approximate one. Each binary problem spends ``(1 - AMP_FRACTION)`` of its epsilon on
  Theorem 9's mechanism and ``AMP_FRACTION`` on output noise of sensitivity ``2 r`` around a point that
  :func:`privfed.common.mechanisms.amp.nesterov_within` always finds within ``r`` of the exact minimiser,
  in a public number of steps: the same work for every owner's rows (Iyengar et al. 2019; the mechanism and
  its argument are
  :class:`privfed.common.mechanisms.objective.ObjectivePerturbation` and :mod:`privfed.common.mechanisms.amp`,
  this module gives the loss and its bounds). Both parts are pure
  epsilon, so each problem stays epsilon/K-DP, and nothing raises once the rows are read. The K
  one-vs-rest problems are separable and solved together, one Nesterov iteration over the K x d matrix.
* ``epsilon=inf`` gives the non-private Huber SVM (b = 0, Delta = 0) through the same code.

:func:`privfed.common.feddpdr.release.owner_svm_release` is the owner's phase 2 for every classifier
of :data:`~privfed.common.feddpdr.choices.SVM_MODELS` (this one-vs-rest SVM among them).

Floating point (SPEC §12): the Gamma radius, the Gaussian direction and the softmax noise come from the
float-safe samplers of :mod:`privfed.common.mechanisms.gaussian` (full-precision uniforms, no gaps in
the tails). The released vector, the solver's point plus AMP's output noise, is clamped and rounded to a
grid that grows with that noise (:class:`~privfed.common.mechanisms.amp.AmpOutputNoise`), so it keeps none of
the solver point's low bits.

References
----------
K. Chaudhuri, C. Monteleoni, A. D. Sarwate, "Differentially private empirical risk minimization",
JMLR 12:1069-1109, 2011 (Algorithm 2, Theorem 9, Huber loss Eq. 7).
R. Iyengar et al., "Towards practical differentially private convex optimization", IEEE S&P 2019 (AMP).
T. Wang et al., "Differentially private support vector machines with knowledge aggregation", CMC 78(3),
2024 (seed 004: Algorithms 1 and 3).
"""

from __future__ import annotations

import numpy as np

from privfed.common.bounds import flush_tiny
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.choices import ovr_epsilons
from privfed.common.feddpdr.model import add_bias_feature
from privfed.common.feddpdr.pca import check_unit_rows, clip_rows_to_unit_ball
from privfed.common.mechanisms.objective import ObjectivePerturbation, perturbed
from privfed.common.validation import check_int, check_positive
from privfed.common.work_rows import pad_rows, work_rows, zero_padding

HUBER_H = 0.5
"""Huber hinge width, the seed's and Chapelle's (2007) typical value."""


def huber_hinge(z: np.ndarray, h: float = HUBER_H) -> np.ndarray:
    """Huber hinge (Chaudhuri et al. 2011, Eq. 7; SPEC §8): 0 for z > 1+h, (1+h-z)^2/(4h) for
    |1-z| <= h, 1-z for z < 1-h; as ``u (1+h-z) - h u^2`` with ``u = -l'(z)``."""
    gap = 1.0 + h - np.asarray(z, dtype=np.float64)
    u = np.clip(gap / (2.0 * h), 0.0, 1.0)
    return u * gap - h * u * u


def huber_hinge_derivative(z: np.ndarray, h: float = HUBER_H) -> np.ndarray:
    """dl/dz: 0, -(1+h-z)/(2h), -1 on the three pieces, one ``clip`` (no branch); |l''| <= 1/(2h) = c."""
    return np.clip((np.asarray(z, dtype=np.float64) - (1.0 + h)) / (2.0 * h), -1.0, 0.0)


def _huber_gradient(F: np.ndarray, X: np.ndarray, Y: np.ndarray, h: float, divisor: float) -> np.ndarray:
    """The gradient of the summed Huber loss of K separable problems over ``divisor`` (F is K x d, Y the K x n
    signs, class-major like the scores ``F X^T``). What the solver calls, each step."""
    return (huber_hinge_derivative(Y * (F @ X.T), h) * Y) @ X / divisor


def _huber_loss(F: np.ndarray, X: np.ndarray, Y: np.ndarray, h: float, divisor: float) -> tuple[float, np.ndarray]:
    """Summed Huber loss of K separable problems over ``divisor``, and its gradient (:func:`_huber_gradient`)."""
    return huber_hinge(Y * (F @ X.T), h).sum() / divisor, _huber_gradient(F, X, Y, h, divisor)


def _perturbed_huber(
    f: np.ndarray, X: np.ndarray, y: np.ndarray, lam: float, b: np.ndarray, Delta: float, h: float
) -> tuple[float, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    Y, m = np.asarray(y, float)[None, :], float(X.shape[0])
    B = np.asarray(b, float)[None, :]
    J = perturbed(lambda F: _huber_loss(F, X, Y, h, m), B.shape, reg=lam + Delta, noise=B, divisor=m)
    return J(np.asarray(f, dtype=np.float64).ravel())


def objective(
    f: np.ndarray, X: np.ndarray, y: np.ndarray, lam: float, b: np.ndarray, Delta: float, h: float = HUBER_H
) -> float:
    """``J(f) = (1/m) sum l(y_i f^T x_i) + (lam/2)||f||^2 + b^T f / m + (Delta/2)||f||^2`` (SPEC §8; seed 004
    Eq. 9 with theta = Delta), at ``m`` the rows of ``X`` (a release's public ``m`` may differ: :func:`fit_dp_svm`)."""
    return _perturbed_huber(f, X, y, lam, b, Delta, h)[0]


def objective_gradient(
    f: np.ndarray, X: np.ndarray, y: np.ndarray, lam: float, b: np.ndarray, Delta: float, h: float = HUBER_H
) -> np.ndarray:
    """``grad J = (1/m) sum l'(z_i) y_i x_i + (lam + Delta) f + b/m`` (SPEC §8; :func:`objective`)."""
    return _perturbed_huber(f, X, y, lam, b, Delta, h)[1]


def public_rows(rows: int | None, n: int) -> int:
    """The ``m`` of the objective: ``rows`` (public), or the ``n`` real rows, at least 1, when none is given."""
    return max(int(n), 1) if rows is None else check_int(rows, name="rows", minimum=1)


def _check_labels(y: np.ndarray, n: int) -> np.ndarray:
    y = np.asarray(y)
    if y.shape != (n,):
        raise ConfigError(f"labels must have shape ({n},) to match the rows, got {y.shape}")
    return y


def _fit_huber(
    X: np.ndarray, Y: np.ndarray, epsilon: float, lam: float, rng: np.random.Generator, h: float, rows: int
) -> np.ndarray:
    """The P one-vs-rest problems of ``Y`` (P x n, +-1) at ``epsilon`` each; (P, d) releases, total.

    Theorem 9's mechanism under add/remove-one, made total by AMP
    (:class:`~privfed.common.mechanisms.objective.ObjectivePerturbation`, module docstring): the Huber loss summed
    over the rows and divided by the public ``rows``, ``c = 1/(2h)`` smooth and of gradient norm <= 1 per row
    (``||x|| <= 1``). An owner with no rows fits the regulariser and the noise alone. The rows' tiny entries are
    zeroed first (:func:`~privfed.common.bounds.flush_tiny`: no subnormal), and the rows are padded with zero
    rows to ``n``'s public grid cell (:mod:`privfed.common.work_rows`), whose size bounds the solver's steps.
    ``X`` may be padded already (``n`` real rows first, zero rows after: :func:`fit_dp_svm_ovr`'s ``n``).
    """
    d = X.shape[1]
    padded = work_rows(X.shape[0])  # zero rows: exact zeros in the gradient, the work of n's public grid cell
    X, Y = pad_rows(flush_tiny(X), padded), pad_rows(Y, padded, axis=-1, value=1.0)
    mech = ObjectivePerturbation(
        epsilon=epsilon, lam=lam, curvature=1.0 / (2.0 * h), d=d, rows=rows, problems=Y.shape[0]
    )
    return mech.privatize(lambda F: _huber_gradient(F, X, Y, h, 1.0), padded, rng)


def fit_dp_svm(
    X_unit_ball: np.ndarray,
    y_pm1: np.ndarray,
    *,
    epsilon: float,
    lam: float,
    rng: np.random.Generator,
    h: float = HUBER_H,
    rows: int | None = None,
) -> np.ndarray:
    """epsilon-DP Huber SVM by objective perturbation (Chaudhuri et al. 2011 Alg. 2, Thm 9; seed 004
    Alg. 3; SPEC §8), made total by AMP (module docstring).

    Parameters
    ----------
    X_unit_ball : ndarray (n, d), every row norm <= 1 (no intercept is added here).
    y_pm1 : ndarray (n,) of -1/+1.
    epsilon : float > 0; ``inf`` is the non-private Huber SVM.
    lam : regularisation strength lambda > 0.
    rng : numpy Generator for the noise vector b.
    h : Huber width; c = 1/(2h).
    rows : the public row count ``m`` of the regulariser and the noise's divisor
        (:func:`~privfed.common.mechanisms.objective.privacy_adjustment`). ``None``: the rows of ``X``, which makes
        their count public; a caller whose count is private passes a public one.

    Returns
    -------
    f : ndarray (d,), the release.
    """
    X = check_unit_rows(X_unit_ball, "X_unit_ball")
    y = _check_labels(y_pm1, X.shape[0]).astype(np.float64)
    if not np.all(np.abs(y) == 1):
        raise ConfigError("y_pm1 must contain only -1 and +1")
    h = check_positive(h, name="h")
    return _fit_huber(X, y[None, :], epsilon, lam, rng, h, public_rows(rows, X.shape[0]))[0]


def fit_dp_svm_ovr(
    X: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    *,
    epsilon: float,
    lam: float,
    rng: np.random.Generator,
    h: float = HUBER_H,
    n: int | None = None,
    rows: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One-vs-rest epsilon-DP Huber SVM on ``[x, 1]/sqrt(2)`` (seed 004 Alg. 3 per class; SPEC §8).

    Parameters
    ----------
    X : ndarray (n, d), every row norm <= 1.
    y : ndarray (n,) of integer labels in ``[0, n_classes)``; ``n_classes`` is public configuration.
    epsilon : total budget, split by :func:`~privfed.common.feddpdr.choices.ovr_epsilons`.
    n : the real rows, when ``X`` and ``y`` are padded already (the first ``n`` rows real, then zero rows;
        :func:`~privfed.common.feddpdr.release.owner_svm_release`): their bias feature is zeroed. ``None``: every
        row is real.
    rows : the public row count of the regulariser (:func:`fit_dp_svm`); ``None``: ``n``, which makes it public.

    Returns
    -------
    W : ndarray (n_classes, d + 1), one row per class, last column on the constant feature; for
        K = 2 the rows are ``(-f, f)`` of the single binary problem (class 1 positive).
    per_class_eps : ndarray, the epsilon each binary problem spent; sums to ``epsilon``.
    """
    X = check_unit_rows(X, "X")
    y = _check_labels(y, X.shape[0])
    eps_each = np.asarray(ovr_epsilons(epsilon, n_classes))
    if not np.issubdtype(y.dtype, np.integer) or np.any((y < 0) | (y >= n_classes)):
        raise ConfigError(f"labels must be integers in [0, {n_classes}), got values {np.unique(y)[:10]}")
    h = check_positive(h, name="h")
    classes = np.array([1]) if n_classes == 2 else np.arange(n_classes)
    Y = np.where(classes[:, None] == y[None, :], 1.0, -1.0)  # class-major, as the scores F X^T
    n = X.shape[0] if n is None else int(n)
    Xb = zero_padding(clip_rows_to_unit_ball(add_bias_feature(X)), n)
    F = _fit_huber(Xb, Y, float(eps_each[0]), lam, rng, h, public_rows(rows, n))
    W = np.vstack([-F[0], F[0]]) if n_classes == 2 else F
    return W, eps_each


__all__ = [
    "HUBER_H",
    "public_rows",
    "fit_dp_svm",
    "fit_dp_svm_ovr",
    "huber_hinge",
    "huber_hinge_derivative",
    "objective",
    "objective_gradient",
]
