"""Owner registry and task queues: the coordinator's transport object.

Strategies build :class:`Task` lists and hand them to :meth:`Dispatcher.run`; the gRPC
servicer feeds :meth:`register`, :meth:`pull` and :meth:`push`. Nothing here knows protobuf.
Time is injected (``clock``) so the waiting logic can be driven in tests.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from privfed.common.errors import JobAborted, RemoteProtocolError, RoundFailed
from privfed.common.jobinfo import JobInfo
from privfed.common.tasks import OwnerInfo, PeerKey, Result, RingMessageTask, Task
from privfed.server.contracts import Rejection
from privfed.server.nodes import NodeQueue, Registry, check_registration
from privfed.server.relay import Envelope, Relay

log = logging.getLogger("privfed.coordinator")
T = TypeVar("T")


#: An answer that came, with the task it answers: a result, or a rejection of an answer that did not decode.
Answer = tuple[Task, Result | Rejection]
#: Takes the answers of a running batch as they come (:meth:`Dispatcher.run`'s ``sink``).
Sink = Callable[[list[Answer]], None]
#: A running batch is woken by its last answer, or once this many wait to be handed over, or at its
#: next liveness check (twice a second): not by each of its N nodes' pushes (issue 27: N wake-ups of
#: the job's thread per round, each taking the lock and the GIL from the nodes' threads).
HAND_OVER = 256


@dataclass
class RunOutcome:
    """What came back from one batch of tasks (with a ``sink``, the answers went there instead:
    ``results`` and ``rejected`` are empty and ``answered`` counts the results handed over)."""

    results: dict[str, Result]  # task_id -> result
    lost: list[str]  # task ids never answered (node dead or deadline passed)
    lost_nodes: list[str]  # nodes of unanswered tasks that are silent (dead or cut off)
    rejected: dict[str, Rejection] = field(default_factory=dict)  # task_id -> an answer that could not be decoded
    answered: int = 0  # results that came (in ``results`` or handed to the sink)


class Dispatcher:
    def __init__(self, *, node_timeout: float = 15.0, clock: Callable[[], float] = time.monotonic):
        lock = threading.RLock()
        self._cv = threading.Condition(lock)  # any change: answers, registrations, queues, the job's state
        # The nodes' long polls wait here, woken by what they wait for (queued tasks, shutdown), not by
        # every answer: with N nodes a round's N pushes woke N polls each, N^2 wake-ups of threads that
        # only found their queue empty and waited again.
        self._polls = threading.Condition(lock)
        self._clock = clock
        self._node_timeout = node_timeout
        self._registry = Registry()  # the nodes, their owners and certificates (guarded by the lock)
        self._pending: dict[str, Task] = {}
        self._arrived: list[Answer] = []  # answers pushed since the running batch last took them
        self._shutdown = False
        self._waiting: set[str] = set()
        self._aborted = False
        self._cancelled = False  # the current job only (cancel_job); clear_cancel lifts it
        self._job: JobInfo | None = None
        self._relay = Relay()  # open ring sessions and the envelopes waiting in the node queues
        self.relayed = 0  # envelopes accepted (tests watch it)
        self.session_id = secrets.token_hex(8)

    def _notify(self) -> None:
        """Wake every waiter, the nodes' polls included (the lock is held)."""
        self._cv.notify_all()
        self._polls.notify_all()

    # ---- called by the servicer --------------------------------------------------------
    def register(
        self,
        node_id: str,
        owners: list[OwnerInfo],
        certificate: bytes = b"",
        peer: str | None = None,
        *,
        part: int = 0,
        parts: int = 1,
        key_tree_signature: bytes = b"",
    ) -> str:
        """Register (or re-register) node ``node_id`` hosting ``owners``; returns the job session id.
        ``key_tree_signature``: the node's signature over its owners' key tree (each key's path is
        rebuilt from the registration when a secure sum needs it: :meth:`~privfed.server.nodes.NodeQueue.tree_key`).

        A node whose owners do not fit one message sends them in ``parts`` calls, ``part`` 0, 1, ...
        from one connection (:class:`~privfed.server.nodes.Parts`): each part is checked alone, and
        the registration takes effect, checked whole, with the last one.

        ``node_id`` is the caller's verified certificate name (the servicer checks the claimed id
        against it; only ``--insecure`` takes the claim as is). Every owner id must be
        ``<node_id>.<local name>`` (:func:`privfed.common.identity.check_owned_by`), so a node can
        neither register another node's owners nor invent owners under another name. A node that
        registers again replaces its own owners and nobody else's.

        A node id serves one process at a time (issue 23, item 4): a second live process is refused with
        :class:`NodeIdInUse`, a restarted one takes over and the old connection ``peer`` is fenced
        (:meth:`~privfed.server.nodes.Registry.admit`): :meth:`pull` refuses it until it registers again.
        """
        check_registration(node_id, owners)
        if parts <= 1 and part:
            raise RemoteProtocolError(f"node {node_id!r} sent registration part {part} of a registration in one part")
        if parts > 1:
            with self._cv:
                whole = self._registry.stage(node_id, owners, part, parts, peer)
            if whole is None:
                return self.session_id
            owners = whole
            check_registration(node_id, owners)
        with self._cv:
            node, old = self._registry.admit(node_id, owners, certificate, peer, self._clock(), key_tree_signature)
            if old is not None:
                self._relay.release(t.task_id for t in old.queue)  # relayed envelopes die with the old queue
            # A (re)connecting node gets every unanswered task of its owners again: tasks its
            # previous incarnation pulled may have died with it, or been taken by a stale long
            # poll of the dead connection. Redelivery can't double-spend: the owner's ledger
            # refuses a release id (task id) it has already debited.
            hosted = set(node.owners)
            node.queue.extend(t for t in self._pending.values() if t.owner_id in hosted)
            self._notify()
        return self.session_id

    def pull(
        self, node_id: str, wait: float, peer: str | None = None, active: Callable[[], bool] | None = None
    ) -> tuple[list[Task], bool]:
        """The node's queued tasks (waiting up to ``wait`` s for one) and whether the job is over.

        A call from another connection than the registration's (``peer``; None: not checked) is
        refused with :class:`RemoteProtocolError`: a node that reconnected registers again (same
        keys: accepted at once), a fenced process is then refused as a second process. A poll whose
        caller is gone (``active()`` false: its call or session ended meanwhile) takes nothing: the
        tasks a node's re-registration queues again are left for its new call."""
        deadline = self._clock() + wait
        with self._cv:
            node = self._registry.caller(node_id, peer)
            while not node.queue and not self._shutdown:
                node.last_seen = self._clock()
                left = deadline - self._clock()
                if left <= 0:
                    break
                self._polls.wait(left)
                node = self._registry.known(node_id)
            if active is not None and not active():
                return [], False
            node.last_seen = self._clock()
            tasks = self._drain(node)
            return tasks, self._shutdown and not tasks

    def push(self, node_id: str, results: list[Result], rejected: Sequence[Rejection] = ()) -> int:
        """Record the node's answers; ``rejected`` are answers that could not be decoded, which
        end their tasks as answered (the job rejects the owner at once instead of waiting)."""
        with self._cv:
            node = self._registry.known(node_id)
            node.last_seen = self._clock()
            accepted = 0
            answers: list[Result | Rejection] = [*results, *rejected]
            for answer in answers:
                if self._registry.owner_node.get(answer.owner_id) != node_id:
                    raise RemoteProtocolError(
                        f"node {node_id!r} answered for owner {answer.owner_id!r} it does not host"
                    )
                task = self._pending.get(answer.task_id)
                if task is None or task.owner_id != answer.owner_id:
                    continue  # its round is over (or it never was ours): drop it, keep the rest
                del self._pending[answer.task_id]
                self._waiting.discard(answer.task_id)
                self._arrived.append((task, answer))
                accepted += 1
            if not self._waiting or len(self._arrived) >= HAND_OVER:  # not the polls: an answer queues nothing
                self._cv.notify_all()
            return accepted

    def relay(self, node_id: str, envelopes: list[tuple[str, bytes]]) -> tuple[int, list[Task]]:
        """Queue sealed owner-to-owner envelopes for their recipients' nodes (no answer expected),
        and hand the calling node whatever is queued for it: a ring's next hop is often one of
        its own owners, and this saves it the wait for its next poll (the envelope still went
        through here, like every other).

        The relay's rules decide which are accepted (:meth:`privfed.server.relay.Relay.accept`: an
        open session, a sender this node hosts, members only, bounded queues); a call that breaks
        one raises (:class:`RemoteProtocolError`, :class:`RingClosed` or :class:`ResourceExhausted`)
        and nothing of it is queued.
        """
        with self._cv:
            caller = self._registry.known(node_id)
            caller.last_seen = self._clock()
            accepted = self._relay.accept(node_id, envelopes, self._registry.owner_node.get)
            for env, (_, data) in zip(accepted, envelopes):
                # A relayed envelope's round is its ring session (it debits nothing).
                task = Task(
                    f"relay-{secrets.token_hex(6)}", env.recipient, env.session_id, RingMessageTask(bytes(data))
                )
                self._registry.nodes[self._registry.owner_node[env.recipient]].queue.append(task)
                self._relay.book(task.task_id, env)
            self.relayed += len(accepted)
            self._notify()
            return len(accepted), self._drain(caller)

    def _drain(self, node: NodeQueue) -> list[Task]:
        tasks = list(node.queue)
        node.queue.clear()
        self._relay.release(t.task_id for t in tasks)
        return tasks

    def with_job(self, take: Callable[[], T]) -> tuple[T, JobInfo | None]:
        """``take()`` (this dispatcher's :meth:`pull` or :meth:`relay`) and the job its tasks belong to,
        read under the lock the drain took: a job begun between the drain and the read (:meth:`begin_job`)
        cannot lend its announcement to the tasks of the one before (an owner's policy judges them by it)."""
        with self._cv:  # an RLock: pull's wait releases it whole, and the drain and this read share a hold
            return take(), self._job

    def requeue(self, node_id: str, tasks: list[Task], job: JobInfo | None) -> None:
        """Put tasks taken by :meth:`pull` or :meth:`relay` for ``job`` back at the front of the node's queue
        (the servicer does so with what would not fit in one response); dropped if another job began
        meanwhile, as :meth:`begin_job` drops the queued ones (else they would go out under its announcement)."""
        if not tasks:
            return
        with self._cv:
            if job is not self._job:  # (the drain released their relay bookings: nothing is counted for them)
                return
            node = self._registry.known(node_id)
            for t in reversed(tasks):
                node.queue.appendleft(t)
                if isinstance(t.spec, RingMessageTask):  # waiting again: counted against its recipient again
                    self._relay.book(t.task_id, Envelope(t.round_id, t.owner_id, len(t.spec.data)))
            self._notify()

    # ---- ring sessions (called by the coordinator's job) -------------------------------
    def open_ring(self, session_id: str, members: Sequence[str]) -> None:
        """Allow relaying among ``members`` (owner ids) under ``session_id`` until :meth:`close_ring`
        (:meth:`Relay.open`)."""
        with self._cv:
            self._relay.open(session_id, members)

    def close_ring(self, session_id: str) -> None:
        """Refuse further envelopes of ``session_id`` and drop those still queued. Closing a
        session that is not open does nothing."""
        with self._cv:
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

    def check_caller(self, node_id: str, peer: str | None) -> None:
        """Raise :class:`RemoteProtocolError` unless ``node_id`` is registered from connection
        ``peer`` (None: not checked), as :meth:`pull` does (a node opening a Session)."""
        with self._cv:
            self._registry.caller(node_id, peer)

    # ---- called by the coordinator's job -----------------------------------------------
    def owners(self) -> dict[str, OwnerInfo]:
        with self._cv:
            return dict(self._registry.owners)

    def nodes(self) -> dict[str, int]:
        """node id -> number of owners it registered."""
        with self._cv:
            return {n: len(node.owners) for n, node in self._registry.nodes.items()}

    def wait_for_owners(self, n: int, timeout: float, progress: Callable[[int], None] | None = None) -> int:
        deadline = self._clock() + timeout
        with self._cv:
            while len(self._registry.owners) < n and not self.aborted:
                if progress:
                    progress(len(self._registry.owners))
                left = deadline - self._clock()
                if left <= 0:
                    break
                self._cv.wait(min(left, 0.5))
            if progress:
                progress(len(self._registry.owners))
            return len(self._registry.owners)

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
        in this thread, in the order they were pushed; :data:`HAND_OVER` at a time, or what came
        within half a second) and not kept: a round of 10^6 owners never
        holds its replies at once (issue 27). Without one, they come back in the outcome.

        Returns when every task is answered, when the round ``timeout`` passes, or when the
        only unanswered tasks belong to nodes silent for longer than ``node_timeout``
        (killed or cut off): the round completes without them. With ``stalls``, an open ring
        session the tasks wait on (a ring leader's), the wait also ends once that ring cannot close
        (:meth:`Relay.stalled`: a member on such a node has not passed the sum on), instead of
        sitting out the attempt's timeout; the secure sum then drops the silent member (contract 5).
        """
        ids = [t.task_id for t in tasks]
        kept: list[Answer] = []
        handed = 0
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
            self._waiting = set(ids)  # push() removes answered ids: O(1) per answer
            self._notify()
            deadline = self._clock() + timeout
            next_liveness_check = self._clock() + 0.5
            while self._waiting and not self.aborted:
                handed += self._hand_over(sink, kept)
                if progress:
                    progress(len(ids) - len(self._waiting), len(ids))
                now = self._clock()
                if now >= deadline:
                    break
                if now >= next_liveness_check:  # O(waiting) work, so at most twice a second
                    next_liveness_check = now + 0.5
                    # An owner its node no longer registers will not answer either (None).
                    gone: set[str | None] = {None}
                    gone.update(self._registry.silent_nodes(now, self._node_timeout))
                    stalled = stalls is not None and self._relay.stalled(
                        stalls, lambda o: self._registry.owner_node.get(o) in gone
                    )
                    if stalled or all(
                        self._registry.owner_node.get(self._pending[i].owner_id) in gone for i in self._waiting
                    ):
                        break
                if self._waiting and not self._arrived:  # a sink may have taken the lock's time
                    self._cv.wait(min(0.5, deadline - now))
            handed += self._hand_over(sink, kept)
            if progress:
                progress(len(ids) - len(self._waiting), len(ids))
            lost = [i for i in ids if i in self._waiting]
            self._waiting = set()
            now = self._clock()
            lost_nodes = sorted(
                {
                    nid
                    for nid in (self._registry.owner_node.get(self._pending[i].owner_id) for i in lost)
                    if nid is not None and now - self._registry.nodes[nid].last_seen > self._node_timeout
                }
            )
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
            return RunOutcome(results=results, lost=lost, lost_nodes=lost_nodes, rejected=rejected, answered=answered)

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

    def shutdown(self) -> None:
        """Tell every node, at its next poll, that the job is over."""
        with self._cv:
            self._shutdown = True
            self._notify()

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
            self._waiting = set()
            self._job = job
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
            self._notify()
