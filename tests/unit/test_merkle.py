"""The Merkle tree of the key bindings (RFC 9162 §2.1): the published vectors, every path of random
trees, and the tampering each proof must refuse (``privfed.common.secagg.merkle``)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from privfed.common.errors import RemoteProtocolError
from privfed.common.secagg.merkle import HASH_BYTES, MerkleTree, inner_hash, leaf_hash, root_from_path

# The Certificate Transparency test vectors (RFC 6962 trees; the same in RFC 9162): the leaf inputs,
# the roots of their first n leaves, and two audit paths of the 8-leaf tree.
CT_LEAVES = [bytes.fromhex(h) for h in ["", "00", "10", "2021", "3031", "40414243", "5051525354555657"]] + [
    bytes.fromhex("606162636465666768696a6b6c6d6e6f")
]
CT_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
CT_PATHS = {
    0: [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    5: [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}


def rfc_mth(leaves: list[bytes]) -> bytes:
    """``MTH`` as RFC 9162 §2.1.1 defines it, recursively (split at the largest power of two < n)."""
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + rfc_mth(leaves[:k]) + rfc_mth(leaves[k:])).digest()


def test_the_published_vectors():
    for n in range(1, 9):
        assert MerkleTree(CT_LEAVES[:n]).root.hex() == CT_ROOTS[n - 1]
    tree = MerkleTree(CT_LEAVES)
    for index, path in CT_PATHS.items():
        assert tree.path(index) == b"".join(bytes.fromhex(h) for h in path)


def _random_leaves(rng: np.random.Generator, n: int) -> list[bytes]:
    return [rng.bytes(int(rng.integers(0, 40))) for _ in range(n)]


def test_every_leaf_of_random_trees_of_1_to_300_leaves_verifies_and_the_tree_is_the_rfcs():
    rng = np.random.default_rng(20261127)
    for n in range(1, 301):
        leaves = _random_leaves(rng, n)
        tree = MerkleTree(leaves)
        if n <= 64 or n % 37 == 0:  # the recursive definition is O(n log n) hashes per root
            assert tree.root == rfc_mth(leaves), n
        depth = (n - 1).bit_length()
        for m in range(n):
            path = tree.path(m)
            assert len(path) <= depth * HASH_BYTES
            assert root_from_path(m, n, leaf_hash(leaves[m]), path) == tree.root, (n, m)


def test_every_single_bit_flip_of_a_proof_fails():
    """A flipped bit anywhere in the leaf, the path or the index never proves the root. (A leftmost
    leaf's path can prove the same root for several sizes: the size is covered by the root's
    signature, ``tests/unit/test_key_tree.py``.)"""
    rng = np.random.default_rng(7)
    for n in (2, 3, 5, 8, 13, 33):
        leaves = _random_leaves(rng, n)
        tree = MerkleTree(leaves)
        for m in range(n):
            leaf, path = leaf_hash(leaves[m]), tree.path(m)
            for bit in range(8 * len(path)):
                bad = bytearray(path)
                bad[bit // 8] ^= 1 << (bit % 8)
                assert root_from_path(m, n, leaf, bytes(bad)) != tree.root
            for bit in range(8 * len(leaf)):
                bad = bytearray(leaf)
                bad[bit // 8] ^= 1 << (bit % 8)
                assert root_from_path(m, n, bytes(bad), path) != tree.root
            for wrong_index in [m ^ (1 << b) for b in range(6)]:
                try:
                    assert root_from_path(wrong_index, n, leaf, path) != tree.root, (n, m, wrong_index)
                except RemoteProtocolError:
                    pass  # out of range or a path of the wrong length: refused outright


def test_truncated_extended_and_reordered_paths_are_refused():
    leaves = [bytes([i]) for i in range(11)]
    tree = MerkleTree(leaves)
    for m in range(11):
        leaf, path = leaf_hash(leaves[m]), tree.path(m)
        with pytest.raises(RemoteProtocolError, match="shorter"):
            root_from_path(m, 11, leaf, path[:-HASH_BYTES])
        with pytest.raises(RemoteProtocolError, match="longer"):
            root_from_path(m, 11, leaf, path + tree.root)
        with pytest.raises(RemoteProtocolError, match="whole"):
            root_from_path(m, 11, leaf, path[:-1])
        hashes = [path[i : i + HASH_BYTES] for i in range(0, len(path), HASH_BYTES)]
        assert root_from_path(m, 11, leaf, b"".join(reversed(hashes))) != tree.root


def test_an_inner_node_is_not_a_leaf():
    """Second preimage (RFC 9162 §2.1.1's domain separation): the hash of two leaves, offered as the
    data of one leaf of a tree half the size, gives another root."""
    leaves = [bytes([i]) for i in range(4)]
    tree = MerkleTree(leaves)
    left, right = inner_hash(leaf_hash(leaves[0]), leaf_hash(leaves[1])), tree.levels[1][1]
    forged = MerkleTree([leaf_hash(leaves[0]) + leaf_hash(leaves[1]), leaf_hash(leaves[2]) + leaf_hash(leaves[3])])
    assert inner_hash(left, right) == tree.root
    assert forged.root != tree.root
    assert root_from_path(0, 2, left, tree.path(0)[HASH_BYTES:]) == tree.root  # an inner node *with* a 2-leaf proof...
    assert root_from_path(0, 2, leaf_hash(left), right) != tree.root  # ...is no leaf: leaves are hashed with 0x00


@pytest.mark.parametrize(("index", "size"), [(0, 0), (3, 3), (-1, 4), (0, (1 << 32) + 1), (True, 2)])
def test_out_of_range_positions_are_refused(index, size):
    with pytest.raises(RemoteProtocolError):
        root_from_path(index, size, b"\0" * 32, b"")


def test_a_tree_has_leaves():
    with pytest.raises(ValueError, match="at least one"):
        MerkleTree([])
    with pytest.raises(ValueError, match="not in"):
        MerkleTree([b"a"]).path(1)
