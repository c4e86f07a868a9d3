"""The dispatcher's side the owner nodes call, through the gRPC servicer: registrations, long polls,
answers and relayed envelopes (:class:`NodeCalls`), and the state it shares with the side the
coordinator's job calls (:class:`~privfed.server.dispatcher.Dispatcher`, which extends it).

Everything here runs under the dispatcher's one lock; nothing here knows protobuf.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from privfed.common.errors import RemoteProtocolError
from privfed.common.jobinfo import JobInfo
from privfed.common.tasks import OwnerInfo, Result, RingMessageTask, Task
from privfed.server.contracts import Rejection
from privfed.server.nodes import NodeQueue, Registry, check_registration, registered_line
from privfed.server.relay import Envelope, Relay

T = TypeVar("T")

log = logging.getLogger("privfed.coordinator")

#: An answer that came, with the task it answers: a result, or a rejection of an answer that did not decode.
Answer = tuple[Task, Result | Rejection]
#: A running batch is woken by its last answer, or once this many wait to be handed over, or at its
#: next liveness check (twice a second): not by each of its N nodes' pushes (issue 27: N wake-ups of
#: the job's thread per round, each taking the lock and the GIL from the nodes' threads).
HAND_OVER = 256
#: The most ended jobs kept for a node that has not yet heard of them (:meth:`NodeCalls.end_job`).
ENDED_KEPT = 16


class NodeCalls:
    """What the servicer calls for the nodes (module docstring), on the state the job's side shares."""

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
        self._job_failed = False  # with _shutdown: the job ended without its result
        self._asked = False  # a task of the current job was put in a node's queue (Dispatcher.asked)
        self._waiting: set[str] = set()
        self._aborted = False
        self._cancelled = False  # the current job only (cancel_job); clear_cancel lifts it
        self._job: JobInfo | None = None
        self._sent_to: set[str] = set()  # the nodes a task of the current job went to (end_job)
        self._ended: dict[str, list[tuple[str, bool]]] = {}  # node -> (job id, failed) not yet told (take_ended)
        self._relay = Relay()  # open ring sessions and the envelopes waiting in the node queues
        self._ring_keys: dict[str, dict[str, frozenset[bytes]]] = {}  # open session -> its nodes' ring keys at open
        self.relayed = 0  # envelopes accepted (tests watch it)
        #: Nodes registered at the service's last run (``JobStore.known_nodes``): named while they are not back.
        self.known_before: frozenset[str] = frozenset()
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
            now = self._clock()
            node, old = self._registry.admit(node_id, owners, certificate, peer, now, key_tree_signature)
            registered = registered_line(node, old, now)
            if old is not None:
                self._relay.release(t.task_id for t in old.queue)  # relayed envelopes die with the old queue
            # A (re)connecting node gets every unanswered task of its owners again: tasks its
            # previous incarnation pulled may have died with it, or been taken by a stale long
            # poll of the dead connection. Redelivery can't double-spend: the owner's ledger
            # refuses a release id (task id) it has already debited.
            hosted = set(node.owners)
            node.queue.extend(t for t in self._pending.values() if t.owner_id in hosted)
            self._notify()
        log.log(*registered)  # one line, outside the lock
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
            while not node.queue and not self._shutdown and node_id not in self._ended:
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

    def leave(self, node_id: str, peer: str | None = None, *, schema_mismatch: bool = False) -> None:
        """Node ``node_id`` is stopping cleanly: its owners are counted on no more, from now on
        (:meth:`~privfed.server.nodes.Registry.leave`, which checks the caller's connection ``peer``). A job waiting
        for owners stops counting them, and a running batch waiting only on them ends as it does for a silent node,
        without waiting out the node timeout. One INFO line says so (none for a repeated leave); a WARNING when
        the node stops because its rows do not fit the federation schema (``schema_mismatch``; walkthrough 11,
        W11-3: the operator read only that it left, as if its owner had stopped it)."""
        with self._cv:
            node = self._registry.leave(node_id, peer)
            self._notify()
        if node is None:
            return
        if schema_mismatch:
            log.warning(
                "node %s left: its rows do not fit the federation schema (schema_mismatch: the node's own log says "
                "where), so it answers no job; its %d owner(s) are no longer counted",
                node_id,
                len(node.owners),
            )
        else:
            log.info("node %s left: its %d owner(s) are no longer counted", node_id, len(node.owners))

    def revoked(self, node_id: str, peer: str) -> None:
        """A registered node whose certificate the service refused as revoked, on the connection it registered from,
        leaves at once (:meth:`leave`'s effect, :meth:`~privfed.server.nodes.Registry.revoked`); nothing for a name
        that is no registered node, nor for another connection (a stale copy cannot take a re-keyed node's owners)."""
        with self._cv:
            node = self._registry.revoked(node_id, peer)
            self._notify()
        if node is not None:
            log.warning(
                "node %s left: its certificate is revoked, so none of its calls is answered; its %d owner(s) are no "
                "longer counted",
                node_id,
                len(node.owners),
            )

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
                if env.accused:  # a complaint is the relay's, never delivered (A33-2)
                    continue
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
        """The node's queued tasks but those answered meanwhile: a node that registers again before it pushes what
        it held (its coordinator may have restarted) has them queued again by its registration, then answers them
        with the push; they are not handed out a second time."""
        tasks = [t for t in node.queue if isinstance(t.spec, RingMessageTask) or t.task_id in self._pending]
        self._relay.release(t.task_id for t in node.queue)
        node.queue.clear()
        if tasks and self._job is not None:
            self._sent_to.add(node.node_id)
        return tasks

    def end_job(self, job_id: str, *, failed: bool, nodes: Iterable[str] | None = None) -> None:
        """The job ``job_id`` is over at ``privfed serve`` (``failed``: without its result). Each node it sent a task to
        (the one announced last), or each of ``nodes`` (a job of an earlier run of the service, failed at the restart:
        the nodes of that run, ``JobStore.known_nodes``; audit 28: not every node that registers), is told so with its
        next answer (:meth:`take_ended`): a daemon's owners learn whether what they released went into a result
        (walkthrough 7, W7-11). At most :data:`ENDED_KEPT` jobs are kept for a node that has not yet heard of them,
        the oldest dropped."""
        with self._cv:
            for node_id in self._sent_to if nodes is None else nodes:
                told = self._ended.setdefault(node_id, [])
                told.append((job_id, failed))
                del told[:-ENDED_KEPT]
            if nodes is None:
                self._sent_to = set()
            self._notify()

    def take_ended(self, node_id: str) -> list[tuple[str, bool]]:
        """The jobs (id, ended without its result) the node has not yet been told of (:meth:`end_job`)."""
        with self._cv:
            return self._ended.pop(node_id, [])

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

    def check_caller(self, node_id: str, peer: str | None) -> None:
        """Raise :class:`RemoteProtocolError` unless ``node_id`` is registered from connection
        ``peer`` (None: not checked), as :meth:`pull` does (a node opening a Session)."""
        with self._cv:
            self._registry.caller(node_id, peer)
