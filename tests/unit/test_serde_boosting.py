"""The boosting messages on the wire (issue 10, "a typed wire"): every field travels, and every
malformed config, history or learner a peer can send is refused at decoding as ``invalid_task``
with a detail from the task alone, while the other tasks of the batch are answered."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import BoostConfig, BoostHistory, KeptRound, at_round, empty_history
from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.learners.stump import Stump, thresholds
from privfed.common.ledger import Ledger
from privfed.common.tasks import (
    BoostEvaluateTask,
    BoostShareReply,
    BoostShareTask,
    JointNccReply,
    LrParametersReply,
    NccRowsReply,
    RingSpec,
    SampledStumpShareReply,
    StumpShareReply,
    Task,
)
from privfed.owner.core import handle_batch
from privfed.owner.local import LocalOwner
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde, serde_boosting

BOUNDS = Bounds.of(0.0, 1.0, 2)
CONFIG = BoostConfig(
    "run-b",
    BoostingParams(
        base="lr",
        epsilon=3.5,
        mechanism="laplace",
        n_classes=3,
        bounds=BOUNDS,
        n_rounds=6,
        group_size=9,
        n_bins=5,
        weight_bound=2.5,
        labels="clear",
        label_fraction=0.3,
        C=0.5,
        param_bound=1.75,
        eval_fraction=0.4,
        eval_groups="all",
        eval_row_bound=1.25,
        max_owner_rows=4321,
        stump_encoding="cells",
        oracle="oue",
        n_sampled=2,
    ),
)
STUMP = Stump(1, 2, float(thresholds(BOUNDS, 4)[1, 1]), (1, 0), 0.125)
CENTROIDS = NearestCentroidModel(np.array([[0.25, 0.5], [0.75, 0.5]]))
LINEAR = LinearModel(np.array([[0.5, -0.5]]), np.array([0.25]), BOUNDS)
HISTORY = BoostHistory(
    (KeptRound(STUMP, 0.5, 3.0, 10.0), KeptRound(CENTROIDS, 0.25, 2.0, 10.5), KeptRound(LINEAR, 1.5, 1.0, 9.5)), 3
)
RING = RingSpec("s", ("a", "b"), 20, 2, 10.0, (), {})


def _task_proto(spec) -> pb.Task:
    return serde.task_to_proto(Task("t", "owner-0.o00000", "run-b", spec))


def _all_fields_set(m, path: str = "") -> list[str]:
    """Fields of ``m`` (recursively) left at their default: a field serde forgot would be one."""
    unset = []
    for f in m.DESCRIPTOR.fields:
        name = f"{path}{f.name}"
        if f.containing_oneof is not None and m.WhichOneof(f.containing_oneof.name) != f.name:
            continue  # another member of a oneof is set
        value = getattr(m, f.name)
        if f.is_repeated:
            if not len(value):
                unset.append(name)
            elif f.message_type is not None:
                unset += [u for item in value for u in _all_fields_set(item, f"{name}[].")]
        elif f.message_type is not None:
            unset += _all_fields_set(value, f"{name}.") if m.HasField(f.name) else [name]
        elif value == f.default_value:
            unset.append(name)
    return unset


def test_every_field_of_the_boosting_messages_is_encoded():
    for learner in (STUMP, CENTROIDS, LINEAR):
        msg = _task_proto(BoostEvaluateTask(CONFIG, HISTORY, learner, RING)).boost_evaluate
        assert _all_fields_set(msg.config) == []
        assert _all_fields_set(msg.history) == []
        assert _all_fields_set(msg.learner) == []


@pytest.mark.parametrize("spec", [BoostShareTask(CONFIG, HISTORY), BoostEvaluateTask(CONFIG, HISTORY, LINEAR, RING)])
def test_decoding_is_the_inverse_of_encoding_on_the_wire_bytes(spec):
    """Encode, decode, encode again: the same bytes (every value survives, nothing is added)."""
    first = _task_proto(spec).SerializeToString(deterministic=True)
    again = serde.task_from_proto(pb.Task.FromString(first))
    assert _task_proto(again.spec).SerializeToString(deterministic=True) == first
    assert again.spec.config == CONFIG


@pytest.mark.parametrize(
    "reply",
    [
        SampledStumpShareReply(coordinates=np.array([[3, 0, 7]]), reports=np.array([[5, 2**40]])),
        StumpShareReply(reports=np.array([[0.5, -0.25]])),
        LrParametersReply(reports=np.array([[0.5, -0.25, 1.0]])),
        NccRowsReply(reports=np.array([[0.5, 1.0], [0.25, 0.0]]), labels=np.array([1, 0])),
        NccRowsReply(reports=np.zeros((0, 3)), labels=np.zeros(0, np.int64)),
        JointNccReply(features=np.array([1, 0, 1]), reports=np.array([4, 0, 6])),
        JointNccReply(features=np.zeros(0, np.int64), reports=np.zeros(0, np.int64)),
    ],
    ids=["sampled-stump", "stump", "lr", "ncc", "ncc-no-rows", "joint-ncc", "joint-ncc-no-rows"],
)
def test_a_boosting_share_reply_survives_the_wire_as_its_type(reply):
    """Each base learner's share is its own message: its arrays come back with their shapes and type."""
    from privfed.common.tasks import Result

    back = serde.result_from_proto(serde.result_to_proto(Result("t", "owner-0.o00000", reply))).payload
    assert type(back) is type(reply)
    for name, value in vars(reply).items():
        np.testing.assert_array_equal(getattr(back, name), value)
        assert getattr(back, name).shape == value.shape, name


