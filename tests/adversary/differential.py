"""Audit 6: the differential harness over every task kind an owner answers (its tests:
``test_differential_kinds.py`` over the real wire, ``test_differential_work.py`` in process).

Two honest ``privfed owner`` processes, one logical owner each, hold different rows of the same public
shape and row cell (3 and 4 rows: the cell ``(2, 4]``; one owner's rows sit on the bounds' corners and
centre with one label, the other's inside with both). A hostile coordinator sends both the same task
sequence, including edge parameters it may choose, and compares everything that is not the released value:

* the reply's *skeleton* (:func:`skeleton`): which ``oneof`` member and which sub-messages are present, every
  repeated field's length, every bytes field's length, every scalar that is not a released value (a
  ``Reports``' shape and grid, a ``Matrix``' shape, a ring session id), and a refusal's code and text;
* how many results came back for each task, and that no envelope was relayed outside a secure sum;
* the public parts of the ledger entries the task made (purpose, ε, δ, non-private flag, job, release id);
* for a ring secure sum (``boost_evaluate``), the envelopes each owner relays through the coordinator:
  their number, kind, sequence number and sealed (AES-GCM) payload length, in the same ring position;
* for the pairwise-mask secure sum (``secagg_keys``, ``secagg_unmask``, a masked input), every owner's answer
  to each step, over the in-process transport's real owner cores (a hostile coordinator's sizes are public);
* the no-clock work trace (``tests/adversary/test_timing_row_count.py``'s technique, made generic): every call
  into the project's code and numpy's Python layer while a real owner core answers, in order.

Any difference is a hole unless it is a released value (accounted in the ledger): the released scalars are
listed in :data:`RELEASED`, and nothing else may differ (an NCC share under ``labels="rr"`` too: its length was
the row count until ``common/learners/ncc_rr.py`` padded it to the public cell, ``test_ncc_rr_row_count.py``). :data:`COVERAGE` names, for every kind of the registry (read through its public
``BY_NAME``), how this module drives it; a kind added to the registry fails
:func:`test_every_kind_of_the_registry_is_driven` until it is listed here (and in :data:`CASES` if it is a
release). The work traces found two holes (fixed in common/work_rows.py): ``pad_rows`` skipped its copy for
a count at its cell's top, and ``release_rows`` branched on ``n > max_owner_rows``, a bound the coordinator sets.
"""

from __future__ import annotations

import gc
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from google.protobuf.descriptor import FieldDescriptor
from hostile import grid_stump

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import BoostConfig, BoostHistory, KeptRound, at_round, empty_history
from privfed.common.bounds import Bounds
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.ledger import Ledger
from privfed.common.tasks import (
    BoostShareTask,
    JoinTask,
    LrGradientTask,
    LrShareTask,
    NbReportTask,
    NccShareTask,
    PcaShareTask,
    SvmShareTask,
    Task,
)
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner
from privfed.proto import privfed_pb2 as pb

D, K = 2, 2
BOUNDS = Bounds.of(0.0, 1.0, D)
BUDGET = 1e4
#: Owner A: 3 rows on the corners and the centre of the box, one label. Owner B: 4 rows inside, both labels.
XA, YA = np.array([[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]]), np.array([0, 0, 0])
XB, YB = np.array([[0.3141592, 0.7], [0.7734, 0.2], [0.05, 0.95], [0.9, 0.9]]), np.array([1, 0, 1, 0])
A, B = "owner-0.o00000", "owner-1.o00000"

#: Scalar fields whose value is the release itself (by ``message.field``): they may differ, their presence too
#: (proto3 leaves a zero out). Everything else in a reply must be the same for both owners.
RELEASED = {
    "PcaShare.noisy_count",
    "NbReport.feature",  # sampled by the owner, independently of its data (and released)
    "NbReport.report",
    "NccShare.labels",
    "JointNccReports.features",  # sampled per row, independently of its data
    "JointNccReports.reports",
    "SampledStumpShare.coordinates",  # sampled by the owner, independently of its data
    "SampledStumpShare.reports",
    "NccRows.labels",
    "RingTotal.values",
    "MaskedInput.masked",  # y_u in Z_2^64: the input under its pairwise and self masks
}


