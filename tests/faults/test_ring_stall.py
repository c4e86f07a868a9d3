"""A ring whose member went silent before passing the sum on cannot close: the coordinator stops
waiting for its leader once the member's node is past the node timeout, instead of sitting out
the attempt's timeout (30 s by default); the fault matrix's ``ring-hop`` cases run this over real
processes. Driven on the dispatcher directly, with a manual clock: the secure sum's driver names
the ring session the leader's batch waits on (``stalls``); the dispatcher reads no task's spec.

No wall-clock window: after each step of the clock the batch's thread is woken (a node's call) and
the test waits until that thread has read the clock twice since (:class:`StepClock`), so it has run
its liveness check at the new time, however slow the machine; a wait that ends is seen at once, and
one that does not end has been checked at every step."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from privfed.common.identity import owner_id
from privfed.common.secagg.ring import Inbound, MessageKind, new_session_id
from privfed.common.tasks import BoostEvaluateTask, OwnerInfo, Refusal, Result, RingSpec, Task
from privfed.server.dispatcher import Dispatcher
from privfed.server.nodes import IDENTITY_LIVENESS

A0, B0, C0 = owner_id("node-a", 0), owner_id("node-b", 0), owner_id("node-c", 0)
NODE_TIMEOUT = 2.0
RESTART_NODE_TIMEOUT = 15.0  # privfed's default
#: Wall-clock seconds the batch's thread may take to look at the clock once woken: a guard against a
#: hang only (it takes milliseconds).
HANG = 60.0


class StepClock:
    """A manual clock that counts the reads of one thread (the batch's, ``runner``)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.runner: threading.Thread | None = None
        self._reads = 0
        self._changed = threading.Condition()

    def __call__(self) -> float:
        with self._changed:
            if threading.current_thread() is self.runner:
                self._reads += 1
                self._changed.notify_all()
            return self.now

    def step(self, seconds: float) -> int:
        """Move the clock on; returns the runner's reads so far (for :meth:`wait_for_check`)."""
        with self._changed:
            self.now += seconds
            return self._reads

    def wait_for_check(self, reads_before: int, wake: Callable[[], object]) -> None:
        """Until the runner has read the clock twice since ``reads_before`` (the first read is the
        loop's ``now``, checked at once; the second comes after that check) or has ended; ``wake()``
        wakes it from its wait (called without this clock's lock: the runner reads it under its own)."""
        deadline = time.monotonic() + HANG
        while True:
            with self._changed:
                if self._reads >= reads_before + 2 or not self.runner.is_alive():
                    return
                assert time.monotonic() < deadline, "the batch's thread never looked at the clock"
            wake()
            with self._changed:
                self._changed.wait(0.01)


def leader_task(session: str) -> Task:
    ring = RingSpec(session, (A0, B0, C0), 20, 3, 1.0, (), {})
    return Task("lead", A0, "r", BoostEvaluateTask(config=None, history=None, learner=None, ring=ring))


def hop(session: str, sender: str, recipient: str, seq: int) -> tuple[str, bytes]:
    return recipient, Inbound(session, sender, recipient, MessageKind.HOP, seq, b"\0" * 32).to_bytes()


def wait_for_leader(b_passed_on: bool, b_restarts: bool = False) -> tuple[bool, list]:
    """Node b goes silent after (or before) relaying its HOP, or (``b_restarts``) a new process of it takes over
    with new ring keys and keeps polling; nodes a and c keep polling for 10 s of the clock. Returns whether the run
    ended and its lost tasks."""
    clock = StepClock()
    # a restart is taken over once the old process is quiet for IDENTITY_LIVENESS, well before the node timeout
    d = Dispatcher(node_timeout=RESTART_NODE_TIMEOUT if b_restarts else NODE_TIMEOUT, clock=clock)
    for node, o in (("node-a", A0), ("node-b", B0), ("node-c", C0)):
        d.register(node, [OwnerInfo(owner_id=o, x25519_public_key=bytes(32))])
    s = new_session_id()
    d.open_ring(s, [A0, B0, C0])
    done: list = []
    runner = threading.Thread(target=lambda: done.append(d.run([leader_task(s)], timeout=60, stalls=s)), daemon=True)
    clock.runner = runner
    runner.start()
    d.pull("node-a", 1.0)  # the leader took its task and started the ring
    d.relay("node-a", [hop(s, A0, B0, 1)])
    if b_passed_on:
        d.relay("node-b", [hop(s, B0, C0, 2)])
    if b_restarts:  # its old process was killed: silent past the takeover's wait, but not the node timeout
        clock.step(IDENTITY_LIVENESS + 0.5)
        d.register("node-b", [OwnerInfo(owner_id=B0, x25519_public_key=b"\1" * 32)])
    for _ in range(20):  # b is silent from here on, or its new process polls
        reads = clock.step(0.5)  # the batch checks liveness every 0.5 s of its clock
        d.pull("node-a", 0.0)
        d.pull("node-c", 0.0)
        if b_restarts:
            d.pull("node-b", 0.0)
        clock.wait_for_check(reads, lambda: d.relay("node-c", []))  # a node's call wakes the batch
    ended = not runner.is_alive()
    d.push("node-a", [Result("lead", A0, Refusal.of("internal"))])  # ends a wait still going on
    runner.join(5)
    return ended, (done[0].lost if done else None)


def test_the_wait_for_a_leader_ends_when_a_member_went_silent_before_passing_the_sum_on():
    ended, lost = wait_for_leader(b_passed_on=False)
    assert ended and lost == ["lead"]


def test_a_member_that_passed_the_sum_on_before_going_silent_does_not_end_the_wait():
    ended, _ = wait_for_leader(b_passed_on=True)
    assert not ended


def test_the_wait_for_a_leader_ends_when_a_new_process_took_over_a_member_that_had_not_passed_the_sum_on():
    """Walkthrough 7, W7-3: a node restarted mid-ring stalled the ring for its 30 s attempt timeout. Its new
    process polls (it is not silent), but the member's peers seal to the old process's keys: the sum cannot pass."""
    ended, lost = wait_for_leader(b_passed_on=False, b_restarts=True)
    assert ended and lost == ["lead"]


def test_a_new_process_of_a_member_that_had_passed_the_sum_on_does_not_end_the_wait():
    ended, _ = wait_for_leader(b_passed_on=True, b_restarts=True)
    assert not ended
