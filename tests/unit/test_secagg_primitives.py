"""The fast paths of the secure-sum primitives give the same bytes as the reference ones."""

import secrets

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from privfed.common.errors import LocalProtocolError, RemoteProtocolError
from privfed.common.secagg import shamir
from privfed.common.secagg.boxes import hkdf_sha256


@pytest.mark.parametrize("salt", [b"", b"run-1", b"s" * 100])
@pytest.mark.parametrize("ikm", [b"", b"k" * 32, b"\x00" * 32])
def test_hkdf_sha256_is_rfc5869_hkdf(salt, ikm):
    info = secrets.token_bytes(40)
    reference = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt or None, info=info).derive(ikm)
    assert hkdf_sha256(ikm, salt=salt, info=info) == reference


def test_shamir_shares_are_the_polynomial_at_each_point_and_any_t_recover_the_secret():
    secret = secrets.token_bytes(shamir.SECRET_BYTES)
    shares = shamir.split(secret, range(1, 13), 7)
    values = {x: int.from_bytes(v, "big") for x, v in shares.items()}
    # f has degree 6: its 7th finite difference over the points 1..12 is zero mod p
    diffs = [values[x] for x in range(1, 13)]
    for _ in range(7):
        diffs = [(b - a) % shamir.PRIME for a, b in zip(diffs, diffs[1:])]
    assert set(diffs) == {0}
    for xs in ((1, 2, 3, 4, 5, 6, 7), (6, 7, 8, 9, 10, 11, 12), (1, 3, 5, 7, 9, 11, 12)):
        assert shamir.combine({x: shares[x] for x in xs}, 7) == secret
    with pytest.raises(RemoteProtocolError):
        shamir.combine({x: shares[x] for x in range(1, 7)}, 7)


@pytest.mark.parametrize("n_secrets,n,t", [(1, 3, 2), (11, 16, 9), (11, 20, 11), (3, 40, 40)])
def test_shamir_joined_shares_are_each_secrets_polynomial_at_each_point(n_secrets, n, t):
    """``split_joined`` evaluates the secrets' polynomials packed in one integer: each secret's slice of the
    joined shares is a degree t-1 polynomial at the points (its t-th finite difference is zero mod p) and any
    t of them recover that secret."""
    secrets_ = [secrets.token_bytes(shamir.SECRET_BYTES) for _ in range(n_secrets)]
    joined = shamir.split_joined(secrets_, range(1, n + 1), t)
    assert all(len(v) == n_secrets * shamir.SHARE_BYTES for v in joined.values())
    for i, secret in enumerate(secrets_):
        shares = {x: v[i * shamir.SHARE_BYTES : (i + 1) * shamir.SHARE_BYTES] for x, v in joined.items()}
        values = [int.from_bytes(shares[x], "big") for x in range(1, n + 1)]
        assert all(v < shamir.PRIME for v in values)
        diffs = values
        for _ in range(t):
            diffs = [(b - a) % shamir.PRIME for a, b in zip(diffs, diffs[1:])]
        assert set(diffs) <= {0}
        assert shamir.combine({x: shares[x] for x in range(n - t + 1, n + 1)}, t) == secret


def test_shamir_packed_reduction_is_mod_p_in_every_slot_and_draws_again_at_or_above_p(monkeypatch):
    """The packed fold reduces every slot mod p, values in [p, 2^384) included (the rare path), and a coefficient
    draw with any slot at or above p is drawn again (else the shares would not be uniform)."""
    packing = shamir._packing(4, 40, 40)
    width = 8 * packing.slot
    slots = [shamir.PRIME, 2**384 - 1, shamir.PRIME - 1, 2 ** (width - 2) + 12345]
    packed = sum(v << (width * (len(slots) - 1 - i)) for i, v in enumerate(slots))
    expected = b"".join((v % shamir.PRIME).to_bytes(shamir.SHARE_BYTES, "big") for v in slots)
    assert packing.shares(packed) == expected
    draws = iter([b"\xff" * shamir.SHARE_BYTES * 4, bytes(range(48)) * 4])
    monkeypatch.setattr(shamir.secrets, "token_bytes", lambda n: next(draws))
    value = shamir._uniform_packed(packing)
    assert value == sum(int.from_bytes(bytes(range(48)), "big") << (width * i) for i in range(4))


