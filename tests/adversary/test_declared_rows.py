"""An owner's declared row count (``privfed owner --work-rows P``) hides which power-of-two cell its rows lie in.

Without it every computation works on ``n``'s cell (the next power of two: ``common/work_rows.py``), so the time of
an answer still tells an owner of 100 rows (cell 128) from one of 600 (cell 1024): docs/owner-limits.md listed that
as left open. With it, a node's core works on ``P`` rows for every owner of at most ``P`` (zero rows of weight 0
beyond its own), so the work is a function of the owner's public configuration alone.

Checked differentially, with no clock: the same task against two owners of different data and different cells
(100 and 600 rows), each answered by a real owner core (ledger, debit, compute, fallback) while every call into the
project's code and numpy's Python layer is recorded with the shapes of the arrays it is given (``sys.setprofile``).
Under ``--work-rows 2048`` the two owners' calls see the same set of shapes, for every kind an owner computes from
rows; without it they do not (the positive control). The padding's own entry points, the only calls given the rows
themselves (``test_differential_row_work.py``), are left out of the comparison: they copy ``n`` rows into the ``P``.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from differential import BOUNDS, CASES, K, owner_core, traced_answer
from test_differential_row_work import HELD, PADDING

from privfed.common.errors import ConfigError
from privfed.common.ledger import Ledger
from privfed.common.tasks import NccShareTask, Task
from privfed.owner.core import OwnerCore
from privfed.owner.local import LocalOwner

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

SMALL, LARGE = 100, 600  # cells 128 and 1024
DECLARED = 2048
#: The kinds that read rows, as test_differential_row_work.py holds them, and every case of theirs but the SVM's at
#: ε = 30 and λ = 2^-20: the same calls on the same shapes as at ε = 1, for up to 40 s of traced Nesterov steps
#: each.
KINDS = sorted({kind for kind, _ in HELD})
ALL = [(kind, case) for kind, case in HELD if not (kind == "svm_share" and "-30-" in case)]
#: Kinds whose every case reads one row whatever the count: nothing for the positive control to see.
ONE_ROW = {"nb"}


def shapes_seen(n: int, case, work_rows: int | None) -> set[tuple[str, tuple]]:
    """(``file:function``, the shapes of the arrays it is given) of every call while a real owner core answers
    ``case``'s task of run ``run-1`` for an owner of ``n`` rows, after a warm-up answer to its task of run
    ``run-0``; the padding's entry points left out."""
    rng = np.random.default_rng(n)
    owner, core = owner_core(rng.uniform(0.0, 1.0, (n, 2)), rng.integers(0, K, n), work_rows=work_rows)
    core.answer([Task("warm-up", owner.owner_id, "run-0", case("run-0"))])
    spec = case("run-1")
    seen: set[tuple[str, tuple]] = set()

    def on_call(where, frame):
        name = f"{where}:{frame.f_code.co_name}"
        if name not in PADDING:
            shapes = tuple(sorted(v.shape for v in frame.f_locals.values() if isinstance(v, np.ndarray)))
            seen.add((name, shapes))

    assert traced_answer(core, owner.owner_id, spec, on_call).payload is not None
    return seen


def _cells(seen: set[tuple[str, tuple]]) -> set[int]:
    """The owners' own cells (128, 1024) wherever a shape shows them (a shape may show either by chance: 64 bins
    of 2 classes, a Duchi share's 2048 x 2 bits in bytes; the comparison above is the claim)."""
    return {d for _, shapes in seen for shape in shapes for d in shape if d in (128, 1024)}


@pytest.mark.parametrize(("kind", "case"), ALL, ids=[f"{k}/{c}" for k, c in ALL])
def test_a_declared_row_count_makes_the_same_work_for_other_cells(kind, case, caplog):
    caplog.set_level(logging.CRITICAL)
    small, large = (shapes_seen(n, CASES[kind][case], DECLARED) for n in (SMALL, LARGE))
    assert small == large, f"100 rows only: {sorted(small - large)[:5]}; 600 rows only: {sorted(large - small)[:5]}"


@pytest.mark.parametrize("kind", sorted(set(KINDS) - ONE_ROW))
def test_positive_control_without_it_the_cells_show(kind, caplog):
    """The first case of each kind: 100 and 600 rows give other shapes, each its own cell (and under
    ``--work-rows`` the declared count's)."""
    caplog.set_level(logging.CRITICAL)
    case = next(iter(CASES[kind].values()))
    small, large = (shapes_seen(n, case, None) for n in (SMALL, LARGE))
    assert small != large
    assert 128 in _cells(small) and 1024 in _cells(large)
    declared = shapes_seen(SMALL, case, DECLARED)  # and with it, the work is the P rows'
    assert DECLARED in {d for _, shapes in declared for shape in shapes for d in shape}


def test_an_ncc_share_carries_the_declared_count_of_reports():
    """The one release whose length is a row count: 2048 reports for 100 rows and for 600 under ``--work-rows``
    (the coordinator accepts it: a power of two), the job's bound still below it."""
    lengths = {}
    for n in (SMALL, LARGE):
        for bound in (None, 1000):
            rng = np.random.default_rng(n)
            owner = LocalOwner("node-0.o00000", rng.uniform(0, 1, (n, 2)), rng.integers(0, K, n), rng, K, BOUNDS)
            core = OwnerCore([owner], Ledger(":memory:", epsilon_budget=100.0), work_rows=DECLARED)
            spec = NccShareTask("pm", 2.0, "joint", 1.0, K, BOUNDS, max_owner_rows=bound)
            (result,) = core.answer([Task("t", owner.owner_id, "r1", spec)]).results
            spec.check_public_count(np.size(result.payload.reports))  # what the coordinator accepts
            lengths[n, bound] = int(np.size(result.payload.reports))
    assert lengths == {(SMALL, None): DECLARED, (LARGE, None): DECLARED, (SMALL, 1000): 1000, (LARGE, 1000): 1000}


@pytest.mark.parametrize(
    ("rows", "n", "message"),
    [(1000, 3, "must be a power of two"), (256, 300, "below an owner's 300 rows"), (0, 0, "power of two")],
)
def test_a_declared_count_that_cannot_hold_the_rows_is_a_clear_error(rows, n, message):
    rng = np.random.default_rng(0)
    owner = LocalOwner("node-0.o00000", rng.uniform(0, 1, (n, 2)), rng.integers(0, K, n), rng, K, BOUNDS)
    with pytest.raises(ConfigError, match=message):
        OwnerCore([owner], Ledger(":memory:", epsilon_budget=1.0), work_rows=rows)