@pytest.mark.parametrize(
    "field,value",
    [("stump", pb.StumpShare(reports=serde.reports_to_proto(np.zeros((2, 3))))),
     ("lr", pb.LrParameters(reports=serde.reports_to_proto(np.zeros(3)))),
     ("ncc", pb.NccRows(reports=serde.reports_to_proto(np.zeros((2, 3))), labels=[1])),
     ("joint_ncc", pb.JointNccReports(features=[1, 2], reports=[3])),
     ("sampled_stump", pb.SampledStumpShare(coordinates=[1], reports=[2**64 - 1]))],
)  # fmt: skip
def test_a_share_of_the_wrong_shape_is_refused_at_decoding(field, value):
    msg = pb.Result(task_id="t", owner_id="owner-0.o00000", boost_share=pb.BoostShare(**{field: value}))
    with pytest.raises(RemoteProtocolError):
        serde.result_from_proto(msg)
    with pytest.raises(RemoteProtocolError, match="no known kind"):
        serde.result_from_proto(pb.Result(task_id="t", owner_id="o", boost_share=pb.BoostShare()))


def test_a_choice_left_unset_or_unknown_on_the_wire_is_refused():
    """No silent default: the coordinator sends every choice resolved (``BoostingParams`` filled
    in its defaults), so an unset or unknown one is a malformed config, not the default."""
    for name in serde.boosting.boost_enums():
        for value in (0, 99):
            msg = serde.boost_config_to_proto(CONFIG)
            setattr(msg, name, value)
            with pytest.raises(RemoteProtocolError, match=name):
                serde.boost_config_from_proto(msg)
    msg = serde.boost_config_to_proto(CONFIG)
    msg.ClearField("n_sampled")  # an optional number: unset is Python's None (the variance-optimal count)
    assert serde.boost_config_from_proto(msg).params.n_sampled is None


def test_a_config_of_another_run_or_another_value_is_not_equal():
    assert serde.boost_config_from_proto(serde.boost_config_to_proto(CONFIG)) == CONFIG
    other = BoostConfig("run-c", CONFIG.params)
    assert other != CONFIG
    for field, value in (("eval_fraction", 0.41), ("bounds", Bounds.of(0.0, 2.0, 2)), ("group_size", None)):
        changed = BoostConfig("run-b", BoostingParams(**{**_public(CONFIG), field: value}))
        assert changed != CONFIG and hash(changed) != hash(CONFIG), field


def _public(config: BoostConfig) -> dict:
    from privfed.common.boosting.params import WIRE_FIELDS

    return {f: getattr(config.params, f) for f in WIRE_FIELDS}


