"""Messages of the pairwise-mask secure sum (:mod:`privfed.common.secagg.pairwise`), owner <-> coordinator.

Frozen dataclasses, validated when built (h11 ``_events.py``): a malformed one is the peer's fault
(:class:`RemoteProtocolError`). Owner-to-owner content (shares) is always a :class:`SealedShare`,
sealed end-to-end with the :class:`~privfed.common.secagg.boxes.Box` of its two owners and the
AAD ``(run id, sender, recipient, kind, round)``, so the coordinator that forwards it can neither
read it nor move it to another owner, kind or round.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privfed.common.errors import RemoteProtocolError
from privfed.common.secagg.shamir import SHARE_BYTES
from privfed.common.secagg.sizes import SEAL_OVERHEAD, X25519_PUBLIC_BYTES

#: AAD kind of sealed shares.
KEY_SHARES = "secagg-key-shares"
#: Largest vector a secure sum carries.
MAX_VALUES = 1 << 20
#: Most secure sums (rounds) one key agreement serves.
MAX_ROUNDS = 1024


@dataclass(frozen=True, slots=True)
class KeyAdvert:
    """Step 0: an owner's mask public key ``s_u^PK`` and its node's signature over (owner, run, key)."""

    owner_id: str
    public_key: bytes
    signature: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.public_key, bytes) or len(self.public_key) != X25519_PUBLIC_BYTES:
            raise RemoteProtocolError(f"a mask key is {X25519_PUBLIC_BYTES} bytes, got {self.public_key!r:.40}")


@dataclass(frozen=True, slots=True)
class SealedShare:
    """Shamir shares sealed from ``sender`` to ``recipient``: of the sender's mask key, then of its
    self-mask seed of each round of the run (``(1 + rounds)`` field elements)."""

    sender: str
    recipient: str
    ciphertext: bytes

    def __post_init__(self) -> None:
        body = len(self.ciphertext) - SEAL_OVERHEAD if isinstance(self.ciphertext, bytes) else -1
        if body < 2 * SHARE_BYTES or body % SHARE_BYTES or body > (1 + MAX_ROUNDS) * SHARE_BYTES:
            raise RemoteProtocolError(
                f"sealed shares are {SEAL_OVERHEAD} + (1 + rounds) * {SHARE_BYTES} bytes, rounds in "
                f"[1, {MAX_ROUNDS}]; got {body + SEAL_OVERHEAD}"
            )


@dataclass(frozen=True, slots=True)
class ShareKeysRequest:
    """Step 1, coordinator → owner: the run's members (sorted), the owner's neighbours' adverts and
    the number of secure sums (rounds) the key agreement serves."""

    members: tuple[str, ...]
    adverts: tuple[KeyAdvert, ...]
    rounds: int

    def __post_init__(self) -> None:
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or not 1 <= self.rounds <= MAX_ROUNDS:
            raise RemoteProtocolError(f"rounds must be an int in [1, {MAX_ROUNDS}], got {self.rounds!r}")


@dataclass(frozen=True, slots=True)
class KeyShares:
    """Step 1, owner → coordinator: shares of ``s_u^SK`` and of the rounds' ``b_u^r``, sealed to each neighbour."""

    owner_id: str
    shares: tuple[SealedShare, ...]


@dataclass(frozen=True, slots=True)
class InputRequest:
    """Step 2, coordinator → owner: round number, the owner's participating neighbours, and (first
    round) the key shares its neighbours sealed to it in step 1."""

    round: int
    participants: tuple[str, ...]
    key_shares: tuple[SealedShare, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.round, bool) or not isinstance(self.round, int) or not 0 <= self.round < MAX_ROUNDS:
            raise RemoteProtocolError(f"round must be an int in [0, {MAX_ROUNDS}), got {self.round!r}")


@dataclass(frozen=True, slots=True)
class MaskedInput:
    """Step 2, owner → coordinator: ``y_u`` in Z_2^64."""

    owner_id: str
    round: int
    masked: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.masked, np.ndarray) or self.masked.dtype != np.uint64 or self.masked.ndim != 1:
            raise RemoteProtocolError("a masked input is a 1-D uint64 array")
        if not 1 <= self.masked.shape[0] <= MAX_VALUES:
            raise RemoteProtocolError(f"a masked input has 1..{MAX_VALUES} values, got {self.masked.shape[0]}")


@dataclass(frozen=True, slots=True)
class UnmaskRequest:
    """Step 3, coordinator → owner: which of its participating neighbours survived and which dropped."""

    round: int
    survivors: tuple[str, ...]
    dropped: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UnmaskReply:
    """Step 3, owner → coordinator: plaintext shares, ``{neighbour: share}``, of the survivors'
    ``b_v^r`` and the dropped owners' ``s_v^SK``."""

    owner_id: str
    round: int
    self_shares: dict[str, bytes]
    key_shares: dict[str, bytes]
