"""``--task ncc --labels joint`` (issue 22): the ncc_share kind's joint (label, sign) release through the owner
core -- one debit of the whole ε before anything is computed, the refusals of the other schemes, the
data-independent fallback -- what it sends is the ε-LDP report of
:class:`~privfed.common.mechanisms.label_sign.LabelSignResponse` (empirical frequencies against the exact
probabilities, whose density ratio is bounded by e^ε), and the strategy's running sums give the encoding's
unbiased centroids."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.learners import resolve_rng
from privfed.common.learners.estimators import LdpNearestCentroid
from privfed.common.learners.ncc_joint import JointLabelEncoding, joint_encoding
from privfed.common.ledger import Ledger
from privfed.common.tasks import (
    JointNccShareReply,
    NccShareReply,
    NccShareTask,
    Refusal,
    Result,
    Task,
    check_reply,
)
from privfed.common.tasks.contract import ContractViolation, PublicLimits
from privfed.owner.core import OwnerCore
from privfed.owner.kinds.shares import NccShareKind
from privfed.owner.local import LocalOwner
from privfed.server.config import JobConfig
from privfed.server.strategies.ncc import NccStrategy

D, K = 3, 2
BOUNDS = Bounds.of(0.0, 1.0, D)


def _owner(i: int, X, y, seed: int = 0) -> LocalOwner:
    return LocalOwner(
        f"owner-0.o{i:05d}", np.asarray(X, float), np.asarray(y), np.random.default_rng([seed, i]), K, BOUNDS
    )


def _joint(eps: float = 1.5, **kw) -> NccShareTask:
    return NccShareTask(**(dict(mechanism="pm", epsilon=eps, labels="joint", label_epsilon=0.0, n_classes=K,
                                bounds=BOUNDS) | kw))  # fmt: skip


def _refused(result: Result, code: str) -> str:
    assert isinstance(result.payload, Refusal) and result.payload.code == code, result.payload
    return result.payload.message


def test_one_joint_release_is_debited_once_at_the_whole_epsilon_before_it_is_computed(monkeypatch):
    owner = _owner(0, [[0.2, 0.5, 0.9], [1.0, 0.0, 0.3]], [1, 0])
    ledger = Ledger(":memory:", epsilon_budget=2.0)
    core = OwnerCore([owner], ledger)
    seen: list[list] = []
    real = NccShareKind._share

    def spy(self, spec, X, y, bounds, rng):  # what the ledger holds when the rows are read
        seen.append([(h["purpose"], h["epsilon"]) for h in ledger.history(owner.owner_id)])
        return real(self, spec, X, y, bounds, rng)

    monkeypatch.setattr(NccShareKind, "_share", spy)
    (out,) = core.answer([Task("t1", owner.owner_id, "r1", _joint(1.5, label_epsilon=7.0))]).results
    assert isinstance(out.payload, JointNccShareReply)  # no label beside the reports
    # the release and its fallback (drawn either way: owner.compute, "Timing"), both after the debit;
    # label_epsilon is no part of a joint release: not spent
    assert seen == [[("ncc-joint:r1", 1.5)]] * 2
    assert out.payload.features.shape == out.payload.reports.shape == (2,)
    assert ledger.spent(owner.owner_id).epsilon == 1.5 and ledger.nonprivate_count(owner.owner_id) == 0

    # past the budget, replayed, or another owner's: refused, nothing more debited or computed
    tasks = [Task("t2", owner.owner_id, "r2", _joint(1.0)), Task("t1", owner.owner_id, "r1", _joint(1.5))]
    over, replay = core.answer(tasks).results
    _refused(over, "budget_exceeded")
    _refused(replay, "already_released")
    assert len(seen) == 2 and [h["purpose"] for h in ledger.history(owner.owner_id)] == ["ncc-joint:r1"]


@pytest.mark.parametrize(
    "spec, code, detail",
    [
        (_joint(1e-300), "invalid_task", "epsilon"),
        (_joint(math.nan), "invalid_task", "epsilon"),
        (_joint(n_classes=3), "invalid_task", "task says 3 classes"),
        (_joint(bounds=Bounds.of(0.0, 2.0, D)), "invalid_task", "task bounds differ"),
    ],
)
def test_a_joint_task_is_refused_on_its_public_fields_alike_whatever_the_rows(spec, code, detail):
    """The refusals of the other schemes, the same text for owners of different rows, nothing debited."""
    owners = [_owner(0, [[0.0, 0.0, 0.0]], [0]), _owner(1, np.full((5, D), 9.0), [1] * 5)]
    ledger = Ledger(":memory:", epsilon_budget=5.0)
    out = OwnerCore(owners, ledger).answer([Task(f"t{i}", o.owner_id, "r", spec) for i, o in enumerate(owners)])
    texts = {_refused(r, code) for r in out.results}
    assert len(texts) == 1 and detail in texts.pop()
    assert all(ledger.history(o.owner_id) == [] for o in owners)


def test_the_fallback_is_the_same_joint_release_of_data_independent_rows(monkeypatch):
    """A compute that fails after the debit releases the fallback: the public count of dummies (weight 0, the
    count the owner's compute would send) through the same joint report, with the debit kept."""

    def broken(self, task, spec, owner):
        raise RuntimeError("boom")

    monkeypatch.setattr(NccShareKind, "compute", broken)
    monkeypatch.setattr(NccShareKind, "compute_many", lambda self, tasks, owners: None)
    owner = _owner(0, np.full((4, D), 0.7), [1, 1, 0, 1])
    ledger = Ledger(":memory:", epsilon_budget=2.0)
    (out,) = OwnerCore([owner], ledger).answer([Task("t", owner.owner_id, "r", _joint(1.0))]).results
    assert isinstance(out.payload, JointNccShareReply) and out.payload.reports.shape == (4,)
    check_reply(_joint(1.0), out.payload, PublicLimits(max_rows=4))
    assert [h["purpose"] for h in ledger.history(owner.owner_id)] == ["ncc-joint:r"]


def test_the_released_reports_follow_the_epsilon_ldp_probabilities_of_the_joint_response():
    """Two owners, each of 2^15 copies of one extreme row: the frequencies of the (feature, report) pairs the
    kind sends match ``report_probabilities`` (4.5 standard errors), whose ratio between the rows is at most
    e^ε with equality somewhere -- so the release is exactly the ε-LDP joint response at the task's ε."""
    eps, n = 1.0, 2**15  # a power of two: no dummies (common/work_rows.py), only its rows
    rows = {0: (np.zeros(D), 0), 1: (np.ones(D), 1)}
    owners = [_owner(i, np.tile(x, (n, 1)), [y] * n, seed=5) for i, (x, y) in rows.items()]
    core = OwnerCore(owners, Ledger(":memory:", epsilon_budget=eps))
    results = core.answer([Task(f"t{i}", o.owner_id, "r", _joint(eps)) for i, o in enumerate(owners)]).results
    encoding = JointLabelEncoding(epsilon=eps, n_classes=K, d=D)
    exact = {}
    for (i, (x, y)), r in zip(rows.items(), results, strict=True):
        freq = np.zeros((D, 2 * K + 1))
        np.add.at(freq, (r.payload.features, r.payload.reports), 1.0 / n)
        exact[i] = encoding.report_probabilities(x, y, bounds=BOUNDS)
        se = np.sqrt(exact[i] * (1 - exact[i]) / n)
        assert np.all(np.abs(freq - exact[i]) < 4.5 * se), (freq, exact[i])
    ratio = np.maximum(exact[0] / exact[1], exact[1] / exact[0])
    assert ratio.max() <= math.exp(eps) * (1 + 1e-12) and ratio.max() > math.exp(eps) * (1 - 1e-9)


def test_the_strategy_sums_batches_into_the_encodings_centroids_and_checks_the_contract():
    rng = np.random.default_rng(3)
    X, y = rng.uniform(0, 1, (600, D)), rng.integers(0, K, 600)
    strategy = NccStrategy(mechanism="pm", epsilon=2.0, n_classes=K, bounds=BOUNDS, labels="joint", max_owner_rows=200)
    spec = strategy.spec()
    assert (spec.epsilon, spec.labels, spec.ledger_entries()) == (2.0, "joint", [(2.0, 0.0, "ncc-joint")])
    encoding = spec.joint_encoding()
    assert encoding is not None
    parts = [encoding.share(X[i : i + 200], y[i : i + 200], bounds=BOUNDS, rng=rng) for i in (0, 200, 400)]
    replies = [JointNccShareReply(p.coordinates[:, 0], p.reports[:, 0]) for p in parts]
    running = strategy.running()
    running.add([Result("a", "o0", replies[0]), Result("b", "o1", Refusal.of("policy"))])
    running.add([Result("c", "o2", r) for r in replies[1:]])
    np.testing.assert_allclose(running.model().centroids, encoding.centroids(parts, bounds=BOUNDS), atol=1e-9)

    limits = PublicLimits(max_rows=200)
    check_reply(spec, replies[0], limits)
    bad = [
        NccShareReply(np.zeros((1, D)), np.array([0])),  # rows and labels beside a joint task
        JointNccShareReply(np.array([D]), np.array([0])),  # a feature the owner cannot have sampled
        JointNccShareReply(np.array([0]), np.array([2 * K + 1])),  # a report outside 0..2K
        JointNccShareReply(np.zeros(201, np.int64), np.zeros(201, np.int64)),  # more rows than any owner holds
    ]
    for reply in bad:
        with pytest.raises(ContractViolation):
            check_reply(spec, reply, limits)


def test_joint_labels_at_infinite_epsilon_send_the_rows_and_the_job_accepts_joint():
    assert joint_encoding(math.inf, K, D) is None
    owner = _owner(0, [[0.25, 0.5, 1.0]], [1])
    (out,) = (
        OwnerCore([owner], Ledger(":memory:", epsilon_budget=math.inf))
        .answer([Task("t", owner.owner_id, "r", _joint(math.inf))])
        .results
    )
    assert isinstance(out.payload, NccShareReply) and out.payload.labels.tolist() == [1]
    np.testing.assert_allclose(out.payload.reports, [[-0.5, 0.0, 1.0]], atol=1e-6)
    assert JobConfig.from_flat(task="ncc", labels="joint", epsilon=1.0).params.labels == "joint"


def test_the_estimators_joint_centroids_are_the_federations_on_the_same_seed():
    """``LdpNearestCentroid(labels="auto")`` below ε = 5.5 fits what one owner holding the rows releases through
    the owner core (same seed) and the strategy aggregates: the same joint reports, the same centroids."""
    rng = np.random.default_rng(4)
    X, y = rng.uniform(0, 1, (512, D)), rng.integers(0, K, 512)  # a power of two: the owner sends no dummy
    estimator_rng = resolve_rng(11)
    estimator_rng.permutation(512)  # the owner's draws before its reports: which rows (all 512) it releases,
    estimator_rng.integers(0, K, 512)  # and a dummy's label for each of its 512 reports (none is a dummy here)
    ours = LdpNearestCentroid(epsilon=2.0, bounds=BOUNDS, random_state=estimator_rng).fit(X, y)
    strategy = NccStrategy(mechanism="pm", epsilon=2.0, n_classes=K, bounds=BOUNDS)  # auto: joint
    owner = LocalOwner("owner-0.o00000", X, y, resolve_rng(11), K, BOUNDS)
    (out,) = (
        OwnerCore([owner], Ledger(":memory:", epsilon_budget=2.0))
        .answer([Task("t", owner.owner_id, "r", strategy.spec())])
        .results
    )
    assert isinstance(out.payload, JointNccShareReply) and ours.labels_ == strategy.labels == "joint"
    running = strategy.running()
    running.add([out])
    np.testing.assert_allclose(ours.centroids_, running.model().centroids, atol=1e-12)
    other = LdpNearestCentroid(epsilon=2.0, bounds=BOUNDS, random_state=12).fit(X, y)
    assert not np.allclose(other.centroids_, ours.centroids_)  # the seed drives the reports
