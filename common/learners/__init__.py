"""Base learners of LDP boosting (seed paper 002, §3.5; SPEC §5, §6).

Every learner is split into an *owner side* (``*_share``: runs on one data owner's rows and
returns exactly what leaves the owner) and a *coordinator side* (``*_aggregate`` /
``*_centroids`` / ``select_stump``: pure post-processing of the shares). The networked path
and the in-process simulations call the same functions.

* :mod:`.ncc` -- nearest centroid from perturbed rows (§3.5.1 "Local Samples").
* :mod:`.logistic` -- logistic regression from perturbed local models (§3.5.2 "Local Classifier").
* :mod:`.stump` -- decision stumps from perturbed weighted cross tables (§3.5.3; SPEC §6).
* :mod:`.samme` -- SAMME weights, stop rules and the boosted model (SPEC §5).

The two helpers below are shared by the scikit-learn style estimators. They are defined
before the submodules are imported, because the submodules import them from here.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.rng import make_rng


def resolve_bounds(bounds, d: int) -> Bounds:
    """Turn an estimator's ``bounds`` parameter into :class:`Bounds` for ``d`` features.

    Parameters
    ----------
    bounds : Bounds, or a pair ``(lo, hi)`` of scalars applied to every feature.
        Public configuration. ``None`` raises: bounds are never derived from private rows
        (STYLE rule 6; SPEC §4).
    d : int
        Number of features of the rows being fitted.
    """
    if bounds is None:
        raise ConfigError(
            "bounds is required: pass public per-feature bounds (privfed.common.bounds.Bounds or a "
            "(lo, hi) pair); they are never derived from the private rows"
        )
    if isinstance(bounds, Bounds):
        if bounds.d != d:
            raise ConfigError(f"bounds describe {bounds.d} features but the rows have {d}; "
                              f"pass bounds for {d} features")
        return bounds
    if isinstance(bounds, tuple) and len(bounds) == 2 and all(isinstance(b, Real) for b in bounds):
        return Bounds.of(float(bounds[0]), float(bounds[1]), d)
    raise ConfigError(f"bounds must be a Bounds or a (lo, hi) pair of numbers, got {bounds!r}")


def resolve_rng(random_state) -> np.random.Generator:
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


from privfed.common.learners.logistic import (  # noqa: E402  (helpers above are imported by submodules)
    LdpLogisticRegression,
    LinearModel,
    clip_parameters,
    fit_local_logistic,
    lr_aggregate,
    lr_share,
)
from privfed.common.learners.ncc import (  # noqa: E402
    LdpNearestCentroid,
    NccShare,
    NearestCentroidModel,
    ncc_centroids,
    ncc_class_sums,
    ncc_share,
    split_label_budget,
)
from privfed.common.learners.samme import (  # noqa: E402
    BoostedModel,
    SammeBoost,
    samme_alpha,
    samme_reweight,
    samme_update,
)
from privfed.common.learners.stump import (  # noqa: E402
    Stump,
    binarize,
    cross_tables,
    select_stump,
    stump_aggregate,
    stump_share,
    thresholds,
)

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
