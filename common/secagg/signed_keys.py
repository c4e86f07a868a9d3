"""X25519 keys bound to their owner's identity by the owner's certificate key (DESIGN, Topology).

Each logical owner holds an X25519 key pair. Its public key is bound to its identity by a
signature made with the owner's *certificate* private key over ``(owner_id, session_id?,
public key)`` (:func:`sign_public_key`), or, for many keys at once, over the root of a Merkle
tree (:mod:`privfed.common.secagg.merkle`, RFC 9162) whose leaves are those same bindings, with
the tree's size and the signer's identity (:func:`sign_key_tree`: one signature per node
registration instead of one per owner, issue 27); the key then travels with its inclusion path.
Every peer checks the signature (or the path, then the root's signature, once per certificate
and root), and that the certificate chains to the federation CA and names the owner, before
using the key (:func:`verify_public_key`). The coordinator relays ciphertexts but holds no owner certificate
key, so it can neither substitute keys nor read or forge traffic. The channel built on a
verified key is :class:`privfed.common.secagg.boxes.Box`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes, PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.roles import DATA_USER, certificate_role
from privfed.common.secagg.boxes import lp, lp_id
from privfed.common.secagg.merkle import MerkleTree, leaf_hash, root_from_path
from privfed.common.secagg.sizes import X25519_PUBLIC_BYTES

_BINDING_TAG = b"privfed-x25519-binding-v1"
_ROOT_TAG = b"privfed-x25519-tree-root-v1"


@dataclass(frozen=True, slots=True)
class TreeProof:
    """Where a key's binding sits in a signed tree: leaf ``index`` of ``size``, and its inclusion
    path (RFC 9162 §2.1.3.1, hashes concatenated, leaf to root)."""

    index: int
    size: int
    path: bytes


def _root_message(identity: str, size: int, root: bytes, error: type[Exception]) -> bytes:
    """What a tree's signature covers: its root, its size and the identity of the signer."""
    return _ROOT_TAG + lp_id("identity", identity, error) + struct.pack(">Q", size) + lp(root)


def _binding_message(
    owner_id: str, x25519_public_bytes: bytes, session_id: str | None, error: type[Exception]
) -> bytes:
    if not isinstance(x25519_public_bytes, bytes) or len(x25519_public_bytes) != X25519_PUBLIC_BYTES:
        raise error(f"an X25519 public key is {X25519_PUBLIC_BYTES} raw bytes, got {x25519_public_bytes!r:.40}")
    session = b"\x00" if session_id is None else b"\x01" + lp_id("session_id", session_id, error)
    return _BINDING_TAG + lp_id("owner_id", owner_id, error) + session + lp(x25519_public_bytes)


def _ec_hash(curve: ec.EllipticCurve) -> hashes.HashAlgorithm:
    """The hash matching the curve's strength (SHA-256 for P-256, as in TLS 1.3 / RFC 8446 §4.2.3)."""
    return hashes.SHA256() if curve.key_size <= 256 else hashes.SHA384() if curve.key_size <= 384 else hashes.SHA512()


_PSS = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.DIGEST_LENGTH)


def sign_public_key(
    cert_private_key: PrivateKeyTypes,
    x25519_public_bytes: bytes,
    owner_id: str,
    session_id: str | None = None,
) -> bytes:
    """Sign ``(owner_id, session_id?, x25519_public_bytes)`` with the owner's certificate key.

    Parameters
    ----------
    cert_private_key : Ed25519, Ed448, EC (ECDSA), RSA (PSS, SHA-256) or DSA private key
        The private key of the owner's X.509 certificate.
    x25519_public_bytes : bytes
        32 raw bytes (:func:`public_bytes`).
    owner_id : str
        The logical owner the key belongs to.
    session_id : str, optional
        Bind the key to one session (an ephemeral key); omit for a long-lived key.

    Raises
    ------
    ConfigError
        A key type that cannot sign, or malformed ids / public key.
    """
    return _sign(cert_private_key, _binding_message(owner_id, x25519_public_bytes, session_id, ConfigError))


