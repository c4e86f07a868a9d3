"""Pairs of ``x_to_proto`` / ``x_from_proto`` between domain messages and protobuf.

The only place that knows both worlds (STYLE rule 10). ``*_from_proto`` validates what a
peer sent and raises :class:`RemoteProtocolError` on anything malformed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.ncc import NearestCentroidModel
from privfed.common.learners.stump import Stump
from privfed.common.mechanisms.base import REPORT_LIMIT, SNAP_BITS
from privfed.common.messages import (
    BoostEvaluateTask,
    BoostShareReply,
    BoostShareTask,
    LrShareReply,
    LrShareTask,
    NccShareReply,
    NccShareTask,
    OwnerInfo,
    PcaShareReply,
    PcaShareTask,
    PeerKey,
    Refusal,
    Result,
    RingJoined,
    RingMessageTask,
    RingSpec,
    RingTotal,
    SecAggKeysTask,
    SecAggUnmaskTask,
    SvmShareReply,
    SvmShareTask,
    Task,
)
from privfed.common.secagg.messages import (
    InputRequest,
    KeyAdvert,
    KeyShares,
    MaskedInput,
    SealedShare,
    ShareKeysRequest,
    UnmaskReply,
    UnmaskRequest,
)
from privfed.proto import privfed_pb2 as pb

if TYPE_CHECKING:
    from types import ModuleType

    from privfed.common.boosting.wire import BoostConfig, BoostHistory, KeptRound, Learner

MAX_MATRIX_VALUES = 8_000_000  # 64 MB of float64; matches the transport's message bound


def matrix_to_proto(a: np.ndarray) -> pb.Matrix:
    a = np.ascontiguousarray(a, dtype="<f8")
    return pb.Matrix(shape=list(a.shape), data=a.tobytes())


def _checked_shape(m: pb.Matrix | pb.Reports, what: str) -> tuple[int, ...]:
    """The shape a peer declared, checked against the size bound and the bytes it sent."""
    shape = tuple(int(s) for s in m.shape)
    size = math.prod(shape)  # () is a scalar: one value
    if size > MAX_MATRIX_VALUES:
        raise RemoteProtocolError(f"{what} of shape {shape} exceeds {MAX_MATRIX_VALUES} values")
    if len(m.data) != 8 * size:
        raise RemoteProtocolError(f"{what} of shape {shape} needs {8 * size} bytes, got {len(m.data)}")
    return shape


def matrix_from_proto(m: pb.Matrix, what: str = "matrix") -> np.ndarray:
    shape = _checked_shape(m, what)
    return np.frombuffer(m.data, dtype="<f8").reshape(shape).astype(np.float64)


GRID_BITS = SNAP_BITS  # the mechanisms' snapping grid 2^-20 (SPEC §12)
_GRID_LIMIT = REPORT_LIMIT * 2.0**GRID_BITS  # 2^62: int64 indices with room to spare


def reports_to_proto(a: np.ndarray) -> pb.Reports:
    """Perturbed reports as int64 indices on the 2^-20 grid (exact for snapped outputs)."""
    scaled = np.rint(np.asarray(a, dtype=np.float64) * 2.0**GRID_BITS)
    if not np.all(np.isfinite(scaled)) or np.any(np.abs(scaled) >= _GRID_LIMIT):
        raise ConfigError("reports must be finite and below 2^42 in magnitude to go on the wire")
    return pb.Reports(shape=list(scaled.shape), grid_bits=GRID_BITS, data=scaled.astype("<i8").tobytes())


def reports_from_proto(m: pb.Reports) -> np.ndarray:
    shape = _checked_shape(m, "reports")
    if m.grid_bits != GRID_BITS:
        raise RemoteProtocolError(f"reports on grid 2^-{m.grid_bits}, expected 2^-{GRID_BITS}")
    return np.frombuffer(m.data, dtype="<i8").reshape(shape).astype(np.float64) * 2.0**-GRID_BITS


def bounds_to_proto(b: Bounds) -> pb.Matrix:
    return matrix_to_proto(np.stack([b.lo, b.hi]))


def bounds_from_proto(m: pb.Matrix) -> Bounds:
    a = matrix_from_proto(m, "bounds")
    if a.ndim != 2 or a.shape[0] != 2:
        raise RemoteProtocolError(f"bounds must have shape (2, d), got {a.shape}")
    try:
        return Bounds(a[0], a[1])
    except ConfigError as exc:
        raise RemoteProtocolError(f"invalid bounds: {exc}") from exc


def owner_info_to_proto(o: OwnerInfo) -> pb.OwnerInfo:
    return pb.OwnerInfo(owner_id=o.owner_id, x25519_public_key=o.x25519_public_key, key_signature=o.key_signature)


def owner_info_from_proto(m: pb.OwnerInfo) -> OwnerInfo:
    if not m.owner_id:
        raise RemoteProtocolError("owner_id is empty")
    return OwnerInfo(
        owner_id=m.owner_id, x25519_public_key=bytes(m.x25519_public_key), key_signature=bytes(m.key_signature)
    )


def _wire() -> ModuleType:
    """:mod:`privfed.common.boosting.wire`, imported once a boosting message is decoded (it imports
    scipy, which an owner node loads only for the tasks that need it)."""
    from privfed.common.boosting import wire

    return wire


def boost_config_to_proto(c: BoostConfig) -> pb.BoostConfig:
    fb = c.params
    return pb.BoostConfig(
        run_id=c.run_id,
        base=fb.base,
        epsilon=fb.epsilon,
        mechanism=fb.mechanism,
        n_classes=fb.n_classes,
        n_rounds=fb.n_rounds,
        group_size=fb.group_size,
        n_bins=fb.n_bins,
        weight_bound=fb.weight_bound,
        labels=fb.labels,
        label_fraction=fb.label_fraction,
        c=fb.C,
        param_bound=fb.param_bound,
        eval_fraction=fb.eval_fraction,
        eval_groups=fb.eval_groups,
        eval_row_bound=fb.eval_row_bound,
        max_owner_rows=fb.max_owner_rows,
        bounds=bounds_to_proto(fb.bounds),
        stump_encoding=fb.stump_encoding,
        oracle=fb.oracle,
        n_sampled=fb.n_sampled,
        share_groups=fb.share_groups,
        eval_mechanism=fb.eval_mechanism,
        budget_split=fb.budget_split,
    )


def boost_config_from_proto(m: pb.BoostConfig) -> BoostConfig:
    """The run's configuration, validated as :class:`~privfed.common.boosting.wire.BoostConfig` validates it.

    Decoded once per distinct message (every task of a run carries the same one; building it costs ~1 ms)."""
    return _boost_config(m.SerializeToString(deterministic=True))


@lru_cache(maxsize=8)
def _boost_config(raw: bytes) -> BoostConfig:
    m, wire = pb.BoostConfig.FromString(raw), _wire()
    params = wire.BoostingParams(
        base=m.base,
        epsilon=m.epsilon,
        mechanism=m.mechanism,
        n_classes=int(m.n_classes),
        n_rounds=int(m.n_rounds),
        group_size=int(m.group_size) if m.HasField("group_size") else None,
        n_bins=int(m.n_bins),
        weight_bound=m.weight_bound,
        labels=m.labels,
        label_fraction=m.label_fraction,
        C=m.c,
        param_bound=m.param_bound,
        eval_fraction=m.eval_fraction,
        eval_groups=m.eval_groups,
        eval_row_bound=m.eval_row_bound,
        max_owner_rows=int(m.max_owner_rows),
        bounds=bounds_from_proto(m.bounds),
        stump_encoding=m.stump_encoding or None,  # unset: the default for the classes
        oracle=m.oracle or "krr",
        n_sampled=int(m.n_sampled) if m.HasField("n_sampled") else None,
        share_groups=m.share_groups or "disjoint",
        eval_mechanism=m.eval_mechanism or "laplace",  # unset: a peer from before the field, which used Laplace
        budget_split=m.budget_split or "epsilon",
    )
    return wire.BoostConfig(m.run_id, params)


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
        centroids = _two_d(matrix_from_proto(m.nearest_centroid.centroids, "centroids"), "centroids")
        return NearestCentroidModel(centroids, np.asarray(m.nearest_centroid.classes, dtype=np.int64))
    if kind == "linear":
        k = m.linear
        intercept = np.asarray(k.intercept, dtype=np.float64)
        if not np.all(np.isfinite(intercept)):
            raise RemoteProtocolError("linear model intercept must be finite")
        return LinearModel(
            _two_d(matrix_from_proto(k.coef, "coef"), "coef"),
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
    return _wire().BoostHistory(tuple(kept_round_from_proto(r) for r in m.kept), int(m.round))


def _peer_keys_to_proto(peers: Sequence[PeerKey]) -> list[pb.PeerKey]:
    return [
        pb.PeerKey(
            owner_id=p.owner_id, node_id=p.node_id, x25519_public_key=p.x25519_public_key, key_signature=p.key_signature
        )
        for p in peers
    ]


def _peer_keys_from_proto(peers: Iterable[pb.PeerKey]) -> tuple[PeerKey, ...]:
    return tuple(PeerKey(p.owner_id, p.node_id, bytes(p.x25519_public_key), bytes(p.key_signature)) for p in peers)


def ring_spec_to_proto(r: RingSpec) -> pb.RingSpec:
    return pb.RingSpec(
        session_id=r.session_id,
        ring=list(r.ring),
        frac_bits=r.frac_bits,
        n_parties=r.n_parties,
        max_abs=r.max_abs,
        peers=_peer_keys_to_proto(r.peers),
        certificates=[pb.NodeCertificate(node_id=n, pem=pem) for n, pem in r.certificates.items()],
    )


def ring_spec_from_proto(m: pb.RingSpec) -> RingSpec:
    return RingSpec(
        session_id=m.session_id,
        ring=tuple(m.ring),
        frac_bits=int(m.frac_bits),
        n_parties=int(m.n_parties),
        max_abs=float(m.max_abs),
        peers=_peer_keys_from_proto(m.peers),
        certificates={c.node_id: bytes(c.pem) for c in m.certificates},
    )


# ---------------------------------------------------------------------- pairwise-mask secure sum


def _sealed_to_proto(shares: Iterable[SealedShare]) -> list[pb.SealedShare]:
    return [pb.SealedShare(sender=s.sender, recipient=s.recipient, ciphertext=s.ciphertext) for s in shares]


def _sealed_from_proto(shares: Iterable[pb.SealedShare]) -> tuple[SealedShare, ...]:
    return tuple(SealedShare(s.sender, s.recipient, bytes(s.ciphertext)) for s in shares)


def _advert_to_proto(a: KeyAdvert) -> pb.KeyAdvert:
    return pb.KeyAdvert(owner_id=a.owner_id, public_key=a.public_key, signature=a.signature)


def _advert_from_proto(m: pb.KeyAdvert) -> KeyAdvert:
    return KeyAdvert(m.owner_id, bytes(m.public_key), bytes(m.signature))


def secagg_keys_to_proto(t: SecAggKeysTask) -> pb.SecAggKeysTask:
    msg = pb.SecAggKeysTask(
        session_id=t.session_id,
        frac_bits=t.frac_bits,
        n_parties=t.n_parties,
        max_abs=t.max_abs,
        peers=_peer_keys_to_proto(t.peers),
        certificates=[pb.NodeCertificate(node_id=n, pem=pem) for n, pem in t.certificates.items()],
    )
    if t.request is not None:
        r = t.request
        msg.share_keys.CopyFrom(
            pb.ShareKeysRequest(
                members=list(r.members), adverts=[_advert_to_proto(a) for a in r.adverts], rounds=r.rounds
            )
        )
    return msg


def secagg_keys_from_proto(m: pb.SecAggKeysTask) -> SecAggKeysTask:
    request = None
    if m.HasField("share_keys"):
        k = m.share_keys
        request = ShareKeysRequest(tuple(k.members), tuple(_advert_from_proto(a) for a in k.adverts), int(k.rounds))
    return SecAggKeysTask(
        session_id=m.session_id,
        frac_bits=int(m.frac_bits),
        n_parties=int(m.n_parties),
        max_abs=float(m.max_abs),
        request=request,
        peers=_peer_keys_from_proto(m.peers),
        certificates={c.node_id: bytes(c.pem) for c in m.certificates},
    )


def _input_request_to_proto(r: InputRequest) -> pb.SecAggInput:
    return pb.SecAggInput(round=r.round, participants=list(r.participants), key_shares=_sealed_to_proto(r.key_shares))


def _input_request_from_proto(m: pb.SecAggInput) -> InputRequest:
    return InputRequest(int(m.round), tuple(m.participants), _sealed_from_proto(m.key_shares))


def _owner_shares(shares: Mapping[str, bytes]) -> list[pb.OwnerShare]:
    return [pb.OwnerShare(owner_id=o, share=s) for o, s in shares.items()]


def _owner_shares_from_proto(shares: Sequence[pb.OwnerShare], what: str) -> dict[str, bytes]:
    out = {s.owner_id: bytes(s.share) for s in shares}
    if len(out) != len(shares):
        raise RemoteProtocolError(f"unmask reply: an owner named twice in its {what}")
    return out


_E = TypeVar("_E", "pb.SvmModel", "pb.RowScaling")

#: FedDPDR's public choices (common/feddpdr/choices.py) and their wire enums. The wire has no default:
#: UNSPECIFIED (0, what an unset field reads as) is malformed, so the one default is Python's.
SVM_MODEL_WIRE = {
    "centroid": pb.SVM_MODEL_CENTROID,
    "mc-huber": pb.SVM_MODEL_MC_HUBER,
    "softmax": pb.SVM_MODEL_SOFTMAX,
    "ovr-huber": pb.SVM_MODEL_OVR_HUBER,
}
ROW_SCALING_WIRE = {"ball": pb.ROW_SCALING_BALL, "normalise": pb.ROW_SCALING_NORMALISE}


def _to_enum(table: Mapping[str, _E], name: str) -> _E:
    if name not in table:
        raise ConfigError(f"no wire value for {name!r}; known: {sorted(table)}")
    return table[name]


def _from_enum(table: Mapping[str, _E], value: _E, field: str) -> str:
    for name, number in table.items():
        if number == value:
            return name
    raise RemoteProtocolError(f"{field} must name one of {sorted(table)}, got enum value {value}")


def task_to_proto(t: Task) -> pb.Task:
    msg = pb.Task(task_id=t.task_id, owner_id=t.owner_id, round_id=t.round_id)
    s = t.spec
    if isinstance(s, (NccShareTask, LrShareTask)):
        mech = pb.MechanismSpec(name=s.mechanism, epsilon=s.epsilon)
    if isinstance(s, NccShareTask):
        msg.ncc_share.CopyFrom(
            pb.NccShareTask(
                mechanism=mech,
                labels=s.labels,
                label_epsilon=s.label_epsilon,
                n_classes=s.n_classes,
                bounds=bounds_to_proto(s.bounds),
            )
        )
    elif isinstance(s, LrShareTask):
        msg.lr_share.CopyFrom(
            pb.LrShareTask(
                mechanism=mech,
                param_bound=s.param_bound,
                c=s.c,
                n_classes=s.n_classes,
                bounds=bounds_to_proto(s.bounds),
            )
        )
    elif isinstance(s, PcaShareTask):
        msg.pca_share.CopyFrom(
            pb.PcaShareTask(
                epsilon=s.epsilon,
                delta=s.delta,
                k=s.k,
                bounds=bounds_to_proto(s.bounds),
                count_epsilon=s.count_epsilon,
                scaling=_to_enum(ROW_SCALING_WIRE, s.scaling),
            )
        )
    elif isinstance(s, SvmShareTask):
        msg.svm_share.CopyFrom(
            pb.SvmShareTask(
                epsilon=s.epsilon,
                lam=s.lam,
                n_classes=s.n_classes,
                bounds=bounds_to_proto(s.bounds),
                subspace=matrix_to_proto(np.zeros((0,)) if s.subspace is None else s.subspace),
                delta=s.delta,
                model=_to_enum(SVM_MODEL_WIRE, s.model),
                scaling=_to_enum(ROW_SCALING_WIRE, s.scaling),
            )
        )
    elif isinstance(s, BoostShareTask):
        msg.boost_share.CopyFrom(
            pb.BoostShareTask(config=boost_config_to_proto(s.config), history=boost_history_to_proto(s.history))
        )
    elif isinstance(s, BoostEvaluateTask):
        msg.boost_evaluate.CopyFrom(
            pb.BoostEvaluateTask(
                config=boost_config_to_proto(s.config),
                history=boost_history_to_proto(s.history),
                learner=learner_to_proto(s.learner),
                ring=ring_spec_to_proto(s.ring),
            )
        )
        if s.secagg is not None:
            msg.boost_evaluate.secagg.CopyFrom(_input_request_to_proto(s.secagg))
    elif isinstance(s, RingMessageTask):
        msg.ring_message.CopyFrom(pb.RingMessageTask(data=s.data))
    elif isinstance(s, SecAggKeysTask):
        msg.secagg_keys.CopyFrom(secagg_keys_to_proto(s))
    elif isinstance(s, SecAggUnmaskTask):
        r = s.request
        msg.secagg_unmask.CopyFrom(
            pb.SecAggUnmaskTask(
                session_id=s.session_id, round=r.round, survivors=list(r.survivors), dropped=list(r.dropped)
            )
        )
    else:
        raise TypeError(f"no wire form for task spec {type(s).__name__}")
    return msg


def task_from_proto(m: pb.Task) -> Task:
    kind = m.WhichOneof("kind")
    try:
        if kind == "ncc_share":
            k = m.ncc_share
            spec = NccShareTask(
                mechanism=k.mechanism.name,
                epsilon=k.mechanism.epsilon,
                labels=k.labels,
                label_epsilon=k.label_epsilon,
                n_classes=int(k.n_classes),
                bounds=bounds_from_proto(k.bounds),
            )
        elif kind == "lr_share":
            k = m.lr_share
            spec = LrShareTask(
                mechanism=k.mechanism.name,
                epsilon=k.mechanism.epsilon,
                param_bound=k.param_bound,
                c=k.c,
                n_classes=int(k.n_classes),
                bounds=bounds_from_proto(k.bounds),
            )
        elif kind == "pca_share":
            k = m.pca_share
            spec = PcaShareTask(
                epsilon=k.epsilon,
                delta=k.delta,
                k=int(k.k),
                bounds=bounds_from_proto(k.bounds),
                count_epsilon=k.count_epsilon,
                scaling=_from_enum(ROW_SCALING_WIRE, k.scaling, "scaling"),
            )
        elif kind == "svm_share":
            k = m.svm_share
            U = matrix_from_proto(k.subspace)
            spec = SvmShareTask(
                epsilon=k.epsilon,
                lam=k.lam,
                n_classes=int(k.n_classes),
                bounds=bounds_from_proto(k.bounds),
                subspace=U if U.size else None,
                delta=k.delta,
                model=_from_enum(SVM_MODEL_WIRE, k.model, "model"),
                scaling=_from_enum(ROW_SCALING_WIRE, k.scaling, "scaling"),
            )
        elif kind == "boost_share":
            k = m.boost_share
            spec = BoostShareTask(config=boost_config_from_proto(k.config), history=boost_history_from_proto(k.history))
        elif kind == "boost_evaluate":
            k = m.boost_evaluate
            spec = BoostEvaluateTask(
                config=boost_config_from_proto(k.config),
                history=boost_history_from_proto(k.history),
                learner=learner_from_proto(k.learner),
                ring=ring_spec_from_proto(k.ring),
                secagg=_input_request_from_proto(k.secagg) if k.HasField("secagg") else None,
            )
        elif kind == "ring_message":
            spec = RingMessageTask(data=bytes(m.ring_message.data))
        elif kind == "secagg_keys":
            spec = secagg_keys_from_proto(m.secagg_keys)
        elif kind == "secagg_unmask":
            k = m.secagg_unmask
            spec = SecAggUnmaskTask(k.session_id, UnmaskRequest(int(k.round), tuple(k.survivors), tuple(k.dropped)))
        else:
            raise RemoteProtocolError(f"task {m.task_id!r} has no known kind ({kind!r})")
    except ConfigError as exc:
        raise RemoteProtocolError(f"task {m.task_id!r} is invalid: {exc}") from exc
    return Task(task_id=m.task_id, owner_id=m.owner_id, round_id=m.round_id, spec=spec)


def task_or_refusal(m: pb.Task) -> tuple[Task | None, Result | None]:
    """Decode ONE task alone (issue 9, item 7): ``(task, None)``, or ``(None, refusal)`` for a task
    that cannot be decoded, so one malformed task never costs the rest of a batch.

    The refusal (code ``invalid_task``) names what was wrong with the task's own fields; nothing
    of the owner's enters it. Any exception a hostile message can provoke in decoding (odd shapes,
    values a constructor rejects) is caught here.
    """
    try:
        return task_from_proto(m), None
    except RemoteProtocolError as exc:
        detail = str(exc)
    except Exception as exc:  # noqa: BLE001 - a peer's bytes must never take the node down
        detail = f"task {m.task_id!r} could not be decoded ({type(exc).__name__})"
    return None, Result(m.task_id, m.owner_id, Refusal.of("invalid_task", detail))


def _two_d(a: np.ndarray, what: str) -> np.ndarray:
    if a.ndim != 2 or not np.all(np.isfinite(a)):
        raise RemoteProtocolError(f"{what} must be a finite 2-D matrix, got shape {a.shape}")
    return a


def result_to_proto(r: Result) -> pb.Result:
    msg = pb.Result(task_id=r.task_id, owner_id=r.owner_id)
    p = r.payload
    if isinstance(p, Refusal):
        msg.refusal.CopyFrom(pb.Refusal(code=p.code, message=p.message))
    elif isinstance(p, NccShareReply):
        msg.ncc_share.CopyFrom(
            pb.NccShare(reports=reports_to_proto(p.reports), labels=np.asarray(p.labels, dtype=np.int64).tolist())
        )
    elif isinstance(p, LrShareReply):
        msg.lr_share.CopyFrom(pb.LrShare(reports=reports_to_proto(p.reports)))
    elif isinstance(p, PcaShareReply):
        msg.pca_share.CopyFrom(pb.PcaShare(subspace=matrix_to_proto(p.subspace), noisy_count=p.noisy_count))
    elif isinstance(p, SvmShareReply):
        msg.svm_share.CopyFrom(pb.SvmShare(coef=matrix_to_proto(p.coef)))
    elif isinstance(p, BoostShareReply):
        msg.boost_share.CopyFrom(
            pb.BoostShare(
                reports=reports_to_proto(p.reports),
                labels=np.asarray(p.labels, dtype=np.int64).tolist(),
                coordinates=np.asarray(p.coordinates, dtype=np.int64).ravel().tolist(),
            )
        )
    elif isinstance(p, RingJoined):
        msg.ring_joined.CopyFrom(pb.RingJoined(session_id=p.session_id))
    elif isinstance(p, RingTotal):
        msg.ring_total.CopyFrom(pb.RingTotal(session_id=p.session_id, values=np.asarray(p.values).tolist()))
    elif isinstance(p, KeyAdvert):
        msg.key_advert.CopyFrom(_advert_to_proto(p))
    elif isinstance(p, KeyShares):
        msg.key_shares.CopyFrom(pb.KeyShares(shares=_sealed_to_proto(p.shares)))
    elif isinstance(p, MaskedInput):
        msg.masked_input.CopyFrom(pb.MaskedInput(round=p.round, masked=p.masked.tolist()))
    elif isinstance(p, UnmaskReply):
        msg.unmask_reply.CopyFrom(
            pb.UnmaskReply(
                round=p.round, self_shares=_owner_shares(p.self_shares), key_shares=_owner_shares(p.key_shares)
            )
        )
    else:
        raise TypeError(f"no wire form for payload {type(p).__name__}")
    return msg


def result_from_proto(m: pb.Result) -> Result:
    kind = m.WhichOneof("kind")
    if kind == "refusal":
        try:
            payload = Refusal(code=m.refusal.code, message=m.refusal.message)
        except ConfigError as exc:
            raise RemoteProtocolError(str(exc)) from exc
    elif kind == "ncc_share":
        reports = reports_from_proto(m.ncc_share.reports)
        labels = np.asarray(m.ncc_share.labels, dtype=np.int64)
        if reports.ndim != 2 or reports.shape[0] != labels.shape[0]:
            raise RemoteProtocolError(f"ncc share: {reports.shape} reports for {labels.shape[0]} labels")
        payload = NccShareReply(reports=reports, labels=labels)
    elif kind == "lr_share":
        payload = LrShareReply(reports=reports_from_proto(m.lr_share.reports))
    elif kind == "pca_share":
        payload = PcaShareReply(
            subspace=_two_d(matrix_from_proto(m.pca_share.subspace), "subspace"),
            noisy_count=int(m.pca_share.noisy_count),
        )
    elif kind == "svm_share":
        payload = SvmShareReply(coef=_two_d(matrix_from_proto(m.svm_share.coef), "coef"))
    elif kind == "boost_share":
        reports = reports_from_proto(m.boost_share.reports)
        labels = np.asarray(m.boost_share.labels, dtype=np.int64)
        if reports.ndim != 2 or (labels.size and labels.shape[0] != reports.shape[0]):
            raise RemoteProtocolError(f"boost share: {reports.shape} reports for {labels.shape[0]} labels")
        coordinates = np.asarray(m.boost_share.coordinates, dtype=np.int64)
        n = reports.shape[0]
        if coordinates.size and (n == 0 or coordinates.size % n):
            raise RemoteProtocolError(f"boost share: {coordinates.size} coordinates for {n} reports")
        shape = (n, coordinates.size // n) if coordinates.size else (0, 0)
        payload = BoostShareReply(reports=reports, labels=labels, coordinates=coordinates.reshape(shape))
    elif kind == "ring_joined":
        payload = RingJoined(session_id=m.ring_joined.session_id)
    elif kind == "ring_total":
        payload = RingTotal(session_id=m.ring_total.session_id, values=np.asarray(m.ring_total.values, dtype=float))
    elif kind == "key_advert":
        payload = _advert_from_proto(m.key_advert)
        if payload.owner_id != m.owner_id:
            raise RemoteProtocolError(f"a mask key advert of {payload.owner_id!r} in a result of {m.owner_id!r}")
    elif kind == "key_shares":  # the answering owner is the sender (the coordinator checks each share's)
        payload = KeyShares(m.owner_id, _sealed_from_proto(m.key_shares.shares))
    elif kind == "masked_input":
        payload = MaskedInput(m.owner_id, int(m.masked_input.round), np.asarray(m.masked_input.masked, dtype=np.uint64))
    elif kind == "unmask_reply":
        k = m.unmask_reply
        payload = UnmaskReply(
            m.owner_id,
            int(k.round),
            _owner_shares_from_proto(k.self_shares, "self-mask shares"),
            _owner_shares_from_proto(k.key_shares, "key shares"),
        )
    else:
        raise RemoteProtocolError(f"result for task {m.task_id!r} has no known kind ({kind!r})")
    return Result(task_id=m.task_id, owner_id=m.owner_id, payload=payload)
