"""End-to-end encrypted owner-to-owner channels relayed by an untrusted coordinator (DESIGN, Topology).

Each logical owner holds an X25519 key pair. Its public key is bound to its identity by a
signature made with the owner's *certificate* private key over ``(owner_id, session_id?,
public key)``; every peer checks that signature, and that the certificate chains to the
federation CA, before using the key (:func:`verify_public_key`). The coordinator relays
ciphertexts but holds no owner certificate key, so it can neither substitute keys nor read or
forge traffic.

A :class:`Box` is the channel between two owners. Per session it derives

    k = HKDF-SHA256(X25519(sk_own, pk_peer), salt = session_id,
                    info = b"privfed-e2e" ‖ lp(min id) ‖ lp(max id))

(``lp`` = 2-byte length prefix, so that ``("ab", "c")`` and ``("a", "bc")`` differ; the
issue's ``sorted(ids)`` concatenated without lengths would be ambiguous) and seals with
AES-256-GCM. The associated data binds ``(session_id, sender, recipient, kind, seq)``
(:class:`AadFields`), so the relay cannot redirect a ciphertext to another party, move it to
another session or message slot, or replay it as a different step undetected. The session id
is also the HKDF salt, so keys differ per session as well. A box bound to a secret of one
session (:meth:`Box.bound_to`) takes ``X25519(sk_own, pk_peer) ‖ lp(secret)`` as the HKDF input:
only a party holding both can open it.

Nonces are 96 random bits from :mod:`secrets`, sent in front of the ciphertext. A counter
would need state shared by both directions (the key is symmetric) and kept across crashes;
reusing a session id after a restart would then repeat nonces, which breaks GCM completely.
Random nonces are stateless; the collision probability stays below 2^-32 up to 2^32 messages
per key, and a secure-sum session sends a handful per key.
"""

from __future__ import annotations

import hmac
import secrets
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from cryptography import x509
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes, PrivateKeyTypes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from cryptography.x509.oid import NameOID

from privfed.common.errors import ConfigError, LocalProtocolError, RemoteProtocolError

NONCE_BYTES = 12
TAG_BYTES = 16
#: Bytes a sealed message adds to its plaintext.
SEAL_OVERHEAD = NONCE_BYTES + TAG_BYTES
X25519_PUBLIC_BYTES = 32
MAX_ID_BYTES = 255
_KEY_INFO = b"privfed-e2e"
_AAD_TAG = b"privfed-e2e-aad-v1"
_BINDING_TAG = b"privfed-x25519-binding-v1"


def _lp(data: bytes) -> bytes:
    """2-byte big-endian length prefix, then the bytes."""
    return struct.pack(">H", len(data)) + data


def _id_bytes(name: str, value: object, error: type[Exception]) -> bytes:
    if not isinstance(value, str):
        raise error(f"{name} must be a str, got {type(value).__name__}")
    raw = value.encode("utf-8")
    if not 1 <= len(raw) <= MAX_ID_BYTES:
        raise error(f"{name} must be 1..{MAX_ID_BYTES} UTF-8 bytes, got {len(raw)}")
    return raw


def hkdf_sha256(ikm: bytes, *, salt: bytes, info: bytes) -> bytes:
    """32 bytes of HKDF-SHA256 (RFC 5869): ``HMAC(HMAC(salt, ikm), info ‖ 0x01)``.

    The same bytes as ``cryptography``'s ``HKDF(SHA256(), 32, salt, info)`` (a test checks it), from
    two stdlib ``hmac.digest`` calls: ~2 µs instead of ~20 µs for building the HKDF object, and a
    10^4-owner run derives ~5·10^5 box and pair keys.
    """
    prk = hmac.digest(salt or bytes(32), ikm, "sha256")
    return hmac.digest(prk, info + b"\x01", "sha256")


# ---------------------------------------------------------------- keys and signatures


def generate_private_key() -> X25519PrivateKey:
    """A fresh X25519 private key (randomness from the OS via ``cryptography``)."""
    return X25519PrivateKey.generate()


