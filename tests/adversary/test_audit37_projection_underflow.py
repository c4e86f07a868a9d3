"""Audit 37, A37-1: FedDPDR phase 2 projects the owner's scaled rows onto the coordinator's ``U_global`` and clips
the projected rows to the unit ball (``common/feddpdr/model.py`` ``project``) *before* anything flushes them: A36-1's
fix flushes the scaled rows (``common/feddpdr/pca.py`` ``_centred_into_ball``) and the SVMs flush ``Z`` later
(``multiclass.fit_dp_multiclass``, ``svm.py``), but ``project``'s norm and ``check_unit_rows``' norm square ``Z``
as it is.

The scaled rows are 0 or at least ``2^-300`` and ``U``'s entries too (flushed), so a product ``x u`` is normal; its
*square* is not when ``x u < 2^-511``. ``project`` accepts any ``U`` with ``U^T U`` within ``1e-8`` of the identity,
so a coordinator sends ``U = [[1, 0], [2^-300, 1]]``: column 0 reads ``x_0 + 2^-300 x_1``. With its schema's wide
bounds (A36-1's precondition: a node started without ``--schema`` reads its rows by the coordinator's, and
``Bounds`` accepts a half-width to ~1.3e154) feature 0's values are flushed to 0, and a feature-1 value ``v`` scaled
to ``x_1 = v / (h sqrt d)`` in ``[2^-300, 2^-211]`` makes ``(2^-300 x_1)^2`` underflow: a subnormal (or an
underflow to 0) in the norm, the CPU's slow path, for exactly the rows whose feature 1 lies in a band
``[2^-300 h sqrt d, 2^-211 h sqrt d]`` the coordinator places with ``h`` (here ``h = 1e150``, ``d = 2``: raw values
in ~``[7e59, 4e86]``). Every model of ``svm_share`` (``mc-huber``, ``centroid``, ``ovr-huber``) and both affine
scalings; no refusal, the release is accepted and debited as usual, and the time of the answer counts the rows in
the band.

No clock: :func:`fpstatus.slow_path` (the CPU's sticky denormal-operand flag and numpy's underflow reports over the
owner core's computations from rows), for two owners whose rows differ in one value. The control is the same pair
under an honest ``U`` (the identity), which A36-1's fix already keeps off the slow path.

Fixed: ``clip_rows_to_unit_ball`` and ``check_unit_rows`` read values below 2^-300 as 0 before the norm
(``common/feddpdr/pca.py``); these tests pass since.
"""

from __future__ import annotations

import numpy as np
import pytest
from differential import BUDGET, XB, YB, K
from fpstatus import X86_64, slow_path

from privfed.common.bounds import Bounds
from privfed.common.ledger import Ledger
from privfed.common.tasks import Refusal, SvmShareTask, Task
from privfed.owner.core import OwnerCore
from privfed.owner.local import LocalOwner

pytestmark = [
    pytest.mark.in_process,
    pytest.mark.skipif(not X86_64, reason="reads the x86 MXCSR register (tests/adversary/fpstatus.py)"),
]

#: The hostile coordinator's schema bounds (A36-1's), accepted by ``Bounds``.
WIDE = Bounds.of(-1e150, 1e150, 2)
#: Passes ``project``'s orthonormality check (``U^T U`` is the identity to 2^-300); column 0 reads feature 1 at 2^-300.
HOSTILE_U = np.array([[1.0, 0.0], [2.0**-300, 1.0]])
HONEST_U = np.eye(2)
#: Owner B's rows and the same rows with one feature-1 value in the band (scaled: 1e80 / (1e150 sqrt 2) ~ 7e-71,
#: times 2^-300 ~ 3.5e-161, squared ~ 1.2e-321: subnormal).
IN_BAND = XB.copy()
IN_BAND[1, 1] = 1e80


def _spec(model: str, scaling: str, U: np.ndarray) -> SvmShareTask:
    delta = 0.0 if model == "ovr-huber" else 1e-5  # ovr-huber is pure epsilon-DP
    return SvmShareTask(1.0, 1e-2, 2, WIDE, U, delta=delta, model=model, scaling=scaling, rows=64)


def _answering(X: np.ndarray, spec: SvmShareTask):
    """A real owner core of rows ``X`` answering ``spec``; the answer must be a release (no refusal: the hostile
    ``U`` is accepted and debited like an honest one)."""
    owner = LocalOwner("node-0.o00000", X, YB, np.random.Generator(np.random.PCG64(1)), K, WIDE)
    core = OwnerCore([owner], Ledger(":memory:", epsilon_budget=BUDGET, delta_budget=1e-3))

    def answer() -> None:
        (result,) = core.answer([Task("t", owner.owner_id, "run-1", spec)]).results
        assert not isinstance(result.payload, Refusal), result.payload

    return answer


def _seen(spec: SvmShareTask, monkeypatch) -> dict[str, set[str]]:
    seen = {}
    for label, X in (("out-of-band", XB), ("in-band", IN_BAND)):
        with monkeypatch.context() as m:
            seen[label] = slow_path(_answering(X, spec), m)
    return seen


CASES = [(m, s) for m in ("mc-huber", "centroid", "ovr-huber") for s in ("box", "ball")]


@pytest.mark.parametrize(("model", "scaling"), CASES, ids=[f"{m}-{s}" for m, s in CASES])
def test_a_hostile_basis_takes_no_row_to_the_slow_path(model, scaling, monkeypatch):
    """Neighbouring rows, one value in the coordinator's band: the computation from rows must take the same path
    for both (none slow). On current code the in-band owner's answer has a denormal operand and an underflow."""
    seen = _seen(_spec(model, scaling, HOSTILE_U), monkeypatch)
    assert seen == {"out-of-band": set(), "in-band": set()}, seen


@pytest.mark.parametrize(("model", "scaling"), CASES, ids=[f"{m}-{s}" for m, s in CASES])
def test_control_an_honest_basis_takes_neither_to_the_slow_path(model, scaling, monkeypatch):
    """Control: the same rows under the identity basis (A36-1's fix holds there), so the difference above is the
    basis's 2^-300 entry, and the detector is not blind to it (the first test sees it)."""
    seen = _seen(_spec(model, scaling, HONEST_U), monkeypatch)
    assert seen == {"out-of-band": set(), "in-band": set()}, seen


def test_the_hostile_basis_passes_the_owners_check():
    """``project`` takes ``HOSTILE_U`` for orthonormal: nothing refuses it before the rows are read."""
    from privfed.common.feddpdr.model import project

    Z = project(np.array([[0.0, 0.5]]), HOSTILE_U)
    assert Z.shape == (1, 2) and Z[0, 1] == 0.5
