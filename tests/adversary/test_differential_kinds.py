"""Audit 6: a differential check over every task kind an owner answers, over the real wire.

Two honest ``privfed owner`` processes, one logical owner each, hold different rows of the same public
shape and row cell (3 and 4 rows: the cell ``(2, 4]``; one owner's rows sit on the bounds' corners and
centre with one label, the other's inside with both). A hostile coordinator sends both the same task
sequence, including edge parameters it may choose, and compares everything that is not the released value:

* the reply's *skeleton* (:func:`skeleton`): which ``oneof`` member and which sub-messages are present, every
  repeated field's length, every bytes field's length, every scalar that is not a released value (a
  ``Reports``' shape and grid, a ``Matrix``' shape, a ring session id), and a refusal's code and text;
* how many results came back for each task, and that no envelope was relayed outside a secure sum;
* the public parts of the ledger entries the task made (purpose, ε, δ, non-private flag, job, release id);
* for a secure sum (``boost_evaluate``'s ring), the envelopes each owner relays through the coordinator:
  their number, kind, sequence number and sealed (AES-GCM) payload length, in the same ring position.

Any difference is a hole unless it is a released value (accounted in the ledger): the released scalars are
listed in :data:`RELEASED` and nothing else may differ. :data:`COVERAGE` names, for every kind of the
registry (read through its public ``BY_NAME``), how this module drives it; a kind added to the registry
fails :func:`test_every_kind_of_the_registry_is_driven` until it is listed here.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable

import numpy as np
import pytest
from google.protobuf.descriptor import FieldDescriptor
from hostile import (
    HostileCoordinator,
    grid_stump,
    ledger_history,
    make_federation_certs,
    spawn_owner,
)

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import BoostConfig, BoostHistory, KeptRound, at_round, empty_history
from privfed.common.bounds import Bounds
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.secagg.ring import Inbound
from privfed.common.tasks import (
    BY_NAME,
    BoostShareTask,
    LrGradientTask,
    LrShareTask,
    NbReportTask,
    NccShareTask,
    PcaShareTask,
    SvmShareTask,
    Task,
)
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde

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
}
#: Documented public cells (owner/core.py, "Limits"): an NCC share under ``labels="rr"`` is one report per row,
#: its length is the owner's row count. These skeleton entries may differ in these cases, and must.
DOCUMENTED = {"ncc_share.reports.shape", "ncc_share.reports.data", "ncc_share.labels"}


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
def _boost(base: str, run: str, *, epsilon: float = 1.0, labels: str = "rr", **kw) -> BoostConfig:
    params = BoostingParams(
        base=base, epsilon=epsilon, n_classes=K, bounds=BOUNDS, n_rounds=3, group_size=1, labels=labels, **kw
    )
    return BoostConfig(run, params)


def _kept_history(n_bins: int = 4) -> BoostHistory:
    """A run with one stump kept at a large weight: owner A's rows (all label 0) are all misclassified by it."""
    from privfed.common.learners.samme import max_alpha

    learner = grid_stump(0, 1, n_bins, leaves=(1, 1))
    return BoostHistory((KeptRound(learner, max_alpha(K), 0.0, 1.0),), 1)