def public_bytes(private_key: X25519PrivateKey) -> bytes:
    """The 32 raw bytes of ``private_key``'s public key, as sent and signed."""
    return private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def _binding_message(
    owner_id: str, x25519_public_bytes: bytes, session_id: str | None, error: type[Exception]
) -> bytes:
    if not isinstance(x25519_public_bytes, bytes) or len(x25519_public_bytes) != X25519_PUBLIC_BYTES:
        raise error(f"an X25519 public key is {X25519_PUBLIC_BYTES} raw bytes, got {x25519_public_bytes!r:.40}")
    session = b"\x00" if session_id is None else b"\x01" + _lp(_id_bytes("session_id", session_id, error))
    return _BINDING_TAG + _lp(_id_bytes("owner_id", owner_id, error)) + session + _lp(x25519_public_bytes)


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
    data = _binding_message(owner_id, x25519_public_bytes, session_id, ConfigError)
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
    """Raise unless ``cert`` is directly issued by ``ca_cert``, is no CA, may sign, and names ``identity``.

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
) -> None:
    """Accept a peer's X25519 public key only if its owner's CA-issued certificate signed it.

    Checks, in order: ``now`` is within both certificates' validity; ``cert`` is directly
    issued by ``ca_cert`` (issuer name and CA signature); ``cert`` is not itself a CA and, if it
    has a KeyUsage extension, allows digital signatures; ``cert`` names ``cert_identity``
    (default ``owner_id``) as subject CN or SAN DNS name/URI; the signature over
    ``(owner_id, session_id?, x25519_public_bytes)`` verifies under ``cert``'s key.

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
    _vouches(cert, ca_cert, owner_id if cert_identity is None else cert_identity)
    try:
        _verify_signature(cert.public_key(), signature, data)
    except InvalidSignature as exc:
        raise RemoteProtocolError(
            f"signature over {owner_id!r}'s X25519 key does not verify under its certificate"
        ) from exc


# ---------------------------------------------------------------- boxes


@dataclass(frozen=True)
class AadFields:
    """What a sealed message is bound to (the AES-GCM associated data).

    ``kind`` is the protocol's message kind (e.g. ``"hop"``), ``seq`` its slot number in the
    session (0 ≤ seq < 2^64).
    """

    session_id: str
    sender: str
    recipient: str
    kind: str
    seq: int

    def to_bytes(self) -> bytes:
        """Canonical, length-prefixed encoding (injective, so distinct fields never collide)."""
        err = LocalProtocolError
        if isinstance(self.seq, bool) or not isinstance(self.seq, int) or not 0 <= self.seq < 2**64:
            raise err(f"seq must be an int in [0, 2^64), got {self.seq!r}")
        return (
            _AAD_TAG
            + _lp(_id_bytes("session_id", self.session_id, err))
            + _lp(_id_bytes("sender", self.sender, err))
            + _lp(_id_bytes("recipient", self.recipient, err))
            + _lp(_id_bytes("kind", self.kind, err))
            + struct.pack(">Q", self.seq)
        )


