"""Private prediction by null-space cleaning (seed 003: Xu, Shah, Cao, Maung, Schweitzer, "Enhancing the
Privacy of Predictors", AAAI 2017; SPEC §10).

A client cleans its query row against the served model's linear first stage before sending it:
``linear_map`` (the least-squares maps of Algorithm 1 step 1, ``e_utility`` and ``e_privacy``), ``cleaner``
(Algorithm 1 as reconstructed in SPEC §10, :class:`NullSpaceCleaner`, with the choices it makes) and
``projection`` (:class:`StageProjection`, the cleaning that uses no confidential map). The owner's query
client is ``privfed.owner.query``.
"""

from privfed.common.nullspace.cleaner import ETA_SCALE, METHODS, CleaningResult, NullSpaceCleaner
from privfed.common.nullspace.linear_map import RIDGE_GRID, e_privacy, e_utility, fit_linear_map
from privfed.common.nullspace.projection import StageProjection

__all__ = [
    "ETA_SCALE",
    "METHODS",
    "RIDGE_GRID",
    "CleaningResult",
    "NullSpaceCleaner",
    "StageProjection",
    "e_privacy",
    "e_utility",
    "fit_linear_map",
]
