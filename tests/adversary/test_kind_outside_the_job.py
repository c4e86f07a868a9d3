"""A hostile coordinator announces one job and asks for another job's release, over the real wire.

An owner node's policy (and its operator) judge a job by its announcement: the task, the data user, ε.
A coordinator that announces an ``nb`` job and then sends an NCC share task (a perturbed row, not an
nb report) is refused ``invalid_task`` by an honest ``privfed owner`` process, nothing is debited, and
the same task under an ``ncc`` announcement is answered: each release kind names the jobs that send it.
"""

import secrets

import numpy as np
from hostile import kind, ledger_history, ncc_task, refusal_code

from privfed.proto import privfed_pb2 as pb

X = np.array([[0.3141592, 0.7], [0.7734, 0.2]])
Y = np.array([1, 0])


JOB = f"job-{secrets.token_hex(3)}"  # one job, announced with one task and then another: a node without a policy
# takes part in one job (owner/node.py), so a second job id would be refused for that reason first


def announce(coordinator, task: str) -> None:
    coordinator.job = pb.JobInfo(job_id=JOB, data_user="", task=task, epsilon=1.0, delta=0.0, schema_sha256="")


def test_a_release_of_another_jobs_kind_is_refused_and_nothing_is_debited(coordinator, owners):
    node = owners("owner-0", X, Y)
    victim = node.owner_ids[0]
    announce(coordinator, "nb")
    task = ncc_task(f"t-{secrets.token_hex(3)}", victim, d=2, epsilon=0.5, label_epsilon=0.1)
    result = coordinator.run([task])[task.task_id]
    assert kind(result) == "refusal" and refusal_code(result) == "invalid_task", result
    assert "announced as 'nb'" in result.refusal.message
    assert ledger_history(node.ledger, victim) == []  # nothing released, nothing debited
    announce(coordinator, "ncc")
    again = ncc_task(f"u-{secrets.token_hex(3)}", victim, d=2, epsilon=0.5, label_epsilon=0.1)
    assert kind(coordinator.run([again])[again.task_id]) == "ncc_share"
    assert node.alive()
