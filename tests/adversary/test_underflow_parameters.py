"""Audit 9: a public parameter the coordinator chooses must not drive the owner's arithmetic on its rows into the
CPU's slow path.

Audit 8 (``test_subnormal_rows.py``) read an owner's tiny row values as 0 when it loads them. A subnormal can
also be *made* from normal rows: an operation whose exact result is below 2^-1022 (an underflow) takes the same
microcode assist as a subnormal operand, tens to hundreds of cycles (Andrysco et al., "On subnormal floating
point and abnormal timing", IEEE S&P 2015). The coordinator chooses numbers that meet the rows, so it chooses
which rows underflow, and the answer's time counts the owner's rows in a region it picked, with no noise and
no debit. Found on main (CPU time, medians of 300 alternated calls, ``bench``-free: the report has the command):

* ``lr_gradient``'s iterate θ: a softmax (K >= 3) of scores 708-745 apart is subnormal (1000 rows placed in
  that band by ``θ_{0,0} = 1000``: 1.09 ms against 0.52 ms for 1000 rows outside, 2.1x); ``θ_j = 2^-1021``
  makes ``t_j θ_j`` subnormal exactly for ``0 < |t_j| < 1/2`` (2.2x); ``exp(-|z|)`` clamped at 700 left
  ``(σ(z) - y) t_j`` subnormal for ``|t_j| < 1.4e-4``;
* a boosting history: ``alpha = 1e-310`` is an operand of the missed rows' arithmetic only (1.40x for 2000 rows
  all missed against none: the time counts the misses, which the evaluation release noises); an LR learner
  with ``coef = 2^-1021`` (1.37x, rows with ``|t_j| < 1/2``);
* an LR share's ``C = 2^-1000`` (products with rows near their bounds' middle), an SVM share's orthonormal
  subspace tilted by ``2^-1021``, and ``privfed query``'s served linear stage tilted the same way or its served
  bounds with ``lo = -1e-310``, which clipped the query's negative values to a subnormal (in the gap between
  ``GetModel`` and the first ``Predict``).

No clock here: :func:`fpstatus.slow_path` reads the CPU's own sticky denormal-operand flag (MXCSR.DE) and
numpy's underflow reports over the owner core's computations from rows (or the query gap). Fixed where the
numbers meet rows: :func:`~privfed.common.bounds.flush_tiny` (now on the bits, no floating-point operation on
a subnormal) reads the coordinator's θ, a ``LinearModel``'s coefficients, a ``KeptRound``'s α, E and W, an SVM
subspace, a served stage and ``Bounds`` below ``2^-300`` as 0; every ``exp`` of the owner's fits goes through
:func:`~privfed.common.bounds.exp_nonpositive` (0 below ``-300``); ``C`` has a public range (from ``2^-40``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from differential import BOUNDS, BUDGET, CASE_IDS, CASES, XA, XB, YA, YB, K, boost
from fpstatus import X86_64, slow_path
from hostile import grid_stump
from test_subnormal_rows import answering
from test_timing_query import BOUND, N_QUERIES, N_TRAIN, SUBSPACE, F, _csv, _query

from privfed.common.boosting.wire import BoostHistory, KeptRound, at_round, empty_history
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.samme import max_alpha
from privfed.common.ledger import Ledger
from privfed.common.tasks import BoostShareTask, LrGradientTask, LrShareTask, SvmShareTask, Task
from privfed.owner.core import OwnerCore
from privfed.owner.local import LocalOwner

pytestmark = pytest.mark.skipif(not X86_64, reason="reads the x86 MXCSR register (tests/adversary/fpstatus.py)")


def answering_classes(X: np.ndarray, y: np.ndarray, spec: object, n_classes: int) -> Callable[[], None]:
    """``test_subnormal_rows.answering`` for an owner of ``n_classes`` classes, whose answer must not be a refusal."""
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


def _gradient(theta: np.ndarray, k: int) -> LrGradientTask:
    return LrGradientTask("pm", 1.0, theta, float(max(np.max(np.abs(theta)), 1.0)), k, BOUNDS)


def _kept(learner: object, alpha: float, base: str) -> BoostShareTask:
    """A boosting share after one kept round of the coordinator's ``learner`` and ``alpha`` (E = 0, W = 1)."""
    history = BoostHistory((KeptRound(learner, alpha, 0.0, 1.0),), 1)
    return BoostShareTask(boost(base, "run-1", n_bins=4), at_round(history, 1))


