"""The owner core with a real SQLite ledger: the budget is checked before anything is computed,
every part of a release is debited before it is computed and returned, an overspend is refused
with nothing released, and one bad task is refused alone with a refusal that carries no data
(issue 9, items 2, 3, 6, 7)."""

import math

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.identity import owner_id
from privfed.common.ledger import Ledger
from privfed.common.tasks import (
    REFUSAL_TEXTS,
    BoostShareTask,
    LrShareReply,
    LrShareTask,
    NccShareReply,
    NccShareTask,
    PcaShareReply,
    PcaShareTask,
    Refusal,
    SvmShareReply,
    SvmShareTask,
    Task,
)
from privfed.owner.compute import is_sendable
from privfed.owner.core import handle_batch
from privfed.owner.data import build_owners, federation_split
from privfed.proto import serde

NODE = "owner-0"


@pytest.fixture(scope="module")
def digits():
    return federation_split("digits", seed=0, test_fraction=0.2)


def owners(train, n=2):
    return {
        o.owner_id: o
        for o in build_owners(train, node_id=NODE, n_owners=n, shards=range(n), seed=0, rng_kind="seeded", rng_seed=0)
    }


def ncc(train, eps=1.0, labels="rr", mechanism="pm", n_classes=10):
    return NccShareTask(
        mechanism=mechanism,
        epsilon=eps,
        labels=labels,
        label_epsilon=0.25 * eps,
        n_classes=n_classes,
        bounds=train.bounds,
    )


def pca(train, eps=0.5, count_eps=0.05, delta=1e-5):
    return PcaShareTask(epsilon=eps, delta=delta, k=5, bounds=train.bounds, count_epsilon=count_eps, scaling="ball")


def refusal(result, code):
    assert isinstance(result.payload, Refusal), result.payload
    assert result.payload.code == code, result.payload
    assert result.payload.message.startswith(REFUSAL_TEXTS[code]), result.payload.message
    return result.payload.message


def test_owner_ids_are_bound_to_the_node(digits):
    train, _ = digits
    assert (
        sorted(owners(train, 3))
        == [owner_id(NODE, i) for i in range(3)]
        == ["owner-0.o00000", "owner-0.o00001", "owner-0.o00002"]
    )


def test_feddpdr_debits_pca_count_then_epsilon2_per_class_and_refuses_past_budget(tmp_path, digits):
    train, _ = digits
    hosted = owners(train)
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=1.0, delta_budget=1e-5)
    replies = handle_batch(
        [Task(f"p{i}", oid, "pca", pca(train, 0.45, 0.05)) for i, oid in enumerate(hosted)], hosted, ledger
    )
    assert all(isinstance(r.payload, PcaShareReply) for r in replies)
    oid = next(iter(hosted))
    assert [h["purpose"] for h in ledger.history(oid)] == ["dp-pca:pca", "dp-count:pca"]
    assert math.isclose(ledger.spent(oid).epsilon, 0.5) and ledger.spent(oid).delta == 1e-5
    U = replies[0].payload.subspace
    svm = [
        Task(f"s{i}", o, "svm", SvmShareTask(0.5, 0.01, 10, train.bounds, U, 0.0, "ovr-huber", "ball"))
        for i, o in enumerate(hosted)
    ]
    replies = handle_batch(svm, hosted, ledger)
    assert all(isinstance(r.payload, SvmShareReply) for r in replies)
    history = [h for h in ledger.history(oid) if h["purpose"].startswith("svm-ovr")]
    assert len(history) == 10 and math.isclose(sum(h["epsilon"] for h in history), 0.5)
    assert math.isclose(ledger.spent(oid).epsilon, 1.0)
    again = handle_batch([Task("p9", oid, "pca2", pca(train, 0.1, 0.01, 1e-6))], hosted, ledger)
    message = refusal(again[0], "budget_exceeded")
    assert "spent" not in message and "1.0" not in message  # the ledger's state is not told
    assert len(ledger.history(oid)) == 12  # nothing debited for the refusal


