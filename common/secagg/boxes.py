"""End-to-end encrypted owner-to-owner channels relayed by an untrusted coordinator (DESIGN, Topology).

Each logical owner holds an X25519 key pair (:func:`generate_private_key`); a peer uses a public
key only once its owner's certificate key has been checked to vouch for it
(:func:`privfed.common.secagg.signed_keys.verify_public_key`), so the coordinator that relays
ciphertexts can neither substitute keys nor read or forge traffic.

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
from functools import lru_cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from privfed.common.errors import ConfigError, LocalProtocolError, RemoteProtocolError
from privfed.common.secagg.sizes import MAX_ID_BYTES, NONCE_BYTES, SEAL_OVERHEAD

_KEY_INFO = b"privfed-e2e"
_AAD_TAG = b"privfed-e2e-aad-v1"


def lp(data: bytes) -> bytes:
    """2-byte big-endian length prefix, then the bytes."""
    return struct.pack(">H", len(data)) + data


@lru_cache(maxsize=1 << 15)
def _id_forms(value: str) -> tuple[bytes, bytes] | None:
    """``(utf-8, lp(utf-8))`` of a valid id, None for a wrong length. Cached: the same owner and
    session ids recur in every box, binding and associated data of a secure sum (~50 per owner)."""
    raw = value.encode("utf-8")
    return (raw, lp(raw)) if 1 <= len(raw) <= MAX_ID_BYTES else None


def _id_checked(name: str, value: object, error: type[Exception]) -> tuple[bytes, bytes]:
    if not isinstance(value, str):
        raise error(f"{name} must be a str, got {type(value).__name__}")
    forms = _id_forms(value)
    if forms is None:
        raise error(f"{name} must be 1..{MAX_ID_BYTES} UTF-8 bytes, got {len(value.encode('utf-8'))}")
    return forms


def id_bytes(name: str, value: object, error: type[Exception]) -> bytes:
    """The UTF-8 bytes of an id (a str of 1..MAX_ID_BYTES bytes); ``error`` otherwise."""
    return _id_checked(name, value, error)[0]


def lp_id(name: str, value: object, error: type[Exception]) -> bytes:
    """``lp(id_bytes(name, value, error))``."""
    return _id_checked(name, value, error)[1]


def hkdf_sha256(ikm: bytes, *, salt: bytes, info: bytes) -> bytes:
    """32 bytes of HKDF-SHA256 (RFC 5869): ``HMAC(HMAC(salt, ikm), info ‖ 0x01)``.

    The same bytes as ``cryptography``'s ``HKDF(SHA256(), 32, salt, info)`` (a test checks it), from
    two stdlib ``hmac.digest`` calls: ~2 µs instead of ~20 µs for building the HKDF object, and a
    10^4-owner run derives ~5·10^5 box and pair keys.
    """
    prk = hmac.digest(salt or bytes(32), ikm, "sha256")
    return hmac.digest(prk, info + b"\x01", "sha256")


# ---------------------------------------------------------------- keys


def generate_private_key() -> X25519PrivateKey:
    """A fresh X25519 private key (randomness from the OS via ``cryptography``)."""
    return X25519PrivateKey.generate()


@lru_cache(maxsize=1 << 16)
def public_key(raw: bytes) -> X25519PublicKey:
    """The X25519 public key of 32 raw bytes (ValueError if malformed). Cached: a node parses each
    remote neighbour's box and mask keys once, not once per owner of its that has that neighbour."""
    return X25519PublicKey.from_public_bytes(raw)


def public_bytes(private_key: X25519PrivateKey) -> bytes:
    """The 32 raw bytes of ``private_key``'s public key, as sent and signed."""
    return private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


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
            + lp_id("session_id", self.session_id, err)
            + lp_id("sender", self.sender, err)
            + lp_id("recipient", self.recipient, err)
            + lp_id("kind", self.kind, err)
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
        The peer's 32-byte X25519 public key, already checked with :func:`~privfed.common.secagg.signed_keys.verify_public_key`.

    Raises
    ------
    RemoteProtocolError
        If the peer's public key is malformed or of low order (all-zero shared secret).
    """

    __slots__ = ("own_id", "peer_id", "_shared", "_info", "_salt", "_key")

    def __init__(self, own_id: str, own_private_key: X25519PrivateKey, peer_id: str, peer_public_bytes: bytes):
        a, b = lp_id("own_id", own_id, ConfigError), lp_id("peer_id", peer_id, ConfigError)
        if own_id == peer_id:
            raise ConfigError(f"a box joins two different owners, got {own_id!r} twice")
        if not isinstance(own_private_key, X25519PrivateKey):
            raise ConfigError(f"own_private_key must be an X25519PrivateKey, got {type(own_private_key).__name__}")
        try:
            shared = own_private_key.exchange(public_key(peer_public_bytes))
        except (ValueError, TypeError) as exc:
            raise RemoteProtocolError(f"unusable X25519 public key for {peer_id!r}: {exc}") from exc
        self.own_id, self.peer_id = own_id, peer_id
        self._shared = shared
        self._info = _KEY_INFO + (a + b if a[2:] < b[2:] else b + a)  # lp(min id) ‖ lp(max id), by bytes
        self._salt, self._key = b"", b""  # the last session's salt and key: see _aead

    def __repr__(self) -> str:
        return f"Box({self.own_id!r} <-> {self.peer_id!r})"

    def turned(self) -> Box:
        """The same channel from the peer's side (its key agreement gives the same secret): for a
        node that holds both owners' keys, one X25519 exchange per pair instead of two."""
        box = object.__new__(Box)
        box.own_id, box.peer_id, box._shared, box._info = self.peer_id, self.own_id, self._shared, self._info
        box._salt, box._key = self._salt, self._key  # the same key: both directions derive it from the same inputs
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
        box._shared = self._shared + lp(secret)
        box._salt, box._key = b"", b""
        return box

    def _aead(self, session_id: str, error: type[Exception]) -> AESGCM:
        """The session's cipher. Both directions of a box share one key per session, so it is derived
        once and kept for the box's last session: the pairwise-mask secure sum seals an owner's
        shares to a neighbour and opens the neighbour's with the same bound box (one HKDF, not two).
        The key is kept, not the cipher: an ``AESGCM`` holds ~2.5 KB of OpenSSL state, and a node of
        5·10^4 owners keeps ~8·10^5 bound boxes through a run (a new ``AESGCM`` costs ~1 µs)."""
        salt = id_bytes("session_id", session_id, error)
        if salt != self._salt:  # never b"": a session id has at least one byte
            self._salt, self._key = salt, hkdf_sha256(self._shared, salt=salt, info=self._info)
        return AESGCM(self._key)

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
                "fails authentication: tampered, misrouted or replayed, or sealed under the keys of an earlier "
                "process of either party (a node restarted mid-session)"
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
