"""What an owner node registers: its owners' signed end-to-end keys, in as many messages as they need.

Each logical owner has an X25519 key for end-to-end secure-sum messages, bound to its id by the node's
certificate key so that peers can check that the relaying coordinator did not swap it (``--insecure``:
unsigned, for byte-capture tests only): one signature over the root of the Merkle tree of all the node's
(owner id, key) bindings (:func:`~privfed.common.secagg.signed_keys.sign_key_tree`, issue 27: ~50 µs of
ECDSA per owner before), which the coordinator rebuilds from the registration to hand each key its path. No row count is registered (contract 2). A node whose rows are checked against the
federation schema the coordinator sends at registration registers its owner ids first
(:class:`DeferredOwners`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from privfed.common.ledger import Ledger
from privfed.common.schema import FederationSchema
from privfed.common.secagg.boxes import public_bytes
from privfed.common.secagg.signed_keys import sign_key_tree
from privfed.common.tasks import OwnerInfo
from privfed.owner.local import LocalOwner
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde
from privfed.proto.transport import REQUEST_FIELDS_ROOM, TlsFiles, size_parts

log = logging.getLogger("privfed.owner")


@dataclass(frozen=True)
class DeferredOwners:
    """Logical owners whose rows are checked against the federation schema the coordinator sends
    at registration: their ids (registered first) and ``load(schema, ledger)``, called once with
    that schema (None if the coordinator sent none) and the node's ledger, where the decision is
    recorded (``privfed.owner.main.checked_rows``). A ConfigError from ``load`` is the node's fatal
    error: it refuses every task as ``schema_mismatch`` (a fixed text, no data) and exits 2.
    ``error``: a local check of the rows already failed with this message (``load`` raises it)."""

    owner_ids: tuple[str, ...]
    load: Callable[[FederationSchema | None, Ledger], list[LocalOwner]]
    error: str | None = None


@dataclass(frozen=True)
class SignedOwners:
    """A node's registration: each owner's public key (no row count: contract 2), in the order of the
    key tree's leaves, the node's certificate and its signature over the tree (empty: ``--insecure``)."""

    owners: list[OwnerInfo]
    certificate: bytes
    key_tree_signature: bytes

    def requests(self, node_id: str, max_message_bytes: int) -> list[pb.RegisterNodeRequest]:
        """The registration's requests (:func:`registration_parts`)."""
        infos = [serde.owner_info_to_proto(i) for i in self.owners]
        return registration_parts(node_id, self.certificate, infos, max_message_bytes, self.key_tree_signature)


def signed_owner_infos(
    node_id: str, owner_ids: list[str], keys: dict[str, X25519PrivateKey], tls: TlsFiles | None
) -> SignedOwners:
    """The owners' public keys, bound by one signature of the node's certificate key over their tree."""
    infos = [OwnerInfo(oid, public_bytes(keys[oid])) for oid in owner_ids]
    if tls is None:
        log.warning("--insecure: ring keys are unsigned (byte-capture tests only)")
        return SignedOwners(infos, b"", b"")
    _, cert, key = tls.read()
    signer = load_pem_private_key(key, password=None)
    signature = sign_key_tree(signer, node_id, [(o.owner_id, o.x25519_public_key) for o in infos])[1] if infos else b""
    return SignedOwners(infos, cert, signature)


def registration_parts(
    node_id: str,
    certificate: bytes,
    owners: list[pb.OwnerInfo],
    max_message_bytes: int,
    key_tree_signature: bytes = b"",
) -> list[pb.RegisterNodeRequest]:
    """The node's registration as requests of at most ``max_message_bytes`` each: one, or parts
    ``0 .. parts-1`` when its owners do not fit one message (issue 27: ~290 000 owner keys fill
    gRPC's 16 MiB), each with the node's id, certificate and key tree signature."""
    budget = (
        max_message_bytes - len(certificate) - len(node_id.encode()) - len(key_tree_signature) - REQUEST_FIELDS_ROOM
    )
    chunks = size_parts(owners, budget)
    parts = len(chunks) if len(chunks) > 1 else 0
    return [
        pb.RegisterNodeRequest(
            node_id=node_id,
            node_certificate=certificate,
            owners=c,
            part=k,
            parts=parts,
            key_tree_signature=key_tree_signature,
        )
        for k, c in enumerate(chunks)
    ]
