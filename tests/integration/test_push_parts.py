"""Issue 27: a node's results go to the coordinator in parts that each fit one message, as its
registration does and its pulls come. Over real sockets with a real ``privfed owner`` process whose node
splits at the coordinator's bound, made small here (``small_message_owner.py``: 32 KiB, not gRPC's
16 MiB): 40 LR owners on digits, each result ~5.2 KB from a ~1.1 KB task, so neither the round's tasks
(~44 KB) nor its results (~210 KB) fit one message. The coordinator cuts its pull answers at the bound it
was given (it cut them at 15 MiB whatever its bound, and the node refused the ~44 KB answer). Before the split the coordinator
refused that push (RESOURCE_EXHAUSTED), the node dropped the results, already debited, and the job waited
until its round timed out."""

import math
from pathlib import Path

from capture import RecordingInterceptor, is_push
from fedharness import Federation

from privfed.common.ledger import Ledger
from privfed.owner.data import federation_split
from privfed.proto import privfed_pb2 as pb
from privfed.server.strategies import make_strategy

LIMIT = 32 * 1024
OWNERS = 40
DIGITS = ["--dataset", "digits", "--n-samples", "400", "--seed", "1", "--test-fraction", "0.25"]
SMALL_MESSAGE_OWNER = [str(Path(__file__).with_name("small_message_owner.py")), str(LIMIT)]


def test_a_push_larger_than_one_message_goes_in_parts_in_order_and_nothing_is_dropped(tmp_path):
    _, test = federation_split("digits", seed=1, test_fraction=0.25, n_samples=400)
    calls = RecordingInterceptor()
    fed = Federation(tmp_path, secure=False, interceptors=(calls,), max_message_bytes=LIMIT)
    try:
        fed.spawn(
            "owner-0",
            n_owners=OWNERS,
            shards=f"0:{OWNERS}",
            budget=math.inf,
            dataset=DIGITS,
            module_cmd=SMALL_MESSAGE_OWNER,
        )
        assert fed.server.dispatcher.wait_for_owners(OWNERS, 60) == OWNERS
        mark = calls.mark()
        strategy = make_strategy(
            "lr", solver="local", mechanism="pm", epsilon=math.inf, n_classes=test.n_classes, bounds=test.bounds
        )
        outcome = fed.run(strategy, OWNERS, round_timeout=30)
        during = calls.since(mark)
    finally:
        fed.close()
    log = fed.log("owner-0")
    assert outcome.answered == OWNERS and outcome.model is not None, log[-2000:]
    assert "refused" not in log and "dropped" not in log, log[-2000:]
    pushes = [  # the release round's (the accept round's answers, a few bytes each, go first, in one push)
        p
        for c in during
        if is_push(c)
        and (p := pb.PushResultsRequest.FromString(c.data)).results
        and any(r.WhichOneof("kind") != "join_accepted" for r in p.results)
    ]
    assert len(pushes) >= 3, [len(p.results) for p in pushes]  # ~210 KB of results in 32 KiB messages
    assert all(p.ByteSize() <= LIMIT for p in pushes)
    # The last part of each batch's results takes the next tasks; the tasks came in two answers at least.
    pulls = [k for k, p in enumerate(pushes) if p.pull]
    assert pulls[-1] == len(pushes) - 1 and len(pulls) >= 2, [p.pull for p in pushes]
    owners = [r.owner_id for p in pushes for r in p.results]
    assert owners == sorted(owners) and len(set(owners)) == OWNERS  # in order, each once
    with Ledger(tmp_path / "owner-0.sqlite", epsilon_budget=math.inf) as ledger:
        for owner in set(owners):
            assert len(ledger.history(owner)) == 1