def _svm(model: str, epsilon: float, lam: float, scaling: str) -> SvmShareTask:
    delta = 0.0 if model == "ovr-huber" else 1e-5
    return SvmShareTask(epsilon, lam, K, BOUNDS, np.eye(D), delta=delta, model=model, scaling=scaling)


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
        for scaling in ("ball", "normalise")
        for k in (1, 2)
    }
    | {"ceiling": lambda run: PcaShareTask(30.0, 1e-3, 1, BOUNDS, 30.0, "normalise")},
    "svm_share": {
        f"{model}-{scaling}-{eps:g}-{lam:g}": (lambda run, a=(model, eps, lam, scaling): _svm(*a))
        for model in ("centroid", "mc-huber", "softmax", "ovr-huber")
        for scaling in ("ball", "normalise")
        for eps, lam in ((1.0, 1e-2), (30.0, 2.0**-20))
    },
    "boost_share": {
        **{
            f"stump-{enc}": (lambda run, e=enc: BoostShareTask(_boost("stump", run, stump_encoding=e), empty_history()))
            for enc in ("signs", "cells", "pair", "table")
        },
        "stump-kept": lambda run: BoostShareTask(_boost("stump", run, n_bins=4), at_round(_kept_history(), 1)),
        "ncc-rr": lambda run: BoostShareTask(_boost("ncc", run), empty_history()),
        "ncc-joint": lambda run: BoostShareTask(_boost("ncc", run, labels="joint"), empty_history()),
        "ncc-joint-kept": lambda run: BoostShareTask(
            _boost("ncc", run, labels="joint", n_bins=4), at_round(_kept_history(), 1)
        ),
        "ncc-joint-bound": lambda run: BoostShareTask(
            _boost("ncc", run, labels="joint", max_owner_rows=3), empty_history()
        ),
        "lr": lambda run: BoostShareTask(_boost("lr", run), empty_history()),
        "lr-kept": lambda run: BoostShareTask(_boost("lr", run, n_bins=4), at_round(_kept_history(), 1)),
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
}

#: How each kind of the registry is driven here: by :data:`CASES`, by the ring test, or why not at all.
COVERAGE = {
    **dict.fromkeys(CASES, "cases"),
    "boost_evaluate": "ring",
    "ring_message": "ring",  # a ring hop: the envelopes of boost_evaluate's rings, compared there
    "secagg_keys": "not driven: the pairwise-mask secure sum is no owner node's path over this wire yet",
    "secagg_unmask": "not driven: as secagg_keys",
}

CASE_IDS = [(kind, case) for kind, cases in CASES.items() for case in cases]


# ----------------------------------------------------------------------------- the federation
@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """The hostile coordinator and the two owner nodes, shared by every case of the module."""
    tmp = tmp_path_factory.mktemp("differential")
    certs = make_federation_certs(tmp / "certs", owners=2)
    coordinator = HostileCoordinator(certs)
    nodes = [
        spawn_owner(tmp, coordinator.port, name, X, y, certs=certs, budget=BUDGET, shards=1)
        for name, X, y in (("owner-0", XA, YA), ("owner-1", XB, YB))
    ]
    try:
        coordinator.wait_registered([A, B])
        yield coordinator, dict(zip((A, B), nodes))
    finally:
        coordinator.stop()
        for node in nodes:
            node.stop()


def _ask_both(coordinator, nodes, name: str, spec_of: Callable[[str], object]):
    """One task of the same spec to each owner (one batch per node, at once): their results, how many
    results came per task, the ledger entries the tasks made and the envelopes relayed meanwhile."""
    run = f"{name}-{secrets.token_hex(4)}"
    before = {o: len(ledger_history(nodes[o].ledger, o, BUDGET)) for o in nodes}
    relays = len(coordinator.relays)
    since = len(coordinator.results)
    spec = spec_of(run)
    tasks = [serde.task_to_proto(Task(f"{run}-{o[6]}", o, run, spec)) for o in (A, B)]
    results = coordinator.run(tasks, timeout=120)
    counts = [sum(r.task_id == t.task_id for r in coordinator.results[since:]) for t in tasks]
    ledgers = [
        public_ledger(ledger_history(nodes[o].ledger, o, BUDGET)[before[o] :], t.task_id) for o, t in zip((A, B), tasks)
    ]
    return [results.get(t.task_id) for t in tasks], counts, ledgers, coordinator.relays[relays:]


def _replaced(value, *names: str):
    """A string with each of ``names`` (a task id, a session, a run: different by construction) as ``<i>``."""
    if not isinstance(value, str):
        return value
    for i, name in enumerate(names):
        value = value.replace(name, f"<{i}>")
    return value


