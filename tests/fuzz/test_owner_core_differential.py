"""Issue 20 item 10: refusals never depend on data, proved differentially on the owner core.

Two :class:`~privfed.owner.core.OwnerCore` s host the same logical owners with the same public
configuration (schema bounds, declared classes) but different rows: other values (some at or
beyond the bounds), other labels, other row counts. Hypothesis sends both the same sequence of
task batches of every kind of the registry (``common.tasks.KINDS``) -- NCC (rr and joint labels), LR, LR gradients at hostile θ, naive Bayes reports with hostile bins, DP-PCA, SVM, boosting shares with hostile histories (α over
the public bound, E > W, off-grid stumps), boosting evaluations in a ring, secure-sum steps and
relayed garbage -- with extreme and tiny ε, odd bounds and malformed sub-fields. After every batch:

* the two cores refused exactly the same tasks, with the same refusal (code and text);
* every release that left was debited: its ledger entries are committed under the task's id (or,
  for an evaluation, under its release id), or it is a boosting share sent again, equal to one
  released and debited before;
* no owner's ledger is over its budget, and the data-independent fallback of every accepted
  release can be drawn and is sendable (the core's totality rests on it).

In-process and seeded: the bounded run in CI takes a few seconds; ``PRIVFED_FUZZ_EXAMPLES`` (as
``make fuzz`` sets it) runs longer.
"""

from __future__ import annotations

import math
import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfed.common.bounds import Bounds
from privfed.common.errors import PrivfedError
from privfed.common.ledger import Ledger
from privfed.common.secagg.boxes import public_bytes
from privfed.common.secagg.messages import UnmaskRequest
from privfed.common.tasks import (
    KINDS,
    BoostEvaluateTask,
    BoostShareTask,
    JoinTask,
    LrGradientTask,
    LrShareTask,
    NbReportTask,
    NccShareTask,
    PcaShareTask,
    PeerKey,
    Refusal,
    RingMessageTask,
    RingSpec,
    SecAggKeysTask,
    SecAggUnmaskTask,
    SvmShareTask,
    Task,
    gradient_release_id,
    kind_of,
    nb_release_id,
)
from privfed.owner import core as owner_core
from privfed.owner.compute import is_sendable
from privfed.owner.core import OwnerCore
from privfed.owner.kinds import kind_of as owner_kind
from privfed.owner.kinds.base import TaskKind
from privfed.owner.local import LocalOwner

EXAMPLES = int(os.environ.get("PRIVFED_FUZZ_EXAMPLES", "30"))
D, K, BUDGET = 3, 3, 4.0
BOUNDS = Bounds.of(0.0, 1.0, D)
OWNERS = [f"owner-0.o{i:05d}" for i in range(3)]
EPSILONS = [1e-300, 1e-12, 1e-4, 0.05, 0.5, 1.5, 60.0, math.inf, 0.0, -1.0, math.nan]


