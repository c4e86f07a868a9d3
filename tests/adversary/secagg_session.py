"""A pairwise-mask secure-sum session keyed honestly (steps 0 and 1) by real owner-side drivers, for the
hostile-coordinator tests that then drive steps 2 and 3 themselves (audit 23's partner drop, audit 31's
cross-round drop): the coordinator's view of it, plus the sealed shares it forwards."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from privfed.common.secagg import shamir
from privfed.common.secagg.aggregator import SecAggServer
from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.masking import neighbour_graph, threshold
from privfed.common.tasks import PeerKey
from privfed.owner.keys import OwnerKeys
from privfed.owner.secagg import SecAggDriver


def nodes_of(n: int, n_nodes: int = 2) -> dict[str, list[str]]:
    """``n`` owners spread as evenly as possible over ``n_nodes`` nodes ``owner-0``, ``owner-1``, ..."""
    return {
        f"owner-{j}": [f"owner-{j}.o{i:05d}" for i in range(n // n_nodes + (j < n % n_nodes))] for j in range(n_nodes)
    }


class Session:
    """One session keyed honestly (steps 0 and 1) by the nodes' real drivers, under the id the coordinator
    gave it (the graph is drawn from it and the members), for ``rounds`` secure sums. ``views``: owners the
    coordinator sends another member list in step 1 (their graph is drawn from it; audit 31, A31-2)."""

    def __init__(
        self,
        session_id: str,
        nodes: Mapping[str, Sequence[str]],
        fixed_point: FixedPoint,
        rounds: int = 2,
        views: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.members = sorted(o for owners in nodes.values() for o in owners)
        self.fp = fixed_point
        keys = {o: generate_private_key() for o in self.members}
        peers = {o: PeerKey(o, o.split(".")[0], public_bytes(keys[o]), b"") for o in self.members}
        self.drivers = {
            node: SecAggDriver(OwnerKeys({o: keys[o] for o in owners}, None)) for node, owners in nodes.items()
        }
        self.id = session_id
        self.server = SecAggServer(self.id, self.members, fixed_point, rounds=rounds)
        self.adverts = {o: self.node(o).advertise(o, self.id, fixed_point) for o in self.members}
        requests = self.server.on_adverts(self.adverts)
        self.graph = self.server.graph  # public: drawn from the session id and the members
        views = views or {}
        #: each owner's neighbours as it sees them (its shares' holders, in share order)
        self.near = {o: neighbour_graph(self.id, views[o])[o] if o in views else self.graph[o] for o in self.members}
        shares = {}
        for o, r in requests.items():
            adverts = tuple(self.adverts[v] for v in self.near[o])
            shares[o] = self.node(o).share_keys(
                o, self.id, type(r)(views.get(o, r.members), adverts, r.rounds), [peers[v] for v in self.near[o]]
            )
        if not views:  # the honest machine's check of the shares' recipients (a hostile coordinator skips it)
            self.server.on_key_shares(shares)
        self.sealed: dict[str, list] = {o: [] for o in self.members}
        for reply in shares.values():
            for s in reply.shares:
                self.sealed[s.recipient].append(s)

    def node(self, owner: str) -> SecAggDriver:
        return self.drivers[owner.split(".")[0]]

    def combine(self, owner: str, shares: dict[str, bytes]) -> bytes | None:
        """``owner``'s secret from its holders' shares, or None below its threshold."""
        near = self.near[owner]
        t = threshold(len(near))
        return shamir.combine({near.index(w) + 1: s for w, s in shares.items()}, t) if len(shares) >= t else None
