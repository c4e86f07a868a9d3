"""End-to-end boxes and signed X25519 keys (DESIGN, Topology; issue §Ring-masked secure sum)."""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.x509.oid import NameOID

from privfed.common.errors import ConfigError, LocalProtocolError, RemoteProtocolError
from privfed.common.secagg.boxes import SEAL_OVERHEAD, AadFields, Box, generate_private_key, local_boxes, public_bytes
from privfed.common.secagg.signed_keys import sign_public_key, verify_public_key

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_cert(
    subject_key, cn, issuer_key=None, issuer_cert=None, *, ca=False, san=(), days=(-1, 365), digital_signature=True
):
    """A certificate for ``subject_key``; self-signed when no issuer is given."""
    issuer_key = subject_key if issuer_key is None else issuer_key
    issuer = _name(cn) if issuer_cert is None else issuer_cert.subject
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(issuer)
        .public_key(subject_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW + days[0] * DAY)
        .not_valid_after(NOW + days[1] * DAY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=digital_signature,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(s) for s in san]), critical=False)
    algorithm = None if isinstance(issuer_key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    return builder.sign(issuer_key, algorithm)


@pytest.fixture(scope="module")
def pki():
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = make_cert(ca_key, "privfed-ca", ca=True)
    keys = {"a": ec.generate_private_key(ec.SECP256R1()), "b": ec.generate_private_key(ec.SECP256R1())}
    certs = {o: make_cert(k, f"owner-{o}", ca_key, ca, san=[o]) for o, k in keys.items()}
    return ca_key, ca, keys, certs


@pytest.fixture(scope="module")
def x25519():
    return {o: generate_private_key() for o in ("a", "b", "c")}


def sealed(boxes, plaintext=b"ring value 0123456789", **aad):
    fields = AadFields(**{"session_id": "s1", "sender": "a", "recipient": "b", "kind": "hop", "seq": 1, **aad})
    return boxes["a"]["b"].seal(plaintext, fields), fields


# ---------------------------------------------------------------- boxes


def test_round_trip_both_directions(x25519):
    boxes = local_boxes(x25519)
    ct, aad = sealed(boxes)
    assert len(ct) == len(b"ring value 0123456789") + SEAL_OVERHEAD
    assert boxes["b"]["a"].open(ct, aad) == b"ring value 0123456789"
    back = AadFields("s1", "b", "a", "hop", 2)
    assert boxes["a"]["b"].open(boxes["b"]["a"].seal(b"", back), back) == b""


def test_key_schedule_is_the_documented_one(x25519):
    box = Box("a", x25519["a"], "b", public_bytes(x25519["b"]))
    aad = AadFields("sess", "a", "b", "hop", 7)
    ct = box.seal(b"payload", aad)
    shared = x25519["b"].exchange(x25519["a"].public_key())
    info = b"privfed-e2e" + b"".join(struct.pack(">H", len(i)) + i for i in (b"a", b"b"))
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"sess", info=info).derive(shared)
    assert AESGCM(key).decrypt(ct[:12], ct[12:], aad.to_bytes()) == b"payload"


def test_nonces_are_fresh(x25519):
    boxes = local_boxes(x25519)
    assert sealed(boxes)[0] != sealed(boxes)[0]


def test_tampering_with_any_byte_fails(x25519):
    boxes = local_boxes(x25519)
    ct, aad = sealed(boxes)
    for i in range(len(ct)):
        forged = bytearray(ct)
        forged[i] ^= 0x80
        with pytest.raises(RemoteProtocolError, match="fails authentication"):
            boxes["b"]["a"].open(bytes(forged), aad)
    for short in (ct[:-1], ct[: SEAL_OVERHEAD - 1], b""):
        with pytest.raises(RemoteProtocolError):
            boxes["b"]["a"].open(short, aad)


@pytest.mark.parametrize("field, value", [("session_id", "s2"), ("kind", "result"), ("seq", 2), ("seq", 2**32 + 1)])
def test_associated_data_is_bound(x25519, field, value):
    boxes = local_boxes(x25519)
    ct, aad = sealed(boxes)
    moved = AadFields(**{**aad.__dict__, field: value})
    with pytest.raises(RemoteProtocolError, match="fails authentication"):
        boxes["b"]["a"].open(ct, moved)


