"""One signature over a node's key tree (issue 27): every key of the tree verifies through its path,
and every substitution a relaying coordinator could try is refused (``signed_keys.sign_key_tree``,
``verify_public_key(..., tree=...)``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.identity import owner_id
from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.merkle import HASH_BYTES
from privfed.common.secagg.signed_keys import TreeProof, _root_signed, sign_key_tree, sign_public_key, verify_public_key
from privfed.common.tasks import OwnerInfo
from privfed.deploy.certs import load_ca, make_certs, party_dir
from privfed.server.dispatcher import Dispatcher


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """The CA and two owner nodes' certificates and keys, as ``privfed certs`` makes them."""
    root = make_certs(tmp_path_factory.mktemp("pki"), owners=2, owner_names=["node-1", "node-2"])
    names = ("node-1", "node-2")
    keys = {n: load_pem_private_key((party_dir(root, n) / f"{n}-key.pem").read_bytes(), None) for n in names}
    certs = {n: x509.load_pem_x509_certificate((party_dir(root, n) / f"{n}.pem").read_bytes()) for n in names}
    return load_ca(root)[1], keys, certs


def _tree(keys, node="node-1", n=7, session=None):
    bindings = [(f"{node}.o{i:05d}", public_bytes(generate_private_key())) for i in range(n)]
    tree, signature = sign_key_tree(keys[node], node, bindings, session)
    return bindings, tree, signature


def _verify(ca, cert, owner, pub, signature, proof, **kw):
    verify_public_key(
        cert,
        ca,
        owner,
        pub,
        signature,
        now=datetime.now(UTC),  # not at import: the certificates are made later
        cert_identity=kw.pop("identity", "node-1"),
        tree=proof,
        **kw,
    )


def test_every_key_of_a_signed_tree_verifies_and_the_root_is_checked_once(nodes):
    ca, keys, certs = nodes
    for n in (1, 2, 7, 64):
        bindings, tree, signature = _tree(keys, n=n)
        before = _root_signed.cache_info()
        for i, (owner, pub) in enumerate(bindings):
            _verify(ca, certs["node-1"], owner, pub, signature, TreeProof(i, n, tree.path(i)))
        after = _root_signed.cache_info()
        assert (after.misses - before.misses, after.hits - before.hits) == (1, n - 1)  # one ECDSA check a tree


def test_substitutions_are_refused(nodes):
    ca, keys, certs = nodes
    bindings, tree, signature = _tree(keys)
    owner, pub = bindings[2]
    proof = TreeProof(2, 7, tree.path(2))
    _verify(ca, certs["node-1"], owner, pub, signature, proof)
    attacker = public_bytes(generate_private_key())
    forged = [
        (owner, attacker, signature, proof),  # another key
        (bindings[3][0], pub, signature, proof),  # the leaf under another owner id
        (bindings[3][0], bindings[3][1], signature, proof),  # another owner's key with this one's path
        (owner, pub, signature, TreeProof(2, 8, proof.path)),  # another size
        (owner, pub, signature, TreeProof(3, 7, proof.path)),  # another index
        (owner, pub, signature, TreeProof(2, 7, proof.path[HASH_BYTES:] + proof.path[:HASH_BYTES])),  # reordered
        (owner, pub, signature, TreeProof(2, 7, proof.path[:-HASH_BYTES])),  # truncated
        (owner, pub, signature[:-1] + bytes([signature[-1] ^ 1]), proof),  # the signature
    ]
    for case in forged:
        with pytest.raises(RemoteProtocolError):
            _verify(ca, certs["node-1"], *case)


def test_a_leftmost_path_proves_a_larger_size_only_to_the_hashes(nodes):
    """The path of leaf 0 of 5 leaves also hashes to the root for sizes 6..8: the size is signed."""
    ca, keys, certs = nodes
    bindings, tree, signature = _tree(keys, n=5)
    for size in (6, 7, 8):
        with pytest.raises(RemoteProtocolError, match="not signed"):
            _verify(ca, certs["node-1"], *bindings[0], signature, TreeProof(0, size, tree.path(0)))


