"""Issue 27: a node's last push of a batch also takes its next tasks (a ``PushResultsRequest`` with
``pull``), one exchange per node per round, on the node's Session stream or, with a coordinator that
has none (UNIMPLEMENTED), a ``PushResults`` call. Tasks that come that way pass the same gate as polled
ones: a hostile coordinator that hands a task back in a push's answer gets no second release, the
refusal is the same for owners whose rows differ, and a push that pulls and fails (the call, or the
session it was sent on) loses no result and debits nothing twice.
"""

import numpy as np
import pytest
from hostile import assert_still_serving, kind, ledger_history, ncc_task, refusal_code, spent_epsilon, wait_until

D = 2
X = np.array([[0.1, 0.9], [0.8, 0.2], [0.5, 0.5]])
Y = np.array([0, 1, 1])
EPS, LABEL_EPS = 0.1, 0.05  # ncc_task's defaults: one release spends both


def warm_node(coordinator, owners):
    """A node of owner-0 that has answered one task ("warm", its first owner's): its first computation
    (a kind's code imported on its first task, cold caches of a fresh checkout) may outlast PUSH_EVERY,
    and its results then go in a push of their own, with no tasks in its answer (owner/node.py)."""
    node = owners("owner-0", X, Y)
    coordinator.send([ncc_task("warm", node.owner_ids[0], d=D, epsilon=EPS, label_epsilon=LABEL_EPS)])
    assert [kind(r) for r in coordinator.wait_results(["warm"])] == ["ncc_share"]
    return node


@pytest.mark.parametrize("sessions", [True, False], ids=["session", "unary"])
def test_a_task_handed_back_in_a_push_answer_is_refused_alike_and_debited_once(coordinator, owners, sessions):
    coordinator.sessions = sessions
    node = warm_node(coordinator, owners)
    first = [ncc_task(f"first-{i}", o, d=D, epsilon=EPS, label_epsilon=LABEL_EPS) for i, o in enumerate(node.owner_ids)]
    handed = set()

    def hand_back(request):  # the very tasks the push answers, once each, in that push's answer
        answered = {r.task_id for r in request.results}
        again = [t for t in first if t.task_id in answered and t.task_id not in handed]
        handed.update(t.task_id for t in again)
        return again

    coordinator.on_push = hand_back
    coordinator.send(first)
    ids = [t.task_id for t in first]
    got = coordinator.wait_results(ids, count=2 * len(ids))
    assert node.alive(), node.log()[-3000:]
    assert set(coordinator.pushed_tasks) >= set(ids), "the tasks were not handed back in a push's answer"
    texts = set()
    for task in first:
        answers = [r for r in got if r.task_id == task.task_id]
        assert [kind(a) for a in answers] == ["ncc_share", "refusal"], answers
        assert refusal_code(answers[1]) == "already_released"
        texts.add(answers[1].refusal.message.replace(task.task_id, "<task id>"))
    assert len(texts) == 1, texts  # rows differ, refusals do not
    assert (coordinator.sessions_opened > 0) == sessions
    for i, o in enumerate(node.owner_ids):
        history = ledger_history(node.ledger, o)
        expected = {first[i].task_id} | ({"warm"} if i == 0 else set())
        assert np.isclose(spent_epsilon(history), len(expected) * (EPS + LABEL_EPS)), history  # one release each
        assert {h["release_id"].split("#")[0] for h in history} == expected


@pytest.mark.parametrize("sessions", [True, False], ids=["session", "unary"])
def test_a_failed_push_and_pull_pushes_alone_registers_again_and_loses_nothing(coordinator, owners, sessions):
    coordinator.sessions = sessions
    node = warm_node(coordinator, owners)
    registered = len(coordinator.registrations)
    coordinator.fail_push_pulls = 1
    task = ncc_task("once", node.owner_ids[0], d=D, epsilon=EPS, label_epsilon=LABEL_EPS)
    coordinator.send([task])
    (result,) = coordinator.wait_results(["once"])
    assert kind(result) == "ncc_share"
    assert coordinator.fail_push_pulls == 0 and coordinator.push_pulls >= 1
    assert wait_until(lambda: len(coordinator.registrations) > registered), "the node did not register again"
    assert [r.task_id for r in coordinator.results].count("once") == 1  # pushed alone, once
    history = ledger_history(node.ledger, node.owner_ids[0])
    assert np.isclose(spent_epsilon(history), 2 * (EPS + LABEL_EPS)), history  # "warm" and "once", each once
    assert {h["release_id"].split("#")[0] for h in history} == {"warm", "once"}
    assert_still_serving(coordinator, node, node.owner_ids[1], d=D)
    if sessions:  # the broken session was opened again
        assert coordinator.sessions_opened >= 2