def _refusal(m: pb.Task) -> str:
    task, refusal = serde.task_or_refusal(m)
    assert task is None, f"decoded: {task}"
    assert refusal.payload.code == "invalid_task" and (refusal.task_id, refusal.owner_id) == (m.task_id, m.owner_id)
    return refusal.payload.message


def _share() -> pb.Task:
    return _task_proto(BoostShareTask(CONFIG, HISTORY))


def _evaluate(learner=STUMP) -> pb.Task:
    return _task_proto(BoostEvaluateTask(CONFIG, HISTORY, learner, RING))


def _set(path_value):
    """A share task with one field changed: ``(attribute path, value)``; lists replace repeated fields."""
    path, value = path_value
    m = _share()
    *parents, leaf = path.split(".")
    target = m.boost_share
    for p in parents:
        target = target[int(p)] if p.isdigit() else getattr(target, p)
    if isinstance(value, list):
        del getattr(target, leaf)[:]
        getattr(target, leaf).extend(value)
    elif isinstance(value, pb.Matrix):
        getattr(target, leaf).CopyFrom(value)
    else:
        setattr(target, leaf, value)
    return m


def _matrix(shape, data) -> pb.Matrix:
    return pb.Matrix(shape=list(shape), data=np.asarray(data, dtype="<f8").tobytes())


MALFORMED = {
    # the config: BoostingParams' own checks, and the bounds'
    "nan-epsilon": (("config.epsilon", math.nan), "epsilon"),
    "zero-epsilon": (("config.epsilon", 0.0), "epsilon"),
    "unknown-base": (("config.base", 17), "base"),
    "unknown-mechanism": (("config.mechanism", 0), "mechanism"),
    "unknown-labels": (("config.labels", -1), "labels"),
    "nan-fraction": (("config.eval_fraction", math.nan), "eval_fraction"),
    "inf-weight-bound": (("config.weight_bound", math.inf), "weight_bound"),
    "no-rounds": (("config.n_rounds", 0), "n_rounds"),
    "one-class": (("config.n_classes", 1), "n_classes"),
    "no-run-id": (("config.run_id", ""), "run_id"),
    "unknown-encoding": (("config.stump_encoding", 9), "stump_encoding"),
    "unknown-oracle": (("config.oracle", 0), "oracle"),
    "no-sampled": (("config.n_sampled", 0), "n_sampled"),
    "bounds-shape": (("config.bounds", _matrix((3, 2), np.zeros(6))), "bounds must have shape (2, d)"),
    "bounds-bytes": (("config.bounds", pb.Matrix(shape=[2, 2], data=b"\0" * 31)), "needs 32 bytes"),
    "bounds-empty": (("config.bounds", pb.Matrix()), "bounds"),
    # the history: α, E, W finite (W > 0), the round not before the kept ones
    "nan-alpha": (("history.kept.0.alpha", math.nan), "alpha"),
    "inf-error": (("history.kept.1.err_total", math.inf), "err_total"),
    "zero-weight": (("history.kept.2.weight_total", 0.0), "weight_total"),
    "round-before-kept": (("history.round", 2), "round"),
    # the learners: a known kind, shapes and finite values
    "stump-3-leaves": (("history.kept.0.learner.stump.leaves", [0, 1, 0]), "2 leaves"),
    "stump-nan-threshold": (("history.kept.0.learner.stump.threshold", math.nan), "finite threshold"),
    "centroids-nan": (
        ("history.kept.1.learner.nearest_centroid.centroids", _matrix((2, 2), [0, np.nan, 0, 0])),
        "finite",
    ),
    "centroids-1d": (("history.kept.1.learner.nearest_centroid.centroids", _matrix((4,), np.zeros(4))), "2-D"),
    "centroids-classes": (("history.kept.1.learner.nearest_centroid.classes", [0, 1, 2]), "classes"),
    "coef-nan": (("history.kept.2.learner.linear.coef", _matrix((1, 2), [np.nan, 0])), "finite"),
    "intercept-length": (("history.kept.2.learner.linear.intercept", [0.5, 0.5]), "intercept"),
    "intercept-inf": (("history.kept.2.learner.linear.intercept", [math.inf]), "intercept"),
    "linear-bounds": (("history.kept.2.learner.linear.bounds", _matrix((2, 3), [0, 0, 0, 1, 1, 1])), "bounds"),
}