def _rows(seed: int, sizes: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each owner's rows: uniform in the bounds, with one row at a corner and one beyond the bounds."""
    rng = np.random.Generator(np.random.PCG64(seed))
    out = []
    for n in sizes:
        X = rng.uniform(0.0, 1.0, (n, D))
        X[0] = rng.choice([0.0, 1.0], D)
        if n > 1:
            X[1] = rng.uniform(-3.0, 4.0, D)  # clipped to the public bounds by every mechanism
        out.append((X, rng.integers(0, K, n)))
    return out


def _core(seed: int, sizes: list[int]) -> OwnerCore:
    owners = [
        LocalOwner(o, X, y, np.random.Generator(np.random.PCG64([seed, i])), K, BOUNDS)
        for i, (o, (X, y)) in enumerate(zip(OWNERS, _rows(seed, sizes)))
    ]
    return OwnerCore(owners, Ledger(":memory:", epsilon_budget=BUDGET, delta_budget=1e-3))


#: Whether the task being drawn is hostile (then each field is hostile one time in three).
_hostile = [False]


def _pick(data, usual, *hostile):
    """``usual`` for a well-meant task; for a hostile one, one of the ``hostile`` values one time in three."""
    if not _hostile[0] or not hostile:
        return usual
    return data.draw(st.sampled_from([usual] * 2 * len(hostile) + list(hostile)))


def _bounds(data) -> Bounds:
    return _pick(data, BOUNDS, Bounds.of(0.0, 2.0, D), Bounds.of(-1.0, 1.0, D), Bounds.of(0.0, 1.0, 2))


def _eps(data) -> float:
    return _pick(data, data.draw(st.sampled_from([0.05, 0.5, 1.5])), *EPSILONS)


def _build(make):
    """A spec, or None when its own constructor refuses the values (serde refuses them the same way)."""
    try:
        return make()
    except (PrivfedError, ValueError, TypeError, OverflowError, ZeroDivisionError):
        return None


def _boost_config(data, run: str, base: str):
    from privfed.common.boosting.params import BoostingParams
    from privfed.common.boosting.wire import BoostConfig

    kw = dict(
        base=base,
        epsilon=_pick(data, data.draw(st.sampled_from([0.5, 2.0])), 1e-9, 50.0, math.inf),
        n_classes=_pick(data, K, 2),
        bounds=_bounds(data),
        n_rounds=_pick(data, 4, 2, 10_000),
        n_bins=data.draw(st.sampled_from([2, 4, 8])),
        weight_bound=_pick(data, 1.0, 1e-30, 1e30),
        eval_row_bound=_pick(data, 1.0, 1e-30, 1e30),
        labels=_pick(data, "joint", "rr"),
        eval_groups=data.draw(st.sampled_from(["disjoint", "all"])),
        eval_mechanism=data.draw(st.sampled_from([None, "laplace", "rr"])),
        budget_split=_pick(data, "epsilon", "owners"),
    )
    return _build(lambda: BoostConfig(run, BoostingParams(**kw)))


def _learner(data, config):
    from privfed.common.learners.stump import Stump, thresholds

    fb = config.params
    bins = fb.n_bins
    a = _pick(data, data.draw(st.integers(0, D - 1)), D)
    b = _pick(data, data.draw(st.integers(1, bins - 1)), bins)
    grid = thresholds(fb.bounds, bins)
    t = _pick(data, float(grid[min(a, fb.bounds.d - 1), min(b, bins - 1) - 1]), 0.123)
    leaves = (_pick(data, data.draw(st.integers(0, K - 1)), K), data.draw(st.integers(0, K - 1)))
    return _build(lambda: Stump(a, b, t, leaves, 0.3))


def _history(data, config, round_no: int):
    from privfed.common.boosting.wire import BoostHistory, KeptRound
    from privfed.common.learners.samme import max_alpha

    kept = []
    for _ in range(data.draw(st.integers(0, 3)) if config.params.base == "stump" else 0):
        learner = _learner(data, config)
        alpha = _pick(
            data, data.draw(st.sampled_from([0.0, 0.7, max_alpha(K)])), max_alpha(K) * 1.001, 709.0, 1e300, -1.0
        )
        e, w = _pick(
            data, data.draw(st.sampled_from([(0.0, 1.0), (3.0, 10.0)])), (5.0, 1.0), (-1.0, 2.0), (1e-300, 1e-300)
        )
        r = _build(lambda learner=learner, alpha=alpha, e=e, w=w: KeptRound(learner, alpha, e, w))
        if r is not None:
            kept.append(r)
    return _build(lambda: BoostHistory(tuple(kept), max(round_no, len(kept))))


def _ncc(data, core: OwnerCore, owner_id: str):
    return _build(
        lambda: NccShareTask(
            _pick(data, data.draw(st.sampled_from(["pm", "duchi", "laplace"])), "nope"),
            _eps(data),
            _pick(data, data.draw(st.sampled_from(["rr", "joint"])), "clear"),
            _eps(data),
            _pick(data, K, 2, 1),
            _bounds(data),
        )
    )


def _lr(data, core: OwnerCore, owner_id: str):
    return _build(
        lambda: LrShareTask(
            data.draw(st.sampled_from(["pm", "laplace"])),
            _eps(data),
            _pick(data, 1.0, 1e-30, 1e30, -1.0),
            _pick(data, 1.0, 1e-9),
            _pick(data, K, 2),
            _bounds(data),
        )
    )


def _lr_gradient(data, core: OwnerCore, owner_id: str):
    n_classes = _pick(data, K, 2, 1)
    rows = 1 if n_classes == 2 else max(n_classes, 1)
    theta = _pick(
        data,
        data.draw(st.sampled_from([np.zeros((rows, D + 1)), np.full((rows, D + 1), 0.5)])),
        np.full((rows, D + 1), 1.5),  # outside the box |theta_j| <= 1
        np.full((rows, D + 1), np.nan),
        np.zeros((rows + 1, D)),  # another schema's shape
    )
    return _build(
        lambda: LrGradientTask(
            _pick(data, data.draw(st.sampled_from(["pm", "hm", "duchi", "laplace"])), "nope"),
            _eps(data),
            theta,
            _pick(data, 1.0, 1e-30, 1e30, -1.0),
            n_classes,
            _bounds(data),
        )
    )


def _nb(data, core: OwnerCore, owner_id: str):
    return _build(
        lambda: NbReportTask(
            _eps(data),
            _pick(data, data.draw(st.sampled_from([2, 3, 8])), 1, 0, 65, 2**31),
            _pick(data, K, 2, 1),
            _bounds(data),
        )
    )


def _pca(data, core: OwnerCore, owner_id: str):
    return _build(
        lambda: PcaShareTask(
            _eps(data),
            _pick(data, 1e-5, 0.0, 0.5, 1.0),
            _pick(data, data.draw(st.integers(1, D)), 0, D + 1),
            _bounds(data),
            _eps(data),
            data.draw(st.sampled_from(["ball", "normalise"])),
        )
    )


def _svm(data, core: OwnerCore, owner_id: str):
    subspace = _pick(
        data, data.draw(st.sampled_from([None, np.eye(D)[:, :2]])), np.eye(D)[:, :2] * 2.0, np.full((D, 1), np.nan)
    )
    model = _pick(data, data.draw(st.sampled_from(["ovr-huber", "centroid", "mc-huber", "softmax"])), "nope")
    delta = _pick(data, 0.0 if model == "ovr-huber" else 1e-5, 0.0, 1e-5)
    return _build(
        lambda: SvmShareTask(
            _pick(data, data.draw(st.sampled_from([0.05, 1.0])), math.inf, 0.0),
            _pick(data, 0.1, 1e-15),
            _pick(data, K, 2),
            _bounds(data),
            subspace,
            delta=delta,
            model=model,
            scaling=data.draw(st.sampled_from(["ball", "normalise"])),
        )
    )


def _boost(data, base: str):
    """A run's config and a history of it (hostile ones too), or None where their constructors refuse."""
    config = _boost_config(data, data.draw(st.sampled_from(["run-a", "run-b"])), base)
    history = None if config is None else _history(data, config, data.draw(st.integers(0, 3)))
    return (None, None) if history is None else (config, history)


def _boost_share(data, core: OwnerCore, owner_id: str):
    config, history = _boost(data, _pick(data, "stump", "ncc", "lr"))
    return None if config is None else BoostShareTask(config, history)


def _boost_evaluate(data, core: OwnerCore, owner_id: str):
    config, history = _boost(data, _pick(data, "stump", "ncc"))
    learner = None if config is None else _learner(data, config)
    if learner is None:
        return None
    other = OWNERS[(OWNERS.index(owner_id) + 1) % len(OWNERS)] if owner_id in OWNERS else OWNERS[0]
    ring = _pick(data, data.draw(st.sampled_from([(owner_id, other), (other, owner_id)])), (other, other))
    peers = tuple(PeerKey(o, "owner-0", public_bytes(core.keys.own_key(o)), b"") for o in OWNERS)
    max_abs = _pick(data, 8.0, 1e6, -1.0)
    return _build(
        lambda: BoostEvaluateTask(config, history, learner, RingSpec("ring-1", ring, 24, 2, max_abs, peers, {}))
    )


def _ring_message(data, core: OwnerCore, owner_id: str):
    return RingMessageTask(data.draw(st.binary(max_size=80)))


def _secagg_keys(data, core: OwnerCore, owner_id: str):
    return SecAggKeysTask(
        data.draw(st.sampled_from(["s1", "s2"])), 24, 4, data.draw(st.sampled_from([8.0, math.inf, -1.0]))
    )


def _secagg_unmask(data, core: OwnerCore, owner_id: str):
    return SecAggUnmaskTask(data.draw(st.sampled_from(["s1", "s2"])), UnmaskRequest(0, (owner_id,), ()))


#: A task of each kind of the registry (``common.tasks.KINDS``), by kind name.
SPECS = {
    "ncc_share": _ncc,
    "lr_share": _lr,
    "pca_share": _pca,
    "svm_share": _svm,
    "boost_share": _boost_share,
    "boost_evaluate": _boost_evaluate,
    "ring_message": _ring_message,
    "secagg_keys": _secagg_keys,
    "secagg_unmask": _secagg_unmask,
    "lr_gradient": _lr_gradient,
    "nb": _nb,
    "join": lambda data, core, owner_id: JoinTask(),  # carries nothing: the announcement is the job
}


def test_every_kind_is_drawn():
    assert set(SPECS) == {k.name for k in KINDS}


def _spec(data, core: OwnerCore, owner_id: str):
    """A task of a kind of the registry (the boosting releases twice as often: their histories are the hostile part)."""
    name = data.draw(st.sampled_from([k.name for k in KINDS] + ["boost_share", "boost_evaluate"]))
    return SPECS[name](data, core, owner_id)


def _outcome(payload) -> object:
    """What must be the same for both cores: the refusal itself, or that the task was not refused."""
    return payload if isinstance(payload, Refusal) else "answered"


def _assert_debited(core: OwnerCore, task: Task, payload, released: dict) -> None:
    ledger, name = core.ledger, kind_of(task.spec).name
    if name == "boost_evaluate":  # debited under its release id: one per (run, round)
        assert ledger.has_release_id(task.owner_id, task.spec.release_id), task
        return
    if name == "lr_gradient":  # debited under the run's release id: one gradient per owner and run
        assert ledger.has_release_id(task.owner_id, gradient_release_id(task.round_id)), task
        return
    if name == "nb":  # debited under the run's release id: one report per owner and run
        assert ledger.has_release_id(task.owner_id, nb_release_id(task.round_id)), task
        return
    debited = any(h["release_id"].startswith(f"{task.task_id}#") for h in ledger.history(task.owner_id))
    if name == "boost_share" and not debited:  # a share sent again: one debited before
        assert any(p is payload for p in released.values()), f"share {task.task_id} left without a debit"
        return
    assert debited, f"release {task.task_id} ({type(payload).__name__}) left without a debit"
    released[task.task_id] = payload


def _assert_fallback_total(core: OwnerCore, task: Task) -> None:
    kind = owner_kind(task.spec)
    if isinstance(kind, TaskKind):
        owner = core.owners[task.owner_id]
        fallback = kind.fallback(task.spec, owner.public, owner.n_rows, np.random.Generator(np.random.PCG64(0)))
        assert is_sendable(fallback), (task, fallback)


def _differential(data, cores: tuple[OwnerCore, OwnerCore]) -> None:
    """Send both cores the same batches; check the module docstring's properties after each."""
    released: tuple[dict, dict] = ({}, {})
    ids = iter(range(10**6))
    for _ in range(data.draw(st.integers(1, 3))):
        batch = []
        for _ in range(data.draw(st.integers(1, 6))):
            _hostile[0] = data.draw(st.booleans())
            owner_id = _pick(data, data.draw(st.sampled_from(OWNERS)), "owner-9.o00000")
            spec = _spec(data, cores[0], owner_id)
            if spec is not None:
                releases = isinstance(owner_kind(spec), TaskKind)
                task_id = data.draw(st.sampled_from([f"t{next(ids)}", "dup"])) if releases else f"t{next(ids)}"
                # a boosting share names its run (another round id is refused): its run, mostly
                rounds = (
                    ["r1", spec.config.run_id, spec.config.run_id] if isinstance(spec, BoostShareTask) else ["r1", "r2"]
                )
                batch.append(Task(task_id, owner_id, data.draw(st.sampled_from(rounds)), spec))
        answers = [core.answer(batch).results for core in cores]
        assert [(r.task_id, r.owner_id, _outcome(r.payload)) for r in answers[0]] == [
            (r.task_id, r.owner_id, _outcome(r.payload)) for r in answers[1]
        ]
        assert not any(isinstance(r.payload, Refusal) and r.payload.code == "internal" for a in answers for r in a)
        for core, results, seen in zip(cores, answers, released):
            by_id: dict[tuple[str, str], Task] = {}
            for t in batch:  # a release answers the first task of its id (a copy is refused)
                by_id.setdefault((t.task_id, t.owner_id), t)
            for r in results:
                task = by_id.get((r.task_id, r.owner_id))
                if task is None or isinstance(r.payload, Refusal) or not isinstance(owner_kind(task.spec), TaskKind):
                    continue
                _assert_debited(core, task, r.payload, seen)
                _assert_fallback_total(core, task)
    for core in cores:
        for o in OWNERS:
            spent = core.ledger.spent(o)
            assert spent.epsilon <= BUDGET * (1 + 1e-9) and spent.delta <= 1e-3 * (1 + 1e-9), (o, spent)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data(), sizes=st.lists(st.integers(1, 5), min_size=3, max_size=3))
