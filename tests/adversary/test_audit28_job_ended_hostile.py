"""Audit 28, A28-1b: what a hostile coordinator can do with ``JobEnded`` (6bf9f47): the daemon only logs, and only of
jobs it was asked in. A reply may carry the same job any number of times (up to the message size: ~10^5 entries in
4 MB); each was a log line of the node's. Now a job's end is logged once; a job the node was not asked in never."""

from __future__ import annotations

import logging

from privfed.common.ledger import Ledger
from privfed.owner.ledger_seen import seen_path
from privfed.owner.node import EndedJobs, OwnerNode
from privfed.proto import privfed_pb2 as pb


def _node(ledger: Ledger) -> OwnerNode:
    node = object.__new__(OwnerNode)  # the state _hear_ended reads: a daemon that answered 3 tasks in job-b
    node.node_id, node._job_logged, node._released, node._answered_in = "owner-0", "job-b", 3, {"job-a": 2}
    node._job_heard, node._ledger, node._ended = None, ledger, EndedJobs()
    return node


def test_a_job_told_ended_many_times_is_logged_once_and_others_jobs_never(caplog, tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite", epsilon_budget=1.0)
    node = _node(ledger)
    told = [pb.JobEnded(job_id=j, failed=True) for j in ("job-b", "job-a", "someone-elses", "job-b")] * 500
    with caplog.at_level(logging.INFO, logger="privfed.owner"):
        node._hear_ended(pb.PullTasksResponse(ended=told))
        assert seen_path(ledger.path).is_file()  # what the ledger holds, recorded beside it once jobs are heard
        seen_path(ledger.path).unlink()
        node._hear_ended(pb.PushResultsResponse(ended=told))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines[:5]
    assert sum("job job-b" in line for line in lines) == 1 and sum("job job-a" in line for line in lines) == 1
    assert not any("someone-elses" in line for line in lines)
    assert all(r.levelno == logging.WARNING for r in caplog.records)  # both released, both failed
    assert not seen_path(ledger.path).exists()  # jobs already heard: not written again, whatever the entries told
    ledger.close()
