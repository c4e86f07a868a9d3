"""Pairwise-mask secure aggregation, the owner's side, as a sans-I/O state machine (STYLE rule 8).

Bonawitz et al., "Practical Secure Aggregation for Privacy-Preserving Machine Learning" (CCS 2017,
§4 and Fig. 4, the semi-honest protocol), on the sparse neighbour graph of Bell et al. (CCS 2020,
§3): every message goes owner → coordinator → owner, so a secure sum takes O(1) round trips
whatever N, where the ring (:mod:`privfed.common.secagg.ring`) takes N sequential hops. The public
pieces (graph, threshold, masks) are in :mod:`privfed.common.secagg.masking`; the coordinator's
machine is :class:`privfed.common.secagg.aggregator.SecAggServer`; messages in
:mod:`privfed.common.secagg.messages`.

Once per run (the run's *key agreement*):

0. **AdvertiseKeys** (:meth:`SecAggOwner.start`): the owner draws a mask key pair
   ``(s_u^SK, s_u^PK)`` (X25519, ``cryptography``) and sends ``s_u^PK``, signed by its node's
   certificate key over (owner id, run id, key) (:func:`~privfed.common.secagg.signed_keys.sign_public_key`).
1. **ShareKeys** (:meth:`SecAggOwner.on_share_keys`): given the members and its neighbours'
   signed keys (each accepted only if ``verify`` accepts it: the driver checks the signature
   against the certificate of the node named in the owner id), the owner derives the pair keys
   ``k_{u,v}`` from ``X25519(s_u^SK, s_v^PK)``, draws one self-mask seed ``b_u^r`` per round of
   the run from :mod:`secrets`, and sends each of its ``k`` neighbours Shamir ``t``-of-``k``
   shares of ``s_u^SK`` and of every ``b_u^r``, sealed end-to-end in the
   :class:`~privfed.common.secagg.boxes.Box` of ``(u, v)`` bound to ``k_{u,v}``
   (:meth:`~privfed.common.secagg.boxes.Box.bound_to`): opening needs the owners' long-lived,
   separately signed box keys (revealing a dropped owner's ``s^SK`` must not open its mail,
   Bonawitz §4) *and* the session's mask key of the recipient (a neighbour keyed again for the
   session, or a node restarted with the same box key, cannot open shares sealed to its first
   mask key); the coordinator only forwards them. Sharing every round's seed up front keeps a
   round to two messages per owner.

Per secure-sum round ``r`` (strictly increasing, below the number of rounds shared for):

2. **MaskedInputCollection** (:meth:`SecAggOwner.masked_input`): with the round's participating
   neighbours ``P`` (at least ``t``), the owner sends
   ``y_u = enc(x_u) + PRG(b_u^r, r) + Σ_{v∈P} ±PRG(k_{u,v}, r)``. The first request also
   forwards the shares its neighbours sealed to it, which it keeps.
3. **Unmasking** (:meth:`SecAggOwner.on_unmask`): told which participating neighbours survived
   (sent ``y``) and which dropped, the owner returns its share of ``b_v^r`` for each survivor and
   its share of ``s_v^SK`` for each dropped neighbour. Per run, an honest neighbour reveals for
   an owner *either* self-mask shares *or* a key share, never both: with both, the coordinator
   would unmask that owner's input of every round it survived. So it refuses
   (``RemoteProtocolError``, machine ``FAILED``) a request naming one owner both ways, a key
   share of an owner whose self-mask share it gave in any round, a self-mask share of an owner
   whose key it revealed (that owner is out of the run), or fewer than ``t`` survivors among its
   neighbours (its own self-mask could not be recovered; answering would only leak). An owner
   that survived an unmasked round and drops later is therefore not recovered: the coordinator
   runs the round again without it (:meth:`~privfed.common.secagg.aggregator.SecAggServer.on_masked`).

**Keyed once.** That memory of what was revealed is one machine's, so it only protects an owner
if each neighbour holds one machine per run for the run's whole life. A node refuses a second
step 0 for a run it keyed (``privfed.owner.secagg``), and shares are sealed to the recipient's
mask key of the run (step 1), so even a machine made anew for the run (a node that forgot the
run) cannot open what its predecessor was sent: a coordinator cannot collect ``t`` key shares of
an owner whose self-mask shares it holds by keying neighbours again (issue 20, finding 3).

**Inputs are releases.** A secure sum hides a contribution from a coordinator that follows the
protocol; one that controls the graph's neighbourhoods, drops owners at will, or tells neighbours
different survivor sets (there is no consistency round, Bonawitz §4's signed survivor sets: audit 17
unmasked an owner's input with one colluding neighbour of k = 5, t = 3; audit 23 with none, by naming
the owner's mask partners dropped to their other neighbours while its own neighbours are told it survived;
audit 31 with none from 4 owners up, across rounds: ``b_u^r`` from ``t`` holders whose participants avoid
``u``'s partners, then each partner named dropped in a later round to ``t`` neighbours that never revealed
its self-mask, whose mask key gives the pair masks of every round, so each round alone is consistent and
only a rule across the run's rounds closes it; ``docs/secagg-consistency.md``) learns more. So, as for the ring,
every owner's input is already a noised release debited in its ledger before :meth:`SecAggOwner.masked_input` sees
it (``privfed.owner.core``); the secure sum only keeps individual noisy values from the coordinator. Key shares are
sealed to the run's member list (:func:`shares_aad`), so an owner cannot be keyed with a list of its own (A31-2).
"""