def test_another_nodes_root_is_refused(nodes):
    """A tree node-2 signed (even naming node-1, even over node-1's owner ids) proves nothing for node-1."""
    ca, keys, certs = nodes
    bindings = [(f"node-1.o{i:05d}", public_bytes(generate_private_key())) for i in range(3)]
    for identity in ("node-1", "node-2"):
        tree, signature = sign_key_tree(keys["node-2"], identity, bindings)
        with pytest.raises(RemoteProtocolError, match="not signed"):
            _verify(ca, certs["node-1"], *bindings[0], signature, TreeProof(0, 3, tree.path(0)))
    tree, signature = sign_key_tree(keys["node-2"], "node-2", bindings)
    with pytest.raises(RemoteProtocolError, match="does not name"):  # node-2's certificate given for node-1
        _verify(ca, certs["node-2"], *bindings[0], signature, TreeProof(0, 3, tree.path(0)))
    tree, signature = sign_key_tree(keys["node-1"], "node-2", bindings)  # node-1's key, another identity
    with pytest.raises(RemoteProtocolError, match="not signed"):
        _verify(ca, certs["node-1"], *bindings[0], signature, TreeProof(0, 3, tree.path(0)))


def test_a_key_signature_and_a_root_signature_are_not_interchangeable(nodes):
    """Domain separation: the signature of one key alone (a mask key's, ``sign_public_key``) is no
    tree's, and a one-leaf tree's is no key's; a session-bound tree proves no long-lived key."""
    ca, keys, certs = nodes
    owner, pub = "node-1.o00000", public_bytes(generate_private_key())
    alone = sign_public_key(keys["node-1"], pub, owner)
    with pytest.raises(RemoteProtocolError, match="not signed"):
        _verify(ca, certs["node-1"], owner, pub, alone, TreeProof(0, 1, b""))
    _, one_leaf = sign_key_tree(keys["node-1"], "node-1", [(owner, pub)])
    _verify(ca, certs["node-1"], owner, pub, one_leaf, TreeProof(0, 1, b""))
    with pytest.raises(RemoteProtocolError, match="does not verify"):
        _verify(ca, certs["node-1"], owner, pub, one_leaf, None)
    bindings, tree, signature = _tree(keys, n=3, session="s1")
    _verify(ca, certs["node-1"], *bindings[1], signature, TreeProof(1, 3, tree.path(1)), session_id="s1")
    with pytest.raises(RemoteProtocolError, match="not signed"):
        _verify(ca, certs["node-1"], *bindings[1], signature, TreeProof(1, 3, tree.path(1)))


def test_a_tree_binds_at_least_one_well_formed_key(nodes):
    _, keys, _ = nodes
    with pytest.raises(ConfigError, match="at least one"):
        sign_key_tree(keys["node-1"], "node-1", [])
    with pytest.raises(ConfigError, match="32 raw bytes"):
        sign_key_tree(keys["node-1"], "node-1", [("node-1.o00000", b"short")])


def test_the_coordinator_hands_on_each_key_of_a_registration_in_parts_with_a_path_that_verifies(nodes):
    """The coordinator rebuilds the node's tree from its registration (leaves in order over all
    parts), so every key it hands on verifies against the node's one signature; a registration with
    new keys gets a new tree, and a key that cannot be a leaf leaves the node's keys unproven (refused),
    not the coordinator down."""
    ca, keys, certs = nodes
    now = [0.0]
    d = Dispatcher(clock=lambda: now[0])
    for generation in range(2):
        now[0] += 60.0  # a restarted node process (new keys) takes over once the old one is silent
        bindings = [(owner_id("node-1", i), public_bytes(generate_private_key())) for i in range(25)]
        _, signature = sign_key_tree(keys["node-1"], "node-1", bindings)
        infos = [OwnerInfo(o, pub) for o, pub in bindings]
        for k, part in enumerate((infos[:10], infos[10:20], infos[20:])):
            d.register("node-1", part, peer=f"p{generation}", part=k, parts=3, key_tree_signature=signature)
        for owner, pub in bindings:
            key = d.peer_key(owner)
            assert (key.x25519_public_key, key.key_signature, key.key_tree_size) == (pub, signature, 25)
            proof = TreeProof(key.key_index, key.key_tree_size, key.key_path)
            _verify(ca, certs["node-1"], owner, pub, signature, proof)
    bad = [OwnerInfo(owner_id("node-2", 0), b"short"), OwnerInfo(owner_id("node-2", 1), b"k" * 32)]
    d.register("node-2", bad, key_tree_signature=b"s" * 70)
    key = d.peer_key(owner_id("node-2", 1))
    assert key.key_tree_size == 0
    with pytest.raises(RemoteProtocolError):
        _verify(ca, certs["node-2"], key.owner_id, key.x25519_public_key, key.key_signature, None, identity="node-2")
