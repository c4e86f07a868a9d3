"""The damped Newton solver of the local logistic fit (:mod:`privfed.common.learners.logistic`, seed 002
eq. 3), with the same work for every owner's rows.

Timing. A coordinator sees when an owner's LR share arrives, so the fit's work must not depend on the rows
(``privfed.owner.compute``, "Timing"): :func:`newton_logistic` runs a number of Newton steps fixed by the
row count's public grid cell and ``C`` (:func:`newton_steps`; the rows padded to the cell,
:mod:`privfed.common.work_rows`) on every problem, converged or not, tries the line search's
first step sizes together, and takes ``exp`` and ``log(1 + exp)`` without branches or subnormals, whose
cost depends on the values. The parameter vector's privacy does not rest on the fit converging (any
vector is clipped and perturbed, :func:`~privfed.common.learners.logistic.lr_share`), so the step count
is a cost, not a proof obligation: a fit that needs more steps takes them (data-dependent work, in a
tail that no fit of ``tests/unit/test_logistic_fixed_work.py`` or ``bench/timing_channels.py`` reached).
Numpy only: no scipy on an owner node (issue 10).
"""

from __future__ import annotations

import math

import numpy as np

from privfed.common.bounds import exp_nonpositive
from privfed.common.errors import ConfigError
from privfed.common.work_rows import pad_rows, work_rows

#: Newton's stopping rule: Euclidean norm of the gradient of the objective divided by
#: ``C * max(sum s, 1)`` (scipy trust-ncg's ``gtol`` on the same scaled objective was 1e-9).
_NEWTON_GTOL = 1e-10
_NEWTON_MAX_STEPS = 100


def _exp_neg_abs(z: np.ndarray) -> np.ndarray:
    """``exp(-|z|)``, 0 beyond :data:`~privfed.common.bounds.EXP_FLOOR` (``e^-300``), never computed there: no
    subnormal and no underflow, whose slow path would make the fit's time depend on how large the margins are
    (module docstring; Andrysco et al., "On subnormal floating point and abnormal timing", IEEE S&P 2015). The
    clamp was 700 (``1e-304``), whose products with a mapped row value (``>= 2^-53``) could still underflow
    (audit 9, ``tests/adversary/test_underflow_parameters.py``)."""
    return exp_nonpositive(-np.abs(z))


def expit(z: np.ndarray) -> np.ndarray:
    """The logistic function ``1 / (1 + exp(-z))``, without overflow for any finite ``z``
    (scipy.special.expit's values to rounding, so the objective is unchanged)."""
    e = _exp_neg_abs(z)
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def softplus(z: np.ndarray) -> np.ndarray:
    """``log(1 + exp(z))``: ``np.logaddexp(0, z)``'s formula without its branches, whose cost depends on the
    signs of ``z`` (module docstring, "Timing"): the same work for every value."""
    return np.maximum(z, 0.0) + np.log1p(_exp_neg_abs(z))


def newton_steps(n_rows: int, C: float) -> int:
    """The Newton steps every fit of ``n_rows`` rows at ``C`` runs: a public function of the fit's shape and
    its task (module docstring, "Timing"). Damped Newton from 0 needs more steps as the loss term ``C n``
    outweighs the regulariser; on mixtures, separable, one-class and saturated rows (n = 1..30000,
    C = 1e-3..1e6, two and three classes) it converged in 3-15 steps at n C <= 3e5, and none needed
    more than this bound (``bench/timing_channels.py`` and ``tests/unit/test_logistic_fixed_work.py``)."""
    return 10 + 2 * math.ceil(math.log10(1.0 + n_rows * C))


#: Step sizes 1 and 1/2 of every Newton step's backtracking line search, tried together (a step that
#: needs a smaller one halves on from 1/4: data-dependent work, which the fits above never needed).
_LADDER = 2.0 ** -np.arange(2)