def test_a_turned_box_is_the_peers_box():
    """``Box.turned()`` (a node holding both owners' keys) opens and seals as the peer's own box does."""
    from privfed.common.secagg.boxes import AadFields, Box, generate_private_key, public_bytes

    a, b = generate_private_key(), generate_private_key()
    ab = Box("owner-0.o1", a, "owner-0.o2", public_bytes(b))
    ba, turned = Box("owner-0.o2", b, "owner-0.o1", public_bytes(a)), ab.turned()
    there, back = AadFields("s", "owner-0.o1", "owner-0.o2", "k", 0), AadFields("s", "owner-0.o2", "owner-0.o1", "k", 0)
    assert (turned.own_id, turned.peer_id) == (ba.own_id, ba.peer_id)
    assert turned.open(ab.seal(b"x", there), there) == ba.open(ab.seal(b"x", there), there) == b"x"
    assert ab.open(turned.seal(b"y", back), back) == b"y"
    with pytest.raises(LocalProtocolError):
        turned.seal(b"z", there)


def test_a_bound_box_opens_only_with_the_same_binding():
    """``Box.bound_to(secret)``: the peer's box bound to the same secret opens it (also turned); the
    unbound box, or one bound to another session's secret, does not."""
    from privfed.common.secagg.boxes import AadFields, Box, generate_private_key, public_bytes

    a, b = generate_private_key(), generate_private_key()
    ab = Box("owner-0.o1", a, "owner-1.o2", public_bytes(b))
    ba = Box("owner-1.o2", b, "owner-0.o1", public_bytes(a))
    aad = AadFields("s", "owner-0.o1", "owner-1.o2", "k", 0)
    first, second = secrets.token_bytes(32), secrets.token_bytes(32)
    sealed = ab.bound_to(first).seal(b"shares", aad)
    assert ba.bound_to(first).open(sealed, aad) == ab.bound_to(first).turned().open(sealed, aad) == b"shares"
    for other in (ba, ba.bound_to(second)):
        with pytest.raises(RemoteProtocolError, match="authentication"):
            other.open(sealed, aad)
    with pytest.raises(LocalProtocolError):
        ab.bound_to(b"short")


def test_a_box_keyed_in_one_session_seals_another_sessions_messages_with_that_sessions_key():
    """A box keeps the cipher of its last session (a secure sum seals and opens with the same one):
    after a message of session ``s1`` it still seals ``s2``'s, a bound box made from it its own
    binding's and a turned one the same key, each opened by a fresh box of the peer."""
    from privfed.common.secagg.boxes import AadFields, Box, generate_private_key, public_bytes

    a, b = generate_private_key(), generate_private_key()
    ab = Box("owner-0.o1", a, "owner-1.o2", public_bytes(b))

    def peer() -> Box:
        return Box("owner-1.o2", b, "owner-0.o1", public_bytes(a))

    s1, s2 = (AadFields(s, "owner-0.o1", "owner-1.o2", "k", 0) for s in ("s1", "s2"))
    assert peer().open(ab.seal(b"1", s1), s1) == b"1"
    assert peer().open(ab.seal(b"2", s2), s2) == b"2"
    assert peer().open(ab.seal(b"1", s1), s1) == b"1"
    binding = secrets.token_bytes(32)
    assert peer().bound_to(binding).open(ab.bound_to(binding).seal(b"3", s1), s1) == b"3"
    back = AadFields("s1", "owner-1.o2", "owner-0.o1", "k", 0)
    assert ab.open(ab.turned().seal(b"4", back), back) == b"4"
    with pytest.raises(RemoteProtocolError, match="authentication"):
        peer().open(ab.bound_to(binding).seal(b"5", s2), s2)


@pytest.mark.parametrize("bad", ["", "x" * 256, "é" * 128, 5, None])
def test_an_id_is_checked_at_every_use_though_valid_ones_are_cached(bad):
    """Ids are encoded once and kept (``boxes._id_forms``): a wrong one is still refused each time."""
    from privfed.common.secagg.boxes import AadFields

    assert AadFields("s", "a" * 255, "b", "k", 0).to_bytes()  # 255 bytes: the longest id
    for _ in range(2):
        with pytest.raises(LocalProtocolError, match="session_id"):
            AadFields(bad, "a", "b", "k", 0).to_bytes()
