"""An owner's private row count does not show in the work of its fits (common/work_rows.py).

A coordinator times an owner's keyed answer. The fits used to work on the owner's ``n`` rows: matrix shapes
``n x d`` and step counts that grew with ``n`` (the LR fit's Newton steps, the SVM solvers' Nesterov steps),
so one timing told an owner of 10% fewer rows apart (0.6-0.95 accuracy, ``bench/timing_processes.py``). Now
every fit runs on ``n``'s public grid cell (the next power of two), padded with zero rows.

Checked without clocks, on real owner cores (:class:`~privfed.owner.core.OwnerCore`, ledger, debit, compute,
fallback): each fit's per-step function is wrapped to record the shapes it works on, once per call, and
owners of 300, 270 and 257 rows (one cell, ``(256, 512]``) must make the very same trace, for the LR share,
the DP-PCA share and every SVM model. Positive control: with the padding taken out (the fits' ``work_rows``
made the identity, the old behaviour), the same traces differ.

A boosted NCC share is one report per row, so its *length* showed the count outright: it now carries exactly
``work_rows(n, max_owner_rows)`` reports (dummies of weight 0, or a subsample above the bound), checked on real
owner cores for both label schemes that leave a network (``joint``, ``rr``), the release and the fallback alike;
so does a ``--task ncc`` share under ``joint`` (weight-0 dummies) and ``rr`` (⊥ dummies, ``ncc_rr``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.feddpdr import centroid, multiclass, pca, release, svm
from privfed.common.feddpdr.choices import SVM_MODELS
from privfed.common.learners import newton
from privfed.common.ledger import Ledger
from privfed.common.tasks import (
    BoostShareTask,
    LrShareTask,
    NccShareTask,
    PcaShareTask,
    Refusal,
    SvmShareTask,
    Task,
)
from privfed.owner.core import OwnerCore
from privfed.owner.kinds import OWNER_KINDS, shares
from privfed.owner.local import LocalOwner

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

D, K = 6, 3
BOUNDS = Bounds.of(-4.0, 4.0, D)
SAME_CELL = (300, 270, 257)  # (256, 512]: one public cell, 10% and 14% fewer rows than 300


def _svm(model: str) -> SvmShareTask:
    delta = 0.0 if model == "ovr-huber" else 1e-5
    return SvmShareTask(1.0, 1e-3, K, BOUNDS, np.eye(D)[:, :3], delta=delta, model=model, scaling="ball")


SPECS: dict[str, Callable[[], object]] = {
    "lr_share": lambda: LrShareTask("pm", 1.0, 1.0, 1.0, K, BOUNDS),
    "pca_share": lambda: PcaShareTask(1.0, 1e-5, 2, BOUNDS, 0.5, "ball"),
    **{f"svm_share/{model}": functools.partial(_svm, model) for model in SVM_MODELS},
}

#: (module, function, which argument holds the rows): each fit's per-step work, or the matrix its one pass
#: runs on (DP-PCA's ``X^T X``, the class sums: what their ``pad_rows`` returns).
STEPS = [
    (newton, "_newton_step", 0),
    (svm, "_huber_gradient", 1),
    (multiclass, "_loss_gradient", 1),
]
PASSES = [pca, centroid]


def _core(n: int) -> OwnerCore:
    rng = np.random.Generator(np.random.PCG64(n))
    X, y = rng.normal(size=(n, D)), rng.integers(0, K, n)
    owner = LocalOwner("node-0.o00000", X, y, np.random.Generator(np.random.PCG64(1)), K, BOUNDS)
    return OwnerCore([owner], Ledger(":memory:", epsilon_budget=100.0, delta_budget=1e-3))


def _trace(name: str, n: int, monkeypatch) -> list[tuple[str, tuple[int, ...]]]:
    """The shapes every step and pass of the owner's answer worked on, in order."""
    trace: list[tuple[str, tuple[int, ...]]] = []
    with monkeypatch.context() as m:
        for module, fn, arg in STEPS:
            real = getattr(module, fn)

            def step(*args, _real=real, _fn=fn, _arg=arg):
                trace.append((_fn, np.shape(args[_arg])))
                return _real(*args)

            m.setattr(module, fn, step)
        for module in PASSES:
            real_pad = module.pad_rows

            def pad(*args, _real=real_pad, _name=module.__name__, **kw):
                out = _real(*args, **kw)
                trace.append((_name, np.shape(out)))
                return out

            m.setattr(module, "pad_rows", pad)
        core = _core(n)
        (result,) = core.answer([Task("t", "node-0.o00000", "r1", SPECS[name]())]).results
    assert not isinstance(result.payload, Refusal), result
    return trace


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_fits_work_does_not_depend_on_the_row_count(name, monkeypatch):
    """Owners of 300, 270 and 257 rows: the same calls on the same shapes (the release's and the fallback's)."""
    traces = [_trace(name, n, monkeypatch) for n in SAME_CELL]
    assert traces[0], "nothing recorded: the kind's fit was not seen"
    assert traces[0] == traces[1] == traces[2]
    assert all(shape[-2] in (1, 512) for _, shape in traces[0] if len(shape) >= 2), traces[0]  # fallback: 0 -> 1