def sign_key_tree(
    cert_private_key: PrivateKeyTypes,
    identity: str,
    bindings: Sequence[tuple[str, bytes]],
    session_id: str | None = None,
) -> tuple[MerkleTree, bytes]:
    """One signature for many keys: the Merkle tree (RFC 9162) whose leaf ``m`` is the binding of
    ``bindings[m] = (owner_id, x25519_public_bytes)`` (the message :func:`sign_public_key` signs),
    and the signature over ``(identity, tree size, root)`` by the certificate key of ``identity``.

    Raises
    ------
    ConfigError
        No bindings, a key type that cannot sign, or malformed ids / public keys.
    """
    tree = key_tree(bindings, session_id)
    return tree, _sign(cert_private_key, _root_message(identity, tree.size, tree.root, ConfigError))


def key_tree(bindings: Sequence[tuple[str, bytes]], session_id: str | None = None) -> MerkleTree:
    """The tree :func:`sign_key_tree` signs, from its bindings (a coordinator rebuilds it from a node's
    registration to hand each key its inclusion path; it holds no key, so it proves nothing itself).

    Raises
    ------
    ConfigError
        No bindings, or malformed ids / public keys.
    """
    if not bindings:
        raise ConfigError("a key tree binds at least one key")
    return MerkleTree([_binding_message(o, pub, session_id, ConfigError) for o, pub in bindings])


def _sign(cert_private_key: PrivateKeyTypes, data: bytes) -> bytes:
    if isinstance(cert_private_key, (ed25519.Ed25519PrivateKey, ed448.Ed448PrivateKey)):
        return cert_private_key.sign(data)
    if isinstance(cert_private_key, ec.EllipticCurvePrivateKey):
        return cert_private_key.sign(data, ec.ECDSA(_ec_hash(cert_private_key.curve)))
    if isinstance(cert_private_key, rsa.RSAPrivateKey):
        return cert_private_key.sign(data, _PSS, hashes.SHA256())
    if isinstance(cert_private_key, dsa.DSAPrivateKey):
        return cert_private_key.sign(data, hashes.SHA256())
    raise ConfigError(
        f"certificate key type {type(cert_private_key).__name__} cannot sign; "
        "use an Ed25519, ECDSA, RSA or DSA certificate key"
    )


def _verify_signature(public_key: CertificatePublicKeyTypes, signature: bytes, data: bytes) -> None:
    """Raises InvalidSignature on a bad signature, RemoteProtocolError on an unusable key type."""
    if isinstance(public_key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey)):
        public_key.verify(signature, data)
    elif isinstance(public_key, ec.EllipticCurvePublicKey):
        public_key.verify(signature, data, ec.ECDSA(_ec_hash(public_key.curve)))
    elif isinstance(public_key, rsa.RSAPublicKey):
        public_key.verify(signature, data, _PSS, hashes.SHA256())
    elif isinstance(public_key, dsa.DSAPublicKey):
        public_key.verify(signature, data, hashes.SHA256())
    else:
        raise RemoteProtocolError(f"certificate key type {type(public_key).__name__} cannot sign")


def _check_validity(cert: x509.Certificate, now: datetime, what: str) -> None:
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        raise RemoteProtocolError(
            f"{what} certificate {cert.subject.rfc4514_string()} is not valid at {now.isoformat()} "
            f"(valid {cert.not_valid_before_utc.isoformat()} .. {cert.not_valid_after_utc.isoformat()})"
        )


def _cert_names(cert: x509.Certificate) -> set[str]:
    """Subject common names plus SAN DNS names and URIs: the identities a certificate vouches for."""
    names = {str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)}
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return names
    return (
        names
        | set(san.get_values_for_type(x509.DNSName))
        | set(san.get_values_for_type(x509.UniformResourceIdentifier))
    )


