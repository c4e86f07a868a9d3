"""Ring-masked secure sum as a sans-I/O state machine (SPEC §11.2; seed paper 002 §3.3; STYLE rule 8).

Parties ``P_1..P_N`` (``ring``, in order) each hold a vector ``x_i`` of ``m`` reals, encoded
as ``e_i = enc(x_i)`` in Z_2^64 (:mod:`privfed.common.secagg.fixedpoint`). The leader ``P_1`` draws
``R`` uniform in Z_2^64^m from :mod:`secrets` and sends ``R + e_1`` to ``P_2``; each ``P_i``
adds ``e_i`` and passes the vector on; ``P_N`` sends it back to ``P_1``, which subtracts ``R``
and decodes ``Σ x_i``. Every hop value is ``R`` plus something independent of ``R``, hence
uniform on the ring whatever the inputs (one-time pad). Two colluding neighbours of ``P_i``
learn ``e_i``; no mask or dropout recovery is attempted (SPEC §11.2) — a party that does not
answer makes every machine time out, and the coordinator's machine
(:class:`privfed.common.secagg.transitions.SecureSum`, with :func:`~privfed.common.secagg.ring_topology.reform_ring` and
:func:`~privfed.common.secagg.ring_topology.stalled_party`) re-forms the ring without it under a fresh session id (:func:`new_session_id`).

This is the SPEC's variant (one mask, drawn by the leader). The seed paper's variant, where
every party adds and later removes its own mask, needs a second lap and gives nothing more
against an honest-but-curious relay.

**Announcing the total.** After the return hop the leader sends ``RESULT`` (the encoded total,
exact in Z_2^64) directly to every other party, as the seed paper's "distributes to all
other data owners"; so every machine ends ``DONE`` with the same :meth:`RingParty.result`.
The leader's result is available as soon as the return hop arrives; reporting it to the
coordinator (which learns only the aggregate) is the driver's job.

Every message travels as an :class:`Outbound` / :class:`Inbound` envelope whose plaintext
header (session, sender, recipient, kind, seq) lets an untrusted relay route it, and whose
ciphertext is sealed with the :class:`~privfed.common.secagg.boxes.Box` of (sender, recipient) with that
header as associated data. ``seq`` is the sender's 1-based ring position for ``HOP`` and
``N + 1`` for ``RESULT``, so each message has exactly one valid slot per session: misrouted,
tampered, replayed, reordered or cross-session messages fail the header check or
authentication, raise :class:`RemoteProtocolError` and leave the recipient ``FAILED``.

**Complaints (audit 33, A33-2).** A party whose expected message (the one sender, kind and seq valid in its
state) does not authenticate, or has the wrong size, fails as before and also asks its driver to send a
``COMPLAINT`` (:func:`complaint`, :meth:`RingParty.take_complaint`): a header-only envelope from the party to that
message's sender (recipient), its seq, and no ciphertext. It is a function of the failed message's header alone:
nothing of any owner's data, and the same whatever the input. The relay (``privfed.server.relay``) does not deliver
it; it records it if it relayed an envelope from the accused to the complainer in the session, and the coordinator
drops both ends of that hop (:func:`~privfed.common.secagg.ring_topology.complained_hops`): it cannot tell which of
the two lied, so a hostile sealer takes at most its one recipient with it, and a false complainer loses its own
place. Before, the recipient only logged and sent nothing, so the stall was blamed on it and the sealer framed each
honest successor in turn. A message that breaks the header rules (another sender, kind or seq) makes no complaint:
a node that sent a hop twice (a relay call retried) must not get its honest sender dropped.

Driver contract: call :meth:`~RingParty.start` on every local party before delivering
messages to it; deliver each :class:`Inbound` with :meth:`~RingParty.on_message`; send what
either returns; call :meth:`~RingParty.on_timeout` when the session deadline passes. A ring
needs ``N ≥ 2`` (with one party the "sum" is its own input; refusing makes a driver that has
re-formed down to one party stop rather than publish an individual value).

**What the ring does not do.** It hides each input from an honest-but-curious relay; it does
not protect an input from whoever chooses the ring. A coordinator that forms the rings
``[A, B]``, ``[A, C]``, ``[B, C]`` reads ``A``'s input as ``(ab + ac - bc) / 2`` (issue 9, item
1), and ``N ≥ 2`` does not prevent it. So an input must already be a private release when it
enters: in boosting each owner's ``(err_sum, w_sum)`` is clipped, Laplace-noised and debited at
the owner before its party starts (:class:`privfed.common.mechanisms.laplace.ErrorPairLaplace`;
``privfed.owner.kinds.boosting``), and the ring only keeps the individual noisy values from
the relay.
"""