def skeleton(msg, out: list | None = None, path: str = "") -> list:
    """Everything about a message that is not a released value (module docstring), in field order."""
    out = [] if out is None else out
    name = msg.DESCRIPTOR.name
    for field in msg.DESCRIPTOR.fields:
        where, key = f"{path}{field.name}", f"{name}.{field.name}"
        is_message = field.type == FieldDescriptor.TYPE_MESSAGE
        if field.is_repeated:
            values = getattr(msg, field.name)
            out.append((where, "len", len(values)))
            if is_message:
                for i, v in enumerate(values):
                    skeleton(v, out, f"{where}[{i}].")
            elif key not in RELEASED:
                out.append((where, list(values)))
        elif is_message:
            present = msg.HasField(field.name)
            out.append((where, "present", present))
            if present:
                skeleton(getattr(msg, field.name), out, f"{where}.")
        elif field.type == FieldDescriptor.TYPE_BYTES:
            out.append((where, "bytes", len(getattr(msg, field.name))))
        elif key not in RELEASED:
            value = getattr(msg, field.name)
            out.append((where, value.replace(B, A) if isinstance(value, str) else value))
    return out


def public_ledger(entries: list[dict], task_id: str) -> list[tuple]:
    """The public parts of ledger entries, the task's id and owner B's in a release id read as placeholders."""
    return [
        (e["release_id"].replace(task_id, "<task>").replace(B, A), e["purpose"], e["epsilon"], e["delta"])
        + (e["nonprivate"], e["job"])
        for e in entries
    ]


# ----------------------------------------------------------------------------- the task table
def boost(base: str, run: str, *, epsilon: float = 1.0, labels: str = "rr", **kw) -> BoostConfig:
    params = BoostingParams(
        base=base, epsilon=epsilon, n_classes=K, bounds=BOUNDS, n_rounds=3, group_size=1, labels=labels, **kw
    )
    return BoostConfig(run, params)


def kept_history(base: str = "stump", n_bins: int = 4) -> BoostHistory:
    """A run with one learner of ``base`` kept at the largest weight SAMME gives. Each learner predicts class 1 on
    every row of the box (the NCC centroids: on every row used here), so a row of label 0 is misclassified and
    its weight saturates high; owner A's rows are all of label 0, owner B's of both."""
    from privfed.common.learners.samme import max_alpha

    learner = {
        "stump": lambda: grid_stump(0, 1, n_bins, leaves=(1, 1)),
        "ncc": lambda: NearestCentroidModel(np.array([[0.9, 0.9], [0.5, 0.5]]), np.arange(K)),
        "lr": lambda: LinearModel(np.array([[0.0, 0.0]]), np.array([1.0]), BOUNDS),
    }[base]()
    return BoostHistory((KeptRound(learner, max_alpha(K), 0.0, 1.0),), 1)


#: ``ovr-huber``'s public row count (the task's ``rows``): a DP count near these owners' rows, as a coordinator sends.
#: (An m far below an owner's rows is the coordinator's choice of more solver steps: sqrt(cell / m) times.)
SVM_ROWS = 64


def svm_spec(model: str, epsilon: float, lam: float, scaling: str) -> SvmShareTask:
    delta = 0.0 if model == "ovr-huber" else 1e-5
    return SvmShareTask(epsilon, lam, K, BOUNDS, np.eye(D), delta=delta, model=model, scaling=scaling, rows=SVM_ROWS)


