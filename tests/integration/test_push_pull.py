"""Issue 27: one message pair per node per round. A node's last push of a batch also takes its next tasks
(a ``PushResultsRequest`` with ``pull``), on the node's Session stream, so consecutive rounds cost each node
one message each way, over real sockets with real ``privfed owner`` processes: no ``PullTasks`` and no
unary ``PushResults`` with results (the idle long polls go over the session too). Every round is answered
by every owner and debited once."""

import math
import time

from capture import RecordingInterceptor, is_push
from fedharness import Federation

from privfed.common.ledger import Ledger
from privfed.owner.data import federation_split
from privfed.proto import privfed_pb2 as pb
from privfed.server.strategies import make_strategy
from privfed.server.strategies.result import StrategyResult

ROUNDS, OWNERS = 8, 4


class Rounds:
    """The LR round ``ROUNDS`` times, a new round id each (bench/federation.py's RoundTimer);
    ``between(r)`` is called after round ``r``."""

    def __init__(self, lr, between=lambda r: None):
        self.lr, self.between = lr, between

    def privacy(self):
        return self.lr.privacy()

    def check_feasible(self, n_owners):
        """Any number of owners can release."""

    def run(self, owner_ids, transport):
        models = []
        for r in range(ROUNDS):
            models.append(self.lr.aggregate(transport.run_tasks(self.lr.configure(owner_ids, f"r{r}"))))
            self.between(r)
        return StrategyResult(models[-1], self.privacy())


def assert_debited_once_per_round(tmp_path):
    for k in range(2):
        with Ledger(tmp_path / f"owner-{k}.sqlite", epsilon_budget=math.inf) as ledger:
            for i in (2 * k, 2 * k + 1):
                history = ledger.history(f"owner-{k}.o{i:05d}")
                rounds = [h["release_id"].split("-")[0] for h in history]  # "r<round>-<task>#0"
                assert sorted(rounds) == [f"r{r}" for r in range(ROUNDS)], rounds  # every round debited once


def recorded_rounds(tmp_path, session_capacity=None, between=lambda fed, r: None):
    """Two nodes of two owners each run the LR round ``ROUNDS`` times; returns the calls of the rounds.
    ``session_capacity``: the coordinator's (None: its default); ``between(fed, r)`` runs after round r."""
    _, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)
    calls = RecordingInterceptor()
    fed = Federation(tmp_path, secure=False, interceptors=(calls,))
    if session_capacity is not None:
        fed.server.sessions.capacity = session_capacity
    try:
        for k in range(2):
            fed.spawn(f"owner-{k}", n_owners=OWNERS, shards=f"{2 * k}:{2 * k + 2}", budget=math.inf)
        fed.server.dispatcher.wait_for_owners(OWNERS, 60)
        mark = calls.mark()
        strategy = make_strategy(
            "lr", solver="local", mechanism="pm", epsilon=math.inf, n_classes=2, bounds=test.bounds
        )
        outcome = fed.run(Rounds(strategy, lambda r: between(fed, r)), OWNERS)
        during = [c for c in calls.since(mark) if not accept_answers(c)]  # the rounds': after the accept round's
    finally:
        fed.close()
    assert outcome.answered == OWNERS and outcome.model is not None
    return during


def accept_answers(call) -> bool:
    """Whether ``call`` pushes the job's accept round's answers (before its rounds; the push takes round 0's tasks)."""
    if not is_push(call):
        return False
    results = pb.PushResultsRequest.FromString(call.data).results
    return bool(results) and all(r.WhichOneof("kind") == "join_accepted" for r in results)


def test_consecutive_rounds_cost_each_node_one_message_pair_on_its_session(tmp_path):
    during = recorded_rounds(tmp_path)
    assert not [c for c in during if c.method.endswith("/PullTasks")]
    for node in ("owner-0", "owner-1"):
        mine = [
            (c.method.rsplit("/", 1)[1], p)
            for c in during
            if is_push(c) and (p := pb.PushResultsRequest.FromString(c.data)).node_id == node and p.results
        ]
        assert len(mine) == ROUNDS and all(m == "Session" and p.pull for m, p in mine), [
            (m, len(p.results), p.pull) for m, p in mine
        ]
    assert_debited_once_per_round(tmp_path)