def test_wrong_recipient_cannot_open(x25519):
    boxes = local_boxes(x25519)
    ct, aad = sealed(boxes)
    with pytest.raises(RemoteProtocolError, match="opens only"):
        boxes["c"]["a"].open(ct, aad)  # c's box with a: the header names b
    redirected = AadFields("s1", "a", "c", "hop", 1)
    with pytest.raises(RemoteProtocolError, match="fails authentication"):
        boxes["c"]["a"].open(ct, redirected)  # header rewritten to c: the a/c key differs
    with pytest.raises(RemoteProtocolError, match="opens only"):
        boxes["a"]["b"].open(ct, aad)  # the sender's own box refuses its own direction


def test_seal_checks_direction_and_fields(x25519):
    boxes = local_boxes(x25519)
    with pytest.raises(LocalProtocolError, match="seals only"):
        boxes["a"]["b"].seal(b"x", AadFields("s1", "b", "a", "hop", 1))
    with pytest.raises(LocalProtocolError, match="seq"):
        boxes["a"]["b"].seal(b"x", AadFields("s1", "a", "b", "hop", -1))
    with pytest.raises(LocalProtocolError, match="session_id"):
        boxes["a"]["b"].seal(b"x", AadFields("", "a", "b", "hop", 1))


def test_aad_encoding_is_injective():
    assert AadFields("s", "ab", "c", "k", 1).to_bytes() != AadFields("s", "a", "bc", "k", 1).to_bytes()


def test_bad_peer_keys_are_refused(x25519):
    with pytest.raises(RemoteProtocolError, match="unusable"):
        Box("a", x25519["a"], "b", bytes(32))  # low-order point: all-zero shared secret
    with pytest.raises(RemoteProtocolError, match="unusable"):
        Box("a", x25519["a"], "b", b"short")
    with pytest.raises(ConfigError, match="two different"):
        Box("a", x25519["a"], "a", public_bytes(x25519["a"]))


def test_local_boxes_limits_pairs(x25519):
    boxes = local_boxes(x25519, peers_of=lambda o: {"a": ["b"], "b": ["a", "c"], "c": ["b"]}[o])
    assert {o: sorted(b) for o, b in boxes.items()} == {"a": ["b"], "b": ["a", "c"], "c": ["b"]}
    assert sorted(local_boxes(x25519)["c"]) == ["a", "b"]


# ---------------------------------------------------------------- signed public keys


@pytest.mark.parametrize(
    "make_key",
    [
        lambda: ec.generate_private_key(ec.SECP256R1()),
        lambda: ec.generate_private_key(ec.SECP384R1()),
        ed25519.Ed25519PrivateKey.generate,
        lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
    ],
    ids=["p256", "p384", "ed25519", "rsa2048"],
)
def test_sign_and_verify_each_certificate_key_type(pki, make_key):
    ca_key, ca, _, _ = pki
    key = make_key()
    cert = make_cert(key, "owner-z", ca_key, ca)
    pk = public_bytes(generate_private_key())
    verify_public_key(cert, ca, "owner-z", pk, sign_public_key(key, pk, "owner-z"), now=NOW)
    verify_public_key(cert, ca, "owner-z", pk, sign_public_key(key, pk, "owner-z", "sess"), now=NOW, session_id="sess")


def test_substituted_public_key_fails(pki, x25519):
    _, ca, keys, certs = pki
    pk = public_bytes(x25519["a"])
    sig = sign_public_key(keys["a"], pk, "a")
    verify_public_key(certs["a"], ca, "a", pk, sig, now=NOW)
    with pytest.raises(RemoteProtocolError, match="does not verify"):
        verify_public_key(certs["a"], ca, "a", public_bytes(x25519["c"]), sig, now=NOW)


def test_key_signed_by_another_certificate_fails(pki, x25519):
    _, ca, keys, certs = pki
    pk = public_bytes(x25519["c"])  # the relay's key, passed off as a's
    with pytest.raises(RemoteProtocolError, match="does not verify"):
        verify_public_key(certs["a"], ca, "a", pk, sign_public_key(keys["b"], pk, "a"), now=NOW)
    with pytest.raises(RemoteProtocolError, match="does not name 'a'"):
        verify_public_key(certs["b"], ca, "a", pk, sign_public_key(keys["b"], pk, "a"), now=NOW)


