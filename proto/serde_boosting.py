"""Serde pairs of LDP boosting (``common/tasks/boosting.py``, ``common/boosting/wire.py``): the run's
config, its learners and history, the share and evaluate tasks, and the typed share replies.

:mod:`privfed.common.boosting.wire` imports scipy, which an owner node loads only for the tasks
that need it: it is imported here once a boosting message is decoded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.learners.stump import Stump
from privfed.common.learners.stump_encodings import STUMP_ENCODINGS
from privfed.common.mechanisms.frequency import ORACLES
from privfed.common.tasks.boosting import (
    BoostEvaluateTask,
    BoostShareReply,
    BoostShareTask,
    JointNccReply,
    LrParametersReply,
    NccRowsReply,
    SampledStumpShareReply,
    StumpShareReply,
)
from privfed.proto import privfed_pb2 as pb
from privfed.proto.serde_arrays import (
    LastEncoded,
    WireEnum,
    bounds_from_proto,
    bounds_to_proto,
    integers,
    matrix_from_proto,
    matrix_to_proto,
    reports_from_proto,
    reports_to_proto,
    two_d,
)
from privfed.proto.serde_shares import LABEL_SCHEME, MECHANISM, joint_reports_from_proto, joint_reports_to_proto
from privfed.proto.serde_steps import (
    input_request_from_proto,
    input_request_to_proto,
    ring_spec_from_proto,
    ring_spec_to_proto,
)

if TYPE_CHECKING:
    from types import ModuleType

    from privfed.common.boosting.wire import BoostConfig, BoostHistory, KeptRound, Learner


def _wire() -> ModuleType:
    from privfed.common.boosting import wire

    return wire


def _params() -> ModuleType:
    from privfed.common.boosting import params

    return params


@cache
def boost_enums() -> Mapping[str, WireEnum[Any]]:
    """The fields of ``BoostConfig`` that name one of the run's public choices, and their wire enums."""
    f = _params()
    return {
        "base": WireEnum(pb.BaseLearner, f.BASE_LEARNERS),
        "mechanism": MECHANISM,
        "labels": LABEL_SCHEME,
        "eval_groups": WireEnum(pb.EvalGroups, f.EVAL_GROUPS),
        "stump_encoding": WireEnum(pb.StumpEncoding, STUMP_ENCODINGS),
        "oracle": WireEnum(pb.FrequencyOracle, ORACLES),
        "share_groups": WireEnum(pb.ShareGroups, f.SHARE_GROUPS),
        "eval_mechanism": WireEnum(pb.EvalMechanism, f.EVAL_MECHANISMS),
        "budget_split": WireEnum(pb.BudgetSplit, f.BUDGET_SPLITS),
    }


def boost_config_to_proto(c: BoostConfig) -> pb.BoostConfig:
    """Every wire field of the run's ``BoostingParams`` (``WIRE_FIELDS``: its parameter table says which), under
    its name in lower case (``C`` is ``c``); every choice as the params hold it, resolved when they were built."""
    enums, values = boost_enums(), {}
    for name in _params().WIRE_FIELDS:
        value = getattr(c.params, name)
        values[name.lower()] = (
            enums[name].to_proto(value) if name in enums else bounds_to_proto(value) if name == "bounds" else value
        )
    return pb.BoostConfig(run_id=c.run_id, **values)


def boost_config_from_proto(m: pb.BoostConfig) -> BoostConfig:
    """The run's configuration, validated as :class:`~privfed.common.boosting.params.BoostingParams` validates it.

    Decoded once per distinct message (every task of a run carries the same one; building it costs ~1 ms)."""
    return _boost_config(m.SerializeToString(deterministic=True))


@lru_cache(maxsize=8)
def _boost_config(raw: bytes) -> BoostConfig:
    """Each wire field back by its constraint (``PARAMETERS``): a choice from its enum, an int as an int, an
    optional number unset as None (the params then derive it), the bounds from their matrix."""
    m, params, enums = pb.BoostConfig.FromString(raw), _params(), boost_enums()
    values: dict[str, Any] = {}
    for name in params.WIRE_FIELDS:
        field, check = name.lower(), params.PARAMETERS[name].check
        if name in enums:
            values[name] = enums[name].from_proto(getattr(m, field), name)
        elif name == "bounds":
            values[name] = bounds_from_proto(m.bounds)
        elif check.optional and not m.HasField(field):
            values[name] = None
        else:
            values[name] = int(getattr(m, field)) if check.parse is int else getattr(m, field)
    return _wire().BoostConfig(m.run_id, params.BoostingParams(**values))