def test_two_cores_with_different_rows_refuse_exactly_the_same_tasks(data, sizes):
    _differential(data, (_core(1, [1, 2, 3]), _core(2, sizes)))


def test_the_comparison_catches_a_refusal_that_depends_on_the_rows(monkeypatch):
    """The positive control: with the fallback taken away and a compute that fails when an owner's
    first label is 0 (the shape of finding 2), the two cores' outcomes differ; with the real core
    they do not."""
    from privfed.owner.kinds.shares import NccShareKind

    batch = [Task(f"n{i}", o, "r", NccShareTask("pm", 0.5, "rr", 0.5, K, BOUNDS)) for i, o in enumerate(OWNERS)]

    def outcomes(core):
        return [(r.task_id, _outcome(r.payload)) for r in core.answer(batch).results]

    assert outcomes(_core(1, [1, 2, 3])) == outcomes(_core(2, [2, 2, 2]))
    real = NccShareKind.compute

    def leaky(self, task, spec, owner):
        if owner.y[0] == 0:
            raise FloatingPointError("a weight overflowed")
        return real(self, task, spec, owner)

    def leaky_many(self, tasks, owners):  # the batched computation (issue 27) fails the same way
        if any(o.y[0] == 0 for o in owners):
            raise FloatingPointError("a weight overflowed")
        return None

    monkeypatch.setattr(NccShareKind, "compute_many", leaky_many)
    monkeypatch.setattr(NccShareKind, "compute", leaky)
    assert outcomes(_core(1, [1, 2, 3])) == outcomes(_core(2, [2, 2, 2]))  # the fallback still stops it
    monkeypatch.setattr(owner_core, "release_from", lambda kind, task, owner, out: kind.compute(task, task.spec, owner))
    a, b = _core(1, [1, 2, 3]), _core(2, [2, 2, 2])
    assert [o.y[0] == 0 for o in a.owners.values()] != [o.y[0] == 0 for o in b.owners.values()]
    assert outcomes(a) != outcomes(b)