def _normalised(result: pb.Result, *names: str) -> list:
    return [(w, *(_replaced(v, result.task_id, *names) for v in rest)) for w, *rest in skeleton(result)]


@pytest.mark.parametrize(("kind", "case"), CASE_IDS, ids=[f"{k}/{c}" for k, c in CASE_IDS])
def test_two_owners_differ_only_in_their_released_values(federation, kind, case):
    coordinator, nodes = federation
    (ra, rb), counts, (la, lb), relays = _ask_both(coordinator, nodes, f"{kind}-{case}", CASES[kind][case])
    assert ra is not None and rb is not None, (ra, rb, [n.log()[-2000:] for n in nodes.values()])
    assert counts == [1, 1], counts
    sa, sb = _normalised(ra), _normalised(rb)
    if kind == "ncc_share" and case.startswith("rr-"):
        assert [e for e in sa if e[0] in DOCUMENTED] != [e for e in sb if e[0] in DOCUMENTED]  # 3 rows and 4
        sa, sb = ([e for e in s if e[0] not in DOCUMENTED] for s in (sa, sb))
    assert sa == sb, (ra, rb)
    assert la == lb, (la, lb)
    assert relays == [], relays


def test_every_kind_of_the_registry_is_driven():
    """A kind added to ``privfed.common.tasks`` fails here until :data:`COVERAGE` says how it is driven."""
    assert set(COVERAGE) == set(BY_NAME), set(BY_NAME) ^ set(COVERAGE)


# ----------------------------------------------------------------------------- a secure sum's envelopes
def _envelopes(coordinator, node_id: str, session: str) -> list[tuple]:
    """What the coordinator sees of a node's relayed envelopes in one session: recipient, kind, seq, sealed length."""
    out = []
    for recipient, data in coordinator.relays_from(node_id, session):
        env = Inbound.from_bytes(data)
        out.append((recipient.replace(B, A), env.kind, env.seq, len(env.ciphertext), len(data)))
    return out


RINGS = {
    "stump": lambda run: (_boost("stump", run, n_bins=4), empty_history(), grid_stump(0, 1, 4)),
    "stump-kept": lambda run: (_boost("stump", run, n_bins=4), at_round(_kept_history(), 1), grid_stump(1, 3, 4)),
    "ncc-joint": lambda run: (
        _boost("ncc", run, labels="joint", n_bins=4),
        empty_history(),
        NearestCentroidModel(np.array([[0.25, 0.25], [0.75, 0.75]]), np.arange(K)),
    ),
}


@pytest.mark.parametrize("case", sorted(RINGS))
def test_a_ring_member_relays_the_same_envelopes_whatever_its_rows(federation, case):
    """A two-owner ring each way round: owner A in a position relays what owner B relays in it (number, kind,
    sequence, sealed length); the answers and ledger entries of the two positions are alike but for the total."""
    coordinator, nodes = federation
    seen = {}
    for ring in ([A, B], [B, A]):
        run = f"ring-{case}-{secrets.token_hex(4)}"
        config, history, learner = RINGS[case](run)
        before = {o: len(ledger_history(nodes[o].ledger, o, BUDGET)) for o in nodes}
        outcome = coordinator.run_ring(ring, learner, config, round_id=run, history=history, timeout=60)
        assert outcome.total is not None, (outcome.answers, [n.log()[-2000:] for n in nodes.values()])
        for position, o in enumerate(ring):
            result = outcome.answers[o]
            entries = ledger_history(nodes[o].ledger, o, BUDGET)[before[o] :]
            seen[(position, o)] = (
                _envelopes(coordinator, coordinator.node_of(o), outcome.session),
                _normalised(result, outcome.session, run),
                [tuple(_replaced(v, run) for v in e) for e in public_ledger(entries, result.task_id)],
            )
    for position in (0, 1):
        assert seen[(position, A)] == seen[(position, B)], position
        assert seen[(position, A)][0], "no envelope seen"