@pytest.mark.parametrize("case", MALFORMED, ids=str)
def test_a_malformed_boosting_share_is_refused_at_decoding(case):
    change, words = MALFORMED[case]
    assert words in _refusal(_set(change))


def test_a_learner_of_no_known_kind_is_refused():
    m = _share()
    m.boost_share.history.kept[0].learner.Clear()
    assert "no known kind" in _refusal(m)
    # a kind from some other schema version: an unknown field number inside BoostLearner
    unknown = pb.BoostLearner.FromString(b"\x4a\x02\x08\x01")  # field 9, length 2: {1: 1}
    assert unknown.WhichOneof("kind") is None
    m = _evaluate()
    m.boost_evaluate.learner.CopyFrom(unknown)
    assert "no known kind" in _refusal(m)
    m = _evaluate()
    m.boost_evaluate.ClearField("learner")
    assert "no known kind" in _refusal(m)


@pytest.mark.parametrize(
    "extra",
    [{"bounds": Bounds(np.zeros(2), np.ones(2))}, {"priors": [0.3, 0.7]}, {"variance": 0.25}],
    ids=["bounds", "priors", "variance"],
)
def test_a_nearest_centroid_the_wire_cannot_carry_whole_is_refused_not_cut(extra):
    """The wire's nearest centroid is centroids and classes: a model with more would reach the owners as another rule."""
    model = NearestCentroidModel(CENTROIDS.centroids, **extra)
    with pytest.raises(ConfigError, match="without bounds, priors or variance"):
        serde_boosting.learner_to_proto(model)
    assert serde_boosting.learner_from_proto(serde_boosting.learner_to_proto(CENTROIDS)).predict(
        np.array([[0.2, 0.5], [0.8, 0.5]])
    ).tolist() == [0, 1]


def test_the_domain_objects_refuse_what_the_wire_refuses():
    with pytest.raises(ConfigError, match="alpha"):
        KeptRound(STUMP, math.nan, 1.0, 1.0)
    with pytest.raises(ConfigError, match="unknown learner kind"):
        KeptRound({"kind": "stump"}, 1.0, 1.0, 1.0)
    with pytest.raises(ConfigError, match="round"):
        BoostHistory(HISTORY.kept, 1)
    with pytest.raises(ConfigError, match="round"):
        at_round(empty_history(), -1)
    with pytest.raises(ConfigError, match="run_id"):
        BoostConfig("", CONFIG.params)


def test_the_node_answers_the_rest_of_a_batch_after_malformed_boosting_tasks(tmp_path):
    """Decoded one by one (as ``owner/node.py`` does), the bad tasks become refusals and the good
    share of the same batch is computed and debited."""
    rng = np.random.Generator(np.random.PCG64(5))
    X = rng.uniform(0, 1, (6, 2))
    owner = LocalOwner(
        "owner-0.o00000", X, (X[:, 0] > 0.5).astype(np.int64), np.random.Generator(np.random.PCG64(6)), 2, BOUNDS
    )
    config = BoostConfig("run-ok", BoostingParams(epsilon=1.0, n_classes=2, bounds=BOUNDS, n_rounds=3, n_bins=4))
    good = serde.task_to_proto(
        Task("good", owner.owner_id, "run-ok", BoostShareTask(config, at_round(empty_history(), 0)))
    )
    batch = [_set(MALFORMED["nan-alpha"][0]), _set(MALFORMED["stump-3-leaves"][0]), good]
    decoded = [serde.task_or_refusal(m) for m in batch]
    assert [t is None for t, _ in decoded] == [True, True, False]
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=2.0)
    (result,) = handle_batch([t for t, _ in decoded if t is not None], {owner.owner_id: owner}, ledger)
    assert result.task_id == "good" and isinstance(result.payload, BoostShareReply)
    assert [h["purpose"] for h in ledger.history(owner.owner_id)] == ["boost-share:run-ok"]