def newton_logistic(
    t1: np.ndarray, signs: np.ndarray, s: np.ndarray, C: float, *, weight_bound: float = 1.0
) -> np.ndarray:
    """Minimise, for each of ``B`` independent problems ``b`` (seed 002 eq. 3),

        C * sum_i s_bi log(1 + exp(-signs_bi (theta_b . t1_bi))) + ||theta_b||^2 / 2,

    by damped Newton steps in numpy, all problems at once (``t1`` (B, n, p), ``signs`` and ``s``
    (B, n); returns theta (B, p)). The Hessian ``C T1' diag(s p (1 - p)) T1 + I >= I``, so every
    step is a descent direction and each problem's Armijo backtracking converges; near the optimum
    full steps converge quadratically. A problem stops moving on its own (:data:`_NEWTON_GTOL` on its
    gradient scaled by ``1 / (C max(sum s, 1))``, which keeps gradients O(1)).

    ``weight_bound``: the public bound on the weights ``s`` (1: unweighted rows); the steps are those of the
    heaviest loss it allows, :func:`newton_steps` at ``C * max(weight_bound, 1)``, not of the weights the rows
    have (SAMME's reach ``2^512`` under a history a coordinator chooses).

    Timing: the work is fixed by the shapes, ``C`` and ``weight_bound``, not by the rows; the rows' number enters only as its
    public grid cell (:func:`~privfed.common.work_rows.work_rows`): the problems are padded with
    zero rows of zero weight ``s``, which add exact zeros to the loss, its gradient and its Hessian. Every problem takes part in
    :func:`newton_steps` steps, converged or not (a converged one is not moved), and each step tries the
    line search's first sizes (:data:`_LADDER`) together. Only a fit that needs more steps, or a smaller
    step size, does more (up to :data:`_NEWTON_MAX_STEPS`): data-dependent work in a tail the fits of
    :func:`newton_steps` never reached.
    """
    b, n, p = t1.shape
    if np.any(s > weight_bound):
        raise ConfigError(f"weights above their public bound {weight_bound!r}: clip them first")
    scale = 1.0 / (C * np.maximum(s.sum(axis=1), 1.0))  # (B,): same argmin
    rows = work_rows(n)  # zero rows of zero weight: the work of a public row count (module docstring)
    t1, signs, s = pad_rows(t1, rows), pad_rows(signs, rows, axis=-1, value=1.0), pad_rows(s, rows, axis=-1)
    theta = np.zeros((b, p))
    live = np.ones(b, dtype=bool)
    for step_no in range(_NEWTON_MAX_STEPS):
        if step_no >= newton_steps(rows, C * max(weight_bound, 1.0)) and not live.any():
            break
        theta, live = _newton_step(t1, signs, s, C, scale, theta, live)
    return theta


def _loss(margin: np.ndarray, s: np.ndarray, theta: np.ndarray, C: float, scale: np.ndarray) -> np.ndarray:
    """The scaled objective of each problem (``margin`` (..., n), ``theta`` (..., p), ``scale`` broadcast)."""
    return _loss_from(softplus(-margin), s, theta, C, scale)


def _loss_from(losses: np.ndarray, s: np.ndarray, theta: np.ndarray, C: float, scale: np.ndarray) -> np.ndarray:
    """:func:`_loss` from the rows' ``softplus(-margin)``."""
    return (C * np.sum(s * losses, axis=-1) + 0.5 * np.sum(theta * theta, axis=-1)) * scale