from __future__ import annotations

import enum
import secrets
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from privfed.common.errors import ConfigError, LocalProtocolError, RemoteProtocolError, Unopened
from privfed.common.secagg import shamir
from privfed.common.secagg.boxes import AadFields, Box, public_bytes, public_key
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.masking import members_digest, neighbour_graph, pair_key, pair_masks, self_mask, threshold
from privfed.common.secagg.messages import (
    KEY_SHARES,
    InputRequest,
    KeyAdvert,
    KeyShares,
    MaskedInput,
    SealedShare,
    ShareKeysRequest,
    UnmaskReply,
    UnmaskRequest,
)
from privfed.common.secagg.sizes import SEAL_OVERHEAD

R = TypeVar("R")

#: Co-hosted agreements a :class:`CohostedAgreements` holds until the other end takes them (then it forgets all).
MAX_HELD = 200_000


class CohostedAgreements:
    """X25519 agreements of owner pairs whose both ends one process hosts, computed once per pair.

    ``X25519(s_u^SK, s_v^PK) = X25519(s_v^SK, s_u^PK)``: the first end of a co-hosted pair computes
    it and leaves it here under its own and its peer's public key; the second end, whose machine
    asks with the same two keys the other way round, takes it instead of computing it again (half
    the exchanges of co-hosted pairs; step 1). The value is exactly the one the second end would
    compute, and it never leaves the process that holds both private keys.

    Parameters
    ----------
    cohosted : callable
        ``cohosted(peer)``: whether ``peer``'s machine in the session lives in this process.
    """

    def __init__(self, cohosted: Callable[[str], bool]) -> None:
        self._cohosted = cohosted
        self._held: dict[tuple[bytes, bytes], bytes] = {}  # (first end's public key, second end's) -> agreement

    def agree(self, own_key: X25519PrivateKey, own_public: bytes, peer: str, peer_public: bytes) -> bytes:
        """``X25519(own_key, peer_public)``; raises ValueError for an unusable public key."""
        agreed = self._held.pop((peer_public, own_public), None)
        if agreed is not None:
            return agreed
        agreed = own_key.exchange(public_key(peer_public))
        if self._cohosted(peer):
            if len(self._held) >= MAX_HELD:
                self._held.clear()
            self._held[(own_public, peer_public)] = agreed
        return agreed


class OwnerState(enum.Enum):
    IDLE = "idle"  # built, start() not called
    ADVERTISED = "advertised"  # mask key sent, waiting for ShareKeysRequest
    READY = "ready"  # key shares sent: waiting for a round's InputRequest
    MASKED = "masked"  # masked input sent for the current round, waiting for its UnmaskRequest
    FAILED = "failed"  # terminal: failure_reason says why


