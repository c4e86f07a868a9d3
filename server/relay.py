"""The coordinator's relay rules for sealed owner-to-owner envelopes (contract 5), written once.

The coordinator relays ring envelopes it cannot read. :class:`Relay` decides which it accepts and
keeps what a secure sum's driver needs to know: an envelope is accepted only inside an open session
(:meth:`Relay.open`), from a sender hosted by the calling node, to its own header's recipient, both
members of the session; and only while the queues stay within :data:`MAX_QUEUED_ENVELOPES_PER_OWNER`,
:data:`MAX_QUEUED_BYTES_PER_OWNER` and :data:`MAX_QUEUED_BYTES`. It records the senders of the
``HOP`` envelopes of each open session (which party stalled a ring, :meth:`Relay.stalled`).

A ``COMPLAINT`` (audit 33, A33-2; :func:`privfed.common.secagg.ring.complaint`) is a member's word that the envelope
its header's recipient sealed to it did not open. It is accepted by the same rules (its sender hosted by the calling
node, both ends members) but never queued for delivery (:attr:`Envelope.accused`); it is recorded
(:meth:`Relay.complaints`) only if an envelope from the accused to the complainer was relayed in the session, and a
session with a complaint cannot close (:meth:`Relay.stalled`): the leader's wait ends there, and the coordinator
drops both ends of the hop. An older coordinator refuses the kind (not a ring envelope), and its node drops the
complaint: the ring then stalls as before.

The dispatcher (``privfed.server.dispatcher``, under its lock, queueing envelopes for nodes to pull)
and the in-process transport (``privfed.deploy.inprocess``, delivering them at once) both use it.
No locks, sockets or clocks here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from privfed.common.errors import ConfigError, RemoteProtocolError, ResourceExhausted, RingClosed
from privfed.common.secagg import ring as securesum

#: At most this many relayed envelopes wait for one recipient (a ring sends an owner about two
#: per session; the rest is a node flooding a peer that does not poll).
MAX_QUEUED_ENVELOPES_PER_OWNER = 64
#: At most this many relayed bytes wait for one recipient: two of the largest ring envelopes
#: (``securesum.MAX_MESSAGE_BYTES``, 8 MiB of ring values) fit, a flood does not.
MAX_QUEUED_BYTES_PER_OWNER = 2 * securesum.MAX_MESSAGE_BYTES
#: At most this many relayed bytes wait in the coordinator in all: memory stays bounded however
#: many owners the rings hold.
MAX_QUEUED_BYTES = 256 * 1024 * 1024

#: Who hosts an owner: its node id, or None for an owner no node registers.
HostOf = Callable[[str], str | None]


@dataclass(frozen=True)
class Envelope:
    """One accepted envelope: its session, its recipient, its size, the sender of a ``HOP`` (else ""), and for a
    ``COMPLAINT`` (never delivered) the owner it names (else "")."""

    session_id: str
    recipient: str
    size: int
    hop_from: str = ""
    accused: str = ""
    sender: str = ""


class Relay:
    """Open sessions, their ``HOP`` senders, and the envelopes waiting per recipient (module docstring)."""

    def __init__(self) -> None:
        self._rings: dict[str, frozenset[str]] = {}  # open session -> member owner ids
        self._hop_senders: dict[str, set[str]] = {}  # open session -> senders of HOPs relayed in it
        self._relayed: dict[str, set[tuple[str, str]]] = {}  # open session -> (sender, recipient) relayed in it
        self._complaints: dict[str, set[tuple[str, str]]] = {}  # open session -> (complainer, accused) heard
        self._waiting: dict[str, Envelope] = {}  # key (a relay task id) -> the envelope it holds
        self._load: dict[str, tuple[int, int]] = {}  # recipient -> (envelopes, bytes) waiting
        self._bytes = 0

    # ------------------------------------------------------------------ sessions
    def open(self, session_id: str, members: Sequence[str]) -> None:
        """Allow relaying among ``members`` under ``session_id`` until :meth:`close`. Opening an open
        session again with the same members does nothing; with other members it raises
        :class:`ConfigError` (a re-formed ring gets a fresh session id)."""
        ring = frozenset(members)
        if not session_id or len(ring) != len(members) or len(ring) < 2:
            raise ConfigError(
                f"a ring session needs a non-empty id and at least 2 distinct members, got "
                f"{session_id!r} with {len(members)} member(s), {len(ring)} distinct"
            )
        held = self._rings.get(session_id)
        if held is not None and held != ring:
            raise ConfigError(
                f"ring session {session_id!r} is already open with other members; "
                "use a new session id (securesum.new_session_id) for a re-formed ring"
            )
        self._rings[session_id] = ring
        self._hop_senders.setdefault(session_id, set())
        self._relayed.setdefault(session_id, set())
        self._complaints.setdefault(session_id, set())

    def close(self, session_id: str) -> set[str]:
        """Refuse further envelopes of ``session_id``; returns the keys of its envelopes still waiting
        (the caller drops them from its queues and :meth:`release` s them). Closing a session that is not
        open does nothing."""
        self._hop_senders.pop(session_id, None)
        self._relayed.pop(session_id, None)
        self._complaints.pop(session_id, None)
        if self._rings.pop(session_id, None) is None:
            return set()
        return {key for key, env in self._waiting.items() if env.session_id == session_id}

    def is_open(self, session_id: str) -> bool:
        return session_id in self._rings

    def open_sessions(self) -> list[str]:
        return list(self._rings)

    def hop_senders(self, session_id: str) -> set[str]:
        """Senders of the ``HOP`` envelopes relayed in the open session ``session_id`` (empty if it is
        not open): the input of :func:`~privfed.common.secagg.ring_topology.stalled_party`."""
        return set(self._hop_senders.get(session_id, ()))

    def complaints(self, session_id: str) -> set[tuple[str, str]]:
        """``(complainer, accused)`` of the complaints heard in the open session ``session_id`` (module docstring):
        the input of :func:`~privfed.common.secagg.ring_topology.complained_hops`."""
        return set(self._complaints.get(session_id, ()))

    def members(self, session_id: str) -> frozenset[str]:
        """The member owner ids of the open session ``session_id`` (empty if it is not open)."""
        return self._rings.get(session_id, frozenset())

    def stalled(self, session_id: str, gone: Callable[[str], bool]) -> bool:
        """Whether the open session's ring cannot close: a member that is ``gone`` (its node silent or
        unregistered) has not passed the sum on (no ``HOP`` from it was relayed). A leader's wait can
        end then instead of sitting out the attempt's timeout. So can it once a member complained (A33-2)."""
        members = self._rings.get(session_id)
        if not members:
            return False
        if self._complaints.get(session_id):
            return True
        passed = self._hop_senders.get(session_id, set())
        return any(gone(m) and m not in passed for m in members)

    # ------------------------------------------------------------------ envelopes
    def accept(self, node_id: str, envelopes: Sequence[tuple[str, bytes]], host_of: HostOf) -> list[Envelope]:
        """Check a node's ``(recipient, sealed bytes)`` envelopes; all or none are accepted.

        Each plaintext header (:meth:`securesum.Inbound.from_bytes`) must name an open session, a
        sender ``host_of`` says ``node_id`` hosts and the envelope's own recipient, both members of
        the session, and the recipient must be hosted; the queues must have room for all of them
        (counting what already waits). Records the ``HOP`` senders of what it accepts, and its complaints
        about an envelope relayed to their sender (module docstring); a complaint is not to be queued.

        Raises
        ------
        RingClosed
            A session that is not open.
        RemoteProtocolError
            Any other broken rule.
        ResourceExhausted
            The queues would pass their bounds (retry later).
        """
        accepted = [self._check(node_id, recipient, data, host_of) for recipient, data in envelopes]
        self._check_room(accepted)
        for env in accepted:
            if env.hop_from:
                self._hop_senders[env.session_id].add(env.hop_from)
            if not env.accused:
                self._relayed[env.session_id].add((env.sender, env.recipient))
            elif (env.accused, env.sender) in self._relayed[env.session_id]:
                self._complaints[env.session_id].add((env.sender, env.accused))
        return accepted

    def _check(self, node_id: str, recipient: str, data: bytes, host_of: HostOf) -> Envelope:
        header = securesum.Inbound.from_bytes(data)  # RemoteProtocolError if it is not a ring envelope
        members = self._rings.get(header.session_id)
        if members is None:
            raise RingClosed(
                f"relay for ring session {header.session_id!r:.80}, which is not open (never opened, "
                "or closed: its ring finished, timed out or was re-formed)"
            )
        if host_of(header.sender) != node_id:
            raise RemoteProtocolError(
                f"node {node_id!r} relayed an envelope from owner {header.sender!r:.80}, which it does not host"
            )
        if header.recipient != recipient:
            raise RemoteProtocolError(
                f"envelope addressed to {recipient!r:.80} has header recipient {header.recipient!r:.80}"
            )
        if header.sender not in members or recipient not in members:
            raise RemoteProtocolError(
                f"relay from {header.sender!r:.80} to {recipient!r:.80}: both must be members "
                f"of ring session {header.session_id!r:.80}"
            )
        if host_of(recipient) is None:
            raise RemoteProtocolError(f"relay to unknown owner {recipient!r:.80}")
        hop_from = header.sender if header.kind is securesum.MessageKind.HOP else ""
        accused = recipient if header.kind is securesum.MessageKind.COMPLAINT else ""
        return Envelope(header.session_id, recipient, len(data), hop_from, accused, header.sender)

    def _check_room(self, batch: Iterable[Envelope]) -> None:
        batch = list(batch)
        added: dict[str, tuple[int, int]] = {}
        for env in batch:
            count, size = added.get(env.recipient, self._load.get(env.recipient, (0, 0)))
            added[env.recipient] = (count + 1, size + env.size)
        for recipient, (count, size) in added.items():
            if count > MAX_QUEUED_ENVELOPES_PER_OWNER or size > MAX_QUEUED_BYTES_PER_OWNER:
                raise ResourceExhausted(
                    f"owner {recipient!r} would have {count} envelope(s), {size} bytes waiting; at most "
                    f"MAX_QUEUED_ENVELOPES_PER_OWNER = {MAX_QUEUED_ENVELOPES_PER_OWNER} and "
                    f"MAX_QUEUED_BYTES_PER_OWNER = {MAX_QUEUED_BYTES_PER_OWNER} may wait for its node to poll; retry later"
                )
        total = self._bytes + sum(env.size for env in batch)
        if total > MAX_QUEUED_BYTES:
            raise ResourceExhausted(
                f"relay queues would hold {total} bytes, more than MAX_QUEUED_BYTES = {MAX_QUEUED_BYTES}; retry later"
            )

    def book(self, key: str, envelope: Envelope) -> None:
        """Count an envelope entering a queue (under ``key``, its relay task id) against its recipient's limits."""
        self._waiting[key] = envelope
        count, size = self._load.get(envelope.recipient, (0, 0))
        self._load[envelope.recipient] = (count + 1, size + envelope.size)
        self._bytes += envelope.size

    def release(self, keys: Iterable[str]) -> None:
        """Forget envelopes leaving the queues (delivered or dropped); unknown keys are ignored."""
        for key in keys:
            env = self._waiting.pop(key, None)
            if env is None:
                continue
            count, size = self._load[env.recipient]
            if count == 1:
                del self._load[env.recipient]
            else:
                self._load[env.recipient] = (count - 1, size - env.size)
            self._bytes -= env.size

    def waiting(self) -> tuple[int, int]:
        """(envelopes, bytes) waiting in the queues."""
        return len(self._waiting), self._bytes