from __future__ import annotations

import enum
import secrets
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Self

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.errors import ConfigError, LocalProtocolError, ProtocolError, RemoteProtocolError
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.ring_topology import check_id, check_ring, ring_peers
from privfed.common.secagg.sizes import MAX_ID_BYTES, SEAL_OVERHEAD

if TYPE_CHECKING:
    from privfed.common.secagg.boxes import AadFields, Box

#: Largest vector length ``m`` a ring session carries (8 MiB of ring values per message).
MAX_VALUES = 1 << 20
_MAGIC = b"PFRS\x01"
_HEAD = struct.Struct(">5sBI")  # magic+version, kind code, seq
_LEN16, _LEN32 = struct.Struct(">H"), struct.Struct(">I")
#: Upper bound on an envelope's wire size; a transport should allow at least this much.
MAX_MESSAGE_BYTES = _HEAD.size + 3 * (2 + MAX_ID_BYTES) + 4 + SEAL_OVERHEAD + 8 * MAX_VALUES


class MessageKind(enum.Enum):
    """Message kinds; the value is the string bound into the AES-GCM associated data."""

    HOP = "hop"
    RESULT = "result"
    COMPLAINT = "complaint"  # to the relay only: the message from its recipient did not open (A33-2)


_KIND_CODE = {MessageKind.HOP: 1, MessageKind.RESULT: 2, MessageKind.COMPLAINT: 3}
_CODE_KIND = {code: kind for kind, code in _KIND_CODE.items()}


class State(enum.Enum):
    IDLE = "idle"  # built, start() not called yet
    AWAIT_HOP = "await_hop"  # member: waiting for the predecessor's hop
    AWAIT_RETURN = "await_return"  # leader: waiting for P_N's hop
    AWAIT_RESULT = "await_result"  # member: forwarded, waiting for the leader's RESULT
    DONE = "done"  # terminal: result() holds the total
    FAILED = "failed"  # terminal: failure_reason says why


class Role(enum.Enum):
    LEADER = "leader"
    MEMBER = "member"


class _Start(enum.Enum):
    START = "start"


#: Everything that moves a machine: ``{role: {state: {event: next_state}}}`` (h11 ``_state.py``).
#: Any inbound message whose kind is not listed for the current state is a protocol violation
#: (→ FAILED); on_timeout moves every non-terminal state to FAILED.
TRANSITIONS: dict[Role, dict[State, dict[object, State]]] = {
    Role.LEADER: {
        State.IDLE: {_Start.START: State.AWAIT_RETURN},
        State.AWAIT_RETURN: {MessageKind.HOP: State.DONE},
    },
    Role.MEMBER: {
        State.IDLE: {_Start.START: State.AWAIT_HOP},
        State.AWAIT_HOP: {MessageKind.HOP: State.AWAIT_RESULT},
        State.AWAIT_RESULT: {MessageKind.RESULT: State.DONE},
    },
}
_TERMINAL = (State.DONE, State.FAILED)


