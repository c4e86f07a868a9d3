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

The mechanisms are re-exported lazily (PEP 562): an idle node imports ``base`` and ``snapping`` alone
(issue 27), and one that never builds Duchi's mechanisms (:mod:`.duchi`) or a Gaussian release
(:mod:`.gaussian`), which need ``scipy.special``, never imports scipy (issue 10, "a lean owner node").
"""

import importlib
from typing import TYPE_CHECKING, Any

from privfed.common.mechanisms.base import (
    MECHANISMS,
    SNAP_STEP,
    IdentityMechanism,
    Mechanism,
    clip_error_pairs,
    estimate_mean,
    snap,
)
from privfed.common.mechanisms.snapping import EPSILON_CEILING, EPSILON_FLOOR, check_epsilon_range

if TYPE_CHECKING:
    from privfed.common.mechanisms.duchi import Duchi1D, DuchiMultidim, duchi_constant, duchi_multidim_constant
    from privfed.common.mechanisms.factory import make_mechanism, mechanism_of
    from privfed.common.mechanisms.frequency import (
        ORACLES,
        DirectEncoding,
        FrequencyOracle,
        OptimizedLocalHashing,
        OptimizedUnaryEncoding,
        make_oracle,
    )
    from privfed.common.mechanisms.gaussian import GaussianMechanism, calibrated_gaussian, gaussian_sigma
    from privfed.common.mechanisms.geometric import GeometricMechanism, discrete_laplace, noisy_count
    from privfed.common.mechanisms.label_sign import LabelSignResponse
    from privfed.common.mechanisms.laplace import ErrorPairLaplace, LaplaceMechanism
    from privfed.common.mechanisms.piecewise import HM_EPSILON_STAR, HybridMechanism, PiecewiseMechanism, pm_constant
    from privfed.common.mechanisms.piecewise_multidim import PiecewiseMultidim
    from privfed.common.mechanisms.randomized_response import ErrorPairResponse, KaryRandomizedResponse

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
    "mechanism_of",
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

#: Names re-exported lazily, and the module (of this package) that holds each: the mechanisms themselves,
#: imported when a task first builds one (issue 27: an idle node holds only ``base`` and ``snapping``);
#: Duchi's and the Gaussian ones import scipy.
_LAZY = {
    **dict.fromkeys(["Duchi1D", "DuchiMultidim", "duchi_constant", "duchi_multidim_constant"], "duchi"),
    **dict.fromkeys(["GaussianMechanism", "calibrated_gaussian", "gaussian_sigma"], "gaussian"),
    "make_mechanism": "factory",
    "mechanism_of": "factory",
    **dict.fromkeys(
        ["ORACLES", "DirectEncoding", "FrequencyOracle", "OptimizedLocalHashing", "OptimizedUnaryEncoding"],
        "frequency",
    ),
    "make_oracle": "frequency",
    **dict.fromkeys(["GeometricMechanism", "discrete_laplace", "noisy_count"], "geometric"),
    "LabelSignResponse": "label_sign",
    **dict.fromkeys(["ErrorPairLaplace", "LaplaceMechanism"], "laplace"),
    **dict.fromkeys(["HM_EPSILON_STAR", "HybridMechanism", "PiecewiseMechanism", "pm_constant"], "piecewise"),
    "PiecewiseMultidim": "piecewise_multidim",
    **dict.fromkeys(["ErrorPairResponse", "KaryRandomizedResponse"], "randomized_response"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