#: kind name -> {case name -> spec(run id)}: the same spec goes to both owners.
CASES: dict[str, dict[str, Callable[[str], object]]] = {
    "ncc_share": {
        **{
            f"{labels}-{mech}": (lambda run, m=mech, lab=labels: NccShareTask(m, 1.0, lab, 0.5, K, BOUNDS))
            for labels in ("rr", "joint")
            for mech in ("pm", "hm", "duchi", "laplace")
        },
        "joint-bound-1": lambda run: NccShareTask("pm", 1.0, "joint", 0.0, K, BOUNDS, max_owner_rows=1),
        "joint-bound-3": lambda run: NccShareTask("pm", 1.0, "joint", 0.0, K, BOUNDS, max_owner_rows=3),
        "rr-bound-1": lambda run: NccShareTask("pm", 1.0, "rr", 0.5, K, BOUNDS, max_owner_rows=1),  # K-ary
        "rr-bound-3": lambda run: NccShareTask("pm", 1.0, "rr", 0.5, K, BOUNDS, max_owner_rows=3),  # ⊥ or subsample
        "rr-floor": lambda run: NccShareTask("pm", 1e-5, "rr", 1e-5, K, BOUNDS),
        "rr-ceiling": lambda run: NccShareTask("pm", 30.0, "rr", 30.0, K, BOUNDS),
        "over-budget": lambda run: NccShareTask("pm", 2 * BUDGET, "rr", 0.5, K, BOUNDS),
        "other-schema": lambda run: NccShareTask("pm", 1.0, "rr", 0.5, K, Bounds.of(0.0, 1.0, D + 1)),
        "other-classes": lambda run: NccShareTask("pm", 1.0, "rr", 0.5, 5, BOUNDS),
        "infinite": lambda run: NccShareTask("pm", math.inf, "rr", math.inf, K, BOUNDS),
    },
    "lr_share": {
        **{m: (lambda run, m=m: LrShareTask(m, 1.0, 1.0, 1.0, K, BOUNDS)) for m in ("pm", "hm", "duchi", "laplace")},
        "tiny-c": lambda run: LrShareTask("pm", 1.0, 1.0, 1e-9, K, BOUNDS),
        "huge-bound": lambda run: LrShareTask("pm", 1.0, 1e9, 1.0, K, BOUNDS),
        "ceiling": lambda run: LrShareTask("pm", 30.0, 1e-6, 1e6, K, BOUNDS),
    },
    "pca_share": {
        f"{scaling}-k{k}": (lambda run, k=k, s=scaling: PcaShareTask(1.0, 1e-5, k, BOUNDS, 0.5, s))
        for scaling in ("ball", "box", "normalise")
        for k in (1, 2)
    }
    | {"ceiling": lambda run: PcaShareTask(30.0, 1e-3, 1, BOUNDS, 30.0, "normalise")},
    "svm_share": {
        f"{model}-{scaling}-{eps:g}-{lam:g}": (lambda run, a=(model, eps, lam, scaling): svm_spec(*a))
        for model in ("centroid", "mc-huber", "softmax", "ovr-huber")
        for scaling in ("ball", "box", "normalise")
        for eps, lam in ((1.0, 1e-2), (30.0, 2.0**-20))
    },
    "boost_share": {
        **{
            f"stump-{enc}": (lambda run, e=enc: BoostShareTask(boost("stump", run, stump_encoding=e), empty_history()))
            for enc in ("signs", "cells", "pair", "table")
        },
        "stump-kept": lambda run: BoostShareTask(boost("stump", run, n_bins=4), at_round(kept_history(), 1)),
        "ncc-rr": lambda run: BoostShareTask(boost("ncc", run), empty_history()),
        "ncc-joint": lambda run: BoostShareTask(boost("ncc", run, labels="joint"), empty_history()),
        "ncc-joint-kept": lambda run: BoostShareTask(
            boost("ncc", run, labels="joint", n_bins=4), at_round(kept_history("ncc"), 1)
        ),
        "ncc-joint-bound": lambda run: BoostShareTask(
            boost("ncc", run, labels="joint", max_owner_rows=3), empty_history()
        ),
        "lr": lambda run: BoostShareTask(boost("lr", run), empty_history()),
        "lr-kept": lambda run: BoostShareTask(boost("lr", run, n_bins=4), at_round(kept_history("lr"), 1)),
    },
    "lr_gradient": {
        **{
            m: (lambda run, m=m: LrGradientTask(m, 1.0, np.zeros((1, D + 1)), 4.0, K, BOUNDS))
            for m in ("pm", "hm", "duchi", "laplace")
        },
        "theta-at-the-box": lambda run: LrGradientTask("pm", 1.0, np.full((1, D + 1), 4.0), 4.0, K, BOUNDS),
        "theta-huge": lambda run: LrGradientTask("pm", 1.0, np.full((1, D + 1), -1e6), 1e6, K, BOUNDS),
    },
    "nb": {
        "bins-2": lambda run: NbReportTask(1.0, 2, K, BOUNDS),
        "bins-64": lambda run: NbReportTask(1.0, 64, K, BOUNDS),
        "ceiling": lambda run: NbReportTask(30.0, 3, K, BOUNDS),
        "floor": lambda run: NbReportTask(1e-5, 3, K, BOUNDS),
    },
    "join": {"accept": lambda run: JoinTask()},  # the accept round: answered from the policy, none here
}