@dataclass(frozen=True, slots=True)
class _Envelope:
    """A routed, sealed message. The header is plaintext for the relay and authenticated as AAD."""

    session_id: str
    sender: str
    recipient: str
    kind: MessageKind
    seq: int
    ciphertext: bytes

    _error: ClassVar[type[ProtocolError]] = LocalProtocolError

    def __post_init__(self) -> None:
        for name in ("session_id", "sender", "recipient"):
            check_id(name, getattr(self, name), self._error)
        if not isinstance(self.kind, MessageKind):
            raise self._error(f"kind must be a MessageKind, got {self.kind!r}")
        if isinstance(self.seq, bool) or not isinstance(self.seq, int) or not 0 <= self.seq < 2**32:
            raise self._error(f"seq must be an int in [0, 2^32), got {self.seq!r}")
        if not isinstance(self.ciphertext, bytes) or len(self.ciphertext) > MAX_MESSAGE_BYTES:
            raise self._error(
                f"ciphertext must be bytes of at most {MAX_MESSAGE_BYTES}, got {type(self.ciphertext).__name__}"
            )

    def aad(self) -> AadFields:
        from privfed.common.secagg.boxes import AadFields  # here: the relay reads headers without the ciphers

        return AadFields(self.session_id, self.sender, self.recipient, self.kind.value, self.seq)

    def to_bytes(self) -> bytes:
        """``magic ‖ kind ‖ seq ‖ lp(session) ‖ lp(sender) ‖ lp(recipient) ‖ len ‖ ciphertext``."""
        ids = b"".join(
            _LEN16.pack(len(raw)) + raw
            for raw in (s.encode("utf-8") for s in (self.session_id, self.sender, self.recipient))
        )
        return (
            _HEAD.pack(_MAGIC, _KIND_CODE[self.kind], self.seq)
            + ids
            + _LEN32.pack(len(self.ciphertext))
            + self.ciphertext
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        """Parse :meth:`to_bytes` output, refusing anything oversized, truncated or with trailing bytes."""
        err = cls._error
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise err(f"envelope must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) > MAX_MESSAGE_BYTES:
            raise err(f"envelope of {len(data)} bytes exceeds MAX_MESSAGE_BYTES = {MAX_MESSAGE_BYTES}")
        try:
            magic, code, seq = _HEAD.unpack_from(data, 0)
            pos, fields = _HEAD.size, []
            for _ in range(3):
                (n,) = _LEN16.unpack_from(data, pos)
                fields.append(data[pos + 2 : pos + 2 + n].decode("utf-8"))
                pos += 2 + n
            (n,) = _LEN32.unpack_from(data, pos)
            ciphertext = data[pos + 4 : pos + 4 + n]
        except (struct.error, UnicodeDecodeError) as exc:
            raise err(f"malformed envelope: {exc}") from exc
        if magic != _MAGIC or code not in _CODE_KIND:
            raise err(f"not a privfed ring envelope (magic {magic!r}, kind code {code})")
        if len(ciphertext) != n or pos + 4 + n != len(data):
            raise err(f"envelope length mismatch: header says {n} ciphertext bytes, {len(data) - pos - 4} present")
        return cls(fields[0], fields[1], fields[2], _CODE_KIND[code], seq, ciphertext)


@dataclass(frozen=True, slots=True)
class Outbound(_Envelope):
    """A message a machine asks its driver to send (invalid fields are our bug: LocalProtocolError)."""

    _error: ClassVar[type[ProtocolError]] = LocalProtocolError


@dataclass(frozen=True, slots=True)
class Inbound(_Envelope):
    """A message the driver received for a machine (invalid fields: RemoteProtocolError)."""

    _error: ClassVar[type[ProtocolError]] = RemoteProtocolError


def complaint(msg: Inbound) -> Outbound:
    """The complaint of ``msg``'s recipient that ``msg`` (from its sender, in its session, at its seq) did not open:
    header only, from recipient to sender, no ciphertext (module docstring, "Complaints"). A function of the
    header alone, so it tells nothing of either owner's data."""
    return Outbound(msg.session_id, msg.recipient, msg.sender, MessageKind.COMPLAINT, msg.seq, b"")


def new_session_id() -> str:
    """A fresh random session id (128 bits, hex). Use a new one for every attempt of a ring."""
    return secrets.token_hex(16)


class RingParty:
    """One party's machine in a ring secure sum (SPEC §11.2).

    Parameters
    ----------
    party_id : str
    ring : list of str
        Party ids in ring order, the same list at every party; ``ring[0]`` leads.
    session_id : str
        Fresh per attempt (:func:`new_session_id`); bound into every key and AAD.
    fixed_point : FixedPoint
        Shared encoding; ``fixed_point.n_parties >= len(ring)``.
    box_for : mapping or callable
        ``box_for[peer]`` or ``box_for(peer)`` → the :class:`Box` of ``(party_id, peer)`` for every
        peer in :func:`ring_peers`; resolved here, so a missing box fails at construction.
    max_values : int
        Largest vector length accepted (≤ :data:`MAX_VALUES`).
    """

    def __init__(
        self,
        party_id: str,
        ring: Sequence[str],
        session_id: str,
        fixed_point: FixedPoint,
        box_for: Mapping[str, Box] | Callable[[str], Box],
        *,
        max_values: int = MAX_VALUES,
    ):
        self.ring = check_ring(ring)
        if party_id not in self.ring:
            raise ConfigError(f"party {party_id!r} is not in ring {self.ring}")
        check_id("session_id", session_id, ConfigError)
        if not isinstance(fixed_point, FixedPoint) or fixed_point.n_parties < len(self.ring):
            raise ConfigError(
                f"fixed_point must be a FixedPoint with n_parties >= {len(self.ring)} (ring size), "
                f"got {fixed_point!r}; build it with FixedPoint.choose(n_parties=len(ring), ...)"
            )
        if isinstance(max_values, bool) or not isinstance(max_values, int) or not 1 <= max_values <= MAX_VALUES:
            raise ConfigError(f"max_values must be an int in [1, {MAX_VALUES}], got {max_values!r}")
        self.party_id, self.session_id, self.fixed_point, self.max_values = (
            party_id,
            session_id,
            fixed_point,
            max_values,
        )
        self.index = self.ring.index(party_id)
        self.role = Role.LEADER if self.index == 0 else Role.MEMBER
        self._boxes = {peer: self._resolve_box(box_for, peer) for peer in ring_peers(self.ring, party_id, self.index)}
        self._state = State.IDLE
        self.failure_reason: str | None = None
        self._complaint: Outbound | None = None  # the complaint to send once, if the expected message did not open
        self._m: int | None = None
        self._secret: np.ndarray | None = None  # leader: the mask R; member: its encoded input e_i
        self._total: np.ndarray | None = None

    def _resolve_box(self, box_for: Mapping[str, Box] | Callable[[str], Box], peer: str) -> Box:
        from privfed.common.secagg.boxes import Box  # a party has its boxes' module loaded already

        try:
            box = box_for(peer) if callable(box_for) else box_for[peer]
        except KeyError as exc:
            raise ConfigError(
                f"party {self.party_id!r} has no Box for peer {peer!r} (needs {ring_peers(self.ring, self.party_id)})"
            ) from exc
        if not isinstance(box, Box) or (box.own_id, box.peer_id) != (self.party_id, peer):
            raise ConfigError(f"box for {peer!r} must be a Box({self.party_id!r} <-> {peer!r}), got {box!r}")
        return box

    # ------------------------------------------------------------ introspection
    @property
    def state(self) -> State:
        return self._state

    @property
    def n_parties(self) -> int:
        return len(self.ring)

    def _expected(self) -> tuple[MessageKind, str, int] | None:
        """(kind, sender, seq) of the one message valid in the current state."""
        n = len(self.ring)
        if self._state is State.AWAIT_RETURN:
            return MessageKind.HOP, self.ring[-1], n
        if self._state is State.AWAIT_HOP:
            return MessageKind.HOP, self.ring[self.index - 1], self.index
        if self._state is State.AWAIT_RESULT:
            return MessageKind.RESULT, self.ring[0], n + 1
        return None

    @property
    def waiting_for(self) -> str | None:
        """The peer whose message this machine is waiting for, if any."""
        expected = self._expected()
        return None if expected is None else expected[1]

    def take_complaint(self) -> Outbound | None:
        """The complaint about the expected message that did not open, once (then ``None``): the driver sends it
        (module docstring, "Complaints")."""
        out, self._complaint = self._complaint, None
        return out

    def result(self) -> np.ndarray | None:
        """The decoded total ``Σ x_i`` (float64, length ``m``) once ``DONE``, else ``None``."""
        return None if self._state is not State.DONE or self._total is None else self.fixed_point.decode(self._total)

    def result_encoded(self) -> np.ndarray | None:
        """The exact ring total ``Σ e_i mod 2^64`` (uint64) once ``DONE``, else ``None``."""
        return None if self._state is not State.DONE or self._total is None else self._total.copy()

    # ------------------------------------------------------------ transitions
    def _transition(self, event: object) -> None:
        self._state = TRANSITIONS[self.role][self._state][event]

    def _fail(self, reason: str) -> None:
        self._state, self.failure_reason = State.FAILED, reason
        self._secret = self._total = None

    def _send(self, kind: MessageKind, recipient: str, seq: int, payload: np.ndarray) -> Outbound:
        from privfed.common.secagg.boxes import AadFields

        aad = AadFields(self.session_id, self.party_id, recipient, kind.value, seq)
        ciphertext = self._boxes[recipient].seal(payload.astype("<u8").tobytes(), aad)
        return Outbound(self.session_id, self.party_id, recipient, kind, seq, ciphertext)

    def start(self, values: ArrayLike) -> list[Outbound]:
        """Contribute ``values`` (1-D, ``|x| ≤ max_abs``). The leader returns its first hop.

        Raises
        ------
        ConfigError
            Bad values (state unchanged). LocalProtocolError if already started.
        """
        if self._state is not State.IDLE:
            raise LocalProtocolError(f"start() called in state {self._state.name}; a RingParty runs one session")
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 1 or not 1 <= values.shape[0] <= self.max_values:
            raise ConfigError(f"values must be a 1-D vector of length 1..{self.max_values}, got shape {values.shape}")
        encoded = self.fixed_point.encode(values)
        self._m = values.shape[0]
        if self.role is Role.MEMBER:
            self._secret = encoded
            self._transition(_Start.START)
            return []
        self._secret = np.frombuffer(secrets.token_bytes(8 * self._m), dtype="<u8").astype(np.uint64)
        out = self._send(MessageKind.HOP, self.ring[1], 1, FixedPoint.add(self._secret, encoded))
        self._transition(_Start.START)
        return [out]

    def on_message(self, msg: Inbound) -> list[Outbound]:
        """Handle one delivered message; returns what to send next.

        Raises
        ------
        RemoteProtocolError
            Wrong session, recipient, sender, kind, seq or size, or failed authentication; the
            machine is then ``FAILED``.
        LocalProtocolError
            Called before :meth:`start` or after the machine failed (driver misuse).
        """
        if not isinstance(msg, Inbound):
            raise TypeError(f"on_message takes an Inbound, got {type(msg).__name__}")
        if self._state is State.IDLE:
            raise LocalProtocolError(f"{self.party_id}: call start() before delivering messages")
        if self._state is State.FAILED:
            raise LocalProtocolError(f"{self.party_id}: machine FAILED ({self.failure_reason}); start a new session")
        try:
            return self._receive(msg)
        except RemoteProtocolError as exc:
            self._fail(f"{self.party_id}: {exc}")
            raise

    def _receive(self, msg: Inbound) -> list[Outbound]:
        if msg.session_id != self.session_id:
            raise RemoteProtocolError(f"message for session {msg.session_id!r}, this session is {self.session_id!r}")
        if msg.recipient != self.party_id:
            raise RemoteProtocolError(f"misrouted message addressed to {msg.recipient!r}")
        if msg.kind not in TRANSITIONS[self.role].get(self._state, {}):
            raise RemoteProtocolError(f"unexpected {msg.kind.name} from {msg.sender!r} in state {self._state.name}")
        expected = self._expected()
        if expected is None or self._m is None:
            raise LocalProtocolError(f"{self.party_id}: no message is expected in state {self._state.name}")
        kind, sender, seq = expected
        if (msg.sender, msg.seq) != (sender, seq):
            raise RemoteProtocolError(
                f"expected {kind.name} seq {seq} from {sender!r}, got seq {msg.seq} from {msg.sender!r}"
            )
        try:
            if len(msg.ciphertext) != SEAL_OVERHEAD + 8 * self._m:
                raise RemoteProtocolError(
                    f"{kind.name} of {len(msg.ciphertext)} bytes, expected "
                    f"{SEAL_OVERHEAD + 8 * self._m} for m = {self._m} values"
                )
            plain = self._boxes[sender].open(msg.ciphertext, msg.aad())
        except RemoteProtocolError:
            self._complaint = complaint(msg)  # the one message valid now, from its sender, did not open (A33-2)
            raise
        value = np.frombuffer(plain, dtype="<u8").astype(np.uint64)
        out: list[Outbound] = []
        secret = self._secret
        if kind is MessageKind.HOP and secret is None:
            raise LocalProtocolError(f"{self.party_id}: no secret held in state {self._state.name}")
        if self.role is Role.LEADER and secret is not None:
            self._total = FixedPoint.sub(value, secret)
            out = [self._send(MessageKind.RESULT, p, len(self.ring) + 1, self._total) for p in self.ring[1:]]
        elif kind is MessageKind.HOP and secret is not None:
            succ = self.ring[(self.index + 1) % len(self.ring)]
            out = [self._send(MessageKind.HOP, succ, self.index + 1, FixedPoint.add(value, secret))]
        else:
            self._total = value
        self._secret = None
        self._transition(kind)
        return out

    def on_timeout(self) -> list[Outbound]:
        """The session deadline passed: a non-terminal machine becomes ``FAILED``; returns ``[]``."""
        if self._state not in _TERMINAL:
            expected = self._expected()
            waiting = "start()" if expected is None else f"{expected[0].name} from {expected[1]!r}"
            self._fail(f"{self.party_id}: timed out in state {self._state.name} waiting for {waiting}")
        return []
