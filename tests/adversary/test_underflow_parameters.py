"""Audit 9: a public parameter the coordinator chooses must not drive the owner's arithmetic on its rows into the
CPU's slow path.

Audit 8 (``test_subnormal_rows.py``) read an owner's tiny row values as 0 when it loads them. A subnormal can
also be *made* from normal rows: an operation whose exact result is below 2^-1022 (an underflow) takes the same
microcode assist as a subnormal operand, tens to hundreds of cycles (Andrysco et al., "On subnormal floating
point and abnormal timing", IEEE S&P 2015). The coordinator chooses the iterate θ of an ``lr_gradient`` task
(inside ``|θ_j| <= param_bound <= 2^20``), so it chooses where the owner's arithmetic underflows:

* **softmax band** (K >= 3): ``exp(s_k - max s)`` of a row whose scores differ by 708-745 is subnormal, and so
  are its probability and its ``d + 1`` gradient products; with one class's score ``a t_j + c`` the band is any
  interval of feature ``j`` the coordinator likes. On main, 1000 rows in the band against 1000 rows outside:
  1.15 ms against 0.60 ms per gradient (CPU time, medians of 300 alternated calls);
* **tiny θ**: ``t_j θ_j`` with ``θ_j = 2^-1021`` underflows exactly for the rows with ``0 < |t_j| < 1/2``, a
  threshold the coordinator sets (``θ_j = 1e-310``: for every row with ``t_j != 0``); the product is in the
  scores' matmul (16x slower for such rows, 0.33 ms against 0.02 ms for 2000 rows);
* **the logistic residual**: ``exp(-|z|)`` was clamped at 700 (``1e-304``), so ``(σ(z) - y) t_j`` of a row of
  label 0 at the intercept ``-699.5`` underflows for ``|t_j| < 1.4e-4``.

The time then counts the owner's rows in a region the coordinator picked, with no noise and no debit. No clock
here: the owner core answers under numpy's floating-point status check (:func:`underflows`: every ufunc,
``matmul`` included, whose result underflowed reports it), and audit 8's detector looks for subnormal arrays
at every call into the project. The fix reads ``|θ_j| < 2^-300`` as 0 (:func:`~privfed.common.bounds.flush_tiny`)
and takes every ``exp`` of the owner's fits through :func:`~privfed.common.bounds.exp_nonpositive` (0 below
``-300``), so no product with a row value reaches the subnormal range.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from differential import BOUNDS, BUDGET, CASE_IDS, CASES, XA, XB, YA, YB
from test_subnormal_rows import answering, subnormal_operands

from privfed.common.ledger import Ledger
from privfed.common.tasks import LrGradientTask, Task
from privfed.owner.core import OwnerCore
from privfed.owner.local import LocalOwner


def underflows(answer: Callable[[], None]) -> list[str]:
    """What numpy's floating-point checks reported as underflow while ``answer()`` ran (none: no operation made a
    result below the normal range)."""
    seen: list[str] = []
    old = np.seterrcall(lambda kind, flag: seen.append(kind))
    try:
        with np.errstate(under="call"):
            answer()
    finally:
        np.seterrcall(old)
    return seen


def answering_classes(X: np.ndarray, y: np.ndarray, spec: object, n_classes: int) -> Callable[[], None]:
    """``test_subnormal_rows.answering`` for an owner of ``n_classes`` classes."""
    owner = LocalOwner("node-0.o00000", X, y, np.random.Generator(np.random.PCG64(1)), n_classes, BOUNDS)
    core = OwnerCore([owner], Ledger(":memory:", epsilon_budget=BUDGET, delta_budget=1e-3))

    def answer() -> None:
        (result,) = core.answer([Task("t", owner.owner_id, "run-1", spec)]).results
        assert getattr(result.payload, "code", None) is None, result.payload  # answered, not refused

    return answer


def _theta(k: int, **entries: float) -> np.ndarray:
    theta = np.zeros((k, 3))  # (K', d + 1): two features and the intercept
    for name, value in entries.items():
        theta[int(name[1]), int(name[2])] = value
    return theta


#: Owner B's rows with row 1's first feature next to the centre of its bounds (``t_0 = 2e-7``), label 0.
XC = XB.copy()
XC[1, 0] = 0.5 + 1e-7
#: Owner B's rows with three classes (row 1 is the one in the band below: ``t_0 = 0.5468``).
Y3 = np.array([1, 0, 2, 0])

#: name -> (rows, labels, classes, the coordinator's θ): each puts some of the owner's rows where the
#: arithmetic on main underflowed (module docstring).
ATTACKS = {
    "softmax-band": (XB, Y3, 3, _theta(3, t00=720.0 / 0.5468)),  # class 0's score 720 for row 1: exp(-720)
    "softmax-beyond": (XB, Y3, 3, _theta(3, t00=2000.0)),  # exp of -1094 and -1600: 0 from below the range
    "theta-subnormal": (XB, YB, 2, _theta(1, t00=1e-310)),
    "theta-tiny": (XB, YB, 2, _theta(1, t00=2.0**-1021)),  # |t_0 θ_0| < 2^-1022 for |t_0| < 1/2
    "residual": (XC, YB, 2, _theta(1, t02=-699.5)),  # e^-699.5 * 2e-7
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_the_gradient_iterate_makes_no_underflow(attack):
    """On main each attack's answer underflowed (and ``logistic_gradients`` returned subnormals)."""
    X, y, k, theta = ATTACKS[attack]
    spec = LrGradientTask("pm", 1.0, theta, float(max(np.max(np.abs(theta)), 1.0)), k, BOUNDS)
    assert underflows(answering_classes(X, y, spec, k)) == []
    assert subnormal_operands(answering_classes(X, y, spec, k), sent=(theta,)) == []


@pytest.mark.parametrize(("kind", "case"), CASE_IDS, ids=[f"{k}/{c}" for k, c in CASE_IDS])
def test_no_answer_underflows(kind, case):
    """Every case of the differential harness, for both of its owners: no operation underflows (a guard: the
    class of the attacks above, for every kind)."""
    for X, y in ((XA, YA), (XB, YB)):
        assert underflows(answering(X, y, CASES[kind][case]("run-1"), BOUNDS)) == [], (kind, case)


def test_the_detector_sees_an_underflow():
    """Positive controls: a subnormal ``exp`` and a matmul (BLAS) whose products are subnormal are reported."""
    assert underflows(lambda: np.exp(np.array([-720.0]))) == ["underflow"]
    assert underflows(lambda: np.full((64, 3), 0.75) @ np.full((3, 2), 1e-310))
    assert underflows(lambda: np.exp(np.array([-300.0]))) == []