def _svm(model: str, U: np.ndarray) -> SvmShareTask:
    return SvmShareTask(
        1.0, 1e-2, K, BOUNDS, U, delta=0.0 if model == "ovr-huber" else 1e-5, model=model, scaling="ball"
    )


#: Owner B's rows with row 1's first feature next to the centre of its bounds (``t_0 = 2e-7``), label 0.
XC = XB.copy()
XC[1, 0] = 0.5 + 1e-7
#: Owner B's rows with three classes (row 1 is the one in the band below: ``t_0 = 0.5468``).
Y3 = np.array([1, 0, 2, 0])
TINY_NORMAL = 2.0**-1021  # |t θ| < 2^-1022 for |t| < 1/2
#: An orthonormal subspace (a rotation by 2^-1021) whose products with rows underflow.
TILTED = np.array([[1.0, -TINY_NORMAL], [TINY_NORMAL, 1.0]])

#: name -> (rows, labels, classes, task): each has the owner's arithmetic on main meet a subnormal or
#: underflow, for rows in a region of the coordinator's choosing (module docstring).
ATTACKS = {
    "gradient-softmax-band": (XB, Y3, 3, _gradient(_theta(3, t00=720.0 / 0.5468), 3)),  # row 1's exp(-720)
    "gradient-softmax-beyond": (XB, Y3, 3, _gradient(_theta(3, t00=2000.0), 3)),  # exp(-1094): 0 from below
    "gradient-theta-subnormal": (XB, YB, 2, _gradient(_theta(1, t00=1e-310), 2)),
    "gradient-theta-tiny": (XB, YB, 2, _gradient(_theta(1, t00=TINY_NORMAL), 2)),
    "gradient-residual": (XC, YB, 2, _gradient(_theta(1, t02=-699.5), 2)),  # e^-699.5 * 2e-7
    "boost-alpha-subnormal": (XB, YB, 2, _kept(grid_stump(0, 1, 4, leaves=(1, 1)), 1e-310, "stump")),
    "boost-lr-coef-tiny": (XB, YB, 2, _kept(LinearModel([[TINY_NORMAL, 0.0]], [1.0], BOUNDS), max_alpha(K), "lr")),
    "lr-share-c-floor": (XB, YB, 2, LrShareTask("pm", 1.0, 1.0, 2.0**-40, K, BOUNDS)),  # the lowest C accepted
    "boost-lr-c-floor": (XB, YB, 2, BoostShareTask(boost("lr", "run-1", C=2.0**-40), empty_history())),
    **{f"svm-{m}-tilted": (XB, YB, 2, _svm(m, TILTED)) for m in ("centroid", "mc-huber", "softmax", "ovr-huber")},
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_the_coordinators_parameters_take_no_slow_path(attack, monkeypatch):
    """On main each attack's computation from rows had a subnormal operand or an underflow."""
    X, y, k, spec = ATTACKS[attack]
    assert slow_path(answering_classes(X, y, spec, k), monkeypatch) == set()


@pytest.mark.parametrize(
    "spec",
    [
        LrShareTask("pm", 1.0, 1.0, 2.0**-1000, K, BOUNDS),
        LrShareTask("pm", 1.0, 1.0, 1e-310, K, BOUNDS),
        BoostShareTask(boost("lr", "run-1", C=2.0**-1000), empty_history()),
    ],
    ids=["lr-share-2^-1000", "lr-share-subnormal", "boost-lr-2^-1000"],
)
def test_an_lr_c_below_its_public_range_is_refused_before_any_row_is_read(spec):
    """The LR fit multiplies rows by ``C``: at ``2^-1000`` on main its products underflowed (and at 1e-310 the
    fit was not finite, so the fallback left). ``C`` now has a public range (``SENSITIVITY_LIMITS``, from
    ``2^-40``), checked with the task alone."""
    owner = LocalOwner("node-0.o00000", XB, YB, np.random.Generator(np.random.PCG64(1)), K, BOUNDS)
    ledger = Ledger(":memory:", epsilon_budget=BUDGET, delta_budget=1e-3)
    (result,) = OwnerCore([owner], ledger).answer([Task("t", owner.owner_id, "run-1", spec)]).results
    assert result.payload.code == "invalid_task" and "C=" in result.payload.message, result.payload
    assert ledger.history(owner.owner_id) == []


@pytest.mark.parametrize(("kind", "case"), CASE_IDS, ids=[f"{k}/{c}" for k, c in CASE_IDS])
def test_no_answer_takes_the_slow_path(kind, case):
    """Every case of the differential harness, for both of its owners, whole answers: no subnormal operand and
    no underflow anywhere (a guard: the class of the attacks above, for every kind)."""
    for X, y in ((XA, YA), (XB, YB)):
        assert slow_path(answering(X, y, CASES[kind][case]("run-1"), BOUNDS)) == set(), (kind, case)


def test_the_detector_sees_the_slow_path(monkeypatch):
    """Positive controls: a subnormal operand (numpy and CPython floats), an underflowing ``exp`` and a matmul
    (BLAS) with subnormal products are seen; normal arithmetic is not; and scoped to the computations from
    rows, an answer whose computation is made to meet a subnormal is seen."""
    tiny = [1e-310]
    assert slow_path(lambda: np.full(8, tiny[0]) * 2.0) == {"denormal"}
    assert slow_path(lambda: tiny[0] * 3.0) == {"denormal"}
    # an underflowing exp is seen; whether its implementation also meets a subnormal operand on the way depends on
    # the CPU's numpy loop (SIMD or libm): both were seen on the 2-core machines this runs on
    assert "underflow" in slow_path(lambda: np.exp(np.array([-720.0])))
    assert slow_path(lambda: np.full((64, 3), 0.75) @ np.full((3, 2), tiny[0])) == {"denormal", "underflow"}
    assert slow_path(lambda: np.exp(np.full(8, -300.0)) * np.full(8, 0.5)) == set()
    from privfed.owner import core

    spec = CASES["lr_gradient"]["pm"]("run-1")
    assert slow_path(answering(XB, YB, spec, BOUNDS), monkeypatch) == set()
    for name in ("release_from", "compute_together"):  # the computation meets a subnormal first
        original = getattr(core, name)
        monkeypatch.setattr(core, name, lambda *a, f=original, **k: (np.full(8, tiny[0]) * 2.0, f(*a, **k))[1])
    assert slow_path(answering(XB, YB, spec, BOUNDS), monkeypatch) == {"denormal"}
    assert slow_path(lambda: np.full(8, tiny[0]) * 2.0, monkeypatch) == set()  # outside a computation


@pytest.mark.parametrize("lo", [-BOUND, -1e-310], ids=["bounds", "bound-subnormal"])
@pytest.mark.parametrize("flags", [{}, {"confidential_labels": (0,), **SUBSPACE}], ids=["projection", "subspace"])
def test_a_served_linear_stage_takes_the_query_gap_to_no_slow_path(
    coordinator, certs, tmp_path, monkeypatch, flags, lo
):
    """``privfed query`` over real sockets: the coordinator serves ``A_d`` of one column tilted by ``2^-1021``
    (rank 1, finite: ``check_linear_stage`` takes it), with bounds whose ``lo`` is -4 or -1e-310. Between
    ``GetModel``'s answer and the first ``Predict`` (the gap a coordinator times, ``owner/query.py``) the owner
    cleans its query rows against them: on main the rows' products with the tilt underflowed, and the rows'
    negative values were clipped to the subnormal bound."""
    from privfed.owner import query_client
    from privfed.proto import privfed_pb2 as pb
    from privfed.proto.serde import matrix_to_proto

    rng = np.random.Generator(np.random.PCG64(3))
    queries = _csv(tmp_path / "q.csv", np.clip(rng.normal(size=(N_QUERIES, F)), -BOUND, BOUND))
    train = _csv(tmp_path / "t.csv", np.column_stack([rng.normal(size=(N_TRAIN, F)), rng.integers(0, 2, N_TRAIN)]))
    A_d = np.array([[1.0], [TINY_NORMAL], [0.0], [0.0]])
    coordinator.model = pb.GetModelResponse(
        model_id="m", kind="lr", bounds=matrix_to_proto(np.stack([np.full(F, lo), np.full(F, BOUND)])),
        linear_stage=matrix_to_proto(A_d),
    )  # fmt: skip
    go = _query(coordinator, certs, tmp_path, queries, **({**flags, "train_data": train} if flags else {}))
    seen = slow_path(go, monkeypatch, between=(query_client.ModelClient, "get_model", "predict"))
    assert coordinator.predicts, "no Predict was sent"
    assert seen == set()
