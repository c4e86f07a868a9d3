"""Owner registry and task queues: the coordinator's transport object.

Strategies build :class:`Task` lists and hand them to :meth:`Dispatcher.run`; the gRPC
servicer feeds :meth:`register`, :meth:`pull` and :meth:`push`. Nothing here knows protobuf.
Time is injected (``clock``) so the waiting logic can be driven in tests.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from privfed.common.errors import ConfigError, PrivfedError, RemoteProtocolError


class JobAborted(PrivfedError):
    """The job was stopped (SIGTERM) while a round was in flight."""
from privfed.common.messages import OwnerInfo, PeerKey, Result, RingMessageTask, Task


@dataclass
class _Node:
    node_id: str
    owners: list[str]
    queue: deque = field(default_factory=deque)
    last_seen: float = 0.0


@dataclass
class RunOutcome:
    """What came back from one batch of tasks."""

    results: dict[str, Result]      # task_id -> result
    lost: list[str]                 # task ids never answered (node dead or deadline passed)
    lost_nodes: list[str]           # nodes of unanswered tasks that are silent (dead or cut off)


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
        self._shutdown = False
        self._certificates: dict[str, bytes] = {}
        self._waiting: set[str] = set()
        self._aborted = False
        self.late_results = 0
        self.relayed = 0
        self.session_id = secrets.token_hex(8)

    # ---- called by the servicer --------------------------------------------------------
    def register(self, node_id: str, owners: list[OwnerInfo], certificate: bytes = b"") -> str:
        if not node_id:
            raise RemoteProtocolError("node_id is empty")
        with self._cv:
            for o in owners:
                holder = self._owner_node.get(o.owner_id)
                if holder is not None and holder != node_id:
                    raise ConfigError(f"owner id {o.owner_id!r} is already registered by node {holder!r}")
            node = _Node(node_id, [o.owner_id for o in owners], last_seen=self._clock())
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

    def pull(self, node_id: str, wait: float) -> tuple[list[Task], bool]:
        deadline = self._clock() + wait
        with self._cv:
            node = self._known(node_id)
            while not node.queue and not self._shutdown:
                node.last_seen = self._clock()
                left = deadline - self._clock()
                if left <= 0:
                    break
                self._cv.wait(left)
                node = self._known(node_id)
            node.last_seen = self._clock()
            tasks = list(node.queue)
            node.queue.clear()
            return tasks, self._shutdown and not tasks

    def push(self, node_id: str, results: list[Result]) -> int:
        with self._cv:
            node = self._known(node_id)
            node.last_seen = self._clock()
            accepted = 0
            for r in results:
                if self._owner_node.get(r.owner_id) != node_id:
                    raise RemoteProtocolError(f"node {node_id!r} answered for owner {r.owner_id!r} it does not host")
                task = self._pending.get(r.task_id)
                if task is None or task.owner_id != r.owner_id:
                    self.late_results += 1  # its round is over (or it never was ours): drop it, keep the rest
                    continue
                del self._pending[r.task_id]
                self._waiting.discard(r.task_id)
                self._results[r.task_id] = r
                accepted += 1
            self._cv.notify_all()
            return accepted

    def relay(self, node_id: str, envelopes: list[tuple[str, bytes]]) -> tuple[int, list[Task]]:
        """Queue sealed owner-to-owner envelopes for their recipients' nodes (no answer expected),
        and hand the calling node whatever is queued for it: a ring's next hop is often one of
        its own owners, and this saves it the wait for its next poll (the envelope still went
        through here, like every other)."""
        with self._cv:
            caller = self._known(node_id)
            caller.last_seen = self._clock()
            for recipient, data in envelopes:
                target = self._owner_node.get(recipient)
                if target is None:
                    raise RemoteProtocolError(f"relay to unknown owner {recipient!r}")
                self._nodes[target].queue.append(Task(f"relay-{secrets.token_hex(6)}", recipient, "ring",
                                                      RingMessageTask(data)))
            self.relayed += len(envelopes)
            self._cv.notify_all()
            tasks = list(caller.queue)
            caller.queue.clear()
            return len(envelopes), tasks

    def peer_key(self, owner_id: str) -> PeerKey:
        with self._cv:
            o = self._owners[owner_id]
            return PeerKey(owner_id, self._owner_node[owner_id], o.x25519_public_key, o.key_signature)

    def certificates(self) -> dict[str, bytes]:
        with self._cv:
            return {n: c for n, c in self._certificates.items() if c}

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

    def run(self, tasks: list[Task], *, timeout: float,
            progress: Callable[[int, int], None] | None = None) -> RunOutcome:
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
                    raise ConfigError(f"task {t.task_id!r} is for unknown owner {t.owner_id!r}")
                self._pending[t.task_id] = t
                self._nodes[node_id].queue.append(t)
            self._waiting = set(ids)   # push() removes answered ids: O(1) per answer
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
                    silent = {nid for nid, n in self._nodes.items() if now - n.last_seen > self._node_timeout}
                    if all(self._owner_node[self._pending[i].owner_id] in silent for i in self._waiting):
                        break
                self._cv.wait(min(0.5, deadline - now))
            if progress:
                progress(len(ids) - len(self._waiting), len(ids))
            lost = [i for i in ids if i in self._waiting]
            self._waiting = set()
            now = self._clock()
            lost_nodes = sorted({nid for nid in (self._owner_node[self._pending[i].owner_id] for i in lost)
                                 if now - self._nodes[nid].last_seen > self._node_timeout})
            lost_set = set(lost)
            for i in lost:
                self._pending.pop(i)
            for node in self._nodes.values():
                if any(t.task_id in lost_set for t in node.queue):
                    node.queue = deque(t for t in node.queue if t.task_id not in lost_set)
            results = {i: self._results.pop(i) for i in ids if i in self._results}
            if self._aborted:
                raise JobAborted(f"job aborted with {len(lost)} task(s) of the round unanswered")
            return RunOutcome(results=results, lost=lost, lost_nodes=lost_nodes)

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

    def connected_nodes(self, within: float) -> list[str]:
        now = self._clock()
        with self._cv:
            return [nid for nid, n in self._nodes.items() if now - n.last_seen <= within]
