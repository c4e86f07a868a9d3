"""The fallback of a release the rows cannot afford takes the real release's time (owner.compute, "Timing").

Whether an owner's rows were spent under an earlier id (the ledger's ``RowsUnused``) is a membership bit
(stop 35, finding 6): its refusals and values no longer tell it, and its answer's time must not either. A
coordinator times the answer; a fallback that skips the computation answers faster (one probe told it
at 0.9-1.0 accuracy for every kind, ``bench/timing_channels.py``). By construction, both paths now do the
same work: the release is computed from the rows, and the fallback drawn, whichever leaves.

Checked without clocks: every method of every release kind is wrapped to record its calls (which method,
for which owners, on how many rows), and an owner whose rows can afford the release must make exactly
the calls an owner whose rows cannot make -- alone, and in a batch computed together (issue 27).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.ledger import Debit, Ledger
from privfed.common.secagg.boxes import public_bytes
from privfed.common.tasks import (
    BoostEvaluateTask,
    BoostShareTask,
    LrGradientTask,
    LrShareTask,
    NbReportTask,
    NccShareTask,
    PcaShareTask,
    PeerKey,
    Refusal,
    RingSpec,
    SvmShareTask,
    Task,
)
from privfed.owner import compute as owner_compute
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.kinds import OWNER_KINDS
from privfed.owner.kinds.base import TaskKind
from privfed.owner.local import LocalOwner

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

D, K, ROWS, BUDGET = 3, 2, 12, 100.0
BOUNDS = Bounds.of(0.0, 1.0, D)
OLD = "old-0.o00000"  # the id under which the rows were spent (or not) before


def _boost_config(run: str):
    from privfed.common.boosting.params import BoostingParams
    from privfed.common.boosting.wire import BoostConfig

    return BoostConfig(run, BoostingParams(base="stump", epsilon=2.0, n_classes=K, bounds=BOUNDS, n_rounds=4))


def _boost_evaluate(core: OwnerCore, owners: list[str]):
    from privfed.common.boosting.wire import BoostHistory
    from privfed.common.learners.stump import Stump, thresholds

    config = _boost_config("run-e")
    learner = Stump(0, 1, float(thresholds(BOUNDS, config.params.n_bins)[0, 0]), (0, 1), 0.3)
    peers = tuple(PeerKey(o, "node-0", public_bytes(core.keys.own_key(o)), b"") for o in owners)
    return BoostEvaluateTask(
        config, BoostHistory((), 0), learner, RingSpec("ring-1", tuple(owners), 24, 2, 8.0, peers, {})
    )


def _svm(model: str):
    delta = 0.0 if model == "ovr-huber" else 1e-5
    return SvmShareTask(1.0, 0.1, K, BOUNDS, np.eye(D)[:, :2], delta=delta, model=model, scaling="ball")


#: A task of every release kind (a boosting evaluation needs the core, for its ring's keys).
SPECS = {
    "ncc_share": lambda core, owners: NccShareTask("pm", 1.0, "rr", 0.5, K, BOUNDS),
    "lr_share": lambda core, owners: LrShareTask("pm", 1.0, 1.0, 1.0, K, BOUNDS),
    "pca_share": lambda core, owners: PcaShareTask(1.0, 1e-5, 2, BOUNDS, 0.5, "ball"),
    "svm_share": lambda core, owners: _svm("mc-huber"),
    "boost_share": lambda core, owners: BoostShareTask(_boost_config("r1"), _history()),
    "boost_evaluate": _boost_evaluate,
    "lr_gradient": lambda core, owners: LrGradientTask("pm", 1.0, np.full((1, D + 1), 0.5), 1.0, K, BOUNDS),
    "nb": lambda core, owners: NbReportTask(1.0, 4, K, BOUNDS),
}
RELEASE_KINDS = sorted(name for name, kind in OWNER_KINDS.items() if isinstance(kind, TaskKind))


def _history():
    from privfed.common.boosting.wire import BoostHistory

    return BoostHistory((), 0)


def test_every_release_kind_is_checked():
    assert sorted(SPECS) == RELEASE_KINDS


def _core(n_owners: int, spent: list[bool]) -> OwnerCore:
    """``n_owners`` owners on one node, the same rows whatever ``spent``; an earlier id held each owner's
    rows and spent nearly all of their budget (``spent[i]``) or a little (the owner's own id is fresh)."""
    rng = np.random.Generator(np.random.PCG64(5))
    ledger = Ledger(":memory:", epsilon_budget=BUDGET, delta_budget=1e-3)
    owners = []
    for i in range(n_owners):
        X, y = rng.uniform(0, 1, (ROWS, D)), rng.integers(0, K, ROWS)
        keys = row_digests(X, y)
        old = f"{OLD}-{i}"
        ledger.bind_rows(old, keys)
        ledger.debit_many([Debit(old, BUDGET - 1e-6 if spent[i] else 1e-6, 0.0, "earlier", f"earlier-{i}#0")])
        gen = np.random.Generator(np.random.PCG64([5, i]))
        owners.append(LocalOwner(f"node-0.o{i:05d}", X, y, gen, K, BOUNDS, row_keys=tuple(keys)))
    return OwnerCore(owners, ledger)


def _recorded(monkeypatch, calls: list) -> None:
    """Record every call of every release kind's compute and fallback, batched or not."""
    for kind in OWNER_KINDS.values():
        if not isinstance(kind, TaskKind):
            continue
        cls = type(kind)
        for name in ("compute", "compute_many", "fallback", "fallback_many"):
            real = getattr(cls, name)

            def spy(self, *args, _real=real, _name=name):
                calls.append((kind_name(self), _name, _what(_name, args)))
                return _real(self, *args)

            monkeypatch.setattr(cls, name, functools.wraps(real)(spy))


def kind_name(kind: TaskKind) -> str:
    return kind.name


def _what(method: str, args: tuple) -> object:
    """What a call works on: the owners (and their row counts) or the fallback's public row count."""
    if method == "compute":
        return (args[2].owner_id, args[2].n_rows)
    if method in ("compute_many", "fallback_many"):
        return tuple((o.owner_id, o.n_rows) for o in args[1])
    return args[2]  # fallback(spec, public, n_rows, rng)


def _answer(name: str, spent: list[bool], monkeypatch) -> tuple[list, list]:
    core = _core(len(spent), spent)
    ids = list(core.owners)
    spec = SPECS[name](core, ids)
    calls: list = []
    with monkeypatch.context() as m:
        _recorded(m, calls)
        results = core.answer([Task(f"t{i}", o, "r1", spec) for i, o in enumerate(ids)]).results
    assert not any(isinstance(r.payload, Refusal) for r in results), results
    return calls, results


@pytest.mark.parametrize("name", sorted(SPECS))
def test_spent_rows_make_the_same_calls_as_unspent_ones(name, monkeypatch):
    """An owner (and a peer, for a ring): its release computed from its rows and its fallback drawn, whether
    its rows were spent or not."""
    unspent, _ = _answer(name, [False, False], monkeypatch)
    spent, _ = _answer(name, [True, False], monkeypatch)
    assert unspent == spent
    assert any(method.startswith("compute") for _, method, _ in spent), spent  # the rows were computed from
    assert any(method.startswith("fallback") for _, method, _ in unspent), unspent  # the fallback was drawn


@pytest.mark.parametrize("name", ["ncc_share", "lr_share", "lr_gradient", "nb"])
def test_a_batch_makes_the_same_calls_whichever_of_its_owners_rows_were_spent(name, monkeypatch):
    """Owners of one node computed together (``compute_many``): the batch's calls do not say which owners'
    rows were spent, nor how many."""
    traces = [_answer(name, spent, monkeypatch)[0] for spent in ([False] * 3, [True, False, True], [True] * 3)]
    assert traces[0] == traces[1] == traces[2]
    assert [m for _, m, _ in traces[0]] == ["compute_many", "fallback_many"]


def test_the_trace_catches_a_fallback_that_skips_the_computation(monkeypatch):
    """Positive control: the fallback path as it was (the kind's fallback alone, nothing computed) makes
    other calls than a release from the rows."""
    monkeypatch.setattr(
        owner_compute,
        "fallback_release",
        lambda kind, task, owner: kind.fallback(task.spec, owner.public, owner.n_rows, owner.rng),
    )
    unspent, _ = _answer("pca_share", [False], monkeypatch)
    spent, _ = _answer("pca_share", [True], monkeypatch)
    assert unspent != spent
    assert "compute" not in [m for _, m, _ in spent]


@pytest.mark.parametrize("name", ["lr_share", "lr_gradient", "nb", "pca_share"])
def test_spent_rows_answer_a_value_that_does_not_depend_on_them(name):
    """The construction changes the work, not what leaves: two owners whose rows differ, both spent,
    seeded alike, answer the very same fallback (the computation from their rows drew as much noise)."""
    answers = []
    for seed in (5, 6):  # other rows, the same generators
        core = _core(1, [True])
        rows = np.random.Generator(np.random.PCG64(seed))
        (owner,) = core.owners.values()
        owner.X, owner.y = rows.uniform(0, 1, (ROWS, D)), rows.integers(0, K, ROWS)
        (result,) = core.answer([Task("t", owner.owner_id, "r1", SPECS[name](core, [owner.owner_id]))]).results
        answers.append(result.payload)
    assert not isinstance(answers[0], Refusal)
    assert repr(answers[0]) == repr(answers[1])
