"""Issue 9, item 3: a refusal says a code and a reason, never a data value.

Before the fix an NCC task with ``n_classes=1`` got ``task says 1 classes, owner holds label 1``
(the owner's label, for free). Now (contract 3) the message is a fixed text per code plus details
built only from the task's own fields and the owner's public configuration. The test sends the
same invalid tasks to two owners on two nodes whose rows, labels and spent budget differ; after
replacing each owner's own id by a placeholder the refusal texts must be identical, and none may
contain one of the owner's values.
"""

import re

import numpy as np
from hostile import assert_still_serving, boost_config, boost_share, kind, lr_task, ncc_task, refusal_code

D = 2
# Labels are class indices of the node's own file: node owner-0 holds classes 0 and 1 (the test
# attacks its owner holding class 1), node owner-1 only class 0.
ROWS = {
    "owner-0": (np.array([[0.123, 0.987], [0.246, 0.135]]), np.array([0, 1])),
    "owner-1": (np.array([[0.654, 0.321], [0.777, 0.888]]), np.array([0, 0])),
}


def _invalid_tasks(owner_id):
    """The same malformed or over-budget tasks for any owner (same task ids on both nodes)."""
    lr = lr_task("lr-k1", owner_id, d=D, epsilon=0.1, n_classes=1, round_id="r")
    return [
        ncc_task("k1", owner_id, d=D, n_classes=1),
        ncc_task("k0", owner_id, d=D, n_classes=0),
        ncc_task("d3", owner_id, d=3),
        ncc_task("mech", owner_id, d=D, mechanism=77),  # a mechanism this version does not know
        ncc_task("neg", owner_id, d=D, epsilon=-1.0),
        ncc_task("nan", owner_id, d=D, label_epsilon=float("nan")),
        ncc_task("over", owner_id, d=D, epsilon=3.0),
        lr,
        boost_share("b-d3", owner_id, "run-d3", boost_config(3, "run-d3")),
        boost_share("b-k3", owner_id, "run-k3", boost_config(D, "run-k3", n_classes=3)),
        boost_share("b-over", owner_id, "run-over", boost_config(D, "run-over", epsilon=5.0)),
    ]


def _normalise(text, owner_id, node):
    return text.replace(owner_id, "<owner>").replace(node, "<node>")


def _numbers(text):
    return set(re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", text))


def test_refusal_texts_carry_no_data(coordinator, owners):
    nodes = {name: owners(name, X, y) for name, (X, y) in ROWS.items()}
    ids = {
        "owner-0": next(o for o, (_, lab) in nodes["owner-0"].rows().items() if lab == 1),
        "owner-1": nodes["owner-1"].owner_ids[0],
    }
    # owner-1 has spent part of its budget: a budget refusal must not tell how much
    spend = ncc_task("spend", ids["owner-1"], d=D, epsilon=0.5, label_epsilon=0.1)
    assert kind(coordinator.run([spend])["spend"]) == "ncc_share"

    for name in nodes:
        coordinator.send(_invalid_tasks(ids[name]))
    task_ids = [t.task_id for t in _invalid_tasks("x.o0")]
    got = coordinator.wait_results(task_ids, count=2 * len(task_ids))
    by = {(r.owner_id, r.task_id): r for r in got}

    texts = {}
    for name, oid in ids.items():
        X = nodes[name].rows()[oid][0]
        values = {f"{v:g}" for v in X.ravel()} | {str(v) for v in X.ravel()}
        for tid in task_ids:
            r = by.get((oid, tid))
            assert r is not None, f"{name} did not answer {tid}:\n{nodes[name].log()[-3000:]}"
            assert kind(r) == "refusal", f"{name} answered invalid task {tid} with {kind(r)}"
            msg = r.refusal.message
            assert not any(v in msg for v in values), f"{name} refusal for {tid} quotes a row value: {msg!r}"
            texts[(name, tid)] = (refusal_code(r), _normalise(msg, oid, name))
    for tid in task_ids:
        a, b = texts[("owner-0", tid)], texts[("owner-1", tid)]
        assert a == b, f"refusal of {tid} differs between owners with different data: {a!r} vs {b!r}"
        assert a[0] in ("invalid_task", "budget_exceeded", "policy"), a
    # the over-budget refusal names no spent amount (owner-1 spent 0.6, owner-0 nothing)
    assert texts[("owner-0", "over")][0] == "budget_exceeded"
    assert not {"0.6", "1.4", "0.6000000000000001"} & _numbers(texts[("owner-1", "over")][1])

    for name, node in nodes.items():
        assert_still_serving(coordinator, node, ids[name], d=D)
