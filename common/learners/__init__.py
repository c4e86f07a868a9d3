"""Base learners of LDP boosting (seed paper 002, §3.5; SPEC §5, §6).

Every learner is split into an *owner side* (``*_share``: runs on one data owner's rows and
returns exactly what leaves the owner) and a *coordinator side* (``*_aggregate`` /
``*_centroids`` / ``select_stump``: pure post-processing of the shares). The networked path
and the in-process simulations call the same functions.

* :mod:`.ncc` -- nearest centroid from perturbed rows (§3.5.1 "Local Samples").
* :mod:`.logistic` -- logistic regression from perturbed local models (§3.5.2 "Local Classifier").
* :mod:`.stump` -- decision stumps from perturbed weighted cross tables (§3.5.3; SPEC §6).
* :mod:`.samme` -- SAMME weights, stop rules and the boosted model (SPEC §5).
* :mod:`.naive_bayes` -- LDP naive Bayes from one (feature, bin, class) report per owner (issue 22).
* :mod:`.marginal_boost` -- SAMME over the stumps on the product model of those reports (issue 22).

The two helpers below are shared by the scikit-learn style estimators (:mod:`.estimators`).
The names listed in ``__all__`` are re-exported lazily: each submodule is imported on first use.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.rng import make_rng


def resolve_bounds(bounds: object, d: int) -> Bounds:
    """Turn an estimator's ``bounds`` parameter into :class:`Bounds` for ``d`` features.

    Parameters
    ----------
    bounds : Bounds, or a pair ``(lo, hi)`` of scalars (every feature) or of ``d``-long arrays
        (per feature). Public configuration. ``None`` raises: bounds are never derived from
        private rows (STYLE rule 6; SPEC §4).
    d : int
        Number of features of the rows being fitted.
    """
    if bounds is None:
        raise ConfigError(
            "bounds is required: pass public bounds as a (lo, hi) pair of numbers or of per-feature arrays "
            "(or a privfed.common.bounds.Bounds); they are never derived from the private rows"
        )
    if isinstance(bounds, tuple) and len(bounds) == 2:
        lo, hi = (np.asarray(b, dtype=np.float64) if _numeric(b) else None for b in bounds)
        if lo is not None and hi is not None and lo.ndim <= 1 and hi.ndim <= 1:
            lo, hi = (np.full(d, float(b.reshape(-1)[0])) if b.size == 1 else b for b in (lo, hi))
            bounds = Bounds(lo, hi)
    if isinstance(bounds, Bounds):
        if bounds.d != d:
            raise ConfigError(
                f"bounds describe {bounds.d} features but the rows have {d}; pass bounds for {d} features"
            )
        return bounds
    raise ConfigError(f"bounds must be a (lo, hi) pair of numbers or of arrays of {d} numbers, got {bounds!r}")


def _numeric(value: object) -> bool:
    """A number or a sequence of numbers (not a string, not bool)."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        return False
    return arr.dtype.kind in "iuf"


def resolve_rng(random_state: object) -> np.random.Generator:
    """Generator for an estimator's ``random_state``.

    An int seeds PCG64 (reproducible simulations; record the seed). A ``Generator`` is used
    as given. ``None`` means a fresh *secure* stream (AES-CTR keyed from :mod:`secrets`), never
    numpy's global generator (STYLE rule 5; SPEC §13).
    """
    if random_state is None:
        return make_rng("secure")
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        return make_rng("seeded", int(random_state))
    raise ConfigError(f"random_state must be an int seed, a numpy Generator or None, got {random_state!r}")


#: Public name -> submodule that defines it. Resolved on first access (PEP 562), so importing one
#: submodule (an owner node imports :mod:`.logistic` and :mod:`.ncc`) does not import the others,
#: nor :mod:`.estimators` and with it scikit-learn (issue 10, "a lean owner node").
_EXPORTS = {
    "LdpLogisticRegression": "estimators",
    "LinearModel": "logistic",
    "clip_parameters": "logistic",
    "fit_local_logistic": "logistic",
    "lr_aggregate": "logistic",
    "lr_share": "logistic",
    "LdpNearestCentroid": "estimators",
    "NccShare": "ncc",
    "NearestCentroidModel": "ncc_model",
    "ncc_centroids": "ncc",
    "ncc_class_sums": "ncc",
    "ncc_share": "ncc",
    "split_label_budget": "ncc",
    "BoostedModel": "samme",
    "SammeBoost": "samme",
    "samme_alpha": "samme",
    "samme_reweight": "samme",
    "samme_update": "samme",
    "Stump": "stump",
    "binarize": "stump",
    "cross_tables": "stump",
    "select_stump": "stump",
    "stump_aggregate": "stump_encodings",
    "stump_share": "stump_encodings",
    "thresholds": "stump",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "BoostedModel",
    "LdpLogisticRegression",
    "LdpNearestCentroid",
    "LinearModel",
    "NccShare",
    "NearestCentroidModel",
    "SammeBoost",
    "Stump",
    "binarize",
    "clip_parameters",
    "cross_tables",
    "fit_local_logistic",
    "lr_aggregate",
    "lr_share",
    "ncc_centroids",
    "ncc_class_sums",
    "ncc_share",
    "resolve_bounds",
    "resolve_rng",
    "samme_alpha",
    "samme_reweight",
    "samme_update",
    "select_stump",
    "split_label_budget",
    "stump_aggregate",
    "stump_share",
    "thresholds",
]
