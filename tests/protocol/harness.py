"""In-memory wiring of N ring secure-sum machines through an untrusted relay.

In the style of h11's ``tests/helpers.py`` ``ConnectionPair``: every :class:`Outbound` a
machine emits is serialised, checked to parse back to exactly the same fields (what one side
sends is what the other receives), handed to the :class:`Relay` as opaque bytes and delivered
in FIFO order. The relay plays the coordinator: it sees only envelopes (plaintext routing
header + AES-GCM ciphertext), records them, and can be told to drop, hold (for reordering),
tamper with or duplicate matching messages, or have old messages injected (replay).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Mapping

import numpy as np

from privfed.common.errors import ProtocolError, RemoteProtocolError
from privfed.common.secagg.ring import Inbound, MessageKind, Outbound, RingParty, State

Predicate = Callable[[Inbound], bool]
Action = Callable[[bytes], list[bytes]]


def header(wire: bytes) -> Inbound:
    """What the relay can read of a message: the routing header (the ciphertext is opaque)."""
    return Inbound.from_bytes(wire)


def rewrite(wire: bytes, **fields) -> bytes:
    """``wire`` with header fields (or the ciphertext) replaced: a relay forging a header."""
    return dataclasses.replace(header(wire), **fields).to_bytes()


def flip_byte(wire: bytes, offset_from_end: int) -> bytes:
    """Flip one bit of the byte ``offset_from_end`` bytes before the end (inside the ciphertext)."""
    data = bytearray(wire)
    data[len(data) - offset_from_end] ^= 0x01
    return bytes(data)


def match(
    *, sender: str | None = None, recipient: str | None = None, kind: MessageKind | None = None, seq: int | None = None
) -> Predicate:
    """A predicate on the header; ``None`` fields match anything."""

    def predicate(msg: Inbound) -> bool:
        return all(
            want is None or getattr(msg, name) == want
            for name, want in (("sender", sender), ("recipient", recipient), ("kind", kind), ("seq", seq))
        )

    return predicate


class Relay:
    """An untrusted relay: records every envelope and applies the first matching rule.

    A rule is ``(predicate, action)``; ``action(wire)`` returns the envelopes to deliver now
    (``[]`` drops, ``[wire, wire]`` duplicates, ``[tampered]`` forges). Unmatched messages pass
    through unchanged.
    """

    def __init__(self) -> None:
        self.recorded: list[bytes] = []
        self.held: list[bytes] = []
        self._rules: list[tuple[Predicate, Action, list[int]]] = []

    def on(self, predicate: Predicate, action: Action, *, times: int | None = None) -> Relay:
        """Apply ``action`` to matching messages (at most ``times`` times, default always)."""
        self._rules.append((predicate, action, [-1 if times is None else times]))
        return self

    def drop(self, predicate: Predicate) -> Relay:
        return self.on(predicate, lambda wire: [])

    def hold(self, predicate: Predicate) -> Relay:
        """Keep matching messages back until :meth:`RingNetwork.release` (to reorder them)."""

        def keep(wire: bytes) -> list[bytes]:
            self.held.append(wire)
            return []

        return self.on(predicate, keep)

    def tamper(self, predicate: Predicate, forge: Callable[[bytes], bytes], *, times: int | None = 1) -> Relay:
        return self.on(predicate, lambda wire: [forge(wire)], times=times)

    def duplicate(self, predicate: Predicate) -> Relay:
        return self.on(predicate, lambda wire: [wire, wire], times=1)

    def route(self, wire: bytes) -> list[bytes]:
        self.recorded.append(wire)
        msg = header(wire)
        for predicate, action, budget in self._rules:
            if budget[0] != 0 and predicate(msg):
                budget[0] -= 1
                return action(wire)
        return [wire]

    def hop_senders(self, session_id: str) -> list[str]:
        """Senders of the HOP envelopes seen in ``session_id`` (input to ``stalled_party``)."""
        return [
            m.sender for m in map(header, self.recorded) if m.session_id == session_id and m.kind is MessageKind.HOP
        ]


class RingNetwork:
    """``parties`` wired through ``relay``; run with :meth:`start` and :meth:`run`.

    Protocol errors raised by a machine are collected in :attr:`errors` (per recipient), not
    raised, so a test can assert who failed and why. Messages for a machine that has already
    failed are not delivered (a real driver abandons a failed session) but are counted in
    :attr:`undelivered`.
    """

    def __init__(self, parties: Mapping[str, RingParty], relay: Relay | None = None) -> None:
        self.parties = dict(parties)
        self.relay = Relay() if relay is None else relay
        self.in_flight: deque[bytes] = deque()
        self.errors: dict[str, list[ProtocolError]] = {p: [] for p in self.parties}
        self.undelivered: list[bytes] = []

    def send(self, outbound: list[Outbound]) -> None:
        for out in outbound:
            assert isinstance(out, Outbound)
            wire = out.to_bytes()
            assert dataclasses.astuple(Inbound.from_bytes(wire)) == dataclasses.astuple(out)
            assert Outbound.from_bytes(wire) == out
            self.in_flight.append(wire)

    def start(self, values_by_party: Mapping[str, np.ndarray]) -> RingNetwork:
        for party_id, values in values_by_party.items():
            self.send(self.parties[party_id].start(values))
        return self

    def inject(self, wire: bytes) -> None:
        """The relay delivers ``wire`` (e.g. a recorded or forged envelope) right now."""
        self._deliver(wire)

    def release(self, reverse: bool = True) -> None:
        """Deliver held messages, by default in the reverse of the order they arrived."""
        held, self.relay.held = self.relay.held, []
        for wire in reversed(held) if reverse else held:
            self._deliver(wire)

    def run(self) -> RingNetwork:
        """Route until nothing is in flight."""
        while self.in_flight:
            for wire in self.relay.route(self.in_flight.popleft()):
                self._deliver(wire)
        return self

    def _deliver(self, wire: bytes) -> None:
        msg = Inbound.from_bytes(wire)
        party = self.parties.get(msg.recipient)
        if party is None or party.state is State.FAILED:
            self.undelivered.append(wire)
            return
        try:
            self.send(party.on_message(msg))
        except RemoteProtocolError as exc:
            self.errors[msg.recipient].append(exc)

    def timeout(self) -> None:
        """The session deadline passes for everybody."""
        for party in self.parties.values():
            assert party.on_timeout() == []

    def states(self) -> dict[str, State]:
        return {p: m.state for p, m in self.parties.items()}

    def failed(self) -> set[str]:
        return {p for p, m in self.parties.items() if m.state is State.FAILED}

    def results(self) -> dict[str, np.ndarray | None]:
        return {p: m.result() for p, m in self.parties.items()}


__all__ = ["Relay", "RingNetwork", "flip_byte", "header", "match", "rewrite"]
