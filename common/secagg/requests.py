"""What each owner is sent in the coordinator's secure sums: ring specs and key-agreement tasks.

Message building only; the decisions (who is asked, when, and what an answer means) are the
machines' in :mod:`privfed.common.secagg.transitions`. The ring order, the members and the nodes'
certificates go once per node and session (the node caches them): per owner they would cost O(N)
bytes each, O(N^2) a sum.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from privfed.common.errors import RoundFailed
from privfed.common.secagg.aggregator import SecAggServer
from privfed.common.secagg.events import PeerKeys
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.messages import KeyAdvert, KeyShares, ShareKeysRequest
from privfed.common.secagg.ring import new_session_id
from privfed.common.secagg.ring_topology import ring_peers
from privfed.common.tasks import Payload, RingSpec, SecAggKeysTask, TaskSpec


class KeyAgreement:
    """Steps 0 and 1 of new runs over disjoint member sets ``(members, rounds)``, each step one batch
    for all runs: step 0, each owner signs a fresh mask key; step 1, each seals key shares to its
    neighbours, given, once per node and run, the members, the nodes' certificates (per owner they
    would cost O(N) bytes each, O(N^2) a run) and each neighbour's box key with its proof (a node
    keeps a run's keys for all its owners, ``privfed.owner.secagg``: per owner a key and its
    log2(n)-hash path went to every owner that has it as a neighbour, most of a node's decoding). A run too few owners
    advertised in raises :class:`RoundFailed` if ``strict``, else is left out."""

    def __init__(
        self,
        batch: Sequence[tuple[tuple[str, ...], int]],
        max_abs: float,
        peer_key: PeerKeys,
        certificates: Mapping[str, bytes],
        *,
        strict: bool,
    ) -> None:
        self.peer_key, self.certificates, self.strict = peer_key, dict(certificates), strict
        self.servers: dict[str, SecAggServer] = {}
        self.advertise: dict[str, SecAggKeysTask] = {}
        for members, rounds in batch:
            session = new_session_id()
            fp = FixedPoint.choose(n_parties=len(members), max_abs=max_abs)
            self.servers[session] = SecAggServer(session, members, fp, rounds=rounds)
            self.advertise[session] = SecAggKeysTask(session, fp.frac_bits, fp.n_parties, max_abs)
        self.run_of = {o: session for session, server in self.servers.items() for o in server.owners}
        self.notes: list[str] = []

    def advert_specs(self) -> dict[str, TaskSpec]:
        return {o: self.advertise[session] for o, session in self.run_of.items()}

    def on_adverts(self, payloads: Mapping[str, Payload]) -> dict[str, TaskSpec]:
        adverts = {o: p for o, p in payloads.items() if isinstance(p, KeyAdvert) and o in self.run_of}
        requests: dict[str, ShareKeysRequest] = {}
        for session, server in list(self.servers.items()):
            try:
                requests.update(server.on_adverts({o: a for o, a in adverts.items() if self.run_of[o] == session}))
            except RoundFailed:
                if self.strict:
                    raise
                self.notes.append(f"secure sum {session}: too few mask keys advertised; keyed by its first sum instead")
                del self.servers[session]
        sent_to: set[tuple[str, str]] = set()
        keys_sent: dict[tuple[str, str], set[str]] = {}
        # built with the constructors, not dataclasses.replace: 10^5 owners made 2·10^5 replace calls,
        # ~30 % of this step, serial on the coordinator while every node waits for its step 1 tasks

        def share_keys(owner: str) -> SecAggKeysTask:
            session = self.run_of[owner]
            node = (session, self.peer_key(owner).node_id)
            first = node not in sent_to
            sent_to.add(node)
            sent = keys_sent.setdefault(node, set())
            new = [v for v in self.servers[session].graph[owner] if v not in sent]
            sent.update(new)
            request = requests[owner]
            base = self.advertise[session]
            return SecAggKeysTask(
                base.session_id,
                base.frac_bits,
                base.n_parties,
                base.max_abs,
                request if first else ShareKeysRequest((), request.adverts, request.rounds),
                tuple(map(self.peer_key, new)),
                self.certificates if first else {},
            )

        return {o: share_keys(o) for o in requests}

    def on_key_shares(self, payloads: Mapping[str, Payload]) -> list[SecAggServer]:
        replies = {o: p for o, p in payloads.items() if isinstance(p, KeyShares) and o in self.run_of}
        for session, server in self.servers.items():
            server.on_key_shares({o: k for o, k in replies.items() if self.run_of[o] == session})
        return list(self.servers.values())


def ring_specs(
    session_id: str,
    ring: tuple[str, ...],
    max_abs: float,
    peer_key: PeerKeys,
    certificates: Mapping[str, bytes],
    task_for: Callable[[RingSpec], TaskSpec],
) -> Callable[[str], TaskSpec]:
    """Each owner's task of one ring attempt. The ring order and the certificates go once per node
    and session (the node caches them): per owner they would cost O(N) bytes each, O(N^2) a ring."""
    certs = dict(certificates)
    fp = FixedPoint.choose(n_parties=len(ring), max_abs=max_abs)
    index = {o: i for i, o in enumerate(ring)}
    sent_to: set[str] = set()

    def spec(owner_id: str) -> TaskSpec:
        node = peer_key(owner_id).node_id
        first = node not in sent_to
        sent_to.add(node)
        peers = tuple(peer_key(p) for p in ring_peers(ring, owner_id, index[owner_id]))
        return task_for(
            RingSpec(
                session_id,
                ring if first else (),
                fp.frac_bits,
                fp.n_parties,
                max_abs,
                peers,
                certs if first else {},
            )
        )

    return spec
