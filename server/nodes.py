"""What the coordinator keeps of the registered owner nodes, and what a registration may hold (contract 1).

:class:`Registry` holds the nodes (:class:`NodeQueue`), their owners and certificates; the dispatcher
(:class:`~privfed.server.dispatcher.Dispatcher`) guards it with its lock and keeps the tasks. A node registers
its owners in one message or in parts (:class:`Parts`); the registration replaces the node's own owners and
nobody else's (:func:`check_registration`), and a node id serves one process at a time
(:meth:`Registry.admit`).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

from privfed.common.errors import ConfigError, NodeIdInUse, RemoteProtocolError, RoundFailed
from privfed.common.identity import check_owned_by
from privfed.common.secagg.merkle import MerkleTree
from privfed.common.secagg.sizes import MAX_ID_BYTES
from privfed.common.tasks import OwnerInfo, PeerKey

log = logging.getLogger("privfed.coordinator")

#: At most this many owners in one node's registration: 10^6 logical owners fit in two node
#: processes (issue 27). A registration larger than one message comes in parts (:class:`Parts`).
MAX_OWNERS_PER_NODE = 1_000_000
#: At most this many parts in one registration.
MAX_REGISTRATION_PARTS = 4096
#: A registered node that called within this many seconds is alive: a node long-polls back to
#: back (each poll at most ``PULL_WAIT`` = 1 s) and pushes a heartbeat every second while it
#: computes, so a process that died is seen dead this soon after its last call.
IDENTITY_LIVENESS = 3.0


@dataclass
class NodeQueue:
    """A registered node: its owners, its queue of tasks to pull, when it last called, its owners' ring
    keys, the connection it registered from, and whether it said it left."""

    node_id: str
    owners: list[str]
    queue: deque = field(default_factory=deque)
    last_seen: float = 0.0
    keys: frozenset[bytes] = frozenset()  # the owners' ring keys: fresh per node process, the same on re-registration
    peer: str | None = None  # the connection the registration came from (None: unknown, in-process callers)
    #: The node's signature over its owners' key tree (empty: each key signed alone, or unsigned).
    key_tree_signature: bytes = b""
    #: The node's process said it is stopping (:meth:`Registry.leave`): silent from then on, as a node past the
    #: node timeout, until it registers again (a new entry).
    left: bool = False
    _tree: MerkleTree | None = field(default=None, repr=False)
    _index: dict[str, int] = field(default_factory=dict, repr=False)
    _tree_keys: dict[str, PeerKey] = field(default_factory=dict, repr=False)

    def tree_key(self, owner_id: str, owners: dict[str, OwnerInfo]) -> PeerKey:
        """``owner_id``'s key with its inclusion path in the node's key tree, which is rebuilt from the
        registration (leaves in its order) when a key is first asked for; a key that cannot be a leaf
        (malformed) makes the node's keys go without paths: peers refuse them, as any unproven key."""
        key = self._tree_keys.get(owner_id)
        if key is not None:
            return key
        info = owners[owner_id]
        if self._tree is None:
            from privfed.common.secagg.signed_keys import key_tree  # with the first secure sum, not at idle

            try:
                self._tree = key_tree([(o, owners[o].x25519_public_key) for o in self.owners])
            except ConfigError:
                return PeerKey(owner_id, self.node_id, info.x25519_public_key, self.key_tree_signature)
            self._index = {o: i for i, o in enumerate(self.owners)}
        i = self._index[owner_id]
        key = PeerKey(
            owner_id,
            self.node_id,
            info.x25519_public_key,
            self.key_tree_signature,
            i,
            self._tree.size,
            self._tree.path(i),
        )
        self._tree_keys[owner_id] = key
        return key


@dataclass
class Parts:
    """A registration arriving in parts (``RegisterNodeRequest.part`` of ``parts``): the owners of the
    parts so far, from one connection, in order. Part 0 starts it again (a node that retries its
    registration sends every part again)."""

    parts: int
    peer: str | None
    owners: list[OwnerInfo] = field(default_factory=list)
    received: int = 0

    def add(self, node_id: str, owners: list[OwnerInfo], part: int, parts: int, peer: str | None) -> bool:
        """Add the next part; True once it was the last. :class:`RemoteProtocolError` if it is not the
        next one of this registration (the registration is dropped: the node starts again at part 0)."""
        if (part, parts, peer) != (self.received, self.parts, self.peer):
            raise RemoteProtocolError(
                f"node {node_id!r} sent registration part {part} of {parts}, expected part {self.received} of "
                f"{self.parts}; start again at part 0"
            )
        if len(self.owners) + len(owners) > MAX_OWNERS_PER_NODE:
            raise RemoteProtocolError(
                f"a registration may carry at most MAX_OWNERS_PER_NODE = {MAX_OWNERS_PER_NODE} owners in all its "
                "parts; split the owners over more nodes"
            )
        self.owners += owners
        self.received += 1
        return self.received == self.parts


