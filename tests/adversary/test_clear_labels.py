"""Issue 9, item 2: labels do not leave raw unless the owner itself opted in.

A hostile coordinator asks for clear labels (NCC ``labels=clear``, and a boosting share with the
NCC base learner and clear labels). An owner started without ``--allow-clear-labels`` refuses
with code ``policy`` and debits nothing; an owner started with it answers and its ledger records
a non-private ``clear-labels`` entry. Everything the coordinator's side builds defaults to
randomized response (contract 6).
"""

import math
import secrets

import numpy as np
from hostile import (
    assert_still_serving,
    boost_config,
    boost_share,
    kind,
    ledger_history,
    ncc_task,
    refusal_code,
)

D = 2
X = np.array([[0.2, 0.9], [0.8, 0.3]])
Y = np.array([1, 0])


def _tid(prefix):
    return f"{prefix}-{secrets.token_hex(4)}"


def test_clear_labels_refused_without_opt_in(coordinator, owners):
    node = owners("owner-0", X, Y)
    a, b = node.owner_ids
    ncc = ncc_task(_tid("clear"), a, d=D, epsilon=0.1, labels="clear", label_epsilon=0.0)
    boost = boost_share(_tid("bclear"), b, "clear-run", boost_config(D, "clear-run", base="ncc", labels="clear"))
    results = coordinator.run([ncc, boost])
    for task in (ncc, boost):
        r = results.get(task.task_id)
        assert kind(r) == "refusal", f"clear labels released without opt-in: {r}"
        assert refusal_code(r) == "policy", r.refusal
        # nothing left, so nothing is debited
        assert not [h for h in ledger_history(node.ledger, task.owner_id) if task.task_id in h["release_id"]]
    assert_still_serving(coordinator, node, a, d=D)


def test_clear_labels_with_opt_in_are_recorded_as_nonprivate(coordinator, owners):
    node = owners("owner-0", X, Y, extra=("--allow-clear-labels",))
    a = node.owner_ids[0]
    task = ncc_task(_tid("clear"), a, d=D, epsilon=0.1, labels="clear", label_epsilon=0.0)
    r = coordinator.run([task])[task.task_id]
    assert kind(r) == "ncc_share", r
    history = ledger_history(node.ledger, a)
    nonprivate = [h for h in history if h.get("nonprivate")]
    assert nonprivate and any("clear-labels" in h["purpose"] for h in nonprivate), history
    assert_still_serving(coordinator, node, a, d=D)


def test_joint_labels_need_no_opt_in_and_never_carry_a_label(coordinator, owners):
    """``labels="joint"`` answers with (feature, report) pairs alone -- no label, no row -- debited at the
    task's ε whatever ``label_epsilon`` the coordinator writes; asked at ε = ∞ (where joint sends the rows and
    labels exactly) an owner of a finite budget refuses, so joint is no back door to clear labels."""
    node = owners("owner-0", X, Y)
    a, b = node.owner_ids
    joint = ncc_task(_tid("joint"), a, d=D, epsilon=0.1, labels="joint", label_epsilon=5.0)
    exact = ncc_task(_tid("jinf"), b, d=D, epsilon=math.inf, labels="joint", label_epsilon=0.0)
    results = coordinator.run([joint, exact])
    share = results[joint.task_id].ncc_share
    assert share.HasField("joint") and not share.HasField("reports") and not share.labels, share
    assert len(share.joint.features) == len(share.joint.reports) >= 1
    assert all(0 <= f < D for f in share.joint.features) and all(0 <= r <= 4 for r in share.joint.reports)
    entries = [h for h in ledger_history(node.ledger, a) if joint.task_id in h["release_id"]]
    assert [(h["purpose"].split(":")[0], h["epsilon"], h["nonprivate"]) for h in entries] == [("ncc-joint", 0.1, False)]
    assert refusal_code(results[exact.task_id]) == "budget_exceeded"
    assert not [h for h in ledger_history(node.ledger, b) if exact.task_id in h["release_id"]]
    assert_still_serving(coordinator, node, a, d=D)


def test_label_scheme_defaults_to_a_private_one():
    """Private by default: for NCC joint below ε 5.5 and rr from it on (never clear), joint (one k-RR report of
    label and sign) for boosted NCC."""
    from privfed.common.boosting.params import BoostingParams
    from privfed.common.bounds import Bounds
    from privfed.deploy.cli import build_parser, job_config
    from privfed.server.strategies import make_strategy

    parser = build_parser()
    args = parser.parse_args(["coordinator", "--owners", "1", "--epsilon", "1", "--task", "ncc"])
    assert args.labels is None and job_config(args).task_options()["labels"] == "auto"
    args = parser.parse_args(["simulate", "--task", "bdt", "--base", "ncc"])
    assert args.labels is None and job_config(args, epsilon=1.0).task_options()["labels"] == "joint"
    assert job_config(args, epsilon=1.0, rows_per_owner=3.0).share_weight_bound == 1.0  # a row's weight, for NCC
    bounds = Bounds(np.zeros(D), np.ones(D))
    schemes = {eps: make_strategy("ncc", mechanism="pm", epsilon=eps, n_classes=2, bounds=bounds).labels
               for eps in (0.5, 5.0, 6.0, 8.0, math.inf)}  # fmt: skip
    assert schemes == {0.5: "joint", 5.0: "joint", 6.0: "rr", 8.0: "rr", math.inf: "rr"}
    assert make_strategy("ncc", epsilon=1.0, labels="rr", n_classes=2, bounds=bounds).labels == "rr"  # as asked
    assert BoostingParams(epsilon=1.0, n_classes=2, bounds=bounds, n_rounds=1).labels == "joint"
