"""What the coordinator keeps of a registered owner node, and what a registration may hold (contract 1)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from privfed.common.errors import RemoteProtocolError
from privfed.common.identity import check_owned_by
from privfed.common.jobinfo import JobInfo
from privfed.common.secagg.boxes import MAX_ID_BYTES
from privfed.common.tasks import OwnerInfo

#: At most this many owners in one registration (generous: a node process hosts thousands).
MAX_OWNERS_PER_NODE = 100_000
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