def test_pca_count_is_noised_and_exact_only_at_infinite_epsilon(tmp_path, digits):
    train, _ = digits
    hosted = owners(train, 1)
    oid = next(iter(hosted))
    n = hosted[oid].X.shape[0]
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=math.inf, delta_budget=1.0)
    noisy = [
        handle_batch([Task(f"p{i}", oid, f"r{i}", pca(train, 1.0, 0.05))], hosted, ledger)[0].payload.noisy_count
        for i in range(20)
    ]
    assert all(isinstance(c, int) for c in noisy) and len(set(noisy)) > 1 and any(c != n for c in noisy)
    exact = handle_batch([Task("pinf", oid, "rinf", pca(train, math.inf, math.inf))], hosted, ledger)[0]
    assert exact.payload.noisy_count == n


def test_delta_beyond_the_delta_budget_is_refused(tmp_path, digits):
    train, _ = digits
    hosted = owners(train, 1)
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=10.0, delta_budget=0.0)
    oid = next(iter(hosted))
    out = handle_batch([Task("p", oid, "pca", pca(train))], hosted, ledger)
    refusal(out[0], "budget_exceeded")
    assert ledger.history(oid) == []


def test_rr_labels_debit_features_and_labels_separately(tmp_path, digits):
    train, _ = digits
    hosted = owners(train, 1)
    oid = next(iter(hosted))
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=2.0)
    spec = NccShareTask(mechanism="pm", epsilon=1.6, labels="rr", label_epsilon=0.4, n_classes=10, bounds=train.bounds)
    out = handle_batch([Task("n", oid, "r1", spec)], hosted, ledger)
    assert isinstance(out[0].payload, NccShareReply)
    assert sorted(h["purpose"].split(":")[0] for h in ledger.history(oid)) == ["ncc-features", "ncc-labels"]
    assert math.isclose(ledger.spent(oid).epsilon, 2.0) and ledger.nonprivate_count(oid) == 0


def test_clear_labels_are_refused_by_policy_unless_the_owner_opted_in(tmp_path, digits):
    train, _ = digits
    hosted = owners(train, 1)
    oid = next(iter(hosted))
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=5.0)
    out = handle_batch([Task("n1", oid, "r1", ncc(train, labels="clear"))], hosted, ledger)
    refusal(out[0], "policy")
    assert ledger.history(oid) == []
    boost_ncc_clear = BoostShareTask(boost_config(base="ncc", labels="clear", n_classes=10, d=64), empty_history())
    out = handle_batch([Task("b1", oid, "boost-run", boost_ncc_clear)], hosted, ledger)
    refusal(out[0], "policy")
    assert ledger.history(oid) == []

    out = handle_batch([Task("n2", oid, "r2", ncc(train, labels="clear"))], hosted, ledger, allow_clear_labels=True)
    assert isinstance(out[0].payload, NccShareReply)
    np.testing.assert_array_equal(out[0].payload.labels, hosted[oid].y)  # clear: the true labels
    history = ledger.history(oid)
    assert [(h["purpose"], h["nonprivate"]) for h in history] == [("ncc-features:r2", False), ("clear-labels:r2", True)]
    assert ledger.spent(oid).epsilon == 1.0 and ledger.nonprivate_count(oid) == 1


def test_class_count_is_checked_against_public_configuration_not_the_labels(tmp_path, digits):
    """Item 3: the refusal of a wrong class count is the same for every owner (it does not depend
    on the labels held) and names no label."""
    train, _ = digits
    hosted = owners(train, 4)
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=5.0)
    tasks = [Task(f"n{i}-{k}", oid, "r1", ncc(train, n_classes=k)) for i, oid in enumerate(hosted) for k in (1, 2)]
    out = handle_batch(tasks, hosted, ledger)
    messages = {r.payload.message for r in out if r.payload.code == "invalid_task"}
    assert len(out) == 8 and all(r.payload.code == "invalid_task" for r in out)
    assert messages == {
        f"{REFUSAL_TEXTS['invalid_task']} (task says {k} classes; this owner's data set declares 10)" for k in (1, 2)
    }
    assert all(ledger.history(o) == [] for o in hosted)


def test_wrong_feature_count_is_refused_with_public_detail(tmp_path, digits):
    train, _ = digits
    hosted = owners(train, 1)
    oid = next(iter(hosted))
    spec = LrShareTask(
        mechanism="pm",
        epsilon=1.0,
        param_bound=4.0,
        c=1.0,
        n_classes=10,
        bounds=train.bounds.__class__(train.bounds.lo[:5], train.bounds.hi[:5]),
    )
    out = handle_batch([Task("l", oid, "r1", spec)], hosted, Ledger(tmp_path / "l.sqlite", epsilon_budget=1.0))
    assert "task bounds describe 5 features; this owner's schema has 64" in refusal(out[0], "invalid_task")