def _newton_step(
    t1: np.ndarray, signs: np.ndarray, s: np.ndarray, C: float, scale: np.ndarray, theta: np.ndarray, live: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One damped Newton step of every problem (:func:`newton_logistic`); a problem not ``live`` (converged)
    is computed alike and left where it is. Returns the new theta and which problems still move."""
    margin = signs * np.matmul(t1, theta[..., None])[..., 0]
    e = _exp_neg_abs(margin)  # one exp gives the loss, both logistic values and the curvature
    inv = 1.0 / (1.0 + e)
    ahead = margin >= 0.0
    fits, misfits = np.where(ahead, inv, e * inv), np.where(ahead, e * inv, inv)  # expit(margin), expit(-margin)
    val = _loss_from(np.maximum(-margin, 0.0) + np.log1p(e), s, theta, C, scale)
    weight = s * C
    grad = (np.matmul((-signs * misfits * weight)[:, None, :], t1)[:, 0, :] + theta) * scale[:, None]
    moving = live & (np.linalg.norm(grad, axis=1) > _NEWTON_GTOL)
    step = _solve_hessian(t1, fits * misfits * weight, grad / scale[:, None])
    tiny = np.max(np.abs(step), axis=1) <= 1e-12 * (1.0 + np.max(np.abs(theta), axis=1))  # at rounding level
    slope = np.sum(grad * step, axis=1)  # Newton decrement squared (scaled)
    full = moving & (tiny | (slope <= 1e-12))  # quadratic region: the objective cannot resolve the decrease
    search = moving & ~full
    # the margins are linear in the step size: every size of the ladder costs O(n), tried by every problem
    shift = signs * np.matmul(t1, step[..., None])[..., 0]
    ladder = _LADDER[None, :, None]
    trial = _loss(
        margin[:, None, :] - ladder * shift[:, None, :],
        s[:, None, :],
        theta[:, None, :] - ladder * step[:, None, :],
        C,
        scale[:, None],
    )  # (B, len(_LADDER))
    accepted = trial <= val[:, None] - 1e-4 * _LADDER[None, :] * slope[:, None]
    first = _LADDER[np.argmax(accepted, axis=1)]
    size = np.where(search, np.where(accepted.any(axis=1), first, 0.0), np.where(moving, 1.0, 0.0))
    smaller = search & ~accepted.any(axis=1)
    if smaller.any():  # the data-dependent tail (newton_logistic's docstring)
        size[smaller] = _halve_on(margin, shift, s, theta, step, C, scale, val, slope, smaller)
    return theta - size[:, None] * step, moving & ~tiny & (size > 0.0)


def _solve_hessian(t1: np.ndarray, curvature: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``(T' diag(c) T + I)^-1 g`` for each problem (``t1`` (B, n, p), ``curvature`` (B, n), ``g`` (B, p)).
    With fewer rows than parameters (one-row owners: issue 27's scale path) by the Woodbury identity
    ``(I + U V)^-1 = I - U (I + V U)^-1 V``, ``U = T'``, ``V = diag(c) T``: an ``n x n`` system in place of a
    ``p x p`` one; which form runs depends on the shapes only ("Timing")."""
    b, n, p = t1.shape
    if n >= p:
        hessian = np.matmul(t1.transpose(0, 2, 1), t1 * curvature[..., None]) + np.eye(p)  # BLAS
        return np.linalg.solve(hessian, g[..., None])[..., 0]
    tg = curvature * np.matmul(t1, g[..., None])[..., 0]  # V g, (B, n)
    if n == 1:
        inner = tg / (1.0 + curvature * np.sum(t1[:, 0, :] * t1[:, 0, :], axis=1, keepdims=True))
    else:
        gram = np.matmul(t1, t1.transpose(0, 2, 1)) * curvature[..., None] + np.eye(n)  # I + V U, (B, n, n)
        inner = np.linalg.solve(gram, tg[..., None])[..., 0]
    return g - np.matmul(inner[:, None, :], t1)[:, 0, :]


def _halve_on(
    margin: np.ndarray,
    shift: np.ndarray,
    s: np.ndarray,
    theta: np.ndarray,
    step: np.ndarray,
    C: float,
    scale: np.ndarray,
    val: np.ndarray,
    slope: np.ndarray,
    which: np.ndarray,
) -> np.ndarray:
    """Backtracking below the ladder for the problems ``which``: halve from ``_LADDER[-1] / 2`` until Armijo
    holds, or down to 1e-12 (then 0: no decrease left at rounding level, this is the optimum)."""
    idx = np.flatnonzero(which)
    size = np.full(idx.size, _LADDER[-1] / 2.0)
    pending = np.ones(idx.size, dtype=bool)
    while pending.any():
        j = idx[pending]
        a = size[pending]
        trial = _loss(margin[j] - a[:, None] * shift[j], s[j], theta[j] - a[:, None] * step[j], C, scale[j])
        done = trial <= val[j] - 1e-4 * a * slope[j]
        size[np.flatnonzero(pending)[~done]] /= 2.0
        pending[np.flatnonzero(pending)[done]] = False
        pending &= size > 1e-12
    return np.where(size > 1e-12, size, 0.0)