def learner_to_proto(learner: Learner) -> pb.BoostLearner:
    if isinstance(learner, Stump):
        return pb.BoostLearner(
            stump=pb.Stump(
                attribute=learner.attribute,
                threshold_index=learner.threshold_index,
                threshold=learner.threshold,
                leaves=list(learner.leaves),
                error=learner.error,
            )
        )
    if isinstance(learner, NearestCentroidModel):
        if learner.bounds is not None or learner.priors is not None or learner.variance != 1.0:
            # The wire form is the paper's nearest centroid (§3.5.1), what a boosted NCC round fits: the owners
            # would evaluate another rule than the coordinator's, so refuse rather than drop these.
            raise ConfigError("a boosted nearest centroid travels without bounds, priors or variance")
        return pb.BoostLearner(
            nearest_centroid=pb.NearestCentroid(
                centroids=matrix_to_proto(learner.centroids), classes=np.asarray(learner.classes).tolist()
            )
        )
    if isinstance(learner, LinearModel):
        return pb.BoostLearner(
            linear=pb.LinearModel(
                coef=matrix_to_proto(learner.coef_),
                intercept=learner.intercept_.tolist(),
                bounds=bounds_to_proto(learner.bounds),
                classes=np.asarray(learner.classes).tolist(),
            )
        )
    raise TypeError(f"no wire form for learner {type(learner).__name__}")


def learner_from_proto(m: pb.BoostLearner) -> Learner:
    """A base learner, its shapes and values checked (finite; the stump's ``error`` may be nan).

    Whether it fits a run (kind, features, thresholds, classes) is the owner's check against the
    run's configuration (:func:`privfed.common.boosting.owner.check_learner`).
    """
    kind = m.WhichOneof("kind")
    if kind == "stump":
        s = m.stump
        if len(s.leaves) != 2 or not math.isfinite(s.threshold):
            raise RemoteProtocolError(
                f"stump needs 2 leaves and a finite threshold, got {list(s.leaves)}, {s.threshold}"
            )
        return Stump(int(s.attribute), int(s.threshold_index), float(s.threshold), tuple(s.leaves), float(s.error))
    if kind == "nearest_centroid":
        centroids = two_d(matrix_from_proto(m.nearest_centroid.centroids, "centroids"), "centroids")
        return NearestCentroidModel(centroids, np.asarray(m.nearest_centroid.classes, dtype=np.int64))
    if kind == "linear":
        k = m.linear
        intercept = np.asarray(k.intercept, dtype=np.float64)
        if not np.all(np.isfinite(intercept)):
            raise RemoteProtocolError("linear model intercept must be finite")
        return LinearModel(
            two_d(matrix_from_proto(k.coef, "coef"), "coef"),
            intercept,
            bounds_from_proto(k.bounds),
            np.asarray(k.classes, dtype=np.int64),
        )
    raise RemoteProtocolError(f"learner has no known kind ({kind!r})")


def kept_round_to_proto(r: KeptRound) -> pb.KeptRound:
    return pb.KeptRound(
        learner=learner_to_proto(r.learner), alpha=r.alpha, err_total=r.err_total, weight_total=r.weight_total
    )


def kept_round_from_proto(m: pb.KeptRound) -> KeptRound:
    return _wire().KeptRound(learner_from_proto(m.learner), m.alpha, m.err_total, m.weight_total)


def boost_history_to_proto(h: BoostHistory) -> pb.BoostHistory:
    return pb.BoostHistory(kept=[kept_round_to_proto(r) for r in h.kept], round=h.round)


def boost_history_from_proto(m: pb.BoostHistory) -> BoostHistory:
    """The public history; decoded once per distinct message (every task of a round carries the same one)."""
    return _boost_history(m.SerializeToString(deterministic=True))


@lru_cache(maxsize=8)
def _boost_history(raw: bytes) -> BoostHistory:
    m = pb.BoostHistory.FromString(raw)
    return _wire().BoostHistory(tuple(kept_round_from_proto(r) for r in m.kept), int(m.round))


@lru_cache(maxsize=8)
def _learner(raw: bytes) -> Learner:
    """:func:`learner_from_proto` once per distinct message (a round's evaluate tasks carry the same learner)."""
    return learner_from_proto(pb.BoostLearner.FromString(raw))


_config_msg = LastEncoded(boost_config_to_proto)
_history_msg = LastEncoded(boost_history_to_proto)
_learner_msg = LastEncoded(learner_to_proto)


def boost_share_task_to_proto(s: BoostShareTask) -> pb.BoostShareTask:
    return pb.BoostShareTask(config=_config_msg(s.config), history=_history_msg(s.history))