#: ``{state: {event: next state}}``; an event not listed for the state is a protocol violation.
TRANSITIONS: dict[OwnerState, dict[type, OwnerState]] = {
    OwnerState.ADVERTISED: {ShareKeysRequest: OwnerState.READY},
    OwnerState.READY: {InputRequest: OwnerState.MASKED},
    # A round the coordinator gave up on is never unmasked: the next round's input supersedes it.
    OwnerState.MASKED: {UnmaskRequest: OwnerState.READY, InputRequest: OwnerState.MASKED},
}


def shares_aad(run_id: str, members: tuple[str, ...], sender: str, recipient: str) -> AadFields:
    """What key shares from ``sender`` to ``recipient`` are bound to: the run and its member list
    (:func:`~privfed.common.secagg.masking.members_digest`, audit 31, A31-2)."""
    return AadFields(run_id, sender, recipient, f"{KEY_SHARES}/{members_digest(members)}", 0)


def seal_share(box: Box, run_id: str, members: tuple[str, ...], shares: bytes) -> SealedShare:
    """Shares sealed from ``box.own_id`` to ``box.peer_id``, bound to the run and its member list."""
    return SealedShare(box.own_id, box.peer_id, box.seal(shares, shares_aad(run_id, members, box.own_id, box.peer_id)))


