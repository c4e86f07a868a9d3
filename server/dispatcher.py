"""Owner registry and task queues: the coordinator's transport object.

Strategies build :class:`Task` lists and hand them to :meth:`Dispatcher.run`; the gRPC
servicer feeds :meth:`~NodeCalls.register`, :meth:`~NodeCalls.pull` and :meth:`~NodeCalls.push`
(:mod:`privfed.server.node_calls`, the nodes' side, which :class:`Dispatcher` extends with the
job's). Nothing here knows protobuf. Time is injected (``clock``) so the waiting logic can be
driven in tests.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from privfed.common.errors import JobAborted, RoundFailed
from privfed.common.jobinfo import JobInfo
from privfed.common.tasks import OwnerInfo, PeerKey, Result, Task
from privfed.common.tasks.join import JoinTask
from privfed.server.contracts import Rejection
from privfed.server.node_calls import Answer, NodeCalls

log = logging.getLogger("privfed.coordinator")

#: Seconds between the lines a waiting round logs of what it still waits for (walkthrough 11, W11-7: a round of
#: owners of 200 000 rows each showed nothing for minutes, and nobody could tell a slow owner from a stuck one).
WAITING_EVERY = 60.0

#: Takes the answers of a running batch as they come (:meth:`Dispatcher.run`'s ``sink``).
Sink = Callable[[list[Answer]], None]


@dataclass
class RunOutcome:
    """What came back from one batch of tasks (with a ``sink``, the answers went there instead:
    ``results`` and ``rejected`` are empty and ``answered`` counts the results handed over)."""

    results: dict[str, Result]  # task_id -> result
    lost: list[str]  # task ids never answered (node dead or deadline passed)
    lost_nodes: list[str]  # nodes of unanswered tasks that are silent (dead or cut off)
    rejected: dict[str, Rejection] = field(default_factory=dict)  # task_id -> an answer that could not be decoded
    answered: int = 0  # results that came (in ``results`` or handed to the sink)
    #: Each node with an unanswered task -> ``online`` (it did not answer in time), ``silent`` or ``left``.
    unanswered_by: dict[str, str] = field(default_factory=dict)

    def unanswered_line(self) -> str:
        """The unanswered tasks' nodes and why, for a log line (walkthrough 6, W6-5: "silent nodes: none", and a
        node that had said it leaves called silent)."""
        said = {"online": "online, no answer in time", "silent": "silent", "left": "left"}
        return "; ".join(f"{node}: {said.get(state, state)}" for node, state in sorted(self.unanswered_by.items()))


class Dispatcher(NodeCalls):
    """The nodes' side (:class:`NodeCalls`) and the side the coordinator's job calls: ring sessions,
    the registered owners, batches of tasks (:meth:`run`) and one job after another."""

    #: Called once per job (:meth:`begin_job`) before the first task that asks an owner for a release is queued
    #: (``privfed serve`` records it in the job's store: a crash leaves no other trace; walkthrough 7, W7-6).
    on_first_ask: Callable[[], None] | None = None
    #: What the batch under way still waits for, as its log's once-a-minute line says it (None: nothing, or not a
    #: minute yet): a running job's note (walkthrough 14, W14-17: its data user could not tell slow from stuck).
    waiting: str | None = None

    # ---- ring sessions (called by the coordinator's job) -------------------------------
    def open_ring(self, session_id: str, members: Sequence[str]) -> None:
        """Allow relaying among ``members`` (owner ids) under ``session_id`` until :meth:`close_ring`
        (:meth:`Relay.open`)."""
        with self._cv:
            self._relay.open(session_id, members)
            nodes = {self._registry.owner_node.get(m) for m in members} - {None}
            self._ring_keys[session_id] = {n: self._registry.nodes[n].keys for n in nodes if n is not None}

    def _rekeyed(self, session_id: str) -> set[str]:
        """The nodes of an open ring's members that a new process (other ring keys) took over since it opened: its
        members there that had not passed the sum on cannot (their peers seal to keys that died with the old
        process; walkthrough 7, W7-3). The lock is held."""
        opened = self._ring_keys.get(session_id, {})
        return {n for n, keys in opened.items() if (now := self._registry.nodes.get(n)) is None or now.keys != keys}

    def close_ring(self, session_id: str) -> None:
        """Refuse further envelopes of ``session_id`` and drop those still queued. Closing a
        session that is not open does nothing."""
        with self._cv:
            self._ring_keys.pop(session_id, None)
            dropped = self._relay.close(session_id)
            if not dropped:
                return
            for node in self._registry.nodes.values():
                if any(t.task_id in dropped for t in node.queue):
                    node.queue = deque(t for t in node.queue if t.task_id not in dropped)
            self._relay.release(dropped)

    def hop_senders(self, session_id: str) -> set[str]:
        """Senders of the ``HOP`` envelopes relayed in the open session ``session_id`` (empty if
        it is not open): the input of :func:`~privfed.common.secagg.ring_topology.stalled_party`."""
        with self._cv:
            return self._relay.hop_senders(session_id)

    def complaints(self, session_id: str) -> set[tuple[str, str]]:
        """``(complainer, accused)`` heard in the open session ``session_id`` (:meth:`Relay.complaints`, A33-2)."""
        with self._cv:
            return self._relay.complaints(session_id)

    def rekeyed_owners(self, session_id: str) -> set[str]:
        """The members of the open ring ``session_id`` that had not passed the sum on and whose node a new process
        took over since the ring opened (:meth:`_rekeyed`), or that no node registers now: they cannot pass it on,
        so the re-formed ring drops them. Not :func:`~privfed.common.secagg.ring_topology.stalled_party`'s first
        member without a ``HOP``: when the wait ends at such a takeover the sum may not have reached the member yet,
        and that party is an honest one still to come (audit 28, A28-1: a node that left and registered again with
        new keys right after the joins had the leader, or the next member, dropped in its place, and could do it
        again at each attempt)."""
        with self._cv:
            nodes: set[str | None] = {None, *self._rekeyed(session_id)}
            passed = self._relay.hop_senders(session_id)
            return {
                m
                for m in self._relay.members(session_id)
                if m not in passed and self._registry.owner_node.get(m) in nodes
            }

    def queued_relay(self) -> tuple[int, int]:
        """(envelopes, bytes) of relayed envelopes waiting in the queues."""
        with self._cv:
            return self._relay.waiting()

    def peer_key(self, owner_id: str) -> PeerKey:
        with self._cv:
            return self._registry.peer_key(owner_id)

    def certificates(self) -> dict[str, bytes]:
        with self._cv:
            return {n: c for n, c in self._registry.certificates.items() if c}

    def silent_owners(self) -> set[str]:
        """Owners whose node has been silent for longer than the node timeout."""
        now = self._clock()
        with self._cv:
            silent = self._registry.silent_nodes(now, self._node_timeout)
            if not silent:  # the common case: no scan of every owner (10^5 and more) per secure-sum step
                return set()
            return {o for o, nid in self._registry.owner_node.items() if nid in silent}

    # ---- called by the coordinator's job -----------------------------------------------
    def owners(self) -> dict[str, OwnerInfo]:
        with self._cv:
            return dict(self._registry.owners)

    def live_owners(self) -> dict[str, OwnerInfo]:
        """The registered owners whose node has called within the node timeout: those a job can count on
        (:meth:`~privfed.server.nodes.Registry.live_owners`)."""
        with self._cv:
            return self._registry.live_owners(self._clock(), self._node_timeout)

    def nodes(self) -> dict[str, int]:
        """node id -> number of owners it registered."""
        with self._cv:
            return {n: len(node.owners) for n, node in self._registry.nodes.items()}

    def node_states(self) -> dict[str, str]:
        """Registered node -> ``online``, ``silent`` or ``left`` (:meth:`~privfed.server.nodes.Registry.node_states`)."""
        with self._cv:
            return self._registry.node_states(self._clock(), self._node_timeout)

    def silent_nodes(self) -> set[str]:
        """Registered nodes silent for longer than the node timeout (exited, or hung)."""
        with self._cv:
            return self._registry.silent_nodes(self._clock(), self._node_timeout)

    def wait_for_owners(self, n: int, timeout: float, progress: Callable[[int], None] | None = None) -> int:
        """Wait up to ``timeout`` s for ``n`` :meth:`live_owners`; returns how many there are (fewer on
        timeout or abort). A node that goes silent meanwhile stops counting within half a second."""
        deadline = self._clock() + timeout
        with self._cv:
            while (live := len(self._registry.live_owners(self._clock(), self._node_timeout))) < n and not self.aborted:
                if progress:
                    progress(live)
                left = deadline - self._clock()
                if left <= 0:
                    break
                self._cv.wait(min(left, 0.5))
            live = len(self._registry.live_owners(self._clock(), self._node_timeout))
            if progress:
                progress(live)
            return live

    def wait_for_nodes(self, nodes: set[str], timeout: float) -> set[str]:
        """Wait up to ``timeout`` s for each of ``nodes`` to be online (to have called within the node timeout); returns
        those that are. A node that left does not come back (it said it stops), so it is not waited for."""
        deadline = self._clock() + timeout
        with self._cv:
            while not self.aborted:
                states = self._registry.node_states(self._clock(), self._node_timeout)
                back = {n for n in nodes if states.get(n) == "online"}
                left = deadline - self._clock()
                if left <= 0 or all(states.get(n, "left") != "silent" for n in nodes - back):
                    return back
                self._cv.wait(min(left, 0.5))
            return set()

    def run(
        self,
        tasks: list[Task],
        *,
        timeout: float,
        progress: Callable[[int, int], None] | None = None,
        stalls: str | None = None,
        sink: Sink | None = None,
    ) -> RunOutcome:
        """Queue ``tasks`` for their owners' nodes and wait for the answers.

        With a ``sink``, the answers are handed to it in batches as they come (outside the lock,
        in this thread, in the order they were pushed; :data:`~privfed.server.node_calls.HAND_OVER` at a time, or what came
        within half a second) and not kept: a round of 10^6 owners never
        holds its replies at once (issue 27). Without one, they come back in the outcome.

        Returns when every task is answered, when the round ``timeout`` passes, or when the
        only unanswered tasks belong to nodes silent for longer than ``node_timeout``
        (killed or cut off) or that left (stopped cleanly: :meth:`leave`): the round completes
        without them. With ``stalls``, an open ring session the tasks wait on (a ring leader's),
        the wait also ends once that ring cannot close (:meth:`Relay.stalled`: a member on such a
        node has not passed the sum on), instead of sitting out the attempt's timeout; the secure
        sum then drops the silent member (contract 5).
        """
        ids = [t.task_id for t in tasks]
        kept: list[Answer] = []
        handed = 0
        if self.on_first_ask is not None and not self._asked and any(not isinstance(t.spec, JoinTask) for t in tasks):
            self.on_first_ask()  # before any node can take such a task (a raise: none is queued)
        with self._cv:
            for t in tasks:
                node_id = self._registry.owner_node.get(t.owner_id)
                if node_id is None:
                    raise RoundFailed(
                        f"task {t.task_id!r} is for owner {t.owner_id!r}, which is not registered (its "
                        "node left or re-registered without it)"
                    )
                self._pending[t.task_id] = t
                self._registry.nodes[node_id].queue.append(t)
                self._asked = self._asked or not isinstance(t.spec, JoinTask)  # an accept round asks for nothing
            self._waiting = set(ids)  # push() removes answered ids: O(1) per answer
            self._notify()
            started = self._clock()
            deadline, next_liveness_check, next_line = started + timeout, started + 0.5, started + WAITING_EVERY
            while self._waiting and not self.aborted:
                handed += self._hand_over(sink, kept)
                if progress:
                    progress(len(ids) - len(self._waiting), len(ids))
                now = self._clock()
                if now >= deadline:
                    break
                next_line = self._log_waiting(now, next_line, tasks[0].round_name, len(ids), started)
                if now >= next_liveness_check:  # O(waiting) work, so at most twice a second
                    next_liveness_check = now + 0.5
                    if self._cannot_be_answered(now, stalls):
                        break
                if self._waiting and not self._arrived:  # a sink may have taken the lock's time
                    self._cv.wait(min(0.5, deadline - now))
            handed += self._hand_over(sink, kept)
            if progress:
                progress(len(ids) - len(self._waiting), len(ids))
            lost = [i for i in ids if i in self._waiting]
            self._waiting, self.waiting = set(), None
            states = self._registry.node_states(self._clock(), self._node_timeout)
            unanswered_by = {
                nid: states.get(nid, "left")
                for i in lost
                if (nid := self._registry.owner_node.get(self._pending[i].owner_id)) is not None
            }
            lost_nodes = sorted(nid for nid, state in unanswered_by.items() if state != "online")
            lost_set = set(lost)
            for i in lost:
                self._pending.pop(i)
            for node in self._registry.nodes.values():
                if any(t.task_id in lost_set for t in node.queue):
                    node.queue = deque(t for t in node.queue if t.task_id not in lost_set)
            results = {t.task_id: a for t, a in kept if isinstance(a, Result)}
            rejected = {t.task_id: a for t, a in kept if isinstance(a, Rejection)}
            if self.aborted:
                raise JobAborted(f"job aborted with {len(lost)} task(s) of the round unanswered")
            answered = len(results) if sink is None else handed
            return RunOutcome(results, lost, lost_nodes, rejected, answered, unanswered_by)

    def _log_waiting(self, now: float, due: float, round_name: str, asked: int, started: float) -> float:
        """From ``due`` on, one line of what a round started at ``started`` still waits for: how many answered, and the
        nodes of the unanswered tasks with their state (``online``: computing, or slow). Returns when the next line is
        due. The lock is held."""
        if now < due:
            return due
        states = self._registry.node_states(self._clock(), self._node_timeout)
        # an owner its node no longer registers is "left" too
        waiting_on = Counter(self._registry.owner_node.get(self._pending[i].owner_id, "?") for i in self._waiting)
        nodes = ", ".join(f"{node} ({n} task(s), {states.get(node, 'left')})" for node, n in sorted(waiting_on.items()))
        self.waiting = (
            f"round {round_name}: {asked - len(self._waiting)} of {asked} task(s) answered after {now - started:.0f} s; "
            f"waiting for {nodes}"
        )
        log.info("%s", self.waiting)
        return now + WAITING_EVERY

    def _cannot_be_answered(self, now: float, stalls: str | None) -> bool:
        """Whether the waiting tasks of :meth:`run` can no longer be answered: each is of a node silent for the node
        timeout, that left or that no longer registers its owner, or (``stalls``) the ring they wait on cannot
        close: a member that has not passed the sum on is on such a node, or on one a new process took over since
        the ring opened (:meth:`_rekeyed`; walkthrough 7, W7-3: a node restarted mid-ring stalled it for the
        attempt's 30 s). The lock is held."""
        gone: set[str | None] = {None}  # an owner its node no longer registers will not answer either
        gone.update(self._registry.silent_nodes(now, self._node_timeout))
        if stalls is not None:
            gone |= self._rekeyed(stalls)
            if self._relay.stalled(stalls, lambda o: self._registry.owner_node.get(o) in gone):
                return True
        return all(self._registry.owner_node.get(self._pending[i].owner_id) in gone for i in self._waiting)

    def _hand_over(self, sink: Sink | None, kept: list[Answer]) -> int:
        """Hand the answers pushed since the last call to ``sink``, called with the lock released
        (pushes go on meanwhile), or keep them in ``kept``; returns the results handed to ``sink``.
        Called with the lock held."""
        answers, self._arrived = self._arrived, []
        if sink is None or not answers:
            kept += answers
            return 0
        self._cv.release()
        try:
            sink(answers)
        finally:
            self._cv.acquire()
        return sum(1 for _, a in answers if isinstance(a, Result))

    def shutdown(self, *, failed: bool = False) -> None:
        """Tell every node, at its next poll, that the job is over; ``failed``: without its result (a node
        of one job then exits 2, a cron job can tell)."""
        with self._cv:
            self._shutdown = True
            self._job_failed = self._job_failed or failed
            self._notify()

    @property
    def job_failed(self) -> bool:
        """The job the nodes are told is over ended without its result (:meth:`shutdown`, :meth:`abort`)."""
        return self._job_failed

    @property
    def aborted(self) -> bool:
        """The coordinator is stopping (:meth:`abort`) or the current job was cancelled (:meth:`cancel_job`)."""
        return self._aborted or self._cancelled

    # ---- one job after another (privfed serve) -----------------------------------------
    def begin_job(self, job: JobInfo | None) -> None:
        """Announce ``job``: the tasks queued from now on belong to it, and each node is told so with
        the tasks it takes (:meth:`with_job`), so an owner's policy can judge the job. Tasks of an
        earlier job still queued are dropped (their job is over); the owners stay registered."""
        with self._cv:
            for node in self._registry.nodes.values():
                self._relay.release(t.task_id for t in node.queue)
                node.queue.clear()
            self._pending.clear()
            self._arrived = []
            self._waiting, self.waiting = set(), None  # not an earlier job's note (audit 37, O-1: a batch left raising)
            self._job = job
            self._asked = False
            self._sent_to = set()
            self._notify()

    def cancel_job(self) -> None:
        """Stop the current job as :meth:`abort` does (a waiting round raises JobAborted), but keep
        the nodes: they are not told to exit. :meth:`clear_cancel` lifts it for the next job."""
        with self._cv:
            self._cancelled = True
            self._notify()

    def clear_cancel(self) -> None:
        """Lift :meth:`cancel_job` (``privfed serve`` before each job; a cancel that comes while the
        job starts is not lost: it is lifted only before the job is claimed)."""
        with self._cv:
            self._cancelled = False

    @property
    def asked(self) -> bool:
        """Whether a task of the job announced last (:meth:`begin_job`) was put in a node's queue, its accept round's
        aside (they release nothing): until then no owner can have released anything for it."""
        return self._asked

    @property
    def job(self) -> JobInfo | None:
        """The job announced last (:meth:`begin_job`)."""
        return self._job

    def abort(self) -> None:
        """Stop the job: a waiting round returns at once (raising JobAborted), nodes are told
        to exit. Owners debit before they push, so their ledgers stay consistent: a late
        answer is simply dropped."""
        with self._cv:
            self._aborted = True
            self._shutdown = True
            self._job_failed = True
            self._notify()