def _old_work(monkeypatch) -> None:
    """The fits as they were: on the owner's own rows, steps from its own count."""
    for module in (newton, svm, multiclass, centroid, pca, release, shares):
        monkeypatch.setattr(module, "work_rows", lambda n: max(int(n), 1))


@pytest.mark.parametrize("name", sorted(SPECS))
def test_positive_control_the_old_work_followed_the_row_count(name, monkeypatch):
    """Without the padding the trace tells 300 rows from 270: what the test above would catch."""
    _old_work(monkeypatch)
    assert _trace(name, 300, monkeypatch) != _trace(name, 270, monkeypatch)


def test_the_cell_shows_and_nothing_finer(monkeypatch):
    """What is left, stated (common/work_rows.py): 300 rows and 600 rows (another cell) make other traces."""
    from privfed.common.work_rows import work_rows

    assert _trace("lr_share", 300, monkeypatch) != _trace("lr_share", 600, monkeypatch)
    assert [work_rows(n) for n in (0, 1, 2, 3, 257, 300, 512, 513)] == [1, 1, 2, 4, 512, 512, 512, 1024]


# ----------------------------------------------------------------------------- a boosted NCC share's length
def _ncc_share_length(n: int, labels: str, max_owner_rows: int, monkeypatch) -> int:
    """The length of the share a real owner core answers, after checking its fallback's is the same."""
    from privfed.common.boosting.params import BoostingParams
    from privfed.common.boosting.wire import config_to_dict, empty_history

    fb = BoostingParams(
        base="ncc", epsilon=3.0, labels=labels, n_classes=K, bounds=BOUNDS, n_rounds=2, max_owner_rows=max_owner_rows
    )
    core = _core(n)
    spec = BoostShareTask(config_to_dict(fb, "run-1"), empty_history())
    (result,) = core.answer([Task("t", "node-0.o00000", "run-1", spec)]).results
    assert not isinstance(result.payload, Refusal), result
    owner = core.owners["node-0.o00000"]
    fallback = OWNER_KINDS["boost_share"].fallback(spec, owner.public, owner.n_rows, owner.rng)
    length = int(np.shape(result.payload.reports)[0])
    assert int(np.shape(fallback.reports)[0]) == length  # the data-independent answer: as long
    return length


@pytest.mark.parametrize("labels", ["joint", "rr"])
def test_a_boosted_ncc_share_carries_the_public_count_of_reports(labels, monkeypatch):
    """300, 270 and 257 rows: 512 reports (no bound below the cell); under a public bound of 280, 280 reports
    for every one of them (the 300-row owner subsampled), and an owner of 3 rows sends 4."""
    assert {_ncc_share_length(n, labels, 10**6, monkeypatch) for n in SAME_CELL} == {512}
    assert {_ncc_share_length(n, labels, 280, monkeypatch) for n in SAME_CELL} == {280}
    assert _ncc_share_length(3, labels, 10**6, monkeypatch) == 4


def _unpadded(X, y, w, count=None):
    """An NCC share's rows as they were before the public count: the rows (weight 1 unless given), or a fallback's
    ``count`` midpoint rows (its count was the row count, as the patched ``work_rows`` gives it)."""
    if count is not None:
        return np.full((count, X.shape[1]), 0.5), np.zeros(count, dtype=np.int64), np.ones(count)
    return X, y, np.ones(len(y)) if w is None else w


def test_positive_control_a_boosted_ncc_share_used_to_be_as_long_as_the_rows(monkeypatch):
    """Without the public count (the rows as they are, and a fallback of as many), the share's length is the row
    count."""
    from privfed.common import work_rows
    from privfed.common.boosting import owner as boosting_owner

    monkeypatch.setattr(
        boosting_owner, "ncc_release_rows", lambda plan, X, y, w, rng, count=None: _unpadded(X, y, w, count)
    )
    monkeypatch.setattr(work_rows, "work_rows", lambda n, bound=None: max(int(n), 1))  # the fallback's count
    assert [_ncc_share_length(n, "joint", 10**6, monkeypatch) for n in (300, 270)] == [300, 270]


# ----------------------------------------------------------------------------- an NCC share's length (--task ncc)
def _ncc_task_length(n: int, max_owner_rows: int | None, labels: str = "joint", batch: int = 1) -> set[int]:
    """The lengths of the shares ``batch`` owners of ``n`` rows each answer (one batch), and their fallbacks'."""
    rng = np.random.Generator(np.random.PCG64(n))
    owners = [
        LocalOwner(
            f"node-0.o{i:05d}", rng.normal(size=(n, D)), rng.integers(0, K, n), np.random.default_rng(i), K, BOUNDS
        )
        for i in range(batch)
    ]
    core = OwnerCore(owners, Ledger(":memory:", epsilon_budget=100.0, delta_budget=1e-3))
    spec = NccShareTask("pm", 2.0, labels, 1.0, K, BOUNDS, max_owner_rows=max_owner_rows)
    results = core.answer([Task(f"t{i}", o.owner_id, "r1", spec) for i, o in enumerate(owners)]).results
    assert not any(isinstance(r.payload, Refusal) for r in results), results
    kind = OWNER_KINDS["ncc_share"]
    fallbacks = [kind.fallback(spec, o.public, o.n_rows, o.rng) for o in owners]
    return {int(np.size(r.payload.reports)) for r in results} | {int(np.size(f.reports)) for f in fallbacks}


