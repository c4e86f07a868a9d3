"""Task kinds of the secure sums' steps (SPEC §11): a ring hop, and the key agreement and unmasking of
the pairwise-mask secure aggregation (:mod:`privfed.common.secagg.pairwise`).

A step reads no row and releases nothing of its own (no ledger entry): the value a secure sum adds
up is an evaluation release (:class:`~privfed.common.tasks.boosting.BoostEvaluateTask`), debited
before its first message. A ring hop is a sealed envelope the coordinator relays and gets no answer
of its own (the leader's total answers its evaluate task). A step's reply is checked by the secure
sum's own state machine (:mod:`privfed.common.secagg.aggregator`, the ring session), which refuses
a reply that does not move it; its contract here checks only that it is one of the step's replies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from privfed.common.secagg.messages import KeyAdvert, KeyShares, ShareKeysRequest, UnmaskReply, UnmaskRequest
from privfed.common.tasks.base import Kind, LedgerEntries, Payload, TaskSpec
from privfed.common.tasks.contract import PublicLimits


@dataclass(frozen=True)
class PeerKey:
    """A peer's end-to-end key as its node registered it: signed alone (``key_tree_size`` 0), or a
    leaf of its node's signed key tree with its inclusion path
    (:func:`~privfed.common.secagg.signed_keys.sign_key_tree`)."""

    owner_id: str
    node_id: str
    x25519_public_key: bytes
    key_signature: bytes
    key_index: int = 0
    key_tree_size: int = 0
    key_path: bytes = b""


@dataclass(frozen=True, eq=False)
class RingSpec:
    """One ring secure sum: the order, the fixed-point encoding and the keys this party needs."""

    session_id: str
    ring: tuple[str, ...]
    frac_bits: int
    n_parties: int
    max_abs: float
    peers: tuple[PeerKey, ...]
    certificates: dict[str, bytes]  # node_id -> PEM bytes


@dataclass(frozen=True)
class RingJoined:
    """A ring member's answer to its evaluate task: it passed its masked value on."""

    session_id: str


@dataclass(frozen=True)
class RingTotal:
    """The ring leader's answer to its evaluate task: the aggregate, never one owner's value."""

    session_id: str
    values: np.ndarray


def checked_by_the_sum(spec: TaskSpec, payload: Payload, limits: PublicLimits) -> None:
    """A step's reply: checked by the secure sum's state machine (module docstring), not here."""


@dataclass(frozen=True)
class RingMessageTask:
    """An opaque sealed ring envelope for this owner, relayed by the coordinator."""

    data: bytes

    def ledger_entries(self) -> LedgerEntries:
        return []


RING_MESSAGE = Kind("ring_message", RingMessageTask, (), checked_by_the_sum)


@dataclass(frozen=True, eq=False)
class SecAggKeysTask:
    """The key agreement of a pairwise-mask secure sum (:mod:`privfed.common.secagg.pairwise`).

    ``request`` None: step 0, draw and sign the session's mask key (the reply is a
    :class:`KeyAdvert`). Otherwise step 1 (the reply is :class:`KeyShares`), with the neighbours'
    long-lived box keys (``peers``) and, in the first task of a node per session, the owner
    nodes' certificates (as :class:`RingSpec` carries them). Not a release: no ledger entry.
    """

    session_id: str
    frac_bits: int
    n_parties: int
    max_abs: float
    request: ShareKeysRequest | None = None
    peers: tuple[PeerKey, ...] = ()
    certificates: dict[str, bytes] = field(default_factory=dict)

    def ledger_entries(self) -> LedgerEntries:
        return []


SECAGG_KEYS = Kind("secagg_keys", SecAggKeysTask, (KeyAdvert, KeyShares), checked_by_the_sum)


@dataclass(frozen=True, eq=False)
class SecAggUnmaskTask:
    """Step 3 of a pairwise-mask secure sum round: the shares the coordinator needs to unmask the
    sum (never one owner's input; the machine refuses requests that would reveal one)."""

    session_id: str
    request: UnmaskRequest

    def ledger_entries(self) -> LedgerEntries:
        return []


SECAGG_UNMASK = Kind("secagg_unmask", SecAggUnmaskTask, (UnmaskReply,), checked_by_the_sum)
