"""Audit 35: a node's stop of a batch whose job the coordinator says ended (walkthrough 11, W11-9) is a function of
what the coordinator said and when, never of the rows.

The coordinator says "ended" when it likes, for any job id (``PushResultsResponse.ended``, heard by the batch's
heartbeat or a push: ``EndedJobs``), and the node stops the batch before its next chunk (``_answer_in_order``),
dropping the answers made and not pushed (already debited). Here two nodes of 20 owners each, over different rows,
answer the same batch of 20 PCA shares (two chunks: 16 and 4, ``OwnerCore.chunk_end``), the coordinator's "ended"
heard after the first chunk; compared: the chunks computed, every call the node makes to the coordinator (method
and request size), what it returns to push, the refusal codes among its answers, and what each owner's ledger
debited. For the batch of a job not said to have ended (another id ended) both go on alike. No clock, no socket:
the coordinator is a recording stub.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from privfed.common.datasets import load_builtin
from privfed.common.identity import owner_id
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Ledger
from privfed.common.tasks import PcaShareTask, Refusal, Task
from privfed.owner.data import build_owners
from privfed.owner.node import OwnerNode
from privfed.proto import privfed_pb2 as pb

#: No clock, no child process, no socket.
pytestmark = pytest.mark.in_process

NODE = "owner-0"
OWNERS = 20


class _Stub:
    """The coordinator: records each call (method, request size) and answers as one that queues nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def PushResults(self, request, timeout=None):  # noqa: N802 (gRPC's names)
        self.calls.append(("PushResults", request.ByteSize()))
        return pb.PushResultsResponse(accepted=len(request.results))

    def Relay(self, request, timeout=None):  # noqa: N802
        self.calls.append(("Relay", request.ByteSize()))
        return pb.RelayResponse()


def _node(tmp_path: Path, seed: int) -> OwnerNode:
    owners = build_owners(
        load_builtin("synthetic", n_samples=80, seed=seed),
        node_id=NODE,
        n_owners=OWNERS,
        shards=range(OWNERS),
        seed=seed,
        rng_kind="seeded",
        rng_seed=1,
    )
    ledger = Ledger(tmp_path / f"{NODE}-{seed}.sqlite", epsilon_budget=1.0, delta_budget=1e-3)
    return OwnerNode(node_id=NODE, target="127.0.0.1:1", tls=None, owners=owners, ledger=ledger, connect_timeout=1.0)


def _batch() -> list[Task]:
    bounds = load_builtin("synthetic", n_samples=80, seed=1).bounds
    spec = PcaShareTask(epsilon=0.5, delta=1e-5, k=2, bounds=bounds, count_epsilon=0.05, scaling="ball")
    return [Task(f"pca-{i}", owner_id(NODE, i), "r1", spec) for i in range(OWNERS)]


def _run(tmp_path: Path, seed: int, ended: str) -> dict:
    """What leaves the node (and what its ledger debited) when the coordinator says ``ended`` ended after the
    batch's first chunk."""
    node = _node(tmp_path, seed)
    node._job = JobInfo(job_id="job-1", data_user="alice", task="feddpdr", epsilon=1.0, delta=1e-5, schema_sha256="")
    core = node._core
    assert core is not None
    answer, chunks = core.answer, []

    def answer_then_hear(items, **kwargs):
        out = answer(items, **kwargs)
        chunks.append(len(items))
        node._note_ended([pb.JobEnded(job_id=ended, failed=True)])  # the heartbeat heard it meanwhile
        return out

    core.answer = answer_then_hear  # type: ignore[method-assign]
    stub = _Stub()
    ready = node._answer_in_order(stub, _batch())  # type: ignore[arg-type]
    spent = [node._ledger.spent(owner_id(NODE, o)) for o in range(OWNERS)]  # type: ignore[union-attr]
    debited = {o: (s.epsilon, s.delta) for o, s in enumerate(spent)}
    return {
        "chunks": chunks,
        "calls": stub.calls,
        "ready": len(ready),
        "refusals": [r.payload.code for r in ready if isinstance(r.payload, Refusal)],
        "debited": debited,
    }


@pytest.mark.parametrize("ended", ["job-1", "job-other"])
def test_the_stop_of_an_ended_jobs_batch_is_the_same_for_any_rows(tmp_path, ended):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = _run(tmp_path / "a", 11, ended), _run(tmp_path / "b", 12, ended)
    assert a == b
    if ended == "job-1":  # stopped after its first chunk: nothing pushed, the chunk's debits kept
        assert a["chunks"] == [16] and a["ready"] == 0 and a["calls"] == []
        assert sum(1 for s in a["debited"].values() if s[0] > 0) == 16
    else:
        assert a["chunks"] == [16, 4] and a["ready"] == OWNERS
