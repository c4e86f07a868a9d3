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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from privfed.common.errors import (
    ConfigError,
    JobAborted,
    NodeIdInUse,
    RemoteProtocolError,
    ResourceExhausted,
    RingClosed,
    RoundFailed,
)
from privfed.common.identity import check_owned_by
from privfed.common.secagg import ring as securesum
from privfed.common.secagg.boxes import MAX_ID_BYTES
from privfed.common.tasks import BoostEvaluateTask, OwnerInfo, PeerKey, Result, RingMessageTask, Task
from privfed.server.contracts import Rejection

log = logging.getLogger("privfed.coordinator")

#: At most this many owners in one registration (generous: a node process hosts thousands).
MAX_OWNERS_PER_NODE = 100_000
#: At most this many relayed envelopes wait for one recipient (a ring sends an owner about two
#: per session; the rest is a node flooding a peer that does not poll).
MAX_QUEUED_ENVELOPES_PER_OWNER = 64
#: At most this many relayed bytes wait for one recipient: two of the largest ring envelopes
#: (``securesum.MAX_MESSAGE_BYTES``, 8 MiB of ring values) fit, a flood does not.
MAX_QUEUED_BYTES_PER_OWNER = 2 * securesum.MAX_MESSAGE_BYTES
#: At most this many relayed bytes wait in the coordinator in all: memory stays bounded however
#: many owners the rings hold.
MAX_QUEUED_BYTES = 256 * 1024 * 1024
#: A registered node that called within this many seconds is alive: a node long-polls back to
#: back (each poll at most ``PULL_WAIT`` = 1 s) and pushes a heartbeat every second while it
#: computes, so a process that died is seen dead this soon after its last call.
IDENTITY_LIVENESS = 3.0


@dataclass(frozen=True)
class _Queued:
    """Bookkeeping of one relayed envelope waiting in a node's queue."""

    session_id: str
    recipient: str
    size: int
    hop_from: str = ""  # sender of a HOP envelope (what stalled-party detection needs), else ""


@dataclass
class _Node:
    node_id: str
    owners: list[str]
    queue: deque = field(default_factory=deque)
    last_seen: float = 0.0
    keys: frozenset[bytes] = frozenset()  # the owners' ring keys: fresh per node process, the same on re-registration
    peer: str | None = None  # the connection the registration came from (None: unknown, in-process callers)


@dataclass
class RunOutcome:
    """What came back from one batch of tasks."""

    results: dict[str, Result]  # task_id -> result
    lost: list[str]  # task ids never answered (node dead or deadline passed)
    lost_nodes: list[str]  # nodes of unanswered tasks that are silent (dead or cut off)
    rejected: dict[str, Rejection] = field(default_factory=dict)  # task_id -> an answer that could not be decoded


