"""Audit 26: the accept round's budget check (``OwnerCore._check_affords``) counts an owner id's spending on jobs
other than the announced one (``spent_on(other_than=job_id)``), so that a resumed job's own releases are not
counted twice. A hostile coordinator may announce any job id, the id of a job the owner already paid for among
them: the join then accepts a job the id cannot pay for. That is the coordinator's own planning; it must not let
the job spend past the ledger (the release is refused on the id's whole record, and the debit checks again), nor
past its announcement under a policy (rule ``announced``, which counts the job's earlier releases).
In process, the real owner core over a real ledger file.
"""

from __future__ import annotations

import numpy as np
import pytest
from differential import BOUNDS, K

from privfed.common.ledger import Ledger
from privfed.common.tasks import JoinAccepted, JoinTask, LrShareTask, Refusal, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner
from privfed.owner.policy import OwnerPolicy
from privfed.proto import privfed_pb2 as pb
from privfed.proto.jobwire import job_info_from_proto

pytestmark = pytest.mark.in_process

OWNER = "node-1.o00000"


def _job(job_id: str, epsilon: float):
    return job_info_from_proto(pb.JobInfo(job_id=job_id, data_user="alice", task="lr", epsilon=epsilon), True)


def _lr(task_id: str, epsilon: float) -> Task:
    return Task(task_id, OWNER, f"round-{task_id}", LrShareTask("pm", epsilon, 1.0, 1.0, K, BOUNDS))


@pytest.mark.parametrize("policy", [None, OwnerPolicy()], ids=["no-policy", "policy"])
def test_a_reused_job_id_passes_the_join_but_spends_nothing_past_the_budget(tmp_path, policy):
    X, y = np.array([[0.2, 0.8], [0.6, 0.1], [0.9, 0.4]]), np.array([0, 1, 1])
    owner = LocalOwner(OWNER, X, y, np.random.Generator(np.random.PCG64(1)), K, BOUNDS, row_keys=row_digests(X, y))
    ledger = Ledger(tmp_path / "ledger.sqlite", epsilon_budget=1.0)
    core = OwnerCore([owner], ledger, owner_policy=policy)
    (first,) = core.answer([_lr("a0", 0.8)], job=_job("job-a", 0.8)).results
    assert not isinstance(first.payload, Refusal), first

    def join(job_id: str, epsilon: float):
        (r,) = core.answer(
            [Task(f"join-{job_id}-{epsilon}", OWNER, "accept", JoinTask())], job=_job(job_id, epsilon)
        ).results
        return r.payload

    assert isinstance(join("job-b", 0.5), Refusal) and join("job-b", 0.5).code == "budget_exceeded"
    assert isinstance(join("job-b", 0.2), JoinAccepted)
    assert isinstance(join("job-a", 0.5), JoinAccepted)  # job-a's 0.8 counted as the job's own: the coordinator's id
    (second,) = core.answer([_lr("a1", 0.5)], job=_job("job-a", 0.5)).results
    assert isinstance(second.payload, Refusal), second
    assert second.payload.code == ("budget_exceeded" if policy is None else "policy"), second.payload
    (third,) = core.answer([_lr("a2", 0.2)], job=_job("job-a", 1.0)).results  # fits the budget, and the announcement
    assert not isinstance(third.payload, Refusal), third
    (fourth,) = core.answer([_lr("a3", 0.05)], job=_job("job-a", 1.0)).results
    assert isinstance(fourth.payload, Refusal), fourth
    assert ledger.spent(OWNER).epsilon <= 1.0 + 1e-12
    assert ledger.rows_spent(OWNER).epsilon <= 1.0 + 1e-12
