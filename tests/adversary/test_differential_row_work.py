"""Audit 11: which of an owner's computations work on its private row count ``n`` rather than its public cell.

Audit 10 left "the O(n) passes outside the fits" open (docs/owner-limits.md, "Limits"; then owner/core.py's docstring): measured by wall clock they
were at chance but under heavy load. Counted instead, with no clock: while a real owner core answers
``differential.py``'s cases for an owner of ``n = 37`` rows (cell 64), every call into the project's code and
numpy's Python layer is recorded with the shapes of the arrays it is given (``sys.setprofile``); a call given an
array with ``n`` in its shape works on the private count. An answer whose every pass runs on the cell gives the
``n`` rows to :func:`~privfed.common.work_rows.pad_rows` alone (a copy of ``n`` rows, the one O(n) step left),
or to an entry point that hands them to it first.

The kinds held to that here: the LR share and ``lr_gradient`` (padded since audit 10) and DP-PCA, whose rows were
scaled, checked and clipped row by row before padding: 25-31 calls on the ``n`` rows per answer before the fix
(``common/feddpdr/pca.py``, ``owner_pca_release``), now padded first. Audit 12: the SVM share's scaling, projection,
bias feature and checks (34-46 calls on the ``n`` rows per answer, every model and scaling), now padded first and
the padding zeroed after each per-row step (``common/work_rows.py``, ``zero_padding``); the release is the unpadded
one's bit for bit (``tests/unit/test_padded_releases.py``). An NB report computed every row's cell to release one
(19 calls): now the owner draws its row by index and reads that row alone (``owner/kinds/naive_bayes.py``, ``share_owners``, the
same draws as before, ``tests/unit/test_nb_kind.py``), so nothing at all works on ``n``. A boosted share's
SAMME weights, binarising, encoding and LR fit, and a boosting evaluation's predictions (11-79 calls): now on the
cell (``common/work_rows.py``, ``cell_rows``: zero rows of weight 0; ``owner/history.py``), the same releases bit for
bit (``tests/unit/test_boost_padding.py``); a boosted NCC share's rows go to the NCC code's own padding
(``public_count_rows``: its dummies). An NCC share's reports (7-124 calls on the ``n`` rows; ``labels="rr"``'s length
was ``n`` until stop 45) are held since stop 46: ``_rows`` hands the rows to ``public_count_rows`` first, and no array
of ``n`` ones is made for its weights.
"""

from __future__ import annotations

import gc
import logging
import sys

import numpy as np
import pytest
from differential import CASES, K, owner_core, traced_answer

from privfed.common.tasks import Task

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

#: Rows of the owner: not a power of two, nor a feature or class count, so an array of n rows is told by its shape.
N = 37
#: The functions that may be given the n rows: pad_rows copies them into the cell's, and the entry points that
#: hand them to it before anything else (a numpy function they called on them would show here too): an NCC share's
#: ``_rows`` hands its owner's rows to ``public_count_rows``.
#: ``public_count_rows`` is the NCC code's padding: a copy of the ``n`` rows (or a subsample) and the public count's
#: dummies (common/learners/ncc_padding.py), and ``ncc_release_rows`` hands a boosted NCC share's rows to it.
PADDING = {
    "common/work_rows.py:pad_rows",
    "common/work_rows.py:cell_rows",
    "common/feddpdr/pca.py:owner_pca_release",
    "common/feddpdr/release.py:owner_svm_release",
    "common/boosting/owner.py:ncc_release_rows",
    "common/learners/ncc_padding.py:public_count_rows",
    "owner/kinds/shares.py:_rows",
}
HELD = [
    (kind, case)
    for kind in ("lr_share", "lr_gradient", "pca_share", "svm_share", "nb", "boost_share", "ncc_share")
    for case in CASES[kind]
]


def row_shaped_calls(spec) -> dict[str, int]:
    """Calls (by ``file:function``) given an array with ``N`` in its shape while a real owner core answers ``spec``
    for an owner of ``N`` rows, after a warm-up answer (imports and caches)."""
    rng = np.random.default_rng(5)
    owner, core = owner_core(rng.uniform(0.0, 1.0, (N, 2)), rng.integers(0, K, N))
    core.answer([Task("warm-up", owner.owner_id, "run-0", spec)])
    calls: dict[str, int] = {}

    def on_call(where, frame):
        if any(isinstance(v, np.ndarray) and N in v.shape for v in frame.f_locals.values()):
            name = f"{where}:{frame.f_code.co_name}"
            calls[name] = calls.get(name, 0) + 1

    assert traced_answer(core, owner.owner_id, spec, on_call).payload is not None
    return calls


@pytest.mark.parametrize(("kind", "case"), HELD, ids=[f"{k}/{c}" for k, c in HELD])
def test_only_the_padding_works_on_the_private_row_count(kind, case, caplog):
    caplog.set_level(logging.CRITICAL)
    calls = row_shaped_calls(CASES[kind][case]("run-1"))
    assert set(calls) <= PADDING, f"on the {N} rows, not their cell: {calls}"


@pytest.mark.parametrize("base", ["stump", "ncc", "lr"])
def test_a_boosting_evaluation_works_on_the_cell(base, caplog):
    """A ``boost_evaluate`` release (its SAMME weights after a kept round, its predictions, its clipped sums and the
    fallback drawn with it), as the core computes it (``privfed.owner.compute.compute_release``), without its ring
    (the secure sum's messages carry no row)."""
    from differential import boost, kept_history

    from privfed.common.boosting.wire import at_round
    from privfed.common.tasks import BoostEvaluateTask
    from privfed.common.tasks.steps import RingSpec
    from privfed.owner.compute import compute_release
    from privfed.owner.kinds import kind_of

    caplog.set_level(logging.CRITICAL)
    rng = np.random.default_rng(5)
    owner, _ = owner_core(rng.uniform(0.0, 1.0, (N, 2)), rng.integers(0, K, N))
    history = at_round(kept_history(base), 1)
    spec = BoostEvaluateTask(
        boost(base, "run-1", n_bins=4),
        history,
        history.kept[0].learner,
        RingSpec("s", (owner.owner_id,), 24, 2, 8, (), {}),
    )
    kind, task = kind_of(spec), Task("t", owner.owner_id, "run-1", spec)
    compute_release(kind, task, owner)  # warm-up
    owner.boost_applied.clear()  # the weights are computed again, as for a node's first task of the run
    calls: dict[str, int] = {}

    def on_call(frame, event, arg):
        if event == "call" and any(isinstance(v, np.ndarray) and N in v.shape for v in frame.f_locals.values()):
            name = f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_code.co_name}"
            calls[name] = calls.get(name, 0) + 1

    gc.collect()  # as traced_answer: no finalizer of an earlier test's object runs inside the answer
    gc.disable()
    sys.setprofile(on_call)
    try:
        compute_release(kind, task, owner)
    finally:
        sys.setprofile(None)
        gc.enable()
    assert set(calls) <= {"work_rows.py:cell_rows", "work_rows.py:pad_rows"}, f"on the {N} rows: {calls}"