def boost_share_task_from_proto(k: pb.BoostShareTask) -> BoostShareTask:
    return BoostShareTask(config=boost_config_from_proto(k.config), history=boost_history_from_proto(k.history))


def boost_evaluate_to_proto(s: BoostEvaluateTask) -> pb.BoostEvaluateTask:
    return pb.BoostEvaluateTask(
        config=_config_msg(s.config),
        history=_history_msg(s.history),
        learner=_learner_msg(s.learner),
        ring=ring_spec_to_proto(s.ring),
        secagg=None if s.secagg is None else input_request_to_proto(s.secagg),
    )


def boost_evaluate_from_proto(k: pb.BoostEvaluateTask) -> BoostEvaluateTask:
    return BoostEvaluateTask(
        config=boost_config_from_proto(k.config),
        history=boost_history_from_proto(k.history),
        learner=_learner(k.learner.SerializeToString(deterministic=True)),
        ring=ring_spec_from_proto(k.ring),
        secagg=input_request_from_proto(k.secagg) if k.HasField("secagg") else None,
    )


# ---------------------------------------------------------------------- typed share replies


def _one_row(reports: np.ndarray, what: str) -> np.ndarray:
    if reports.ndim != 2 or reports.shape[0] != 1:
        raise RemoteProtocolError(f"{what}: one row per owner, got shape {reports.shape}")
    return reports


def stump_share_to_proto(p: StumpShareReply) -> pb.BoostShare:
    return pb.BoostShare(stump=pb.StumpShare(reports=reports_to_proto(p.reports)))


def _stump_share_from_proto(m: pb.BoostShare) -> StumpShareReply:
    return StumpShareReply(_one_row(reports_from_proto(m.stump.reports), "stump share"))


def sampled_stump_share_to_proto(p: SampledStumpShareReply) -> pb.BoostShare:
    coordinates, reports = (np.asarray(a, dtype=np.int64).ravel().tolist() for a in (p.coordinates, p.reports))
    return pb.BoostShare(sampled_stump=pb.SampledStumpShare(coordinates=coordinates, reports=reports))


def _sampled_stump_share_from_proto(m: pb.BoostShare) -> SampledStumpShareReply:
    k = m.sampled_stump
    return SampledStumpShareReply(
        integers(k.coordinates, "sampled coordinates").reshape(1, -1), integers(k.reports, "reports").reshape(1, -1)
    )


def lr_parameters_to_proto(p: LrParametersReply) -> pb.BoostShare:
    return pb.BoostShare(lr=pb.LrParameters(reports=reports_to_proto(p.reports)))


def _lr_parameters_from_proto(m: pb.BoostShare) -> LrParametersReply:
    return LrParametersReply(_one_row(reports_from_proto(m.lr.reports), "LR share"))


def ncc_rows_to_proto(p: NccRowsReply) -> pb.BoostShare:
    labels = np.asarray(p.labels, dtype=np.int64).tolist()
    return pb.BoostShare(ncc=pb.NccRows(reports=reports_to_proto(p.reports), labels=labels))


def _ncc_rows_from_proto(m: pb.BoostShare) -> NccRowsReply:
    reports, labels = reports_from_proto(m.ncc.reports), integers(m.ncc.labels, "labels")
    if reports.ndim != 2 or reports.shape[0] != labels.shape[0]:
        raise RemoteProtocolError(f"NCC share: {reports.shape} reports for {labels.shape[0]} labels")
    return NccRowsReply(reports, labels)


def joint_ncc_to_proto(p: JointNccReply) -> pb.BoostShare:
    return pb.BoostShare(joint_ncc=joint_reports_to_proto(p.features, p.reports))


def _joint_ncc_from_proto(m: pb.BoostShare) -> JointNccReply:
    return JointNccReply(*joint_reports_from_proto(m.joint_ncc, "joint NCC share"))


#: ``BoostShare``'s ``oneof`` field -> its decoder.
_SHARES: dict[str, Callable[[pb.BoostShare], BoostShareReply]] = {
    "stump": _stump_share_from_proto,
    "sampled_stump": _sampled_stump_share_from_proto,
    "lr": _lr_parameters_from_proto,
    "ncc": _ncc_rows_from_proto,
    "joint_ncc": _joint_ncc_from_proto,
}


def boost_share_from_proto(m: pb.BoostShare, owner_id: str) -> BoostShareReply:
    decode = _SHARES.get(m.WhichOneof("kind") or "")
    if decode is None:
        raise RemoteProtocolError(f"boosting share has no known kind ({m.WhichOneof('kind')!r})")
    return decode(m)
