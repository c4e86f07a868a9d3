"""A task goes out under the announcement of the job it belongs to, never the next one's (wt-redteam2).

An owner node's policy judges a batch by the job announcement it comes with (``privfed owner --policy``:
the data user, the task, the job's ε). The coordinator service runs jobs one after another, and
:meth:`Dispatcher.begin_job` drops the tasks of the job before. Before the fix two paths let tasks of
the earlier job out under the later one's announcement:

* a response split for size (``MAX_RESPONSE_TASKS``, ``MAX_RESPONSE_TASK_BYTES``) put the tasks that did
  not fit back in the node's queue, whatever job had begun since; the node's next call took them, and
  the announcement read at that drain was the new job's;
* the servicer read the announcement (``drained_job``) after ``pull`` or ``relay`` had let go of the
  lock, so a job begun in between (and a concurrent call of the same node) relabelled them.

So a job of data user ``bob`` (whom the owner's policy declines) had tasks answered and debited under
``alice``'s announcement. Now the drain and the read share one hold of the lock
(:meth:`Dispatcher.with_job`), and tasks put back for an earlier job are dropped. Driven in-process
through the servicer's own response splitting: the interleaving is exact, no timing involved.
"""

from __future__ import annotations

import threading

import pytest

from privfed.common.errors import JobAborted
from privfed.common.jobinfo import JobInfo
from privfed.common.tasks import OwnerInfo, RingMessageTask, Task
from privfed.proto.transport import MAX_RESPONSE_TASK_BYTES
from privfed.server.dispatcher import Dispatcher
from privfed.server.models import ModelStore
from privfed.server.servicer import CoordinatorServicer

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

BOB = JobInfo(job_id="j-bob", data_user="bob", task="bdt", epsilon=8.0, delta=0.0, schema_sha256="s")
ALICE = JobInfo(job_id="j-alice", data_user="alice", task="bdt", epsilon=1.0, delta=0.0, schema_sha256="s")


def test_tasks_put_back_for_a_job_that_ended_do_not_go_out_under_the_next_announcement():
    d = Dispatcher()
    d.register("owner-0", [OwnerInfo("owner-0.o00000")])
    servicer = CoordinatorServicer(d, ModelStore(), require_identity=False)
    d.begin_job(BOB)
    big = RingMessageTask(b"\0" * (MAX_RESPONSE_TASK_BYTES // 2 + 1))  # two never fit one response
    bob_tasks = [Task(f"bob-{i}", "owner-0.o00000", "r1", big) for i in range(3)]
    runner = threading.Thread(target=lambda: pytest.raises(JobAborted, d.run, bob_tasks, timeout=10))
    runner.start()

    (taken, _), job = d.with_job(lambda: d.pull("owner-0", wait=5))
    assert [t.task_id for t in taken] == ["bob-0", "bob-1", "bob-2"] and job is BOB
    d.cancel_job()  # bob's job ends, alice's begins while the response is being built
    runner.join()
    d.clear_cancel()
    d.begin_job(ALICE)
    sent = servicer._encode_tasks("owner-0", taken, job)  # the response carries bob-0 under BOB
    assert [m.task_id for m in sent] == ["bob-0"]

    (again, _), now = d.with_job(lambda: d.pull("owner-0", wait=0))
    assert now is ALICE
    assert [t.task_id for t in again] == []  # before the fix: bob-1, bob-2 under alice's announcement
    assert d.queued_relay() == (0, 0)  # and nothing of them is still counted against the recipient


def test_tasks_of_the_running_job_that_did_not_fit_come_with_its_announcement():
    d = Dispatcher()
    d.register("owner-0", [OwnerInfo("owner-0.o00000")])
    servicer = CoordinatorServicer(d, ModelStore(), require_identity=False)
    d.begin_job(ALICE)
    big = RingMessageTask(b"\0" * (MAX_RESPONSE_TASK_BYTES // 2 + 1))
    tasks = [Task(f"a-{i}", "owner-0.o00000", "r1", big) for i in range(2)]
    runner = threading.Thread(target=lambda: d.run(tasks, timeout=0.5))
    runner.start()
    (taken, _), job = d.with_job(lambda: d.pull("owner-0", wait=5))
    assert [m.task_id for m in servicer._encode_tasks("owner-0", taken, job)] == ["a-0"]
    (rest, _), job = d.with_job(lambda: d.pull("owner-0", wait=0))
    assert [t.task_id for t in rest] == ["a-1"] and job is ALICE  # the control: still the same job
    runner.join()