def test_certificate_not_chaining_to_the_ca_fails(pki, x25519):
    _, ca, keys, _ = pki
    rogue_key = ec.generate_private_key(ec.SECP256R1())
    rogue_ca = make_cert(rogue_key, "privfed-ca", ca=True)  # same name, other key
    forged = make_cert(keys["a"], "owner-a", rogue_key, rogue_ca, san=["a"])
    pk = public_bytes(x25519["a"])
    with pytest.raises(RemoteProtocolError, match="not issued by CA"):
        verify_public_key(forged, ca, "a", pk, sign_public_key(keys["a"], pk, "a"), now=NOW)
    self_signed = make_cert(keys["a"], "a")
    with pytest.raises(RemoteProtocolError, match="not issued by CA"):
        verify_public_key(self_signed, ca, "a", pk, sign_public_key(keys["a"], pk, "a"), now=NOW)


def test_ca_certificate_cannot_vouch_for_an_owner(pki, x25519):
    ca_key, ca, _, _ = pki
    pk = public_bytes(x25519["a"])
    with pytest.raises(RemoteProtocolError, match="is a CA"):
        verify_public_key(ca, ca, "privfed-ca", pk, sign_public_key(ca_key, pk, "privfed-ca"), now=NOW)


def test_validity_dates_use_the_given_time(pki, x25519):
    ca_key, ca, keys, certs = pki
    pk = public_bytes(x25519["a"])
    sig = sign_public_key(keys["a"], pk, "a")
    for when in (NOW + 400 * DAY, NOW - 2 * DAY):
        with pytest.raises(RemoteProtocolError, match="not valid at"):
            verify_public_key(certs["a"], ca, "a", pk, sig, now=when)
    expired = make_cert(keys["a"], "a", ca_key, ca, days=(-10, -1))
    with pytest.raises(RemoteProtocolError, match="owner certificate .* not valid at"):
        verify_public_key(expired, ca, "a", pk, sig, now=NOW)
    with pytest.raises(ConfigError, match="timezone-aware"):
        verify_public_key(certs["a"], ca, "a", pk, sig, now=NOW.replace(tzinfo=None))


def test_session_binding_and_identity_options(pki, x25519):
    ca_key, ca, keys, certs = pki
    pk = public_bytes(x25519["a"])
    sig = sign_public_key(keys["a"], pk, "a", session_id="s1")
    verify_public_key(certs["a"], ca, "a", pk, sig, now=NOW, session_id="s1")
    for session in ("s2", None):
        with pytest.raises(RemoteProtocolError, match="does not verify"):
            verify_public_key(certs["a"], ca, "a", pk, sig, now=NOW, session_id=session)
    # a certificate per owner node vouching for a logical owner hosted there
    node_key = ec.generate_private_key(ec.SECP256R1())
    node = make_cert(node_key, "node-1", ca_key, ca)
    sig = sign_public_key(node_key, pk, "shard-7")
    verify_public_key(node, ca, "shard-7", pk, sig, now=NOW, cert_identity="node-1")
    with pytest.raises(RemoteProtocolError, match="does not name"):
        verify_public_key(node, ca, "shard-7", pk, sig, now=NOW)


def test_certificate_without_digital_signature_usage_fails(pki, x25519):
    ca_key, ca, keys, _ = pki
    cert = make_cert(keys["a"], "a", ca_key, ca, digital_signature=False)
    pk = public_bytes(x25519["a"])
    with pytest.raises(RemoteProtocolError, match="digital signatures"):
        verify_public_key(cert, ca, "a", pk, sign_public_key(keys["a"], pk, "a"), now=NOW)


def test_malformed_inputs(pki, x25519):
    _, ca, keys, certs = pki
    pk = public_bytes(x25519["a"])
    with pytest.raises(RemoteProtocolError, match="does not verify"):
        verify_public_key(certs["a"], ca, "a", pk, b"\0" * 64, now=NOW)
    with pytest.raises(RemoteProtocolError, match="32 raw bytes"):
        verify_public_key(certs["a"], ca, "a", pk[:31], sign_public_key(keys["a"], pk, "a"), now=NOW)
    with pytest.raises(ConfigError, match="32 raw bytes"):
        sign_public_key(keys["a"], pk + b"\0", "a")
    with pytest.raises(ConfigError, match="cannot sign"):
        sign_public_key(x25519["a"], pk, "a")
    with pytest.raises(ConfigError, match="owner_id"):
        sign_public_key(keys["a"], pk, "")
