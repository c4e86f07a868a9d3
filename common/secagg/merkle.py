"""Merkle hash trees and inclusion proofs as Certificate Transparency builds them (RFC 9162 §2.1).

A node binds all its owners' X25519 keys with one signature over the root of a tree of their
bindings (:mod:`privfed.common.secagg.signed_keys`); each key then travels with its inclusion
proof (audit path), which a peer checks with hashes only. Hashes are SHA-256 with the RFC's domain
separation: a leaf is ``H(0x00 || data)`` and an inner node ``H(0x01 || left || right)``, so no inner
node can be passed off as a leaf nor a leaf as an inner node (RFC 9162 §2.1.1; the second-preimage
attack on trees without it is Mehta's, "Merkle tree second preimage attack").

The tree of ``n`` leaves is the RFC's ``MTH``: split at the largest power of two ``k < n``, left
subtree ``D[0:k]``, right ``D[k:n]``. Built bottom-up it is the same tree: pair neighbours level by
level and lift a last node without a partner unchanged (a test checks it against the recursive
definition). Paths are the RFC's ``PATH(m, D[n])`` (§2.1.3.1), leaf to root, and verified by its
algorithm (§2.1.3.2), which also rejects a path of the wrong length for ``(index, size)``.

Pure hashing on :mod:`hashlib`; no clock, no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from privfed.common.errors import RemoteProtocolError

#: Bytes of a SHA-256 hash: every path element.
HASH_BYTES = 32
#: Largest tree a proof may claim (2^32 leaves; a path is then at most 32 hashes).
MAX_TREE_SIZE = 1 << 32
_LEAF, _INNER = b"\x00", b"\x01"


def leaf_hash(data: bytes) -> bytes:
    """``MTH({d}) = SHA-256(0x00 || d)`` (RFC 9162 §2.1.1)."""
    return hashlib.sha256(_LEAF + data).digest()


def inner_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)`` (RFC 9162 §2.1.1)."""
    return hashlib.sha256(_INNER + left + right).digest()


class MerkleTree:
    """The tree over ``leaves`` (their data, hashed here), every level kept for the audit paths.

    Parameters
    ----------
    leaves : sequence of bytes
        At least one. Order matters: leaf ``m`` is ``leaves[m]``.
    """

    def __init__(self, leaves: Sequence[bytes]) -> None:
        if not leaves:
            raise ValueError("a Merkle tree has at least one leaf")
        level = [leaf_hash(d) for d in leaves]
        self.levels: list[list[bytes]] = [level]
        while len(level) > 1:
            up = [inner_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                up.append(level[-1])  # no partner: lifted unchanged (the RFC's split at a power of two)
            self.levels.append(up)
            level = up

    @property
    def size(self) -> int:
        return len(self.levels[0])

    @property
    def root(self) -> bytes:
        """``MTH(D[n])``."""
        return self.levels[-1][0]

    def path(self, index: int) -> bytes:
        """``PATH(index, D[n])``, leaf to root, its hashes concatenated (RFC 9162 §2.1.3.1)."""
        if not 0 <= index < self.size:
            raise ValueError(f"leaf index {index} is not in [0, {self.size})")
        out = []
        for level in self.levels[:-1]:
            sibling = index ^ 1
            if sibling < len(level):  # the last node of an odd level has no sibling: lifted, no hash
                out.append(level[sibling])
            index >>= 1
        return b"".join(out)


def root_from_path(index: int, size: int, leaf: bytes, path: bytes) -> bytes:
    """The root that ``path`` proves the leaf hash ``leaf`` at ``index`` of a tree of ``size`` under
    (RFC 9162 §2.1.3.2, steps 1-5 without the final comparison, which is the caller's: it holds the
    signed root). A path too short, too long or not whole hashes raises.

    Raises
    ------
    RemoteProtocolError
        ``index`` or ``size`` out of range, or a malformed path.
    """
    if isinstance(index, bool) or isinstance(size, bool) or not isinstance(index, int) or not isinstance(size, int):
        raise RemoteProtocolError(f"leaf index and tree size are ints, got {index!r} and {size!r}")
    if not 0 <= index < size <= MAX_TREE_SIZE:
        raise RemoteProtocolError(f"leaf index {index} is not in [0, tree size {size}), size at most {MAX_TREE_SIZE}")
    if not isinstance(path, bytes) or len(path) % HASH_BYTES:
        raise RemoteProtocolError(f"an inclusion path is whole {HASH_BYTES}-byte hashes, got {len(path)} bytes")
    fn, sn, r = index, size - 1, leaf
    for i in range(0, len(path), HASH_BYTES):
        p = path[i : i + HASH_BYTES]
        if sn == 0:
            raise RemoteProtocolError("the inclusion path is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = inner_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = inner_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise RemoteProtocolError("the inclusion path is shorter than the tree is deep")
    return r