@pytest.mark.parametrize("labels", ["joint", "rr"])
def test_an_ncc_share_carries_the_public_count_of_reports(labels):
    """``--task ncc`` under ``labels="joint"`` or ``"rr"`` (⊥ dummies: common/learners/ncc_rr.py; before, an rr
    share was one report per row): 300, 270 and 257 rows send 512 reports with no bound below the cell, 280 under
    the job's bound of 280 (300 subsampled), alone and in a batch computed together."""
    width = 1 if labels == "joint" else D  # values per report: a joint report, or a perturbed row
    assert set().union(*(_ncc_task_length(n, None, labels) for n in SAME_CELL)) == {512 * width}
    assert set().union(*(_ncc_task_length(n, 280, labels, batch=3) for n in SAME_CELL)) == {280 * width}
    assert _ncc_task_length(0, 5, labels) == {width}


def test_the_dummies_are_shuffled_in_not_left_last(monkeypatch):
    """A joint share of 257 rows carries 255 dummies, whose value is ⊥ = 2K before the randomized response: at
    ε = 20 almost every ⊥ report is a dummy's. Left last, they would sit at positions 257-511 and the change
    point would give ``n`` away; shuffled, their mean position is the middle. Positive control: unshuffled,
    it is not."""
    from privfed.owner.kinds import shares

    def bottom_positions() -> float:
        rng = np.random.Generator(np.random.PCG64(3))
        owner = LocalOwner("node-0.o00000", rng.normal(size=(257, D)), rng.integers(0, K, 257), rng, K, BOUNDS)
        core = OwnerCore([owner], Ledger(":memory:", epsilon_budget=100.0))
        spec = NccShareTask("pm", 20.0, "joint", 1.0, K, BOUNDS, max_owner_rows=None)
        (result,) = core.answer([Task("t", owner.owner_id, "r1", spec)]).results
        return float(np.mean(np.flatnonzero(np.asarray(result.payload.reports) == 2 * K)))

    assert 200 < bottom_positions() < 310  # uniform: 255.5
    monkeypatch.setattr(shares, "shuffled", lambda release, rng: release)
    assert bottom_positions() > 370  # the dummies' own positions: 384 on average


@pytest.mark.parametrize("labels", ["joint", "rr"])
def test_positive_control_an_ncc_share_used_to_be_as_long_as_the_rows(monkeypatch, labels):
    from privfed.owner.kinds import shares

    monkeypatch.setattr(shares, "public_count_rows", lambda X, y, w, count=None, **kw: _unpadded(X, y, w, count))
    monkeypatch.setattr(shares, "work_rows", lambda n, bound=None: n)  # the fallback's count too: n, as it was
    width = 1 if labels == "joint" else D
    assert [_ncc_task_length(n, None, labels) for n in (300, 270)] == [{300 * width}, {270 * width}]


def _batch_trace(ns: tuple[int, ...], monkeypatch) -> list[tuple[int, ...]]:
    """The shapes of the Newton steps one node makes answering an LR share for owners of ``ns`` rows together."""
    owners = []
    for i, n in enumerate(ns):
        rng = np.random.Generator(np.random.PCG64(n + i))
        X, y = rng.normal(size=(n, D)), rng.integers(0, K, n)
        owners.append(LocalOwner(f"node-0.o{i:05d}", X, y, np.random.Generator(np.random.PCG64(i)), K, BOUNDS))
    core = OwnerCore(owners, Ledger(":memory:", epsilon_budget=100.0, delta_budget=1e-3))
    trace: list[tuple[int, ...]] = []
    real = newton._newton_step

    def step(*args):
        trace.append(np.shape(args[0]))
        return real(*args)

    monkeypatch.setattr(newton, "_newton_step", step)
    tasks = [Task(f"t{i}", o.owner_id, "r1", SPECS["lr_share"]()) for i, o in enumerate(owners)]
    results = core.answer(tasks).results
    assert not any(isinstance(r.payload, Refusal) for r in results), results
    return trace


def test_co_hosted_owners_are_batched_by_their_cell_not_their_count(monkeypatch):
    """A node's owners of 300 and 270 rows are fitted in one batch, as two owners of 300 are: grouping the batch
    by the private count made one fit for equal counts and two for unequal ones (twice the steps, in time)."""
    for ns in ((300, 270), (300, 300)):  # the step count's data-dependent tail (newton.py) is another matter
        trace = _batch_trace(ns, monkeypatch)
        assert trace and set(trace) == {(2 * K, 512, D + 1)}, (ns, trace)  # both owners' K one-vs-rest problems
