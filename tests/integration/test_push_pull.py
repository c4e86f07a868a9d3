"""Issue 27: one gRPC call per node per round. A node's last push of a batch also takes its next tasks
(``PushResults`` with ``pull``), so consecutive rounds cost each node one call, over real sockets with
real ``privfed owner`` processes: a ``PullTasks`` is made only first and after a long poll that found
nothing for ``PULL_WAIT`` s. Every round is answered by every owner and debited once."""

import math
import time

from capture import RecordingInterceptor
from fedharness import Federation

from privfed.common.ledger import Ledger
from privfed.owner.data import federation_split
from privfed.proto import privfed_pb2 as pb
from privfed.proto.transport import PULL_WAIT
from privfed.server.strategies import make_strategy
from privfed.server.strategies.result import StrategyResult

ROUNDS, OWNERS = 8, 4


class Rounds:
    """The LR round ``ROUNDS`` times, a new round id each (bench/federation.py's RoundTimer)."""

    def __init__(self, lr):
        self.lr = lr

    def privacy(self):
        return self.lr.privacy()

    def check_feasible(self, n_owners):
        """Any number of owners can release."""

    def run(self, owner_ids, transport):
        models = [self.lr.aggregate(transport.run_tasks(self.lr.configure(owner_ids, f"r{r}"))) for r in range(ROUNDS)]
        return StrategyResult(models[-1], self.privacy())


def test_consecutive_rounds_cost_each_node_one_call(tmp_path):
    _, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)
    calls = RecordingInterceptor()
    fed = Federation(tmp_path, secure=False, interceptors=(calls,))
    try:
        for k in range(2):
            fed.spawn(f"owner-{k}", n_owners=OWNERS, shards=f"{2 * k}:{2 * k + 2}", budget=math.inf)
        fed.server.dispatcher.wait_for_owners(OWNERS, 60)
        mark = calls.mark()
        started = time.monotonic()
        strategy = make_strategy(
            "lr", solver="local", mechanism="pm", epsilon=math.inf, n_classes=2, bounds=test.bounds
        )
        outcome = fed.run(Rounds(strategy), OWNERS)
        elapsed = time.monotonic() - started
        during = calls.since(mark)
    finally:
        fed.close()
    assert outcome.answered == OWNERS and outcome.model is not None
    for node in ("owner-0", "owner-1"):
        pulls = [
            c
            for c in during
            if c.method.endswith("/PullTasks") and pb.PullTasksRequest.FromString(c.data).node_id == node
        ]
        pushes = [pb.PushResultsRequest.FromString(c.data) for c in during if c.method.endswith("/PushResults")]
        mine = [p for p in pushes if p.node_id == node and p.results]
        assert len(mine) == ROUNDS and all(p.pull for p in mine), [(len(p.results), p.pull) for p in mine]
        # one PullTasks first, then only after a long poll that found nothing (each lasts PULL_WAIT s)
        assert len(pulls) <= 1 + elapsed / PULL_WAIT, (len(pulls), elapsed)
    for k in range(2):
        with Ledger(tmp_path / f"owner-{k}.sqlite", epsilon_budget=math.inf) as ledger:
            for i in (2 * k, 2 * k + 1):
                assert len(ledger.history(f"owner-{k}.o{i:05d}")) == ROUNDS  # every round debited once