@lru_cache(maxsize=4096)
def _vouches(cert: x509.Certificate, ca_cert: x509.Certificate, identity: str) -> None:
    """Raise unless ``cert`` is directly issued by ``ca_cert``, is no CA, server (the coordinator) nor data user's,
    may sign, and
    names ``identity``. A data-user certificate (:mod:`privfed.common.roles`) submits jobs; it vouches for
    no owner's key, whatever its name (a hostile coordinator would list its holder as a ring peer).

    Time-independent, so cached per (certificate, CA, identity) (a raise is not cached): a node
    checks the chain of each peer node once, not once per signed key (~150 µs of ECDSA each; a
    10^4-owner run checks ~10^5 keys). The validity dates are checked on every call.
    """
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature) as exc:
        raise RemoteProtocolError(
            f"certificate {cert.subject.rfc4514_string()} is not issued by CA {ca_cert.subject.rfc4514_string()}: {exc}"
        ) from exc
    try:
        if cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
            raise RemoteProtocolError(f"certificate {cert.subject.rfc4514_string()} is a CA, not an owner certificate")
    except x509.ExtensionNotFound:
        pass
    if certificate_role(cert) == DATA_USER:
        raise RemoteProtocolError(
            f"certificate {cert.subject.rfc4514_string()} is a data user's: it vouches for no owner"
        )
    try:  # the coordinator's (and the signer's) certificate serves TLS; an owner node's never does
        if ExtendedKeyUsageOID.SERVER_AUTH in cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value:
            raise RemoteProtocolError(
                f"certificate {cert.subject.rfc4514_string()} is a server's (the coordinator's): it vouches for no owner"
            )
    except x509.ExtensionNotFound:
        pass
    try:
        if not cert.extensions.get_extension_for_class(x509.KeyUsage).value.digital_signature:
            raise RemoteProtocolError(f"certificate {cert.subject.rfc4514_string()} does not allow digital signatures")
    except x509.ExtensionNotFound:
        pass
    if identity not in _cert_names(cert):
        raise RemoteProtocolError(
            f"certificate {cert.subject.rfc4514_string()} does not name {identity!r} (CN or SAN); "
            "it cannot vouch for that owner's key"
        )


def verify_public_key(
    cert: x509.Certificate,
    ca_cert: x509.Certificate,
    owner_id: str,
    x25519_public_bytes: bytes,
    signature: bytes,
    *,
    now: datetime,
    session_id: str | None = None,
    cert_identity: str | None = None,
    tree: TreeProof | None = None,
) -> None:
    """Accept a peer's X25519 public key only if its owner's CA-issued certificate signed it.

    Checks, in order: ``now`` is within both certificates' validity; ``cert`` is directly
    issued by ``ca_cert`` (issuer name and CA signature); ``cert`` is not itself a CA and, if it
    has a KeyUsage extension, allows digital signatures; ``cert`` names ``cert_identity``
    (default ``owner_id``) as subject CN or SAN DNS name/URI; the signature over
    ``(owner_id, session_id?, x25519_public_bytes)`` verifies under ``cert``'s key; or, with
    ``tree``, the inclusion path of that binding leads to a root whose ``signature`` over
    ``(identity, tree size, root)`` verifies under ``cert``'s key (checked once per certificate,
    identity and root: the others of the tree cost hashes only).

    The identity check stops a party that holds *some* certificate of the federation CA (for
    example the coordinator's own) from vouching for a key under another owner's id. Pass
    ``cert_identity`` when certificates are issued per owner node rather than per logical
    owner.

    Parameters
    ----------
    now : datetime
        Timezone-aware current time, supplied by the caller (``common/`` reads no clocks).

    Raises
    ------
    RemoteProtocolError
        On any failure; nothing about the key may be trusted then.
    ConfigError
        If ``now`` is naive.
    """
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise ConfigError(f"now must be a timezone-aware datetime, got {now!r}; pass datetime.now(timezone.utc)")
    data = _binding_message(owner_id, x25519_public_bytes, session_id, RemoteProtocolError)
    _check_validity(ca_cert, now, "CA")
    _check_validity(cert, now, "owner")
    identity = owner_id if cert_identity is None else cert_identity
    _vouches(cert, ca_cert, identity)
    if tree is not None:
        root = root_from_path(tree.index, tree.size, leaf_hash(data), tree.path)
        try:
            _root_signed(cert, _root_message(identity, tree.size, root, RemoteProtocolError), signature)
        except InvalidSignature as exc:
            raise RemoteProtocolError(
                f"the key tree holding {owner_id!r}'s X25519 key is not signed by its certificate"
            ) from exc
        return
    try:
        _verify_signature(cert.public_key(), signature, data)
    except InvalidSignature as exc:
        raise RemoteProtocolError(
            f"signature over {owner_id!r}'s X25519 key does not verify under its certificate"
        ) from exc


@lru_cache(maxsize=4096)
def _root_signed(cert: x509.Certificate, message: bytes, signature: bytes) -> None:
    """Raise (InvalidSignature) unless ``signature`` over a tree's root ``message`` verifies under
    ``cert``'s key. A root that verified is remembered per (certificate, root message, signature) (a
    raise is not cached), so each further key of the tree costs its path's hashes only."""
    _verify_signature(cert.public_key(), signature, message)
