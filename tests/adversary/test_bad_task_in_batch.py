"""Issue 9, item 7: one bad task must not kill a node, lose its batch or burn budget.

Before the fix, in one PullTasks answer: a task id used for two owners -> KeyError, exit 1; PM at
ε = 1e-300 -> exit 2 *after* the debit was committed; a Matrix whose bytes don't match its shape
-> exit 2; and the valid tasks of the batch were lost with it. Now each task is decoded and
validated alone: the bad ones get refusals, the rest of the batch is answered, the node stays up,
and nothing is debited for a refused task.
"""

import numpy as np
from hostile import assert_still_serving, boost_config, boost_share, kind, ledger_history, ncc_task, pb, refusal_code

D = 2
X = np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8], [0.9, 0.15]])
Y = np.array([0, 1, 0, 1, 0])
# a field number no version of privfed.proto uses, as a varint: tag (99 << 3 | 0) = 0x98 0x06, value 1
UNKNOWN_FIELD = b"\x98\x06\x01"


def _with_unknown_field(task: pb.Task) -> pb.Task:
    return pb.Task.FromString(task.SerializeToString() + UNKNOWN_FIELD)


def _nan_alpha_share(task_id: str, owner_id: str) -> pb.Task:
    """A boosting share whose history keeps a round with α = NaN (the config itself is valid)."""
    task = boost_share(task_id, owner_id, "nan-run", boost_config(D, "nan-run"))
    task.boost_share.history.kept.add(alpha=float("nan"), weight_total=1.0).learner.stump.leaves.extend([0, 1])
    task.boost_share.history.round = 1
    return task


def test_bad_tasks_are_refused_alone(coordinator, owners):
    node = owners("owner-0", X, Y)
    o = node.owner_ids
    wrong_bytes = pb.Matrix(shape=[2, D], data=b"\x00" * (8 * 2 * D - 5))
    batch = [
        ncc_task("ok-1", o[0], d=D),
        ncc_task("dup", o[1], d=D),  # one task id ...
        ncc_task("dup", o[2], d=D),  # ... for two owners
        ncc_task("tiny", o[3], d=D, epsilon=1e-300),  # reports would leave the wire's range
        ncc_task("bytes", o[4], d=D, bounds=wrong_bytes),  # 27 bytes for a (2, 2) float64 matrix
        ncc_task("huge", o[4], d=D, epsilon=1e300),  # absurd, over any budget
        ncc_task("nan", o[3], d=D, epsilon=float("nan")),
        ncc_task("giant", o[3], d=D, bounds=pb.Matrix(shape=[100_000, 100_000], data=b"")),  # 10^10 values claimed
        _with_unknown_field(ncc_task("unknown", o[0], d=D, round_id="u")),  # unknown field: still valid
        ncc_task("ok-2", o[4], d=D),
        pb.Task(task_id="nokind", owner_id=o[2], round_id="r"),  # no task kind at all
        pb.Task(
            task_id="badjson",
            owner_id=o[2],
            round_id="r",  # a malformed boosting config: NaN ε, no bounds
            boost_share=pb.BoostShareTask(config=pb.BoostConfig(run_id="r", epsilon=float("nan"))),
        ),
        _nan_alpha_share("badhistory", o[3]),
        pb.Task(
            task_id="stranger",
            owner_id="owner-7.o00000",
            round_id="r",  # an owner this node does not host
            ncc_share=ncc_task("x", "x", d=D).ncc_share,
        ),
        pb.Task(
            task_id="junk-ring",
            owner_id=o[1],
            round_id="ring",  # a ring message for no ring
            ring_message=pb.RingMessageTask(data=b"\x00garbage" * 10),
        ),
    ]
    not_awaited = {"junk-ring", "stranger"}  # a ring message gets no result of its own; a stranger may get none
    coordinator.send(batch, node="owner-0")  # all in one PullTasks answer
    ids = sorted({t.task_id for t in batch} - not_awaited)
    got = coordinator.wait_results(ids, count=len([t for t in batch if t.task_id in ids]))
    got += [r for r in coordinator.results if r.task_id == "stranger"]
    assert node.alive(), f"a bad task killed the node:\n{node.log()[-3000:]}"
    by = {}
    for r in got:
        by.setdefault(r.task_id, []).append(r)

    for tid in ("ok-1", "ok-2", "unknown"):
        assert tid in by and kind(by[tid][0]) == "ncc_share", f"valid task {tid} lost or refused: {by.get(tid)}"
    for tid in ("tiny", "bytes", "huge", "nan", "giant", "nokind", "badjson", "badhistory"):
        assert tid in by, f"no answer for bad task {tid}:\n{node.log()[-3000:]}"
        assert all(kind(r) == "refusal" for r in by[tid]), by[tid]
    assert refusal_code(by["tiny"][0]) == "invalid_task"
    assert refusal_code(by["bytes"][0]) == "invalid_task"
    assert by["bytes"][0].owner_id == o[4]
    assert refusal_code(by["huge"][0]) in ("invalid_task", "budget_exceeded")
    assert all(refusal_code(by[t][0]) == "invalid_task" for t in ("nokind", "badjson", "badhistory"))
    # a task for an owner the node does not host: refused or ignored, never answered with data
    assert all(kind(r) == "refusal" for r in by.get("stranger", []))
    # the duplicated id: refused (at least its second use); each answer names its own owner
    assert "dup" in by and any(
        kind(r) == "refusal" and refusal_code(r) in ("duplicate_task", "invalid_task") for r in by["dup"]
    ), by.get("dup")
    assert all(r.owner_id in (o[1], o[2]) for r in by["dup"])

    # nothing was debited for a refused task; every share that left was
    answered = {(r.owner_id, r.task_id) for rs in by.values() for r in rs if kind(r) != "refusal"}
    for owner in o:
        released = [h["release_id"] for h in ledger_history(node.ledger, owner)]
        mine = {tid for (oid, tid) in answered if oid == owner}
        for tid in mine:
            assert any(tid in rid for rid in released), f"{owner}: share {tid} left undebited; ledger {released}"
        refused_here = {r.task_id for rs in by.values() for r in rs if r.owner_id == owner and kind(r) == "refusal"}
        for tid in refused_here - mine:
            assert not any(tid in rid for rid in released), f"{owner}: refused task {tid} debited: {released}"

    # a replay of a task already answered: refused, no second debit
    spent = {owner: ledger_history(node.ledger, owner) for owner in o}
    replay = coordinator.run([ncc_task("ok-1", o[0], d=D)])["ok-1"]
    assert kind(replay) == "refusal" and refusal_code(replay) in ("already_released", "duplicate_task"), replay
    assert {owner: ledger_history(node.ledger, owner) for owner in o} == spent

    for owner in o:
        assert_still_serving(coordinator, node, owner, d=D)
