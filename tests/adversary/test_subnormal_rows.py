"""Audit 8: a row holding a subnormal value must not make the owner's arithmetic take the CPU's slow path.

On x86 an operation with a subnormal operand or result (below 2^-1022 ~ 2.2e-308) takes a microcode assist,
tens to hundreds of cycles instead of a few (Andrysco et al., "On subnormal floating point and abnormal
timing", IEEE S&P 2015). The mechanisms read such a value as 0 (clipping to the public bounds and the map to
[-1, 1] round it away), so the release does not show it, but the time of the answer did: an owner whose rows
hold 1e-310 where another holds 0 was told apart from one CPU timing at 0.75 accuracy (``pca_share``, bounds
symmetric about 0: the ball scaling divides the value and ``X^T X`` multiplies it) and at 0.65-0.74
(``lr_gradient``, ``nb``, ``ncc_share``, lower bound 0: ``to_unit`` doubles and divides it), with every other
value alike (200 alternated answers per arm; ``python bench/timing_channels.py --clock cpu``, the ``tiny-zero vs
subnormal`` lines, is the same measurement on main's code).

No clock here: while a real owner core answers every case of ``differential.CASES``, every array that a call
into the project's code receives or returns is checked for a subnormal (``sys.setprofile``, as
``differential.work_trace``). An owner's rows are read with their values below ``TINY`` as 0 when it is
made (:class:`~privfed.owner.local.LocalOwner`), so none reaches the arithmetic. The detector's positive
control: the same check sees the subnormals of an array handed to the public bounds' map.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable

import numpy as np
import pytest
from differential import BOUNDS, BUDGET, CASE_IDS, CASES, XB, YB, K, _traced

from privfed.common.bounds import Bounds
from privfed.common.ledger import Ledger
from privfed.common.tasks import Task
from privfed.owner.core import OwnerCore
from privfed.owner.local import LocalOwner

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

SUBNORMAL = 1e-310
#: Owner B's rows of ``differential.py`` with a value of each row replaced by a subnormal (either sign).
XS = XB.copy()
XS[:, 0] = [SUBNORMAL, -SUBNORMAL, SUBNORMAL, 5e-324]
SYMMETRIC = Bounds.of(-1.0, 1.0, 2)  # the ball scaling's centre is 0: a subnormal stays one after centring


#: Arguments that are buffers to write into (``np.copyto``'s ``dst``, a ufunc's ``out``, a sampler's scratch
#: ``work``): an ``np.empty`` one holds
#: whatever bytes the allocator left, read by no arithmetic.
OUTPUTS = {"dst", "out", "work"}


def _subnormal(value: object) -> bool:
    if type(value) is not np.ndarray or value.dtype.kind not in "fc" or not value.size:  # no subclass: np.ma
        return False
    a = np.abs(value)
    return bool(np.any((a > 0) & (a < np.finfo(np.float64).tiny)))


def subnormal_operands(
    answer, recording: Callable[[], bool] = lambda: True, sent: tuple[np.ndarray, ...] = ()
) -> list[tuple[str, str, str]]:
    """Where (file, function, argument or ``<return>``) an array holding a subnormal was passed or returned
    while ``answer()`` ran: every call into the project's code (numpy's Python layer is left out: its helpers
    hand each other buffers fresh from ``np.empty``, whose bytes are whatever the allocator left); only while
    ``recording()`` is true. The arrays of ``sent`` (a coordinator's, the same for every owner) are left out:
    handed on by reference to where they are flushed, they enter no arithmetic."""
    seen: list[tuple[str, str, str]] = []

    def profile(frame, event, arg):
        where = _traced(frame.f_code.co_filename) if event in ("call", "return") else None
        if where is None or where.startswith("numpy/") or not recording():  # numpy's helpers: np.empty buffers
            return
        code = frame.f_code
        if event == "return":
            values = [("<return>", arg)]
        elif code.co_cellvars or code.co_freevars:  # 3.11 writes f_locals back at a call: cells not made yet break
            values = []
        else:
            values = frame.f_locals.items()
        for name, value in values:
            if name not in OUTPUTS and _subnormal(value) and not any(value is a for a in sent):
                seen.append((where, code.co_name, name))

    gc.collect()
    gc.disable()
    sys.setprofile(profile)
    try:
        answer()
    finally:
        sys.setprofile(None)
        gc.enable()
    return seen


def answering(X: np.ndarray, y: np.ndarray, spec: object, bounds: Bounds) -> Callable[[], None]:
    """A real owner core of rows ``X, y`` (made here: loading the rows is no part of the answer) and the call
    that answers ``spec``."""
    owner = LocalOwner("node-0.o00000", X, y, np.random.Generator(np.random.PCG64(1)), K, bounds)
    core = OwnerCore([owner], Ledger(":memory:", epsilon_budget=BUDGET, delta_budget=1e-3))

    def answer() -> None:
        (result,) = core.answer([Task("t", owner.owner_id, "run-1", spec)]).results
        # a bug the tracing caused would be refused as internal, with nothing computed: nothing checked then
        assert getattr(result.payload, "code", None) != "internal", result.payload

    return answer


@pytest.mark.parametrize(("kind", "case"), CASE_IDS, ids=[f"{k}/{c}" for k, c in CASE_IDS])
def test_no_subnormal_reaches_an_answers_arithmetic(kind, case):
    """Owner B's rows with a subnormal in each row: answering any case passes no array holding a subnormal to
    any function of the project (on main: the kinds' ``compute``, ``Bounds.clip``, ``to_unit``, the scalings)."""
    make = CASES[kind][case]
    seen = subnormal_operands(answering(XS, YB, make("run-1"), BOUNDS))
    assert not seen, seen[:8]


@pytest.mark.parametrize("scaling", ["ball", "box", "normalise"])
def test_no_subnormal_reaches_the_scalings_of_bounds_centred_on_zero(scaling):
    """Bounds ``[-1, 1]``: the ball scaling subtracts a midpoint of 0, so a subnormal was still one when DP-PCA
    multiplied it (the 0.70 of the module docstring)."""
    from privfed.common.tasks import PcaShareTask

    spec = PcaShareTask(1.0, 1e-5, 1, SYMMETRIC, 0.5, scaling)
    seen = subnormal_operands(answering(XS, YB, spec, SYMMETRIC))
    assert not seen, seen[:8]


def test_the_detector_sees_a_subnormal_operand():
    """Positive control: an array holding subnormals handed to the bounds' map is seen, at the call and by name."""
    seen = subnormal_operands(lambda: BOUNDS.to_unit(XS))
    assert ("common/bounds.py", "to_unit", "x") in seen, seen


def test_a_row_holding_a_subnormal_keeps_the_account_of_its_zero():
    """Every release reads 1e-310 as 0 now, so the row's ledger account is the zero's (as ``-0.0``'s is:
    test_row_digest_signed_zero.py): a file that writes a zero as 1e-310 gives no row a fresh budget."""
    from privfed.owner.data import row_digests

    zeros = np.where(np.abs(XS) < 1e-300, 0.0, XS)
    assert row_digests(XS, YB) == row_digests(zeros, YB)
    assert row_digests(XB, YB) != row_digests(zeros, YB)  # a value that is not tiny still makes its own row


def test_bounds_too_narrow_for_the_flush_are_refused():
    """Reading values below 2^-300 as 0 moves no mapped value only for features at least 2^-200 wide."""
    from privfed.common.errors import ConfigError

    with pytest.raises(ConfigError, match="narrower than 2\\^-200"):
        Bounds.of(-1e-95, 1e-95, 2)
    assert Bounds.of(0.0, 2.0**-200, 2).d == 2
