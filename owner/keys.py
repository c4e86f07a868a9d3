"""The end-to-end key material of the owners a node hosts, and the check of their peers' keys.

Each logical owner has a long-lived X25519 key for its boxes (ring hops, sealed Shamir shares). A
peer's key is accepted only when it is signed by the certificate of the owner node its id names
(contract 1), checked against the federation CA: the coordinator relays keys and must not be
able to swap them. Without a CA (``--insecure``, in-process simulations) keys are taken as sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.identity import node_of
from privfed.common.secagg.signed_keys import TreeProof, verify_public_key
from privfed.common.tasks import PeerKey

#: Checked peer keys a node remembers (then it forgets them all and checks again).
MAX_VERIFIED = 200_000
#: Parsed node certificates a node keeps.
MAX_PARSED = 1024


class OwnerKeys:
    """The hosted owners' X25519 keys and the federation CA.

    Parameters
    ----------
    keys : mapping owner_id -> X25519PrivateKey
    ca_pem : bytes or None
        The federation CA. ``None`` (``--insecure``) skips the check of peers' key signatures:
        byte-capture tests and in-process simulations only, never a deployment.
    clock : callable
        The time certificates are checked at.
    """

    def __init__(
        self,
        keys: Mapping[str, X25519PrivateKey],
        ca_pem: bytes | None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._keys = dict(keys)
        self.ca = x509.load_pem_x509_certificate(ca_pem) if ca_pem else None
        self._clock = clock
        self._verified: dict[tuple[str, str, bytes, bytes], bytes] = {}
        self._parsed: dict[bytes, x509.Certificate] = {}  # node certificates, parsed once

    def own_key(self, owner_id: str) -> X25519PrivateKey:
        """The long-lived X25519 key of an owner this node hosts (its end-to-end boxes)."""
        try:
            return self._keys[owner_id]
        except KeyError as exc:
            raise ConfigError(f"this node holds no key for {owner_id!r}") from exc

    def peer_key(self, certificates: Mapping[str, bytes], peer: PeerKey) -> bytes:
        """A peer's end-to-end key, accepted only if signed by the certificate of the node its id
        names, alone or through its node's key tree (skipped without a CA); verified once and cached
        (a tree's root once per certificate: its other keys cost their paths' hashes)."""
        cache_key = (peer.owner_id, peer.node_id, peer.x25519_public_key, peer.key_signature)
        if cache_key in self._verified:
            return self._verified[cache_key]
        if self.ca is not None:
            # Only an owner node's certificate may vouch for a ring key (verify_public_key: not the coordinator's,
            # whose certificate serves TLS, nor a data user's), and only the node that owns the id (contract 1):
            # owner-1 must not vouch for owner-0's owners. A node's name is free (hospital-a as well as owner-1).
            if node_of(peer.owner_id) != peer.node_id:
                raise RemoteProtocolError(
                    f"peer {peer.owner_id!r} is not an owner of node {peer.node_id!r}; "
                    "its key must be signed by the node its id names"
                )
            pem = certificates.get(peer.node_id)
            if pem is None:
                raise ConfigError(f"no certificate for node {peer.node_id!r} of peer {peer.owner_id!r}")
            cert = self._parsed.get(pem)
            if cert is None:
                if len(self._parsed) >= MAX_PARSED:
                    self._parsed.clear()
                cert = self._parsed[pem] = x509.load_pem_x509_certificate(pem)
            verify_public_key(
                cert,
                self.ca,
                peer.owner_id,
                peer.x25519_public_key,
                peer.key_signature,
                now=self._clock(),
                cert_identity=peer.node_id,
                tree=TreeProof(peer.key_index, peer.key_tree_size, peer.key_path) if peer.key_tree_size else None,
            )
        if len(self._verified) >= MAX_VERIFIED:  # peers that restart bring new keys: checked again
            self._verified.clear()
        self._verified[cache_key] = peer.x25519_public_key
        return peer.x25519_public_key