#: How each kind of the registry is driven here: by :data:`CASES`, by the ring test, or why not at all.
COVERAGE = {
    **dict.fromkeys(CASES, "cases"),
    "boost_evaluate": "ring",
    "ring_message": "ring",  # a ring hop: the envelopes of boost_evaluate's rings, compared there
    # the pairwise-mask secure sum's steps, and boost_evaluate's masked input: real owner cores in process
    "secagg_keys": "secagg",
    "secagg_unmask": "secagg",
}

CASE_IDS = [(kind, case) for kind, cases in CASES.items() for case in cases]


def replaced(value, *names: str):
    """A string with each of ``names`` (a task id, a session, a run: different by construction) as ``<i>``."""
    if not isinstance(value, str):
        return value
    for i, name in enumerate(names):
        value = value.replace(name, f"<{i}>")
    return value


def anonymous(value, task_id: str, owner_ids) -> object:
    """A string with the task id as ``<task>`` and every owner id as ``<owner>``: whose it is is public."""
    if isinstance(value, str):
        value = value.replace(task_id, "<task>")
        for owner_id in owner_ids:
            value = value.replace(owner_id, "<owner>")
    return value


def normalised(result: pb.Result, *names: str) -> list:
    return [(w, *(replaced(v, result.task_id, *names) for v in rest)) for w, *rest in skeleton(result)]


#: Where the traced code lives: the project's (its tests aside) and numpy's Python layer, whose wrappers show
#: which array operations run; other libraries (grpc's finalizers, ...) are left out.
PROJECT = str(Path(__file__).resolve().parents[2]) + os.sep
NUMPY = str(Path(np.__file__).parent) + os.sep


def _traced(where: str) -> str | None:
    if where.startswith(NUMPY):
        return "numpy/" + where[len(NUMPY) :]
    if where.startswith(PROJECT) and f"{os.sep}tests{os.sep}" not in where and f"{os.sep}.venv{os.sep}" not in where:
        return where[len(PROJECT) :]
    return None


def owner_core(X, y, *, work_rows: int | None = None) -> tuple[LocalOwner, OwnerCore]:
    """One owner of rows ``X``, ``y``, bound to its row accounts as a node binds them, and a real core over it
    (``work_rows``: the node's declared row count, ``privfed owner --work-rows``)."""
    owner = LocalOwner(
        "node-0.o00000", X, y, np.random.Generator(np.random.PCG64(1)), K, BOUNDS, row_keys=tuple(row_digests(X, y))
    )
    ledger = Ledger(":memory:", epsilon_budget=BUDGET, delta_budget=1e-3)
    return owner, OwnerCore([owner], ledger, work_rows=work_rows)


def traced_answer(core: OwnerCore, owner_id: str, spec, on_call: Callable[[str, object], None]) -> pb.Result:
    """``core``'s answer to ``spec`` for ``owner_id``, with ``on_call(where, frame)`` told of every call into the
    project's code and numpy's Python layer (``sys.setprofile``: no clock). The garbage collector is run before and
    held off during the answer: a finalizer of an earlier test's object is no part of it."""

    def profile(frame, event, arg):
        if event == "call" and (where := _traced(frame.f_code.co_filename)) is not None:
            on_call(where, frame)

    gc.collect()
    gc.disable()
    sys.setprofile(profile)
    try:
        (result,) = core.answer([Task("t", owner_id, "run-1", spec)]).results
    finally:
        sys.setprofile(None)
        gc.enable()
    return result


def work_trace(X, y, spec) -> tuple[list[tuple[str, str]], object]:
    """Every call into the project's code and numpy's Python layer while a real owner core answers ``spec`` for
    an owner of rows ``X`` (:func:`traced_answer`), in order, and the answer."""
    owner, core = owner_core(X, y)
    calls: list[tuple[str, str]] = []
    result = traced_answer(core, owner.owner_id, spec, lambda where, frame: calls.append((where, frame.f_code.co_name)))
    return calls, result.payload
