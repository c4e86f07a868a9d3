"""The owner core's guarantees beyond the budget (issue 20 items 1, 2, 4): every task kind is in the
one registry and has a data-independent fallback of its reply's shape; once rows have been read
nothing is refused -- a compute that raises, or a release that is not finite, is replaced by that
fallback, debited; SAMME weights saturate at public bounds; a task's bounds and sensitivity
parameters must be the owner's public ones. Real owners, a real ledger, the real core."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.boosting.owner import WEIGHT_MAX, WEIGHT_MIN
from privfed.common.boosting.owner import update_weights as owner_update_weights
from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import BoostHistory, KeptRound, config_to_dict
from privfed.common.bounds import Bounds
from privfed.common.learners.samme import max_alpha, samme_alpha
from privfed.common.learners.stump import Stump, thresholds
from privfed.common.ledger import Ledger
from privfed.common.tasks import (
    BoostEvaluateTask,
    BoostShareReply,
    BoostShareTask,
    LrGradientTask,
    LrShareReply,
    LrShareTask,
    NbReportTask,
    NccShareTask,
    PcaShareTask,
    Refusal,
    RingSpec,
    SvmShareTask,
    Task,
    TaskSpec,
    kind_of,
)
from privfed.owner.compute import is_sendable
from privfed.owner.core import OwnerCore
from privfed.owner.kinds import OWNER_KINDS
from privfed.owner.kinds.base import SENSITIVITY_LIMITS, TaskKind
from privfed.owner.local import LocalOwner

D, K = 3, 2
BOUNDS = Bounds.of(0.0, 1.0, D)


def _owners(n: int = 2, rows: int = 5) -> dict[str, LocalOwner]:
    rng = np.random.Generator(np.random.PCG64(3))
    return {
        f"owner-0.o{i:05d}": LocalOwner(
            f"owner-0.o{i:05d}",
            rng.uniform(0, 1, (rows, D)),
            rng.integers(0, K, rows),
            np.random.Generator(np.random.PCG64(i)),
            K,
            BOUNDS,
        )
        for i in range(n)
    }


def _config(**kw):
    kw = {"epsilon": 1.0, "n_classes": K, "bounds": BOUNDS, "n_rounds": 4, "n_bins": 4} | kw
    return config_to_dict(BoostingParams(**kw), kw.pop("run", "run-1"))


def _stump(leaves=(0, 1)) -> Stump:
    return Stump(0, 2, float(thresholds(BOUNDS, 4)[0, 1]), leaves, 0.25)


def _specs() -> dict[type, TaskSpec]:
    """A valid task of every release kind."""
    config = _config()
    ring = RingSpec("s", ("owner-0.o00000", "owner-0.o00001"), 24, 2, 8.0, (), {})
    return {
        NccShareTask: NccShareTask("pm", 1.0, "rr", 0.5, K, BOUNDS),
        LrShareTask: LrShareTask("pm", 1.0, 1.0, 1.0, K, BOUNDS),
        PcaShareTask: PcaShareTask(1.0, 1e-5, 2, BOUNDS, 0.5, "ball"),
        SvmShareTask: SvmShareTask(1.0, 0.1, K, BOUNDS, np.eye(D)[:, :2], 0.0, "ovr-huber", "ball"),
        BoostShareTask: BoostShareTask(config, BoostHistory()),
        BoostEvaluateTask: BoostEvaluateTask(config, BoostHistory(), _stump(), ring),
        LrGradientTask: LrGradientTask("pm", 1.0, np.full((1 if K == 2 else K, D + 1), 0.5), 4.0, K, BOUNDS),
        NbReportTask: NbReportTask(1.0, 3, K, BOUNDS),
    }


def test_every_release_kind_has_an_example_here():
    releases = {name for name, kind in OWNER_KINDS.items() if isinstance(kind, TaskKind)}
    assert {kind_of(spec).name for spec in _specs().values()} == releases


def _svm(model: str) -> SvmShareTask:
    return SvmShareTask(1.0, 0.1, K, BOUNDS, np.eye(D)[:, :2], 0.0 if model == "ovr-huber" else 1e-5, model, "ball")


@pytest.mark.parametrize(
    "spec",
    [*_specs().values(), *(_svm(m) for m in ("centroid", "mc-huber", "softmax"))],
    ids=lambda s: type(s).__name__ + (f"-{s.model}" if isinstance(s, SvmShareTask) else ""),
)
def test_every_release_kind_has_a_sendable_data_independent_fallback_shaped_like_its_release(spec):
    kind = OWNER_KINDS[kind_of(spec).name]
    assert isinstance(kind, TaskKind)
    owner = next(iter(_owners().values()))
    task = Task("t", owner.owner_id, "r", spec)
    release = kind.compute(task, spec, owner)
    draws = [kind.fallback(spec, owner.public, owner.n_rows, np.random.Generator(np.random.PCG64(s))) for s in (1, 2)]
    for fallback in draws:
        assert type(fallback) is type(release) and is_sendable(fallback)
        for name in ("reports", "labels", "subspace", "coef"):
            if hasattr(release, name):
                assert np.shape(getattr(fallback, name)) == np.shape(getattr(release, name)), name
        if isinstance(release, np.ndarray):
            assert fallback.shape == release.shape
    # noise around a public value, not a constant: two draws differ
    assert not all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(_arrays(draws[0]), _arrays(draws[1])))


def _arrays(release) -> list[np.ndarray]:
    if isinstance(release, np.ndarray):
        return [release]
    return [np.asarray(v) for v in vars(release).values() if isinstance(v, np.ndarray)]


@pytest.mark.parametrize("failure", ["raises", "not finite"])
def test_a_compute_that_fails_after_the_debit_releases_the_fallback_never_a_refusal(monkeypatch, failure):
    kind = OWNER_KINDS["lr_share"]

    def broken(self, task, spec, owner):
        if failure == "raises":
            raise FloatingPointError("the solver diverged on these rows")
        return LrShareReply(reports=np.full((1, 4), np.nan))

    monkeypatch.setattr(type(kind), "compute", broken)
    owners = _owners()
    ledger = Ledger(":memory:", epsilon_budget=2.0)
    tasks = [Task(f"l{i}", o, "r", _specs()[LrShareTask]) for i, o in enumerate(owners)]
    results = OwnerCore(owners.values(), ledger).answer(tasks).results
    for r in results:
        assert isinstance(r.payload, LrShareReply) and is_sendable(r.payload), r.payload
        assert [h["purpose"] for h in ledger.history(r.owner_id)] == ["lr-model:r"]


def test_a_kind_without_a_working_fallback_is_refused_as_internal_with_its_debit_on_record(monkeypatch):
    """The last line: a bug after the debit is a refusal the log names, never a crash of the node."""
    kind = OWNER_KINDS["lr_share"]
    monkeypatch.setattr(type(kind), "compute_many", lambda *a: (_ for _ in ()).throw(ValueError("w")))
    monkeypatch.setattr(type(kind), "compute", lambda *a: (_ for _ in ()).throw(ValueError("x")))
    monkeypatch.setattr(type(kind), "fallback", lambda *a: (_ for _ in ()).throw(ValueError("y")))
    owners = _owners(1)
    ledger = Ledger(":memory:", epsilon_budget=2.0)
    (result,) = OwnerCore(owners.values(), ledger).answer([Task("l", *owners, "r", _specs()[LrShareTask])]).results
    assert isinstance(result.payload, Refusal) and result.payload.code == "internal"
    assert len(ledger.history(result.owner_id)) == 1


@pytest.mark.parametrize(
    "spec, detail",
    [
        (NccShareTask("pm", 1.0, "rr", 0.5, K, Bounds.of(0.0, 2.0, D)), "differ from the public bounds"),
        (NccShareTask("pm", 1.0, "rr", 0.5, K, Bounds.of(-1.0, 1.0, D)), "differ from the public bounds"),
        (LrShareTask("pm", 1.0, 1e30, 1.0, K, BOUNDS), "param_bound=1e+30 is outside the public range"),
        (BoostShareTask(_config(weight_bound=1e-30), BoostHistory()), "weight_bound=1e-30 is outside"),
        (BoostShareTask(_config(eval_row_bound=1e9), BoostHistory()), "eval_row_bound=1000000000.0 is outside"),
        (SvmShareTask(1e3, 1e-15, K, BOUNDS, None, 0.0, "ovr-huber", "ball"), "lam=1e-15 is outside"),
        (SvmShareTask(1.0, 0.01, K, BOUNDS, None, 0.0, "ovr-huber", "ball", 2**50), "svm_rows=1125899906842624 is out"),
    ],
    ids=["wider", "shifted", "param-bound", "weight-bound", "row-bound", "svm-lambda", "svm-rows"],
)
def test_sensitivity_comes_from_the_owners_public_configuration(spec, detail):
    owners = _owners()
    ledger = Ledger(":memory:", epsilon_budget=2.0)
    results = OwnerCore(owners.values(), ledger).answer([Task(f"t{i}", o, "r", spec) for i, o in enumerate(owners)])
    for r in results.results:
        assert r.payload.code == "invalid_task" and detail in r.payload.message, r.payload
        assert ledger.history(r.owner_id) == []
    assert set(SENSITIVITY_LIMITS) == {
        "param_bound",
        "weight_bound",
        "eval_row_bound",
        "max_owner_rows",
        "lam",
        "svm_rows",
        "C",
    }


def _history(alpha: float, n_kept: int, e: float = 0.0, w: float = 1.0, leaves=(1, 1)) -> BoostHistory:
    return BoostHistory(tuple(KeptRound(_stump(leaves), alpha, e, w) for _ in range(n_kept)), n_kept)


@pytest.mark.parametrize(
    "history",
    [_history(709.0, 2), _history(max_alpha(K) * (1 + 1e-9), 1), _history(-0.5, 1), _history(0.5, 1, e=2.0, w=1.0)],
    ids=["alpha-709", "just-over", "negative", "error-over-weight"],
)
def test_a_history_samme_cannot_publish_is_refused_before_any_row_is_read(history):
    owners = _owners()
    ledger = Ledger(":memory:", epsilon_budget=10.0)
    config = _config(n_rounds=history.round + 1)
    tasks = [Task(f"s{i}", o, "run-1", BoostShareTask(config, history)) for i, o in enumerate(owners)]
    for r in OwnerCore(owners.values(), ledger).answer(tasks).results:
        assert r.payload.code == "invalid_task", r.payload
        assert ledger.history(r.owner_id) == []


def test_the_largest_alpha_kept_many_times_saturates_the_weights_and_is_released():
    """max_alpha(K) kept 60 times on a stump that misses every row: the exact weights would be
    e^(60 * 23) = inf; they saturate at the public bound, and every owner's share leaves, debited."""
    owners = _owners(rows=3)
    ledger = Ledger(":memory:", epsilon_budget=10.0)
    config = _config(n_rounds=61)
    history = _history(max_alpha(K), 60, e=1e-300, w=1.0, leaves=(0, 0))
    tasks = [Task(f"s{i}", o, "run-1", BoostShareTask(config, history)) for i, o in enumerate(owners)]
    for r in OwnerCore(owners.values(), ledger).answer(tasks).results:
        assert isinstance(r.payload, BoostShareReply) and is_sendable(r.payload)
        assert len(ledger.history(r.owner_id)) == 1
    for o in owners.values():
        w, padding = np.split(o.boost_applied["run-1"].weights, [o.n_rows])  # the cell's: 0 on its padding
        assert np.all(np.isfinite(w)) and np.all((w >= WEIGHT_MIN) & (w <= WEIGHT_MAX)) and not np.any(padding)


