"""What an owner releases in FedDPDR-DPML phase 2 (seed 004 Alg. 1 lines 5-7; SPEC §8), for every
classifier of :data:`~privfed.common.feddpdr.choices.SVM_MODELS`: the seed's one-vs-rest Huber SVM
(:mod:`.svm`), the multi-class ones (:mod:`.multiclass`) and the class sums (:mod:`.centroid`).

Apart from :mod:`.svm` because :mod:`.multiclass` builds on that module's loss and noise.
"""

from __future__ import annotations

import math

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.choices import DEFAULT_ROW_SCALING, DELTA_MODELS, SVM_MODELS, ovr_epsilons
from privfed.common.feddpdr.model import add_bias_feature, project
from privfed.common.feddpdr.multiclass import fit_dp_multiclass, mechanism
from privfed.common.feddpdr.pca import scale_rows
from privfed.common.feddpdr.svm import fit_dp_svm_ovr
from privfed.common.mechanisms.objective import RANGE_WHAT
from privfed.common.mechanisms.snapping import check_epsilon_range
from privfed.common.work_rows import pad_rows, work_rows, zero_padding


def check_svm_release(model: str, epsilon: float, delta: float, n_classes: int) -> None:
    """Raise ConfigError unless :func:`owner_svm_release` can release ``model`` at ``(epsilon, delta)``:
    the model, its delta rule, and every mechanism's public ε floor and ceiling (each one-vs-rest problem's
    ε/K; the class sums' Gaussian with its σ bounds). Public parameters only: an owner checks it before
    reading a row (SPEC §12)."""
    if model not in SVM_MODELS:
        raise ConfigError(f"model must be one of {SVM_MODELS}, got {model!r}")
    if model in DELTA_MODELS and not (0 < delta < 1 or (delta == 0 and math.isinf(epsilon))):
        raise ConfigError(f"model={model!r} is (epsilon, delta)-DP: pass the delta in (0, 1) that is debited for it")
    if model not in DELTA_MODELS and delta != 0:
        raise ConfigError(f"model={model!r} is pure epsilon-DP: delta={delta!r} would be debited for nothing")
    if math.isinf(epsilon):
        return
    if model == "centroid":
        from privfed.common.feddpdr.centroid import class_sums_release

        class_sums_release(epsilon, delta)
        return
    if model == "ovr-huber":  # each problem's noise (one-vs-rest): ObjectivePerturbation's range
        for eps in ovr_epsilons(epsilon, n_classes):
            check_epsilon_range(eps, what=RANGE_WHAT)
        return
    mechanism(epsilon, delta, n_classes, model)  # the objective's noise and AMP's output noise


def owner_svm_release(
    X: np.ndarray,
    y: np.ndarray,
    bounds: Bounds,
    U_global: np.ndarray | None,
    n_classes: int,
    epsilon2: float,
    lam: float,
    rng: np.random.Generator,
    *,
    delta: float,
    model: str,
    scaling: str = DEFAULT_ROW_SCALING,
    rows: int = 1,
) -> tuple[np.ndarray, int, np.ndarray]:
    """Owner side of FedDPDR-DPML phase 2 (seed 004 Alg. 1 lines 5-7): what an owner releases.

    Scales the raw rows with the public bounds (``scaling``, :data:`privfed.common.feddpdr.pca.ROW_SCALINGS`),
    projects onto the broadcast ``U_global`` (``None``: no reduction, the DPML baseline), and fits
    ``model`` (:data:`~privfed.common.feddpdr.choices.SVM_MODELS`) on ``[z, 1]/sqrt(2)``:

    * ``"centroid"``: :func:`privfed.common.feddpdr.centroid.dp_class_sums` at ``(epsilon2, delta)``:
      the owner's noisy class sums (K, k + 1), which the coordinator sums; no bias feature is added (the
      class sums carry the counts);
    * ``"mc-huber"``, ``"softmax"``: :func:`privfed.common.feddpdr.multiclass.fit_dp_multiclass` at
      ``(epsilon2, delta)``, one budget for all K classes;
    * ``"ovr-huber"``: the seed's one-vs-rest Huber SVMs, :func:`fit_dp_svm_ovr`, epsilon2/K per class
      (``delta`` unused, must be 0), with the public ``rows`` where the seed has the owner's row count (the
      task's, :class:`~privfed.common.tasks.feddpdr.SvmShareTask`: the owner's DP count from phase 1; never
      ``n``, which would make the release's distribution a function of it, audit 14).

    Total: once the rows are read nothing raises (the solvers always return, :mod:`privfed.common.mechanisms.amp`).

    Timing: the rows are padded to ``n``'s public grid cell (:mod:`privfed.common.work_rows`) *before* they are
    scaled and projected, and the padding's rows zeroed after each per-row step that made them non-zero
    (:func:`~privfed.common.work_rows.zero_padding`): the fits take the cell's rows and ``n`` where a padded
    row must stay zero, so only :func:`~privfed.common.work_rows.pad_rows`' copy works on the ``n`` rows (audit
    12, ``tests/adversary/test_differential_row_work.py``; 34-48 calls on them before). The real rows are those
    of the unpadded steps, so the release is the unpadded one's for a fixed seed (``tests/unit/test_padded_releases.py``).

    Returns
    -------
    (W_i, n_i, per_class_eps) : W_i (K, k + 1), the release; n_i the exact local count, which is NOT
        released; per_class_eps the epsilon of each separately fitted problem (it sums to ``epsilon2``).
    """
    check_svm_release(model, epsilon2, delta, n_classes)
    n = int(np.asarray(X).shape[0])
    padded = work_rows(n)  # pad first, then mask (common/work_rows.py): every pass below works on n's cell
    Z = zero_padding(project(scale_rows(pad_rows(X, padded), bounds, scaling), U_global), n)
    y = pad_rows(np.asarray(y), padded, axis=-1)  # class 0 on the zero rows: exact zeros in every sum
    if model == "ovr-huber":
        W, eps_each = fit_dp_svm_ovr(Z, y, n_classes, epsilon=epsilon2, lam=lam, rng=rng, n=n, rows=rows)
        return W, n, eps_each
    if model == "centroid":
        from privfed.common.feddpdr.centroid import dp_class_sums

        return dp_class_sums(Z, y, n_classes, epsilon=epsilon2, delta=delta, rng=rng, n=n), n, np.array([epsilon2])
    Zb = zero_padding(add_bias_feature(Z), n)  # the multiclass fit's steps are the cell's whatever n is
    W, _ = fit_dp_multiclass(Zb, y, n_classes, loss=model, epsilon=epsilon2, delta=delta, rng=rng)
    return W, n, np.array([float(epsilon2)])
