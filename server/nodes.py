"""What the coordinator keeps of a registered owner node, and what a registration may hold (contract 1)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from privfed.common.errors import RemoteProtocolError
from privfed.common.identity import check_owned_by
from privfed.common.jobinfo import JobInfo
from privfed.common.secagg.boxes import MAX_ID_BYTES
from privfed.common.tasks import OwnerInfo

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
    keys and the connection it registered from."""

    node_id: str
    owners: list[str]
    queue: deque = field(default_factory=deque)
    last_seen: float = 0.0
    keys: frozenset[bytes] = frozenset()  # the owners' ring keys: fresh per node process, the same on re-registration
    peer: str | None = None  # the connection the registration came from (None: unknown, in-process callers)
    job: JobInfo | None = None  # the job announced when the node last took tasks (they belong to it)


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
