"""The public choices of a FedDPDR-DPML job: the phase-2 classifiers (their names, the default, what
each debits; issue 21) and the row scalings.

This is the one place that declares them; the command line, :class:`~privfed.server.config.JobConfig`,
the strategy, the wire (``proto/privfed.proto``'s ``SvmModel``) and the owner read it from here. It
imports nothing heavy, so messages and the coordinator's flags can use it without scipy.

* ``"centroid"``: DP class sums, one Gaussian release for all K classes, summed by the coordinator
  into a nearest-centroid model (:mod:`privfed.common.feddpdr.centroid`); ``(epsilon, delta)``.
* ``"mc-huber"``: one multiclass Huber SVM (smoothed Crammer-Singer margin) by Gaussian objective
  perturbation with one budget for all classes, averaged (:mod:`privfed.common.feddpdr.multiclass`);
  ``(epsilon, delta)``.
* ``"softmax"``: the same mechanism with the multinomial logistic loss; ``(epsilon, delta)``.
* ``"ovr-huber"``: the seed's one-vs-rest Huber SVMs (Chaudhuri et al. 2011 Alg. 2), pure epsilon
  split over the K binary problems, averaged (:mod:`privfed.common.feddpdr.svm`).
"""

from __future__ import annotations

from privfed.common.validation import check_choice, check_int, check_positive

DEFAULT_K = 20
"""The subspace dimension of a job that gives no ``--k``: the seed's (§5.2), or every feature where there are fewer
(:func:`default_k`)."""


def default_k(basis: str, d: int) -> int:
    """``--k`` when none is given: every feature with the ``"identity"`` basis (which keeps them all), else
    :data:`DEFAULT_K` or ``d`` if that is fewer (iris and wine have 4 and 13 features: a default of 20 refused them)."""
    return d if basis == "identity" else min(DEFAULT_K, d)


SVM_MODELS = ("centroid", "mc-huber", "softmax", "ovr-huber")
DEFAULT_SVM_MODEL = "centroid"
"""The federation's default classifier: the most accurate on validation splits of MNIST-5k (README,
FedDPDR; the best SVM, ``mc-huber``, is second)."""
DELTA_MODELS = ("centroid", "mc-huber", "softmax")
"""Models whose release spends delta (FedDPDR gives them delta/2 and DP-PCA the other half)."""
ROW_SCALINGS = ("ball", "box", "normalise")
"""How FedDPDR owners map raw rows into the unit ball (all data-independent, SPEC §4):

* ``"ball"``: :func:`~privfed.common.feddpdr.pca.scale_rows_to_unit_ball` (centre at the bounds' midpoint, divide by the
  worst-case radius of the box). For MNIST ([0, 255]^784) every row lands near the same point
  (background pixels at -1/28 each), so the signal is a small fraction of the unit norm.
* ``"box"``: :func:`~privfed.common.feddpdr.pca.scale_rows_to_unit_box` (centre each feature at its bounds' midpoint,
  divide it by its own half-width, then the row by ``sqrt(d)``). Every feature counts by its public range, not its
  unit: under ``"ball"`` one wide feature (anes96's population in thousands, breast cancer's areas) holds nearly
  all of the radius and leaves the others under the noise (walkthrough 13, W13-3). Affine, like ``"ball"``.
* ``"normalise"``: :func:`~privfed.common.feddpdr.pca.normalise_rows` (shift to ``[0, 1]`` with the bounds, then divide each row
  by its own norm). Every row has norm exactly 1 (an all-zero row stays 0), the tightest public
  per-row bound; a per-row map reads only that row, so it is a fixed preprocessing step that the
  sensitivity arguments of §7/§8 apply to unchanged. The model applies it again at prediction.
"""
#: The federation's default is ``"box"``: chosen on validation splits (seeds 100-119, fit/val 75/25 of the training
#: part; fair 100-111), one row per owner, the federation's strategy in process, paired with ``"ball"``: it wins or
#: ties on every set at eps >= 3 (anes96 +0.19 +- 0.06 at eps 5 and 8, where ``"ball"`` stays below the majority
#: class; fair +0.05 +- 0.02 at eps 8; breast cancer, wine, iris within noise; star98, one range for every column,
#: the same map) and lifts the noise-free references (anes96 0.48 -> 0.91, wine 0.69 -> 0.96, breast cancer 0.89 ->
#: 0.93; walkthrough 13, W13-3). Both are affine, so a served model's first stage stays linear in data space
#: (``privfed query`` cleans against it); ``"ball"`` stays selectable (the paper-pipeline-adjacent choice).
#: ``"normalise"`` divides by the row's own norm, which is not linear; the experiments use it by default (``--scaling``).
DEFAULT_ROW_SCALING = "box"
LEDGER_PURPOSE = {"centroid": "svm-class-sums", "mc-huber": "svm-mc-huber", "softmax": "svm-softmax"}


def ovr_epsilons(epsilon: float, n_classes: int) -> list[float]:
    """Per-problem budgets of one-vs-rest: ``[eps]`` for K = 2, else K copies of ``eps/K``."""
    n_classes = check_int(n_classes, name="n_classes", minimum=2)
    epsilon = check_positive(epsilon, name="epsilon", allow_inf=True)
    problems = 1 if n_classes == 2 else n_classes
    return [epsilon / problems] * problems


def ledger_entries(model: str, epsilon: float, delta: float, n_classes: int) -> list[tuple[float, float, str]]:
    """``(epsilon, delta, purpose)`` of each part of one owner's phase-2 release."""
    check_choice(model, name="model", allowed=SVM_MODELS)
    if model in DELTA_MODELS:
        return [(epsilon, delta, LEDGER_PURPOSE[model])]
    return [(e, 0.0, f"svm-ovr-{c}") for c, e in enumerate(ovr_epsilons(epsilon, n_classes))]


__all__ = [
    "DEFAULT_ROW_SCALING",
    "DEFAULT_SVM_MODEL",
    "ROW_SCALINGS",
    "DELTA_MODELS",
    "LEDGER_PURPOSE",
    "SVM_MODELS",
    "ledger_entries",
    "ovr_epsilons",
]