class Dispatcher:
    def __init__(self, *, node_timeout: float = 15.0, clock: Callable[[], float] = time.monotonic):
        self._cv = threading.Condition()
        self._clock = clock
        self._node_timeout = node_timeout
        self._nodes: dict[str, _Node] = {}
        self._owners: dict[str, OwnerInfo] = {}
        self._owner_node: dict[str, str] = {}
        self._pending: dict[str, Task] = {}
        self._results: dict[str, Result] = {}
        self._rejections: dict[str, Rejection] = {}
        self._shutdown = False
        self._certificates: dict[str, bytes] = {}
        self._waiting: set[str] = set()
        self._aborted = False
        self._rings: dict[str, frozenset[str]] = {}  # open ring session -> member owner ids
        self._hop_senders: dict[str, set[str]] = {}  # open ring session -> senders of HOPs relayed in it
        self._queued: dict[str, _Queued] = {}  # relay task id -> what it holds
        self._load: dict[str, tuple[int, int]] = {}  # recipient -> (envelopes, bytes) queued
        self._queued_bytes = 0
        self.relayed = 0  # envelopes accepted (tests watch it)
        self.session_id = secrets.token_hex(8)

    # ---- called by the servicer --------------------------------------------------------
    def register(self, node_id: str, owners: list[OwnerInfo], certificate: bytes = b"", peer: str | None = None) -> str:
        """Register (or re-register) node ``node_id`` hosting ``owners``; returns the job session id.

        ``node_id`` is the caller's verified certificate name (the servicer checks the claimed id
        against it; only ``--insecure`` takes the claim as is). Every owner id must be
        ``<node_id>.<local name>`` (:func:`privfed.common.identity.check_owned_by`), so a node can
        neither register another node's owners nor invent owners under another name. A node that
        registers again replaces its own owners and nobody else's.

        A node id serves one process at a time (issue 23, item 4). A node process draws fresh ring
        keys for its owners when it starts and registers the same ones again after a reconnect;
        other keys for a node id that called within :data:`IDENTITY_LIVENESS` seconds are a second
        process with the same certificate, refused with :class:`NodeIdInUse` (the first keeps its
        place). A node silent for longer is taken over by the new process (a restart), and the old
        connection ``peer`` is fenced: :meth:`pull` refuses it until it registers again.
        """
        self._check_registration(node_id, owners)
        keys = frozenset(o.x25519_public_key for o in owners if o.x25519_public_key)
        with self._cv:
            old = self._nodes.get(node_id)
            if old is not None and old.keys and keys and old.keys != keys:
                self._take_over(old, peer)
            if old is not None:
                self._release(old.queue)  # relayed envelopes die with the old connection's queue
                kept = {o.owner_id for o in owners}
                for gone in (o for o in old.owners if o not in kept):
                    self._owners.pop(gone, None)
                    self._owner_node.pop(gone, None)
            node = _Node(node_id, [o.owner_id for o in owners], last_seen=self._clock(), keys=keys, peer=peer)
            # A (re)connecting node gets every unanswered task of its owners again: tasks its
            # previous incarnation pulled may have died with it, or been taken by a stale long
            # poll of the dead connection. Redelivery can't double-spend: the owner's ledger
            # refuses a release id (task id) it has already debited.
            hosted = set(node.owners)
            node.queue.extend(t for t in self._pending.values() if t.owner_id in hosted)
            self._nodes[node_id] = node
            self._certificates[node_id] = certificate
            for o in owners:
                self._owners[o.owner_id] = o
                self._owner_node[o.owner_id] = node_id
            self._cv.notify_all()
        return self.session_id

    def _take_over(self, old: _Node, peer: str | None) -> None:
        """A new process registers ``old``'s node id: refused while ``old`` is alive, else logged."""
        quiet = self._clock() - old.last_seen
        if quiet < IDENTITY_LIVENESS:
            raise NodeIdInUse(
                f"node id {old.node_id!r} is already registered by another live process (connection "
                f"{old.peer or 'unknown'}, last call {quiet:.1f} s ago); one node certificate serves one "
                "node process at a time: stop the other process, or give this one its own certificate"
            )
        log.warning(
            "node %s registered again from another process (connection %s); its previous process "
            "(connection %s, silent for %.1f s) is fenced",
            old.node_id,
            peer or "unknown",
            old.peer or "unknown",
            quiet,
        )

    @staticmethod
    def _check_registration(node_id: str, owners: list[OwnerInfo]) -> None:
        if not node_id or len(node_id.encode("utf-8")) > MAX_ID_BYTES:
            raise RemoteProtocolError(f"node_id must be 1..{MAX_ID_BYTES} UTF-8 bytes, got {node_id!r:.80}")
        if len(owners) > MAX_OWNERS_PER_NODE:
            raise RemoteProtocolError(
                f"a registration may carry at most MAX_OWNERS_PER_NODE = {MAX_OWNERS_PER_NODE} "
                f"owners, got {len(owners)}; split the owners over more nodes"
            )
        seen: set[str] = set()
        for o in owners:
            if len(o.owner_id.encode("utf-8")) > MAX_ID_BYTES:
                raise RemoteProtocolError(f"owner id {o.owner_id!r:.80} is longer than {MAX_ID_BYTES} UTF-8 bytes")
            check_owned_by(o.owner_id, node_id)
            if o.owner_id in seen:
                raise RemoteProtocolError(f"owner id {o.owner_id!r} appears twice in one registration")
            seen.add(o.owner_id)

    def pull(self, node_id: str, wait: float, peer: str | None = None) -> tuple[list[Task], bool]:
        """The node's queued tasks (waiting up to ``wait`` s for one) and whether the job is over.

        A call from another connection than the registration's (``peer``; None: not checked) is
        refused with :class:`RemoteProtocolError`: a node that reconnected registers again (same
        keys: accepted at once), a fenced process is then refused as a second process."""
        deadline = self._clock() + wait
        with self._cv:
            node = self._known(node_id)
            if peer is not None and node.peer is not None and peer != node.peer:
                raise RemoteProtocolError(
                    f"node {node_id!r} is registered from connection {node.peer}, not {peer}; register again"
                )
            while not node.queue and not self._shutdown:
                node.last_seen = self._clock()
                left = deadline - self._clock()
                if left <= 0:
                    break
                self._cv.wait(left)
                node = self._known(node_id)
            node.last_seen = self._clock()
            tasks = self._drain(node)
            return tasks, self._shutdown and not tasks

    def push(self, node_id: str, results: list[Result], rejected: Sequence[Rejection] = ()) -> int:
        """Record the node's answers; ``rejected`` are answers that could not be decoded, which
        end their tasks as answered (the job rejects the owner at once instead of waiting)."""
        with self._cv:
            node = self._known(node_id)
            node.last_seen = self._clock()
            accepted = 0
            answers: list[Result | Rejection] = [*results, *rejected]
            for answer in answers:
                if self._owner_node.get(answer.owner_id) != node_id:
                    raise RemoteProtocolError(
                        f"node {node_id!r} answered for owner {answer.owner_id!r} it does not host"
                    )
                task = self._pending.get(answer.task_id)
                if task is None or task.owner_id != answer.owner_id:
                    continue  # its round is over (or it never was ours): drop it, keep the rest
                del self._pending[answer.task_id]
                self._waiting.discard(answer.task_id)
                if isinstance(answer, Rejection):
                    self._rejections[answer.task_id] = answer
                else:
                    self._results[answer.task_id] = answer
                accepted += 1
            self._cv.notify_all()
            return accepted

    def relay(self, node_id: str, envelopes: list[tuple[str, bytes]]) -> tuple[int, list[Task]]:
        """Queue sealed owner-to-owner envelopes for their recipients' nodes (no answer expected),
        and hand the calling node whatever is queued for it: a ring's next hop is often one of
        its own owners, and this saves it the wait for its next poll (the envelope still went
        through here, like every other).

        An envelope is accepted only if its plaintext header (:meth:`securesum.Inbound.from_bytes`)
        names an open ring session (:meth:`open_ring`), a sender hosted by the calling node and the
        envelope's own recipient, both members of that session; anything else raises
        :class:`RemoteProtocolError` (:class:`RingClosed` for a session that is not open) and
        nothing of the call is queued. If queueing the call would pass
        :data:`MAX_QUEUED_ENVELOPES_PER_OWNER`, :data:`MAX_QUEUED_BYTES_PER_OWNER` or
        :data:`MAX_QUEUED_BYTES`, :class:`ResourceExhausted` is raised and nothing is queued.
        """
        with self._cv:
            caller = self._known(node_id)
            caller.last_seen = self._clock()
            accepted = [self._check_envelope(node_id, recipient, data) for recipient, data in envelopes]
            self._check_room(accepted)
            for q, (_, data) in zip(accepted, envelopes):
                if q.hop_from:
                    self._hop_senders[q.session_id].add(q.hop_from)
                # A relayed envelope's round is its ring session (it debits nothing).
                task = Task(f"relay-{secrets.token_hex(6)}", q.recipient, q.session_id, RingMessageTask(bytes(data)))
                self._nodes[self._owner_node[q.recipient]].queue.append(task)
                self._book(task)
            self.relayed += len(accepted)
            self._cv.notify_all()
            return len(accepted), self._drain(caller)

    def _check_envelope(self, node_id: str, recipient: str, data: bytes) -> _Queued:
        header = securesum.Inbound.from_bytes(data)  # RemoteProtocolError if it is not a ring envelope
        members = self._rings.get(header.session_id)
        if members is None:
            raise RingClosed(
                f"relay for ring session {header.session_id!r:.80}, which is not open (never opened, "
                "or closed: its ring finished, timed out or was re-formed)"
            )
        if self._owner_node.get(header.sender) != node_id:
            raise RemoteProtocolError(
                f"node {node_id!r} relayed an envelope from owner {header.sender!r:.80}, which it does not host"
            )
        if header.recipient != recipient:
            raise RemoteProtocolError(
                f"envelope addressed to {recipient!r:.80} has header recipient {header.recipient!r:.80}"
            )
        if header.sender not in members or recipient not in members:
            raise RemoteProtocolError(
                f"relay from {header.sender!r:.80} to {recipient!r:.80}: both must be members "
                f"of ring session {header.session_id!r:.80}"
            )
        if recipient not in self._owner_node:
            raise RemoteProtocolError(f"relay to unknown owner {recipient!r:.80}")
        hop_from = header.sender if header.kind is securesum.MessageKind.HOP else ""
        return _Queued(header.session_id, recipient, len(data), hop_from)

    def _check_room(self, batch: list[_Queued]) -> None:
        added: dict[str, tuple[int, int]] = {}
        for q in batch:
            count, size = added.get(q.recipient, self._load.get(q.recipient, (0, 0)))
            added[q.recipient] = (count + 1, size + q.size)
        for recipient, (count, size) in added.items():
            if count > MAX_QUEUED_ENVELOPES_PER_OWNER or size > MAX_QUEUED_BYTES_PER_OWNER:
                raise ResourceExhausted(
                    f"owner {recipient!r} would have {count} envelope(s), {size} bytes waiting; at most "
                    f"MAX_QUEUED_ENVELOPES_PER_OWNER = {MAX_QUEUED_ENVELOPES_PER_OWNER} and "
                    f"MAX_QUEUED_BYTES_PER_OWNER = {MAX_QUEUED_BYTES_PER_OWNER} may wait for its node to poll; retry later"
                )
        total = self._queued_bytes + sum(q.size for q in batch)
        if total > MAX_QUEUED_BYTES:
            raise ResourceExhausted(
                f"relay queues would hold {total} bytes, more than MAX_QUEUED_BYTES = {MAX_QUEUED_BYTES}; retry later"
            )

    def _book(self, task: Task) -> None:
        """Count a relayed envelope entering a queue against its recipient's limits."""
        if not isinstance(task.spec, RingMessageTask):
            raise TypeError(f"only relayed envelopes are booked, got {type(task.spec).__name__}")
        q = _Queued(task.round_id, task.owner_id, len(task.spec.data))
        self._queued[task.task_id] = q
        count, size = self._load.get(q.recipient, (0, 0))
        self._load[q.recipient] = (count + 1, size + q.size)
        self._queued_bytes += q.size

    def _release(self, tasks: Iterable[Task]) -> None:
        """Forget the bookkeeping of relayed envelopes leaving the queues (delivered or dropped)."""
        for t in tasks:
            q = self._queued.pop(t.task_id, None)
            if q is None:
                continue
            count, size = self._load[q.recipient]
            if count == 1:
                del self._load[q.recipient]
            else:
                self._load[q.recipient] = (count - 1, size - q.size)
            self._queued_bytes -= q.size

    def _drain(self, node: _Node) -> list[Task]:
        tasks = list(node.queue)
        node.queue.clear()
        self._release(tasks)
        return tasks

    def requeue(self, node_id: str, tasks: list[Task]) -> None:
        """Put tasks taken by :meth:`pull` or :meth:`relay` back at the front of the node's queue
        (the servicer does so with what would not fit in one response)."""
        if not tasks:
            return
        with self._cv:
            node = self._known(node_id)
            for t in reversed(tasks):
                node.queue.appendleft(t)
                if isinstance(t.spec, RingMessageTask):
                    self._book(t)
            self._cv.notify_all()

    # ---- ring sessions (called by the coordinator's job) -------------------------------
    def open_ring(self, session_id: str, members: Sequence[str]) -> None:
        """Allow relaying among ``members`` (owner ids) under ``session_id`` until :meth:`close_ring`.

        Opening an open session again with the same members does nothing; with other members it
        raises :class:`ConfigError` (a re-formed ring gets a fresh session id).
        """
        ring = frozenset(members)
        if not session_id or len(ring) != len(members) or len(ring) < 2:
            raise ConfigError(
                f"a ring session needs a non-empty id and at least 2 distinct members, got "
                f"{session_id!r} with {len(members)} member(s), {len(ring)} distinct"
            )
        with self._cv:
            held = self._rings.get(session_id)
            if held is not None and held != ring:
                raise ConfigError(
                    f"ring session {session_id!r} is already open with other members; "
                    "use a new session id (securesum.new_session_id) for a re-formed ring"
                )
            self._rings[session_id] = ring
            self._hop_senders.setdefault(session_id, set())

    def close_ring(self, session_id: str) -> None:
        """Refuse further envelopes of ``session_id`` and drop those still queued. Closing a
        session that is not open does nothing."""
        with self._cv:
            self._hop_senders.pop(session_id, None)
            if self._rings.pop(session_id, None) is None:
                return
            dropped = {tid for tid, q in self._queued.items() if q.session_id == session_id}
            if not dropped:
                return
            for node in self._nodes.values():
                if any(t.task_id in dropped for t in node.queue):
                    gone = [t for t in node.queue if t.task_id in dropped]
                    node.queue = deque(t for t in node.queue if t.task_id not in dropped)
                    self._release(gone)

    def hop_senders(self, session_id: str) -> set[str]:
        """Senders of the ``HOP`` envelopes relayed in the open session ``session_id`` (empty if
        it is not open): the input of :func:`~privfed.common.secagg.ring.stalled_party`."""
        with self._cv:
            return set(self._hop_senders.get(session_id, ()))

    def queued_relay(self) -> tuple[int, int]:
        """(envelopes, bytes) of relayed envelopes waiting in the queues."""
        with self._cv:
            return len(self._queued), self._queued_bytes

    def peer_key(self, owner_id: str) -> PeerKey:
        with self._cv:
            o = self._owners.get(owner_id)
            if o is None:
                raise RoundFailed(f"owner {owner_id!r} is not registered (its node left or re-registered without it)")
            return PeerKey(owner_id, self._owner_node[owner_id], o.x25519_public_key, o.key_signature)

    def certificates(self) -> dict[str, bytes]:
        with self._cv:
            return {n: c for n, c in self._certificates.items() if c}

    def _ring_stalled(self, task_id: str, gone: set[str | None]) -> bool:
        """Whether waiting task ``task_id`` is a ring leader's that cannot be answered: its open
        ring has a member on a silent node that has not passed the sum on (no HOP from it was
        relayed), so the ring cannot close. The caller ends the wait instead of sitting out the
        attempt's timeout; the session then drops the silent member and re-forms (contract 5).
        Call with the lock held."""
        spec = self._pending[task_id].spec
        if not isinstance(spec, BoostEvaluateTask):
            return False
        ring = spec.ring
        members = self._rings.get(ring.session_id)
        if not members:
            return False
        passed = self._hop_senders.get(ring.session_id, set())
        return any(self._owner_node.get(m) in gone and m not in passed for m in members)

    def silent_owners(self) -> set[str]:
        """Owners whose node has been silent for longer than the node timeout."""
        now = self._clock()
        with self._cv:
            silent = {nid for nid, n in self._nodes.items() if now - n.last_seen > self._node_timeout}
            return {o for o, nid in self._owner_node.items() if nid in silent}

    def _known(self, node_id: str) -> _Node:
        node = self._nodes.get(node_id)
        if node is None:
            raise RemoteProtocolError(f"node {node_id!r} has not registered")
        return node

    # ---- called by the coordinator's job -----------------------------------------------
    def owners(self) -> dict[str, OwnerInfo]:
        with self._cv:
            return dict(self._owners)

    def nodes(self) -> dict[str, int]:
        """node id -> number of owners it registered."""
        with self._cv:
            return {n: len(node.owners) for n, node in self._nodes.items()}

    def wait_for_owners(self, n: int, timeout: float, progress: Callable[[int], None] | None = None) -> int:
        deadline = self._clock() + timeout
        with self._cv:
            while len(self._owners) < n and not self._aborted:
                if progress:
                    progress(len(self._owners))
                left = deadline - self._clock()
                if left <= 0:
                    break
                self._cv.wait(min(left, 0.5))
            if progress:
                progress(len(self._owners))
            return len(self._owners)

    def run(
        self, tasks: list[Task], *, timeout: float, progress: Callable[[int, int], None] | None = None
    ) -> RunOutcome:
        """Queue ``tasks`` for their owners' nodes and wait for the answers.

        Returns when every task is answered, when the round ``timeout`` passes, or when the
        only unanswered tasks belong to nodes silent for longer than ``node_timeout``
        (killed or cut off): the round completes without them.
        """
        ids = [t.task_id for t in tasks]
        with self._cv:
            for t in tasks:
                node_id = self._owner_node.get(t.owner_id)
                if node_id is None:
                    raise RoundFailed(
                        f"task {t.task_id!r} is for owner {t.owner_id!r}, which is not registered (its "
                        "node left or re-registered without it)"
                    )
                self._pending[t.task_id] = t
                self._nodes[node_id].queue.append(t)
            self._waiting = set(ids)  # push() removes answered ids: O(1) per answer
            self._cv.notify_all()
            deadline = self._clock() + timeout
            next_liveness_check = self._clock() + 0.5
            while self._waiting and not self._aborted:
                if progress:
                    progress(len(ids) - len(self._waiting), len(ids))
                now = self._clock()
                if now >= deadline:
                    break
                if now >= next_liveness_check:  # O(waiting) work, so at most twice a second
                    next_liveness_check = now + 0.5
                    # An owner its node no longer registers will not answer either (None).
                    gone: set[str | None] = {None}
                    gone.update(nid for nid, n in self._nodes.items() if now - n.last_seen > self._node_timeout)
                    if all(
                        self._owner_node.get(self._pending[i].owner_id) in gone or self._ring_stalled(i, gone)
                        for i in self._waiting
                    ):
                        break
                self._cv.wait(min(0.5, deadline - now))
            if progress:
                progress(len(ids) - len(self._waiting), len(ids))
            lost = [i for i in ids if i in self._waiting]
            self._waiting = set()
            now = self._clock()
            lost_nodes = sorted(
                {
                    nid
                    for nid in (self._owner_node.get(self._pending[i].owner_id) for i in lost)
                    if nid is not None and now - self._nodes[nid].last_seen > self._node_timeout
                }
            )
            lost_set = set(lost)
            for i in lost:
                self._pending.pop(i)
            for node in self._nodes.values():
                if any(t.task_id in lost_set for t in node.queue):
                    node.queue = deque(t for t in node.queue if t.task_id not in lost_set)
            results = {i: self._results.pop(i) for i in ids if i in self._results}
            rejected = {i: self._rejections.pop(i) for i in ids if i in self._rejections}
            if self._aborted:
                raise JobAborted(f"job aborted with {len(lost)} task(s) of the round unanswered")
            return RunOutcome(results=results, lost=lost, lost_nodes=lost_nodes, rejected=rejected)

    def shutdown(self) -> None:
        """Tell every node, at its next poll, that the job is over."""
        with self._cv:
            self._shutdown = True
            self._cv.notify_all()

    @property
    def aborted(self) -> bool:
        return self._aborted

    def abort(self) -> None:
        """Stop the job: a waiting round returns at once (raising JobAborted), nodes are told
        to exit. Owners debit before they push, so their ledgers stay consistent: a late
        answer is simply dropped."""
        with self._cv:
            self._aborted = True
            self._shutdown = True
            self._cv.notify_all()