def test_nodes_open_their_session_again_when_the_coordinator_ends_it_and_lose_nothing(tmp_path):
    """Over mTLS: the coordinator ends every node's session after rounds 1 and 4 (as a restart of its
    gRPC layer would); each node pushes what it had not had acknowledged, registers again, opens a new
    session, and every round is answered by every owner and debited once."""
    _, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)
    fed = Federation(tmp_path, secure=True)
    ended = []
    try:
        for k in range(2):
            fed.spawn(f"owner-{k}", n_owners=OWNERS, shards=f"{2 * k}:{2 * k + 2}", budget=math.inf)
        fed.server.dispatcher.wait_for_owners(OWNERS, 60)
        strategy = make_strategy(
            "lr", solver="local", mechanism="pm", epsilon=math.inf, n_classes=2, bounds=test.bounds
        )
        between = lambda r: ended.append(fed.server.sessions.end_all()) if r in (1, 4) else None  # noqa: E731
        outcome = fed.run(Rounds(strategy, between), OWNERS)
        opened = fed.server.sessions.opened
    finally:
        fed.close()
    assert outcome.answered == OWNERS and outcome.model is not None
    assert sum(ended) >= 2 and opened >= 2 + sum(ended), (ended, opened)
    assert_debited_once_per_round(tmp_path)


def pushes_by_node(during):
    """node -> the methods of its pushes that carried results, in order."""
    return {
        node: [
            c.method.rsplit("/", 1)[1]
            for c in during
            if is_push(c) and (p := pb.PushResultsRequest.FromString(c.data)).node_id == node and p.results
        ]
        for node in ("owner-0", "owner-1")
    }


def test_nodes_past_the_coordinators_session_capacity_push_and_poll_with_unary_calls(tmp_path):
    """A session holds a coordinator worker thread while it is open: with room for one, the first node
    gets it and the other is told to use unary calls (which free their thread within a long poll), and
    every round is still answered by every owner and debited once."""
    during = recorded_rounds(tmp_path, session_capacity=1)
    pushes = pushes_by_node(during)
    on_session, on_calls = sorted(pushes, key=lambda node: pushes[node].count("PushResults"))
    assert pushes[on_session] == ["Session"] * ROUNDS, pushes
    # the refused node asks for a session again whenever its growing delay has run out (how often depends on how
    # long the rounds take on a loaded machine: a CI run saw two tries), and a refused try's results, if it carried
    # any, go again as a call: every round's results went as a call in the end
    by_round = pushes_by_round(during, on_calls)
    assert all(by_round[r][-1:] == ["PushResults"] for r in range(ROUNDS)), by_round
    assert pushes[on_calls].count("PushResults") == ROUNDS, pushes
    assert_debited_once_per_round(tmp_path)


def test_a_node_refused_a_session_opens_one_when_the_coordinator_has_room_again(tmp_path):
    """A node refused a session (all the coordinator serves are open) asks again after a growing delay
    (``SESSION_RETRY_BASE`` s first): once room is made after round 2, it opens a session and pushes
    the later rounds' results on it; every round is still answered and debited once."""

    def make_room(fed, r):
        if r != 2:
            return
        opened = fed.server.sessions.opened
        fed.server.sessions.capacity = None
        deadline = time.monotonic() + 30
        while fed.server.sessions.opened == opened and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fed.server.sessions.opened > opened, "the refused node did not ask for a session again"

    during = recorded_rounds(tmp_path, session_capacity=1, between=make_room)
    pushes = pushes_by_node(during)
    on_session, refused = sorted(pushes, key=lambda node: pushes[node].count("PushResults"))
    assert pushes[on_session] == ["Session"] * ROUNDS, pushes
    # The refused node asks for a session whenever its delay has run out, with whatever it has to push,
    # so how many of its pushes are refused Session attempts (each followed by the same results as a
    # call) depends on how long its rounds take: the rounds, not the count, say what went where.
    by_round = pushes_by_round(during, refused)
    assert all(by_round[r][-1:] == ["PushResults"] for r in range(3)), by_round  # refused: they went as a call
    assert all(by_round[r] == ["Session"] for r in range(3, ROUNDS)), by_round  # after room: on its session
    assert_debited_once_per_round(tmp_path)


def pushes_by_round(during, node):
    """round -> the methods of ``node``'s pushes that carried results of that round, in order."""
    rounds = {r: [] for r in range(ROUNDS)}
    for c in during:
        if is_push(c) and (p := pb.PushResultsRequest.FromString(c.data)).node_id == node:
            for r in sorted({int(result.task_id.split("-")[0][1:]) for result in p.results}):  # "r<round>-<hex>"
                rounds[r].append(c.method.rsplit("/", 1)[1])
    return rounds
