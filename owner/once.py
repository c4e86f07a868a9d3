"""Ids a node must refuse for good, remembered in a fixed amount of memory: the secure-sum sessions
(:mod:`privfed.owner.secagg`) and boosting runs (``privfed.owner.kinds.boosting.note_run``) it
forgot.

A node that stays up for months keys thousands of secure-sum sessions and must never key one of
them again; a set of their ids grew by one entry per session for the life of the process.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

#: Bits of the filter (2 MiB) and bits set per id.
BITS = 1 << 24
HASHES = 10


class NeverAgain:
    """Ids once :meth:`add` ed are found by ``in`` for the life of the object, in ``BITS / 8`` bytes.

    A Bloom filter (B. H. Bloom, "Space/time trade-offs in hash coding with allowable errors",
    CACM 1970): an id sets :data:`HASHES` bits, chosen by a BLAKE2b of the id keyed with a per-object
    secret (``secrets``), so whoever picks the ids cannot aim them at the bits of others. An added id
    is always found (no false negatives), so a refusal it backs never lapses. A fresh id is found too
    with probability about ``(1 - exp(-HASHES * n / BITS)) ** HASHES`` after ``n`` ids (4e-13 at
    10^5 ids, 3e-4 at 10^6); what it backs then refuses a fresh id, a public outcome that depends
    on the id and this secret only.
    """

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self._bits: bytearray | None = None  # allocated with the first id

    def _positions(self, item: str) -> list[int]:
        digest = hashlib.blake2b(item.encode(), key=self._key, digest_size=4 * HASHES).digest()
        return [int.from_bytes(digest[i : i + 4], "little") % BITS for i in range(0, len(digest), 4)]

    def add(self, item: str) -> None:
        if self._bits is None:
            self._bits = bytearray(BITS // 8)
        for p in self._positions(item):
            self._bits[p >> 3] |= 1 << (p & 7)

    def __contains__(self, item: object) -> bool:
        if self._bits is None or not isinstance(item, str):
            return False
        bits = self._bits
        return all(bits[p >> 3] & (1 << (p & 7)) for p in self._positions(item))

    def forget_oldest(self, kept: dict[str, Any], keep: int) -> list[str]:
        """Drop the first-inserted entries of ``kept`` beyond ``keep`` and remember their keys here
        (never taken again); returns the keys dropped, oldest first."""
        gone = []
        while len(kept) > keep:
            key = next(iter(kept))
            del kept[key]
            self.add(key)
            gone.append(key)
        return gone