class Box:
    """AES-GCM channel between ``own_id`` and ``peer_id`` (both directions share one key per session).

    Parameters
    ----------
    own_id, peer_id : str
        Distinct logical owner ids.
    own_private_key : X25519PrivateKey
    peer_public_bytes : bytes
        The peer's 32-byte X25519 public key, already checked with :func:`verify_public_key`.

    Raises
    ------
    RemoteProtocolError
        If the peer's public key is malformed or of low order (all-zero shared secret).
    """

    __slots__ = ("own_id", "peer_id", "_shared", "_info")

    def __init__(self, own_id: str, own_private_key: X25519PrivateKey, peer_id: str, peer_public_bytes: bytes):
        a, b = _id_bytes("own_id", own_id, ConfigError), _id_bytes("peer_id", peer_id, ConfigError)
        if own_id == peer_id:
            raise ConfigError(f"a box joins two different owners, got {own_id!r} twice")
        if not isinstance(own_private_key, X25519PrivateKey):
            raise ConfigError(f"own_private_key must be an X25519PrivateKey, got {type(own_private_key).__name__}")
        try:
            shared = own_private_key.exchange(X25519PublicKey.from_public_bytes(peer_public_bytes))
        except (ValueError, TypeError) as exc:
            raise RemoteProtocolError(f"unusable X25519 public key for {peer_id!r}: {exc}") from exc
        self.own_id, self.peer_id = own_id, peer_id
        self._shared = shared
        self._info = _KEY_INFO + b"".join(_lp(x) for x in sorted((a, b)))

    def __repr__(self) -> str:
        return f"Box({self.own_id!r} <-> {self.peer_id!r})"

    def turned(self) -> Box:
        """The same channel from the peer's side (its key agreement gives the same secret): for a
        node that holds both owners' keys, one X25519 exchange per pair instead of two."""
        box = object.__new__(Box)
        box.own_id, box.peer_id, box._shared, box._info = self.peer_id, self.own_id, self._shared, self._info
        return box

    def bound_to(self, secret: bytes) -> Box:
        """The same channel keyed also by ``secret``, a value both ends derive for one session only.

        Its keys are HKDF over ``X25519(sk_own, pk_peer) ‖ lp(secret)``: opening a message needs
        both owners' long-lived box key agreement *and* ``secret``. The pairwise-mask secure sum
        binds its sealed shares to the session's pair key this way, so a party that re-keys the
        session (a fresh mask key, hence another pair key) cannot open what was sealed before.
        """
        if not isinstance(secret, bytes) or not 16 <= len(secret) <= MAX_ID_BYTES:
            raise LocalProtocolError(f"a box binding is 16..{MAX_ID_BYTES} bytes, got {secret!r:.20}")
        box = object.__new__(Box)
        box.own_id, box.peer_id, box._info = self.own_id, self.peer_id, self._info
        box._shared = self._shared + _lp(secret)
        return box

    def _aead(self, session_id: str, error: type[Exception]) -> AESGCM:
        salt = _id_bytes("session_id", session_id, error)
        return AESGCM(hkdf_sha256(self._shared, salt=salt, info=self._info))

    def seal(self, plaintext: bytes, aad: AadFields) -> bytes:
        """``nonce ‖ AES-GCM(plaintext, aad)`` for a message from ``own_id`` to ``peer_id``.

        Raises
        ------
        LocalProtocolError
            If ``aad`` does not name this box's direction (own → peer).
        """
        if (aad.sender, aad.recipient) != (self.own_id, self.peer_id):
            raise LocalProtocolError(
                f"{self!r} seals only {self.own_id!r} -> {self.peer_id!r}, got {aad.sender!r} -> {aad.recipient!r}"
            )
        nonce = secrets.token_bytes(NONCE_BYTES)
        return nonce + self._aead(aad.session_id, LocalProtocolError).encrypt(nonce, bytes(plaintext), aad.to_bytes())

    def open(self, ciphertext: bytes, aad: AadFields) -> bytes:
        """Authenticate and decrypt a message from ``peer_id`` to ``own_id``.

        Raises
        ------
        RemoteProtocolError
            On a wrong direction, a truncated message or any tampering with ciphertext, nonce
            or associated data.
        """
        if (aad.sender, aad.recipient) != (self.peer_id, self.own_id):
            raise RemoteProtocolError(
                f"{self!r} opens only {self.peer_id!r} -> {self.own_id!r}, got {aad.sender!r} -> {aad.recipient!r}"
            )
        if not isinstance(ciphertext, bytes) or len(ciphertext) < SEAL_OVERHEAD:
            raise RemoteProtocolError(f"sealed message too short: {len(ciphertext)} < {SEAL_OVERHEAD} bytes")
        try:
            aad_bytes = aad.to_bytes()
        except LocalProtocolError as exc:
            raise RemoteProtocolError(str(exc)) from exc
        try:
            return self._aead(aad.session_id, RemoteProtocolError).decrypt(
                ciphertext[:NONCE_BYTES], ciphertext[NONCE_BYTES:], aad_bytes
            )
        except InvalidTag as exc:
            raise RemoteProtocolError(
                f"message {aad.sender!r} -> {aad.recipient!r} ({aad.kind}, seq {aad.seq}, session {aad.session_id}) "
                "fails authentication: tampered, misrouted or replayed"
            ) from exc


def local_boxes(
    private_keys: Mapping[str, X25519PrivateKey], peers_of: Callable[[str], Iterable[str]] | None = None
) -> dict[str, dict[str, Box]]:
    """``boxes[owner][peer]`` for owners whose keys all live in one process (tests, simulations, benchmarks).

    ``peers_of(owner)`` limits the pairs built (e.g. :func:`privfed.common.secagg.ring_topology.ring_peers`);
    by default every ordered pair, which costs ``N(N-1)`` X25519 exchanges.
    """
    publics = {owner: public_bytes(key) for owner, key in private_keys.items()}
    boxes: dict[str, dict[str, Box]] = {}
    for owner, key in private_keys.items():
        peers = (p for p in private_keys if p != owner) if peers_of is None else peers_of(owner)
        boxes[owner] = {peer: Box(owner, key, peer, publics[peer]) for peer in peers}
    return boxes