def start_parts(node_id: str, part: int, parts: int, peer: str | None) -> Parts:
    """The staging of a registration in ``parts`` parts, which must start at part 0."""
    if not 1 < parts <= MAX_REGISTRATION_PARTS or part != 0:
        raise RemoteProtocolError(
            f"node {node_id!r} sent registration part {part} of {parts}: a registration in parts starts at "
            f"part 0 and has 2..{MAX_REGISTRATION_PARTS} parts"
        )
    return Parts(parts, peer)


def registered_line(node: NodeQueue, old: NodeQueue | None, now: float) -> tuple[int, str]:
    """The log level and the one line of a registration that took effect: a restarted node's says that its
    previous process is fenced (it was two lines, both saying the node registered)."""
    line = f"node {node.node_id} registered {len(node.owners)} owner(s)" + (f" from {node.peer}" if node.peer else "")
    if old is None or old.left or not (old.keys and node.keys and old.keys != node.keys):  # new, or the same again
        return logging.INFO, line  # (a node that left and starts again is new: nothing to fence)
    quiet = now - old.last_seen
    return logging.WARNING, (
        f"{line}, a new process: its previous process (connection {old.peer or 'unknown'}, silent for "
        f"{quiet:.1f} s) is fenced"
    )


def check_registration(node_id: str, owners: list[OwnerInfo]) -> None:
    """Refuse (:class:`RemoteProtocolError`) a registration a node may not make: a bad node id, too many
    owners, an owner id too long, not ``<node_id>.<local name>``, or twice."""
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


