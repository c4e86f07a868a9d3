"""Local differential privacy mechanisms (SPEC §1-4, §12, §13).

Row-level mechanisms take rows already mapped to ``[-1, 1]^d`` by
:meth:`privfed.common.bounds.Bounds.to_unit` and return unbiased reports; build them with
:func:`make_mechanism` (``"pm"``, ``"hm"``, ``"duchi"``, ``"laplace"``; ``epsilon=math.inf`` gives the
non-private identity). Labels go through :class:`KaryRandomizedResponse`, row counts through
:class:`GeometricMechanism` (:func:`noisy_count`), a boosted NCC row's (label, sign) through
:class:`LabelSignResponse`, a boosting owner's weighted (error, weight) pair through
:class:`ErrorPairLaplace` or :class:`ErrorPairResponse`. The central releases of FedDPDR go through
:mod:`.gaussian` (DP-PCA, class sums) and :mod:`.objective` with :mod:`.amp` (objective perturbation).
Categorical values (stump cells) go through a frequency oracle of :mod:`.frequency` (k-RR, OUE, OLH;
:func:`make_oracle`). Every noise-adding release of privfed lives in this package, one file per family.

Every mechanism accepts ε (a finite one: ``inf`` is the non-private bypass where a class allows it) only
in ``[EPSILON_FLOOR, EPSILON_CEILING]`` and releases float-safely
(SPEC §12): continuous noise through :mod:`.snapping` (full-precision uniforms, a grid that grows
with the noise scale, public clamps), counts through an exact integer sampler (:mod:`.geometric`),
Gaussian releases through :mod:`.gaussian`.

Duchi's mechanisms (:mod:`.duchi`) and the Gaussian releases (:mod:`.gaussian`), which need
``scipy.special``, are re-exported lazily, so an owner node that never builds one does not import scipy
(issue 10, "a lean owner node").
"""

import importlib
from typing import Any

from privfed.common.mechanisms.base import (
    MECHANISMS,
    SNAP_STEP,
    IdentityMechanism,
    Mechanism,
    clip_error_pairs,
    estimate_mean,
    snap,
)
from privfed.common.mechanisms.factory import make_mechanism
from privfed.common.mechanisms.frequency import (
    ORACLES,
    DirectEncoding,
    FrequencyOracle,
    OptimizedLocalHashing,
    OptimizedUnaryEncoding,
    make_oracle,
)
from privfed.common.mechanisms.geometric import GeometricMechanism, discrete_laplace, noisy_count
from privfed.common.mechanisms.label_sign import LabelSignResponse
from privfed.common.mechanisms.laplace import ErrorPairLaplace, LaplaceMechanism
from privfed.common.mechanisms.piecewise import HM_EPSILON_STAR, HybridMechanism, PiecewiseMechanism, pm_constant
from privfed.common.mechanisms.piecewise_multidim import PiecewiseMultidim
from privfed.common.mechanisms.randomized_response import ErrorPairResponse, KaryRandomizedResponse
from privfed.common.mechanisms.snapping import EPSILON_CEILING, EPSILON_FLOOR, check_epsilon_range

__all__ = [
    "MECHANISMS",
    "SNAP_STEP",
    "EPSILON_FLOOR",
    "EPSILON_CEILING",
    "check_epsilon_range",
    "Mechanism",
    "IdentityMechanism",
    "estimate_mean",
    "make_mechanism",
    "snap",
    "LaplaceMechanism",
    "ErrorPairLaplace",
    "ErrorPairResponse",
    "LabelSignResponse",
    "clip_error_pairs",
    "Duchi1D",
    "DuchiMultidim",
    "duchi_constant",
    "duchi_multidim_constant",
    "PiecewiseMechanism",
    "PiecewiseMultidim",
    "HybridMechanism",
    "HM_EPSILON_STAR",
    "pm_constant",
    "KaryRandomizedResponse",
    "GeometricMechanism",
    "GaussianMechanism",
    "calibrated_gaussian",
    "gaussian_sigma",
    "discrete_laplace",
    "noisy_count",
    "ORACLES",
    "FrequencyOracle",
    "DirectEncoding",
    "OptimizedUnaryEncoding",
    "OptimizedLocalHashing",
    "make_oracle",
]

#: Names re-exported lazily, and the module (of this package) that holds each: they import scipy.
_LAZY = {
    "Duchi1D": "duchi",
    "DuchiMultidim": "duchi",
    "duchi_constant": "duchi",
    "duchi_multidim_constant": "duchi",
    "GaussianMechanism": "gaussian",
    "calibrated_gaussian": "gaussian",
    "gaussian_sigma": "gaussian",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
