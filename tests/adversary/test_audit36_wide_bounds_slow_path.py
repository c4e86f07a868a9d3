"""Audit 36, A36-1: wide public bounds, which a hostile coordinator's federation schema may give (a node started
without ``--schema`` reads its rows by the coordinator's schema, ``owner/node.py`` ``_receive_schema``), make
FedDPDR's row scalings ("box", and "ball" before it) produce scaled values whose squares and products underflow,
for the rows whose value lies in a band the coordinator picks: the CPU's slow path (audits 8 and 9), with no
noise and no debit.

``Bounds`` accepts a half-width up to ~1.3e154 (its squares must stay finite). With ``[-h, h]`` the box scaling
multiplies a feature by ``1 / (h sqrt d)`` (the ball scaling divides by ``R = h sqrt d``), so a row value ``x`` of
``0 < |x| < 1.5e-154 h sqrt d`` becomes smaller than ``2^-511``, and its square (the unit-ball clip's norm, DP-PCA's
``X^T X``) is below the normal range. With ``h = 1e150`` and ``d = 2`` that is ``0 < |x| < 2.1e-4``; a larger ``h``
moves the band's edge up to ~2 sqrt d: the coordinator chooses which rows take the slow path, and the time of a
``pca_share`` or ``svm_share`` answer counts them (the count of slow operations grows with the rows in the band).

No clock: :func:`fpstatus.slow_path` reads the CPU's sticky denormal-operand flag and numpy's underflow reports
over the owner core's computations from rows, for two owners whose rows differ in one value (a neighbouring data
set): one in the band, one not. Everything else (task, bounds, ledger) is the same.
"""

from __future__ import annotations

import numpy as np
import pytest
from differential import XB, YB
from fpstatus import X86_64, slow_path
from test_subnormal_rows import answering

from privfed.common.bounds import Bounds
from privfed.common.schema import FederationSchema
from privfed.common.tasks import PcaShareTask, SvmShareTask

pytestmark = [
    pytest.mark.in_process,
    pytest.mark.skipif(not X86_64, reason="reads the x86 MXCSR register (tests/adversary/fpstatus.py)"),
]

#: A hostile coordinator's schema: two numeric features, bounds [-1e150, 1e150] (accepted: finite, lo < hi, the
#: box's radius finite).
SCHEMA = '{"features": 2, "classes": [0, 1], "bounds": {"lo": -1e150, "hi": 1e150}}'
WIDE = Bounds.of(-1e150, 1e150, 2)
#: Owner B's rows (``differential.py``) and the same rows with one value moved into the band (0 < |x| < 2.1e-4).
IN_BAND = XB.copy()
IN_BAND[1, 0] = 1e-5


def _tasks() -> dict[str, object]:
    pca = {f"pca-{s}": PcaShareTask(1.0, 1e-5, 1, WIDE, 0.5, s) for s in ("box", "ball")}
    svm = {
        f"svm-{m}-{s}": SvmShareTask(1.0, 1e-2, 2, WIDE, np.eye(2), delta=1e-5, model=m, scaling=s, rows=64)
        for m in ("mc-huber", "centroid")
        for s in ("box", "ball")
    }
    return pca | svm


TASKS = _tasks()


def test_a_coordinators_schema_may_give_such_bounds():
    """The node takes these bounds from the coordinator's schema: nothing refuses them."""
    schema = FederationSchema.parse(SCHEMA, source="the coordinator's schema")
    bounds = schema.bounds
    assert np.array_equal(bounds.lo, WIDE.lo) and np.array_equal(bounds.hi, WIDE.hi)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_wide_bounds_take_no_row_to_the_slow_path(name, monkeypatch):
    """Rows of neighbouring data sets, one holding a value in the coordinator's band: the computation from rows of
    each must take the same path (none slow). On current code the in-band owner's answer has a denormal operand and
    an underflow, the other's has none."""
    spec = TASKS[name]
    seen = {}
    for label, X in (("out-of-band", XB), ("in-band", IN_BAND)):
        with monkeypatch.context() as m:
            seen[label] = slow_path(answering(X, YB, spec, WIDE), m)
    assert seen == {"out-of-band": set(), "in-band": set()}, seen


#: The "normalise" scaling maps ``[lo, hi]`` onto ``[0, 1]`` first: with ``[0, 1e153]`` a value ``0 < x < 0.149``
#: becomes ``u < 1.5e-154``, whose square (the row's norm) underflows. Rows all above that band, and the same
#: rows with one value in it.
TALL = Bounds.of(0.0, 1e153, 2)
ABOVE = XB + 1.0
ABOVE_IN_BAND = ABOVE.copy()
ABOVE_IN_BAND[1, 0] = 0.01


@pytest.mark.parametrize("k", [1, 2])
def test_the_normalise_scaling_takes_no_row_to_the_slow_path(k, monkeypatch):
    """The same for ``normalise``'s map onto ``[0, 1]`` (its norm of a row holding a value near ``lo``)."""
    spec = PcaShareTask(1.0, 1e-5, k, TALL, 0.5, "normalise")
    seen = {}
    for label, X in (("out-of-band", ABOVE), ("in-band", ABOVE_IN_BAND)):
        with monkeypatch.context() as m:
            seen[label] = slow_path(answering(X, YB, spec, TALL), m)
    assert seen == {"out-of-band": set(), "in-band": set()}, seen


#: Narrow bounds do it too, through the unit-ball clip's division: feature 0's bounds ``[0, 2^-200]`` (box factor
#: ``2^201 / sqrt 2``) and rows holding 1e150 there are clamped to ``2^500``, so the clip divides the row by ~``2^500``
#: and a feature-1 value within ~1/2048 of its half-width from the centre ends below ``2^-511``: its square in
#: ``X^T X`` underflows. Values outside the bounds are counted in the owner's log, not refused (``owner/data.py``).
NARROW = Bounds(np.array([0.0, 0.0]), np.array([2.0**-200, 1.0]))
FAR = XB.copy()
FAR[:, 0] = 1e150
FAR_NEAR_CENTRE = FAR.copy()
FAR_NEAR_CENTRE[1, 1] = 0.5 + 1e-7


def test_a_clamped_feature_takes_no_other_feature_to_the_slow_path(monkeypatch):
    """Regression test of the fix's second flush (after the clip's division): on the code before 510dcb2 the
    near-centre owner's answer had a denormal operand and an underflow, the other's none (checked by restoring
    ``common/feddpdr/pca.py`` of 90d1d7c)."""
    spec = PcaShareTask(1.0, 1e-5, 1, NARROW, 0.5, "box")
    seen = {}
    for label, X in (("away", FAR), ("near-centre", FAR_NEAR_CENTRE)):
        with monkeypatch.context() as m:
            seen[label] = slow_path(answering(X, YB, spec, NARROW), m)
    assert seen == {"away": set(), "near-centre": set()}, seen