class Registry:
    """The registered nodes, their owners and certificates. It has no lock of its own: every call is made
    with the dispatcher's lock held."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeQueue] = {}
        self.owners: dict[str, OwnerInfo] = {}
        self.owner_node: dict[str, str] = {}
        self.certificates: dict[str, bytes] = {}
        self._parts: dict[str, Parts] = {}  # node id -> a registration in parts, not yet whole

    def stage(
        self, node_id: str, owners: list[OwnerInfo], part: int, parts: int, peer: str | None
    ) -> list[OwnerInfo] | None:
        """Add part ``part`` of a registration in ``parts`` parts (:class:`Parts`); the owners of all its
        parts once this was the last, else None."""
        staged = self._parts.pop(node_id, None) if part else start_parts(node_id, part, parts, peer)
        if staged is None:
            raise RemoteProtocolError(f"node {node_id!r} sent registration part {part} without part 0")
        if not staged.add(node_id, owners, part, parts, peer):
            self._parts[node_id] = staged
            return None
        return staged.owners

    def admit(
        self,
        node_id: str,
        owners: list[OwnerInfo],
        certificate: bytes,
        peer: str | None,
        now: float,
        key_tree_signature: bytes = b"",
    ) -> tuple[NodeQueue, NodeQueue | None]:
        """Register (or re-register) ``node_id`` hosting ``owners`` (checked: :func:`check_registration`);
        returns the node's new entry, with an empty queue, and its previous one (None: it is new).

        A node process draws fresh ring keys for its owners when it starts and registers the same ones
        again after a reconnect; other keys for a node id that called within :data:`IDENTITY_LIVENESS`
        seconds are a second process with the same certificate, refused with :class:`NodeIdInUse` (the
        first keeps its place, nothing changes). A node silent for longer is taken over by the new process
        (a restart), and the old connection is fenced: :meth:`caller` refuses it until it registers again.
        """
        keys = frozenset(o.x25519_public_key for o in owners if o.x25519_public_key)
        old = self.nodes.get(node_id)
        if old is not None and old.keys and keys and old.keys != keys:
            self._take_over(old, peer, now)
        if old is not None:
            kept = {o.owner_id for o in owners}
            for gone in (o for o in old.owners if o not in kept):
                self.owners.pop(gone, None)
                self.owner_node.pop(gone, None)
        node = NodeQueue(
            node_id,
            [o.owner_id for o in owners],
            last_seen=now,
            keys=keys,
            peer=peer,
            key_tree_signature=key_tree_signature,
        )
        self.nodes[node_id] = node
        self.certificates[node_id] = certificate
        for o in owners:
            self.owners[o.owner_id] = o
            self.owner_node[o.owner_id] = node_id
        return node, old

    @staticmethod
    def _take_over(old: NodeQueue, peer: str | None, now: float) -> None:
        """A new process registers ``old``'s node id: refused while ``old`` is alive (the registration's one
        line says the takeover: :func:`registered_line`)."""
        quiet = now - old.last_seen
        if quiet < IDENTITY_LIVENESS and not old.left:  # a process that left is gone: its restart needn't wait
            raise NodeIdInUse(
                f"node id {old.node_id!r} is already registered by another live process (connection "
                f"{old.peer or 'unknown'}, last call {quiet:.1f} s ago); one node certificate serves one "
                "node process at a time: stop the other process, or give this one its own certificate"
            )

    def known(self, node_id: str) -> NodeQueue:
        """The registered node ``node_id`` (:class:`RemoteProtocolError` if it has not registered)."""
        node = self.nodes.get(node_id)
        if node is None:
            raise RemoteProtocolError(f"node {node_id!r} has not registered")
        return node

    def caller(self, node_id: str, peer: str | None) -> NodeQueue:
        """:meth:`known`, called from the connection it registered from (``peer``; None: not checked)."""
        node = self.known(node_id)
        if peer is not None and node.peer is not None and peer != node.peer:
            raise RemoteProtocolError(
                f"node {node_id!r} is registered from connection {node.peer}, not {peer}; register again"
            )
        return node

    def leave(self, node_id: str, peer: str | None) -> NodeQueue | None:
        """Mark ``node_id`` as left: its process is stopping cleanly, so its owners are counted on no more, at once
        (:meth:`silent_nodes`), where a node that merely stopped calling is counted on until the node timeout. The
        node stays registered, as a silent one does: a job that asked its owners drops them as it drops a silent
        node's, and the node is counted again when it registers again. Only the caller's connection that registered
        the node may say so (:meth:`caller`; the servicer has checked its certificate against ``node_id``): a fenced
        process, or a second one with the same certificate, cannot take a live node's owners away. Returns the node,
        or None if it had left already."""
        node = self.caller(node_id, peer)
        if node.left:
            return None
        node.left = True
        return node

    def revoked(self, node_id: str, peer: str) -> NodeQueue | None:
        """Mark registered node ``node_id`` as left because the service refused its certificate as revoked on the
        connection it registered from (``peer``): no call of its process is answered any more, so it is counted on no
        more, at once, as a node that leaves (walkthrough 14, W14-3: a running round waited out the node timeout).
        Returns the node, or None if it is not registered from ``peer`` or had left already."""
        node = self.nodes.get(node_id)
        if node is None or node.left or node.peer not in (None, peer):
            return None
        node.left = True
        return node

    def peer_key(self, owner_id: str) -> PeerKey:
        """The registered ring key of ``owner_id`` (:class:`RoundFailed` if it is not registered)."""
        o = self.owners.get(owner_id)
        if o is None:
            raise RoundFailed(f"owner {owner_id!r} is not registered (its node left or re-registered without it)")
        node = self.nodes[self.owner_node[owner_id]]
        if o.key_signature or not node.key_tree_signature:  # signed alone (or unsigned: --insecure)
            return PeerKey(owner_id, node.node_id, o.x25519_public_key, o.key_signature)
        return node.tree_key(owner_id, self.owners)

    def silent_nodes(self, now: float, timeout: float) -> set[str]:
        """Nodes that have not called for longer than ``timeout`` seconds, or that left (:meth:`leave`)."""
        return {nid for nid, state in self.node_states(now, timeout).items() if state != "online"}

    def node_states(self, now: float, timeout: float) -> dict[str, str]:
        """Node id -> ``left`` (it said it stops: :meth:`leave`), ``silent`` (no call for longer than ``timeout``
        seconds: exited, cut off or hung) or ``online``: what a status line or page calls each registered node."""
        return {
            nid: "left" if n.left else "silent" if now - n.last_seen > timeout else "online"
            for nid, n in self.nodes.items()
        }

    def live_owners(self, now: float, timeout: float) -> dict[str, OwnerInfo]:
        """The owners of the nodes that called within ``timeout`` seconds and have not left. A node that exited (or
        hangs) stays registered, so that it takes its place back when it calls again, but hosts no owner a job can
        count on until then: a service counted the owners of a node gone for hours among those a job waited for."""
        silent = self.silent_nodes(now, timeout)
        if not silent:  # the common case: no scan of every owner
            return dict(self.owners)
        return {o: info for o, info in self.owners.items() if self.owner_node[o] not in silent}