def test_one_bad_task_is_refused_alone_and_nothing_is_debited_for_it(tmp_path, digits):
    """Item 7: an ε whose mechanism would give non-finite reports, a duplicate task id across two
    owners, and a foreign owner, in one batch with valid tasks: only the bad ones are refused,
    before any debit."""
    train, _ = digits
    hosted = owners(train, 3)
    a, b, c = hosted
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=5.0)
    tasks = [
        Task("ok1", a, "r1", ncc(train)),
        Task("tiny", b, "r1", ncc(train, eps=1e-300)),
        Task(
            "tiny-lap",
            b,
            "r1",
            LrShareTask(mechanism="laplace", epsilon=1e-300, param_bound=4.0, c=1.0, n_classes=10, bounds=train.bounds),
        ),
        Task("dup", c, "r1", ncc(train)),
        Task(
            "dup",
            a,
            "r1",
            LrShareTask(mechanism="pm", epsilon=1.0, param_bound=4.0, c=1.0, n_classes=10, bounds=train.bounds),
        ),
        Task("x", "owner-9.o00000", "r1", ncc(train)),
    ]
    out = handle_batch(tasks, hosted, ledger)
    assert [(r.task_id, r.owner_id) for r in out] == [(t.task_id, t.owner_id) for t in tasks]
    assert isinstance(out[0].payload, NccShareReply) and isinstance(out[3].payload, NccShareReply)
    assert "epsilon=1e-300" in refusal(out[1], "invalid_task")
    refusal(out[2], "invalid_task")
    refusal(out[4], "duplicate_task")
    refusal(out[5], "invalid_task")
    assert ledger.history(b) == []
    assert [h["purpose"] for h in ledger.history(a)] == ["ncc-features:r1", "ncc-labels:r1"]


def test_a_replayed_task_is_refused_as_already_released(tmp_path, digits):
    train, _ = digits
    hosted = owners(train, 1)
    oid = next(iter(hosted))
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=5.0)
    first = handle_batch([Task("t", oid, "r1", ncc(train))], hosted, ledger)
    again = handle_batch([Task("t", oid, "r1", ncc(train))], hosted, ledger)
    assert isinstance(first[0].payload, NccShareReply)
    refusal(again[0], "already_released")
    assert len(ledger.history(oid)) == 2 and math.isclose(ledger.spent(oid).epsilon, 1.25)


def test_a_task_for_a_foreign_owner_is_refused(tmp_path, digits):
    train, _ = digits
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=2.0)
    out = handle_batch([Task("n", "nobody", "r1", pca(train))], owners(train, 1), ledger)
    refusal(out[0], "invalid_task")


def test_lr_share_is_answered(tmp_path, digits):
    train, _ = digits
    hosted = owners(train, 1)
    oid = next(iter(hosted))
    spec = LrShareTask(mechanism="laplace", epsilon=1.0, param_bound=4.0, c=1.0, n_classes=10, bounds=train.bounds)
    out = handle_batch([Task("l", oid, "r1", spec)], hosted, Ledger(tmp_path / "l.sqlite", epsilon_budget=1.0))
    assert isinstance(out[0].payload, LrShareReply) and out[0].payload.reports.shape == (1, 65 * 10)


@pytest.mark.parametrize(
    "share,ok",
    [
        (NccShareReply(reports=np.zeros((2, 3)), labels=np.array([0, 1])), True),
        (NccShareReply(reports=np.array([[np.nan, 0.0]]), labels=np.array([0])), False),
        (LrShareReply(reports=np.array([[2.0**43]])), False),
        (PcaShareReply(subspace=np.array([[np.inf]]), noisy_count=3), False),
        (SvmShareReply(coef=np.ones((2, 3))), True),
        (NccShareReply(reports=np.zeros((1, 2)), labels=np.array([-1])), False),  # the wire's labels are unsigned
        (NccShareReply(reports=np.zeros((1, 2)), labels=np.array([2**63])), False),
    ],
)
def test_only_finite_shares_within_the_wire_range_are_sendable(share, ok):
    """Sendable: finite, and what the wire encodes (audit 19), whatever field is out of its range; a release
    the wire refuses would raise when the answer is encoded, after the owner core, instead of falling back."""
    assert is_sendable(share) is ok
    if ok:
        serde.payload_to_proto(share)
    elif all(np.all(np.isfinite(a)) for a in vars(share).values() if isinstance(a, np.ndarray)):
        with pytest.raises((ConfigError, ValueError, OverflowError)):
            serde.payload_to_proto(share)


