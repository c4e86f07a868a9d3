"""What the coordinator's secure-sum machines and their driver say to each other (h11's ``_events.py``).

A machine (:mod:`privfed.common.secagg.transitions`) returns :class:`Action` s: :class:`Ask` a batch of
owners, :class:`OpenRing` / :class:`CloseRing` a relay session; the driver answers each :class:`Ask`
with :class:`Answers`. A finished sum hands back its :class:`SumOutcome`. All frozen: what the
machine emits is what the driver acts on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from privfed.common.tasks import Payload, PeerKey, Refusal, TaskSpec


@dataclass(frozen=True, slots=True)
class Ask:
    """Send ``specs`` (owner -> task) as one batch, wait up to ``timeout`` s, feed back :class:`Answers`.
    ``stalls`` names the open ring session whose stall ends the wait early (the leader's task)."""

    specs: Mapping[str, TaskSpec]
    timeout: float
    stalls: str | None = None


@dataclass(frozen=True, slots=True)
class OpenRing:
    """Relay sealed envelopes among ``members`` under ``session_id`` until :class:`CloseRing`."""

    session_id: str
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CloseRing:
    session_id: str


Action = Ask | OpenRing | CloseRing


@dataclass(frozen=True, slots=True)
class RingAttempt:
    """One try of a ring secure sum: a fresh session id over the parties still in the ring."""

    number: int  # 1-based
    session_id: str
    ring: tuple[str, ...]
    timeout: float

    @property
    def leader(self) -> str:
        return self.ring[0]

    @property
    def members(self) -> tuple[str, ...]:
        """The parties asked first (everyone but the leader)."""
        return self.ring[1:]


@dataclass(frozen=True, slots=True)
class Answers:
    """What came back for the last :class:`Ask`: owner -> payload (an owner missing did not answer in
    time), the owners whose node is known silent, and the senders of the ``HOP`` envelopes the relay
    passed in the attempt's session (None: unknown, nobody can be blamed for a stall), and the ``(complainer,
    accused)`` complaints the relay heard in it (audit 33, A33-2: what the accused sealed did not open)."""

    payloads: Mapping[str, Payload]
    silent: frozenset[str] = frozenset()
    hop_senders: frozenset[str] | None = None
    complaints: frozenset[tuple[str, str]] = frozenset()

    def refused(self) -> dict[str, str]:
        return {o: p.code for o, p in self.payloads.items() if isinstance(p, Refusal)}


@dataclass(frozen=True)
class SumOutcome:
    """A finished secure sum: ``totals`` over the parties ``summed``, its attempts, and the parties
    dropped (ring order) and refusing (party -> code) on the way."""

    protocol: str
    totals: np.ndarray
    summed: tuple[str, ...]
    attempts: int
    dropped: tuple[str, ...]
    refused: Mapping[str, str]


PeerKeys = Callable[[str], PeerKey]
