"""The public state of a federated boosting run, typed: what boosting tasks carry.

Each boosting task carries the run's public configuration (:class:`BoostConfig`: a run id and the
run's :class:`~privfed.common.boosting.params.BoostingParams`) and its history (:class:`BoostHistory`:
the kept rounds, each a base learner, its SAMME weight α and the round's published totals E and W -- sums
of the owners' noisy evaluation releases, :mod:`privfed.common.boosting.releases`), from which an owner
computes its own SAMME row weights
(seed 002 Alg. 2 lines 13-15). A node applies only the rounds it has not applied yet and refuses a
history that rewrites them (``privfed.owner.history``); a restarted node recomputes from the full
history, so it needs nothing but its rows, and the coordinator can't give different owners
different weights without it showing in what it sends.

These are frozen dataclasses validated when built; ``proto/serde.py`` maps them to and from the
``BoostConfig``, ``BoostLearner``, ``KeptRound`` and ``BoostHistory`` messages.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np

from privfed.common.boosting.owner import Learner, update_weights
from privfed.common.boosting.params import WIRE_FIELDS, BoostingParams
from privfed.common.boosting.releases import ReleasePlan
from privfed.common.bounds import flush_tiny
from privfed.common.errors import ConfigError
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.learners.stump import Stump
from privfed.common.validation import check_positive, check_real

LEARNER_TYPES = (Stump, NearestCentroidModel, LinearModel)


@dataclass(frozen=True, eq=False)
class BoostConfig:
    """The public configuration of one boosting run, named by its run id.

    ``params`` keeps only the fields of the coordinator's parameters that travel on the wire
    (:data:`~privfed.common.boosting.params.WIRE_FIELDS`; the rest at their defaults), so what the coordinator
    builds equals what an owner decodes. ``releases`` is built from them once (and checks that the run's
    share encoding can be built). Two configs are equal when their run ids and wire fields are (bounds
    compared exactly).
    """

    run_id: str
    params: BoostingParams
    releases: ReleasePlan = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.run_id, str) or not self.run_id:
            raise ConfigError(f"a boosting run needs a non-empty run_id string, got {self.run_id!r}")
        if not isinstance(self.params, BoostingParams):
            raise ConfigError(f"params must be BoostingParams, got {type(self.params).__name__}")
        public = BoostingParams(**{f: getattr(self.params, f) for f in WIRE_FIELDS})
        object.__setattr__(self, "params", public)
        object.__setattr__(self, "releases", ReleasePlan(public))

    def _key(self) -> tuple:
        p = self.params
        bounds = (p.bounds.lo.tobytes(), p.bounds.hi.tobytes())
        return (self.run_id, *(getattr(p, f) for f in WIRE_FIELDS if f != "bounds"), *bounds)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BoostConfig) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def _finite(name: str, value: object, *, positive: bool = False) -> float:
    if positive:
        return check_positive(value, name=name)
    number = check_real(value, name=name)
    if not math.isfinite(number):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    return number


@dataclass(frozen=True)
class KeptRound:
    """One kept round of a run: its base learner, SAMME weight ``alpha`` and published totals E, W.

    ``alpha`` and ``err_total`` must be finite, ``weight_total`` finite and > 0 (an owner divides
    by it, :func:`~privfed.common.boosting.owner.update_weights`). The three are read as 0 below ``2^-300``
    (:func:`~privfed.common.bounds.flush_tiny`; so a ``weight_total`` that small is refused): they are the
    coordinator's, and a subnormal ``alpha`` made the arithmetic of an owner's missed rows, and only theirs, take
    the CPU's slow path (audit 9, ``tests/adversary/test_underflow_parameters.py``).
    """

    learner: Learner
    alpha: float
    err_total: float
    weight_total: float

    def __post_init__(self) -> None:
        if not isinstance(self.learner, LEARNER_TYPES):
            raise ConfigError(
                f"unknown learner kind {type(self.learner).__name__}; known: {[t.__name__ for t in LEARNER_TYPES]}"
            )
        object.__setattr__(self, "alpha", _finite("alpha", self.alpha))
        object.__setattr__(self, "err_total", _finite("err_total", self.err_total))
        object.__setattr__(self, "weight_total", _finite("weight_total", self.weight_total))
        for name in ("alpha", "err_total", "weight_total"):
            object.__setattr__(self, name, float(flush_tiny(getattr(self, name))))
        check_positive(self.weight_total, name="weight_total")


@dataclass(frozen=True)
class BoostHistory:
    """The history of a run as sent with round ``round``'s tasks (0-based): the rounds kept so far.

    ``round`` keys an owner's evaluation release (one per (run, round), cached for a re-formed
    ring; ``privfed.owner.kinds.boosting``); it is at least ``len(kept)`` (a skipped round
    keeps nothing) and an owner checks it against the run's ``n_rounds``.
    """

    kept: tuple[KeptRound, ...] = ()
    round: int = 0

    def __post_init__(self) -> None:
        kept = tuple(self.kept)
        if not all(isinstance(r, KeptRound) for r in kept):
            raise ConfigError("a boosting history holds KeptRound items only")
        object.__setattr__(self, "kept", kept)
        if isinstance(self.round, bool) or not isinstance(self.round, Integral) or self.round < len(kept):
            raise ConfigError(f"boosting round {self.round!r} must be an int >= the {len(kept)} kept rounds")
        object.__setattr__(self, "round", int(self.round))


def config_to_dict(params: BoostingParams, run_id: str) -> BoostConfig:
    """The public configuration of run ``run_id`` (name kept for callers; returns a :class:`BoostConfig`)."""
    return BoostConfig(run_id, params)


def empty_history() -> BoostHistory:
    """The history of a run's first round: nothing kept."""
    return BoostHistory()


def at_round(history: BoostHistory, round_no: int) -> BoostHistory:
    """``history`` as sent with round ``round_no``'s tasks (0-based)."""
    return dataclasses.replace(history, round=round_no)


def with_round(
    history: BoostHistory, learner: Learner, alpha: float, err_total: float, weight_total: float
) -> BoostHistory:
    """The history after keeping ``learner`` with weight ``alpha`` (totals are this round's E, W)."""
    kept = (*history.kept, KeptRound(learner, alpha, err_total, weight_total))
    return BoostHistory(kept, max(history.round, len(kept)))


def apply_rounds(w: np.ndarray, rounds: Iterable[KeptRound], X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row weights ``w`` after the SAMME updates of ``rounds`` (:class:`KeptRound` items), in order."""
    for r in rounds:
        w = update_weights(r.learner, r.alpha, X, y, w, err_total=r.err_total, weight_total=r.weight_total)
    return w


def owner_weights(history: BoostHistory, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """This owner's SAMME row weights after the kept rounds, from scratch (mean-1 convention: start at 1)."""
    return apply_rounds(np.ones(np.asarray(X).shape[0]), history.kept, X, y)