def boost_config(*, n_classes: int, d: int, lo: float = 0.0, **kw):
    from privfed.common.boosting.params import BoostingParams
    from privfed.common.boosting.wire import config_to_dict
    from privfed.common.bounds import Bounds

    fb = BoostingParams(epsilon=1.0, n_classes=n_classes, bounds=Bounds.of(lo, 16.0, d), n_rounds=2, **kw)
    return config_to_dict(fb, "boost-run")


def empty_history():
    from privfed.common.boosting.wire import empty_history

    return empty_history()


@pytest.mark.parametrize(
    "config,detail",
    [
        ({"n_classes": 3, "d": 64}, "task says 3 classes; this owner's data set declares 10"),
        ({"n_classes": 10, "d": 5}, "task bounds describe 5 features; this owner's schema has 64"),
        ({"n_classes": 10, "d": 64, "lo": -1.0}, "task bounds differ from the public bounds of this owner's schema"),
    ],
)
def test_boosting_share_is_checked_against_public_configuration(tmp_path, digits, config, detail):
    train, _ = digits
    hosted = owners(train, 1)
    oid = next(iter(hosted))
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=5.0)
    task = Task("b", oid, "boost-run", BoostShareTask(boost_config(**config), empty_history()))
    out = handle_batch([task], hosted, ledger)
    assert detail in refusal(out[0], "invalid_task")
    assert ledger.history(oid) == []


def test_two_tasks_for_one_owner_in_a_batch_are_checked_together(tmp_path, digits):
    """The second task that would overspend is refused whole before it is computed; nothing of it
    is debited (it used to be checked against the same spent amount as the first, then half-debited)."""
    train, _ = digits
    hosted = owners(train, 1)
    oid = next(iter(hosted))
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=2.0)
    out = handle_batch(
        [Task("a", oid, "r1", ncc(train, eps=1.0)), Task("b", oid, "r2", ncc(train, eps=1.0))], hosted, ledger
    )
    assert isinstance(out[0].payload, NccShareReply)
    refusal(out[1], "budget_exceeded")
    assert [h["release_id"] for h in ledger.history(oid)] == ["a#0", "a#1"]
    assert math.isclose(ledger.spent(oid).epsilon, 1.25)


@pytest.mark.parametrize("encoding", ["cells", "table"])
def test_a_stump_share_in_each_encoding_debits_the_share_epsilon_once_and_decodes_at_the_coordinator(
    tmp_path, digits, encoding
):
    """Owner handler -> wire -> coordinator: what the owner debits is the share's epsilon, and the
    coordinator reads the reply (sampled coordinates included) into a stump of the run."""
    from privfed.common.boosting.coordinator import concat_releases
    from privfed.common.tasks import SampledStumpShareReply, StumpShareReply
    from privfed.proto import serde

    train, _ = digits
    hosted = owners(train, 3)
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=5.0)
    config = boost_config(n_classes=10, d=64, stump_encoding=encoding)
    from privfed.common.boosting.coordinator import CoordinatorSteps
    from privfed.common.boosting.owner import check_learner

    fb, plan = config.params, config.releases
    coordinator = CoordinatorSteps(plan)
    tasks = [Task(f"b{i}", oid, "boost-run", BoostShareTask(config, empty_history())) for i, oid in enumerate(hosted)]
    replies = []
    for result in handle_batch(tasks, hosted, ledger):
        back = serde.result_from_proto(serde.result_to_proto(result)).payload
        assert type(back) is (SampledStumpShareReply if encoding == "cells" else StumpShareReply)
        if encoding == "cells":  # the coordinates the owner sampled
            assert back.coordinates.shape == (1, plan.share_encoding.m)
        replies.append(back)
        history = ledger.history(result.owner_id)
        assert [(h["purpose"], h["epsilon"]) for h in history] == [("boost-share:boost-run", fb.share_epsilon)]
    shares = concat_releases([r.release(coordinator) for r in replies])
    stump = coordinator.select(shares)
    check_learner(plan, stump)
