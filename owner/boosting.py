"""Owner side of LDP boosting over the network (seed 002 Alg. 2): shares with SAMME weights,
and the ring secure sum of local errors, driven through the sans-I/O ``RingParty``."""

from __future__ import annotations

import logging
import re
from datetime import datetime, timezone

import numpy as np
from cryptography import x509

from privfed.common.boostwire import config_from_dict, learner_from_dict, owner_weights
from privfed.common.boosting import owner_local_error
from privfed.common.e2e import Box, verify_public_key
from privfed.common.errors import ConfigError, ProtocolError, RemoteProtocolError
from privfed.common.fixedpoint import FixedPoint
from privfed.common.messages import BoostEvaluateTask, BoostShareReply, RingJoined, RingTotal
from privfed.common.securesum import Inbound, RingParty

log = logging.getLogger("privfed.owner")

OWNER_NODE_NAME = re.compile(r"owner-\d+")  # the names `privfed certs` gives owner node certificates


def boost_share(owner, spec) -> BoostShareReply:
    """The perturbed share of this round's base learner, with this owner's SAMME weights."""
    fb = config_from_dict(spec.config)
    w = owner_weights(spec.history, owner.X, owner.y)
    share = fb.owner_release(owner.X, owner.y, w, rng=owner.rng)
    if fb.base == "ncc":
        return BoostShareReply(reports=share.reports, labels=share.labels)
    return BoostShareReply(reports=np.asarray(share).reshape(1, -1), labels=np.zeros(0, dtype=np.int64))


class RingDriver:
    """Holds the ring parties of the logical owners hosted by this node.

    ``ca_pem`` None (``--insecure``) skips the check of peers' key signatures: byte-capture
    tests only, never a deployment.
    """

    def __init__(self, keys: dict, ca_pem: bytes | None, clock=lambda: datetime.now(timezone.utc)):
        self._keys = keys          # owner_id -> X25519 private key
        self._ca = x509.load_pem_x509_certificate(ca_pem) if ca_pem else None
        self._clock = clock
        self._parties: dict[str, RingParty] = {}   # owner_id -> its party in the current session
        self._verified: dict[tuple, bytes] = {}
        self._sessions: dict[str, tuple] = {}   # session id -> (ring, certificates), sent once per node

    def _session(self, ring_spec) -> tuple[tuple, dict]:
        if ring_spec.ring:
            self._sessions = {ring_spec.session_id: (ring_spec.ring, ring_spec.certificates)}
        if ring_spec.session_id not in self._sessions:
            raise ConfigError(f"ring session {ring_spec.session_id} arrived without its ring order")
        return self._sessions[ring_spec.session_id]

    def _peer_key(self, certificates, peer) -> bytes:
        cache_key = (peer.owner_id, peer.x25519_public_key, peer.key_signature)
        if cache_key in self._verified:
            return self._verified[cache_key]
        if self._ca is not None:
            # Only an owner node's certificate may vouch for a ring key: the coordinator holds a
            # CA-issued certificate too, and must not be able to list itself as a peer's node.
            if not OWNER_NODE_NAME.fullmatch(peer.node_id):
                raise RemoteProtocolError(f"peer {peer.owner_id!r} is said to live on {peer.node_id!r}, "
                                          "which is not an owner node")
            pem = certificates.get(peer.node_id)
            if pem is None:
                raise ConfigError(f"no certificate for node {peer.node_id!r} of peer {peer.owner_id!r}")
            verify_public_key(x509.load_pem_x509_certificate(pem), self._ca, peer.owner_id, peer.x25519_public_key,
                              peer.key_signature, now=self._clock(), cert_identity=peer.node_id)
        self._verified[cache_key] = peer.x25519_public_key
        return peer.x25519_public_key

    def evaluate(self, owner, spec: BoostEvaluateTask):
        """Start this owner's party: returns (result payload or None, outbound envelopes)."""
        ring = spec.ring
        order, certificates = self._session(ring)
        learner = learner_from_dict(spec.learner)
        w = owner_weights(spec.history, owner.X, owner.y)
        err, wsum = owner_local_error(learner, owner.X, owner.y, w)
        fixed_point = FixedPoint(frac_bits=ring.frac_bits, n_parties=ring.n_parties, max_abs=ring.max_abs)
        peers = {p.owner_id: p for p in ring.peers}
        boxes = {pid: Box(owner.owner_id, self._keys[owner.owner_id], pid, self._peer_key(certificates, peers[pid]))
                 for pid in peers if pid != owner.owner_id}
        party = RingParty(owner.owner_id, order, ring.session_id, fixed_point, boxes)
        self._parties[owner.owner_id] = party
        out = party.start(np.array([min(err, ring.max_abs), min(wsum, ring.max_abs)]))
        # Members answer at once; the leader answers with the total when the ring closes.
        return (None if party.index == 0 else RingJoined(ring.session_id)), out

    def deliver(self, owner_id: str, data: bytes):
        """A relayed envelope for ``owner_id``: returns (RingTotal or None, outbound envelopes)."""
        party = self._parties.get(owner_id)
        if party is None:
            log.warning("ring message for %s, which is in no ring here: dropped", owner_id)
            return None, []
        try:
            out = party.on_message(Inbound.from_bytes(data))
        except ProtocolError as exc:
            log.warning("ring party %s failed: %s", owner_id, exc)
            return None, []
        total = party.result()
        if total is not None and party.index == 0:
            self._parties.pop(owner_id)
            # The leader's RESULT broadcast is not relayed: members never need the totals
            # (the coordinator publishes them with α in the next round's history).
            return RingTotal(party.session_id, np.asarray(total)), []
        return None, out