@pytest.mark.parametrize("alpha", [0.0, 0.7, 30.0, 709.0, 1e300])
@pytest.mark.parametrize("e, w", [(0.0, 1.0), (0.3, 1.0), (1.0, 1.0), (5.0, 1.0), (-1.0, 1.0)])
def test_the_samme_update_is_finite_and_within_the_public_bounds_for_any_finite_history(alpha, e, w):
    X = np.array([[0.1, 0.5, 0.5], [0.9, 0.5, 0.5]])
    y = np.array([1, 1])  # the stump (0, 1) misses the first row
    start = np.array([WEIGHT_MAX, WEIGHT_MIN])
    new = owner_update_weights(_stump(), alpha, X, y, start, err_total=e, weight_total=w)
    assert np.all(np.isfinite(new)) and np.all((new >= WEIGHT_MIN) & (new <= WEIGHT_MAX))


def test_the_update_is_the_samme_update_inside_the_bounds():
    """Away from the bounds the log-domain normaliser changes nothing: w e^(alpha miss) / (1 + r (e^alpha - 1))."""
    rng = np.random.Generator(np.random.PCG64(0))
    X, y, w = rng.uniform(0, 1, (50, D)), rng.integers(0, K, 50), rng.uniform(0.5, 2.0, 50)
    alpha, e, total = samme_alpha(0.3, K), 15.0, 50.0
    miss = _stump().predict(X) != y
    expected = w * np.exp(alpha * miss) / (1 + (e / total) * math.expm1(alpha))
    new = owner_update_weights(_stump(), alpha, X, y, w, err_total=e, weight_total=total)
    np.testing.assert_allclose(new, expected, rtol=1e-13)


def test_a_node_answers_a_pull_in_batches_of_each_kinds_size():
    """Shares in runs of their kind's batch (one ledger transaction each), evaluations and secure-sum
    steps in runs of any length, every ring hop alone (its envelope is relayed before the next task)."""
    from privfed.common.tasks import RingMessageTask, SecAggKeysTask

    specs = _specs()
    owner = "owner-0.o00000"
    n = int(OWNER_KINDS["ncc_share"].batch)
    items = (
        [Task(f"s{i}", owner, "r", specs[NccShareTask]) for i in range(n + 4)]
        + [Task(f"e{i}", owner, "r", specs[BoostEvaluateTask]) for i in range(3)]
        + [Task(f"h{i}", owner, "ring", RingMessageTask(b"")) for i in range(2)]
        + [Task("k", owner, "k", SecAggKeysTask("s", 24, 2, 8.0))]
    )
    core = OwnerCore(_owners().values(), Ledger(":memory:", epsilon_budget=1.0))
    ends, start = [], 0
    while start < len(items):
        start = core.chunk_end(items, start)
        ends.append(start)
    assert ends == [n, n + 4, n + 7, n + 8, n + 9, n + 10]