class SecAggOwner:
    """One owner's machine for all secure sums of one run (module docstring).

    Parameters
    ----------
    owner_id, run_id : str
    fixed_point : FixedPoint
        The run's encoding; ``n_parties`` at least the number of members.
    box_for : callable
        ``box_for(peer)`` → the :class:`Box` of ``(owner_id, peer)`` (the owners' long-lived
        end-to-end keys, signed as for the ring).
    verify : callable
        ``verify(advert)`` raises :class:`RemoteProtocolError` unless the advert's mask key is
        signed by the certificate of the node its owner id names.
    cohosted : CohostedAgreements, optional
        The agreements of the pairs this process hosts both ends of (its driver's, shared by its machines).
    """

    def __init__(
        self,
        owner_id: str,
        run_id: str,
        fixed_point: FixedPoint,
        box_for: Callable[[str], Box],
        verify: Callable[[KeyAdvert], None],
        cohosted: CohostedAgreements | None = None,
    ) -> None:
        if not isinstance(fixed_point, FixedPoint):
            raise ConfigError(f"fixed_point must be a FixedPoint, got {fixed_point!r}")
        self.owner_id, self.run_id, self.fixed_point = owner_id, run_id, fixed_point
        self._box_for, self._verify = box_for, verify
        self._agreements = cohosted or CohostedAgreements(lambda peer: False)
        self._state = OwnerState.IDLE
        self.failure_reason: str | None = None
        self._mask_key: X25519PrivateKey | None = None
        self._mask_public = b""  # its public key, as advertised
        self.neighbours: tuple[str, ...] = ()
        self._members: tuple[str, ...] = ()
        self.threshold = 0
        self._boxes: dict[str, Box] = {}
        self._pair_keys: dict[str, bytes] = {}  # neighbour -> the run's pair key k_{u,v}
        self._seeds: list[bytes] = []  # b_u^r for each round r of the run
        self._held: dict[str, bytes] = {}  # neighbour -> my shares of its s^SK and b^r (concatenated)
        self._revealed_keys: set[str] = set()  # neighbours whose s^SK share I gave: out of the run
        self._revealed_self: set[str] = set()  # neighbours I gave a self-mask share of (any round)
        self._round = -1
        self._participants: tuple[str, ...] = ()

    @property
    def state(self) -> OwnerState:
        return self._state

    def _fail(self, reason: str) -> None:
        self._state, self.failure_reason = OwnerState.FAILED, f"{self.owner_id}: {reason}"
        self._mask_key, self._pair_keys, self._seeds, self._held = None, {}, [], {}

    def _guard(self, msg: object, handler: Callable[[], R]) -> R:
        """Run ``handler`` for ``msg`` if the transition table allows it; a peer's violation fails the machine."""
        if self._state is OwnerState.IDLE:
            raise LocalProtocolError(f"{self.owner_id}: call start() before delivering messages")
        if self._state is OwnerState.FAILED:
            raise LocalProtocolError(f"{self.owner_id}: machine FAILED ({self.failure_reason})")
        try:
            if type(msg) not in TRANSITIONS[self._state]:
                raise RemoteProtocolError(f"unexpected {type(msg).__name__} in state {self._state.name}")
            out = handler()
        except RemoteProtocolError as exc:
            self._fail(str(exc))
            raise
        self._state = TRANSITIONS[self._state][type(msg)]
        return out

    # ------------------------------------------------------------------ step 0
    def start(self, sign: Callable[[bytes], bytes]) -> KeyAdvert:
        """Draw the run's mask key pair; ``sign(public key)`` is the node's signature over it."""
        if self._state is not OwnerState.IDLE:
            raise LocalProtocolError(f"start() in state {self._state.name}; a SecAggOwner runs one run")
        self._mask_key = X25519PrivateKey.generate()
        pk = self._mask_public = public_bytes(self._mask_key)
        self._state = OwnerState.ADVERTISED
        return KeyAdvert(self.owner_id, pk, sign(pk))

    # ------------------------------------------------------------------ step 1
    def on_share_keys(self, msg: ShareKeysRequest) -> KeyShares:
        """Check the neighbours' keys and send the sealed shares of ``s_u^SK`` (step 1)."""
        return self._guard(msg, lambda: self._share_keys(msg))

    def _share_keys(self, msg: ShareKeysRequest) -> KeyShares:
        members = msg.members
        if len(members) > self.fixed_point.n_parties:
            raise RemoteProtocolError(f"{len(members)} members exceed the encoding's {self.fixed_point.n_parties}")
        try:
            graph = neighbour_graph(self.run_id, members)
        except ConfigError as exc:
            raise RemoteProtocolError(str(exc)) from exc
        if self.owner_id not in graph:  # the graph's keys are the members: a dict look-up, not a scan
            raise RemoteProtocolError(f"not a member of run {self.run_id!r}'s secure sum")
        self.neighbours = graph[self.owner_id]
        self._members = members  # the shares it seals and opens are bound to them (audit 31, A31-2)
        self.threshold = threshold(len(self.neighbours))
        adverts = {a.owner_id: a for a in msg.adverts}
        if set(adverts) != set(self.neighbours) or len(msg.adverts) != len(self.neighbours):
            raise RemoteProtocolError("the adverts are not exactly those of this owner's neighbours in the run's graph")
        if self._mask_key is None:
            raise LocalProtocolError(f"{self.owner_id}: no mask key")
        for v in self.neighbours:
            self._verify(adverts[v])
            try:
                agreed = self._agreements.agree(self._mask_key, self._mask_public, v, adverts[v].public_key)
            except ValueError as exc:
                raise RemoteProtocolError(f"unusable mask key of {v!r}: {exc}") from exc
            self._pair_keys[v] = pair_key(agreed, self.run_id, self.owner_id, v)
            self._boxes[v] = self._box_for(v).bound_to(self._pair_keys[v])  # module docstring, step 1
        self._seeds = [secrets.token_bytes(shamir.SECRET_BYTES) for _ in range(msg.rounds)]
        xs = range(1, len(self.neighbours) + 1)
        shares = shamir.split_joined([secret_bytes_of(self._mask_key), *self._seeds], xs, self.threshold)
        return KeyShares(
            self.owner_id,
            tuple(seal_share(self._boxes[v], self.run_id, members, shares[x]) for x, v in zip(xs, self.neighbours)),
        )

    # ------------------------------------------------------------------ step 2
    def masked_input(self, msg: InputRequest, values: np.ndarray) -> MaskedInput:
        """``y_u`` for round ``msg.round`` (step 2).

        ``values`` is the owner's contribution, already a noised, debited release.
        """
        return self._guard(msg, lambda: self._masked_input(msg, values))

    def _masked_input(self, msg: InputRequest, values: np.ndarray) -> MaskedInput:
        if not self._round < msg.round < len(self._seeds):
            raise RemoteProtocolError(
                f"round {msg.round} is not in ({self._round}, {len(self._seeds)}): rounds only increase, "
                "up to the number the keys were shared for"
            )
        participants = msg.participants
        if not set(participants) <= set(self.neighbours) - self._revealed_keys or len(set(participants)) != len(
            participants
        ):
            raise RemoteProtocolError("participants must be distinct neighbours whose mask key was not revealed")
        if len(participants) < self.threshold:
            raise RemoteProtocolError(
                f"{len(participants)} participating neighbour(s), fewer than the threshold {self.threshold}"
            )
        size = SEAL_OVERHEAD + (1 + len(self._seeds)) * shamir.SHARE_BYTES
        for sealed in msg.key_shares:
            v = sealed.sender
            if sealed.recipient != self.owner_id or v not in self._boxes or len(sealed.ciphertext) != size:
                raise RemoteProtocolError(f"key shares {v!r} -> {sealed.recipient!r} are not for this owner and run")
            if v not in self._held:
                try:
                    self._held[v] = self._boxes[v].open(
                        sealed.ciphertext, shares_aad(self.run_id, self._members, v, self.owner_id)
                    )
                except RemoteProtocolError as exc:  # the box's causes, and the one this seal adds
                    raise Unopened(  # named, so the coordinator leaves v out rather than blame this owner (A33-2)
                        f"{exc}; or {v!r} was keyed with another member list than this owner's (a coordinator's "
                        "doing, or a node on a privfed before audit 31's change: upgrade every node)",
                        v,
                    ) from exc
        encoded = self.fixed_point.encode(np.asarray(values, dtype=np.float64))
        m = encoded.shape[0]
        masks = pair_masks({v: self._pair_keys[v] for v in participants}, self.owner_id, msg.round, m)
        y = FixedPoint.add(FixedPoint.add(encoded, self_mask(self._seeds[msg.round], msg.round, m)), masks)
        self._round, self._participants = msg.round, tuple(participants)
        return MaskedInput(self.owner_id, msg.round, y)

    # ------------------------------------------------------------------ step 3
    def on_unmask(self, msg: UnmaskRequest) -> UnmaskReply:
        """Shares of the survivors' self-mask seeds and of the dropped owners' mask keys (step 3)."""
        return self._guard(msg, lambda: self._unmask(msg))

    def _unmask(self, msg: UnmaskRequest) -> UnmaskReply:
        if msg.round != self._round:
            raise RemoteProtocolError(f"unmasking round {msg.round}, the masked round is {self._round}")
        survivors, dropped = set(msg.survivors), set(msg.dropped)
        both = (survivors & dropped) | (survivors & self._revealed_keys) | (dropped & self._revealed_self)
        if both:
            raise RemoteProtocolError(
                f"asked for a key share of an owner whose self-mask share was asked for in this run, or the "
                f"reverse: {sorted(both)[:3]}; an honest neighbour reveals one or the other"
            )
        if survivors | dropped != set(self._participants) or len(survivors) + len(dropped) != len(self._participants):
            raise RemoteProtocolError("survivors and dropped must split exactly this round's participants")
        if len(survivors) < self.threshold:
            raise RemoteProtocolError(
                f"{len(survivors)} surviving neighbour(s), fewer than the threshold {self.threshold}: "
                "this owner's self-mask could not be recovered"
            )
        at = (1 + msg.round) * shamir.SHARE_BYTES
        self_shares = {v: self._held[v][at : at + shamir.SHARE_BYTES] for v in sorted(survivors) if v in self._held}
        key_shares = {v: self._held[v][: shamir.SHARE_BYTES] for v in sorted(dropped) if v in self._held}
        self._revealed_self |= survivors
        self._revealed_keys |= dropped
        return UnmaskReply(self.owner_id, msg.round, self_shares, key_shares)

    def on_timeout(self) -> None:
        """The driver's deadline passed: nothing to do (a round not unmasked is superseded by the next)."""


def secret_bytes_of(key: X25519PrivateKey) -> bytes:
    """The 32 raw bytes of an X25519 private key (the secret a member shares)."""
    return key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
