"""Owner side of the pairwise-mask secure sum: the machines of a node's owners, fed the same release.

:class:`SecAggDriver` holds one :class:`~privfed.common.secagg.pairwise.SecAggOwner` per (owner,
secure-sum session) and only moves messages in and out of them: it is the mod an evaluation
release goes through when the coordinator runs pairwise masks (``privfed.owner.core``). An owner's
contribution is the evaluation release of the owner core: validated against the run's public
configuration, noised, debited in the node's ledger and kept per (run, round) before the machine
sees it, so the noise and the ledger entry are the same whichever secure sum the coordinator runs
(``--secure-sum ring|secagg``).

A session is keyed once per owner (issue 20, finding 3): a second step 0 for a session an owner
has a machine in, or for a session whose machines were forgotten (:data:`KEPT_SESSIONS`), is
refused with the fixed code ``already_released``, whatever the data. The record of forgotten
sessions takes a fixed amount of memory however many sessions a long-lived node keys
(:class:`~privfed.owner.once.NeverAgain`) and lives as long as the node process; a restarted node
draws new box keys (``privfed.owner.node``) and new mask keys, and the shares are sealed to both,
so nothing sent before a restart opens after it.

Keys: the owner's long-lived X25519 key seals the shares end-to-end (a peer's key accepted only as
:meth:`OwnerKeys.peer_key` accepts a ring peer's: signed by the certificate of the node its id
names); the run's mask keys are drawn by the machines, signed with the node's certificate key
(``sign``) and checked by each neighbour against that node's certificate (``verify_advert``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np
from cryptography import x509

from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.identity import node_of
from privfed.common.secagg.boxes import Box, public_bytes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.messages import (
    KeyAdvert,
    KeyShares,
    MaskedInput,
    ShareKeysRequest,
    UnmaskReply,
    UnmaskRequest,
)
from privfed.common.secagg.pairwise import CohostedAgreements, SecAggOwner
from privfed.common.secagg.ring import Outbound
from privfed.common.secagg.signed_keys import verify_public_key
from privfed.common.tasks import (
    PeerKey,
    Result,
    SecAggKeysTask,
    SecAggUnmaskTask,
    Task,
    TaskSpec,
)
from privfed.owner.keys import OwnerKeys
from privfed.owner.kinds.base import Refused
from privfed.owner.once import NeverAgain

if TYPE_CHECKING:
    from privfed.common.tasks import BoostEvaluateTask

#: Sessions whose machines a node keeps (the latest ones; a job keys one per evaluation group up front).
KEPT_SESSIONS = 64
#: Co-hosted boxes a node keeps waiting for their peer's side (then it forgets them all).
MAX_COHOSTED = 200_000
#: Parsed node certificates a node keeps.
MAX_PARSED = 1024


class SecAggDriver:
    """The pairwise-mask secure-sum machines of the owners one node hosts (module docstring).

    Parameters
    ----------
    releases : OwnerKeys
        The node's owners' box keys and peer-key checks.
    sign : callable or None
        ``sign(owner_id, session_id, public key)`` with the node's certificate key; ``None``
        (in-process simulations, no certificates) sends unsigned keys.
    """

    def __init__(
        self,
        releases: OwnerKeys,
        *,
        sign: Callable[[str, str, bytes], bytes] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._releases = releases
        self._sign = sign
        self._clock = clock
        self._machines: dict[str, dict[str, SecAggOwner]] = {}  # session -> owner -> machine
        self._forgotten = NeverAgain()  # sessions whose machines were dropped: never keyed again
        self._certificates: dict[str, dict[str, bytes]] = {}  # session -> node id -> PEM (sent once per node)
        self._keys: dict[str, dict[str, PeerKey]] = {}  # session -> owner id -> its long-lived box key
        # session -> (owner, key, signature) checked: dropped with the session's machines
        self._verified: dict[str, set[tuple[str, bytes, bytes]]] = {}
        self._parsed: dict[bytes, x509.Certificate] = {}
        self._members: dict[str, tuple[str, ...]] = {}  # session -> its members (sent once per node)
        # The node's own owners' mask-key adverts and box keys: a neighbour on this node is checked
        # against them (they were drawn here), not against a signature (25% fewer ECDSA checks on 4 nodes).
        self._adverts: dict[tuple[str, str], KeyAdvert] = {}  # (session, owner) -> its advert
        self._own_public: dict[str, bytes] = {}  # owner -> its long-lived box key
        self._cohosted: dict[tuple[str, str], Box] = {}  # (owner, co-hosted peer) -> box, until the peer's side
        self._agreements: dict[str, CohostedAgreements] = {}  # session -> its co-hosted pairs' mask-key agreements

    def _machine(self, session_id: str, owner_id: str) -> SecAggOwner:
        try:
            return self._machines[session_id][owner_id]
        except KeyError as exc:
            raise RemoteProtocolError(f"{owner_id} has no machine in secure-sum session {session_id!r}") from exc

    def _verify_advert(self, session_id: str, advert: KeyAdvert) -> None:
        """Accept a neighbour's mask key only if signed by the certificate of the node its id names;
        an advert is checked once per node and session (the node's owners share neighbours)."""
        ca = self._releases.ca
        checked = (advert.owner_id, advert.public_key, advert.signature)
        if ca is None or checked in self._verified.get(session_id, ()):
            return
        own = self._adverts.get((session_id, advert.owner_id))
        if own is not None:  # an owner of this node: its key is known here, no signature needed
            if own.public_key != advert.public_key:
                raise RemoteProtocolError(f"the mask key of {advert.owner_id!r} is not the one this node drew")
            return
        node = node_of(advert.owner_id)
        pem = self._certificates.get(session_id, {}).get(node)
        if pem is None:
            raise RemoteProtocolError(f"no certificate for node {node!r} of {advert.owner_id!r}")
        if pem not in self._parsed:
            if len(self._parsed) > MAX_PARSED:
                self._parsed.clear()
            self._parsed[pem] = x509.load_pem_x509_certificate(pem)
        verify_public_key(
            self._parsed[pem],
            ca,
            advert.owner_id,
            advert.public_key,
            advert.signature,
            now=self._clock(),
            session_id=session_id,
            cert_identity=node,
        )
        if session_id in self._machines:
            self._verified.setdefault(session_id, set()).add(checked)

    def advertise(self, owner_id: str, session_id: str, fixed_point: FixedPoint) -> KeyAdvert:
        """Step 0: a fresh machine for ``owner_id`` in ``session_id``, and its signed mask key.

        Raises
        ------
        Refused
            ``already_released``: the owner was keyed in the session before (module docstring).
        """
        if session_id in self._forgotten or owner_id in self._machines.get(session_id, {}):
            raise Refused("already_released", f"secure-sum session {session_id!r} is keyed once per owner")

        def box_for(peer: str) -> Box:
            key = self._keys.get(session_id, {}).get(peer)
            if key is None:
                raise RemoteProtocolError(f"no box key for neighbour {peer!r}")
            public = self._own_public.get(peer)  # an owner of this node: its key is known here
            if public is None:
                return Box(
                    owner_id,
                    self._releases.own_key(owner_id),
                    peer,
                    self._releases.peer_key(self._certificates.get(session_id, {}), key),
                )
            if public != key.x25519_public_key:
                raise RemoteProtocolError(f"the box key of {peer!r} is not the one this node holds")
            turned = self._cohosted.pop((peer, owner_id), None)  # the peer's side, made for its own shares
            if turned is not None:
                return turned.turned()
            box = Box(owner_id, self._releases.own_key(owner_id), peer, public)
            if len(self._cohosted) >= MAX_COHOSTED:
                self._cohosted.clear()
            self._cohosted[(owner_id, peer)] = box
            return box

        if session_id not in self._machines:
            self._machines[session_id] = {}
            hosted = self._machines[session_id]
            self._agreements[session_id] = CohostedAgreements(lambda peer: peer in hosted)
            for gone in self._forgotten.forget_oldest(self._machines, KEPT_SESSIONS):
                for table in (self._certificates, self._keys, self._members, self._agreements, self._verified):
                    table.pop(gone, None)
                self._adverts = {k: a for k, a in self._adverts.items() if k[0] != gone}
        machine = SecAggOwner(
            owner_id,
            session_id,
            fixed_point,
            box_for,
            lambda advert: self._verify_advert(session_id, advert),
            self._agreements[session_id],
        )
        self._machines[session_id][owner_id] = machine
        sign = self._sign
        advert = machine.start(lambda pk: b"" if sign is None else sign(owner_id, session_id, pk))
        self._adverts[(session_id, owner_id)] = advert
        if owner_id not in self._own_public:
            self._own_public[owner_id] = public_bytes(self._releases.own_key(owner_id))
        return advert

    def share_keys(
        self,
        owner_id: str,
        session_id: str,
        request: ShareKeysRequest,
        keys: Sequence[PeerKey] = (),
        certificates: Mapping[str, bytes] | None = None,
    ) -> KeyShares:
        """Step 1, with the neighbours' box keys and (once per node and session) the nodes' certificates
        and the run's members (an empty ``request.members`` means the ones the node was sent). A key
        comes once per node and run, with the first owner that has that neighbour; a second, different
        key for a neighbour in the run is refused (equivocation: every owner of the node seals to the one
        key it was sent first). Each key is still checked per owner, when a box is made with it."""
        if session_id in self._machines:  # kept even if this owner's step fails: the node's others need them
            held = self._keys.setdefault(session_id, {})
            for k in keys:
                first = held.get(k.owner_id)
                if first is not None and first.x25519_public_key != k.x25519_public_key:
                    raise RemoteProtocolError(
                        f"a second box key for {k.owner_id!r} in secure-sum session {session_id!r}"
                    )
            held.update({k.owner_id: k for k in keys})
            self._certificates.setdefault(session_id, {}).update(certificates or {})
            if request.members:
                self._members[session_id] = request.members
        if not request.members:
            request = replace(request, members=self._members.get(session_id, ()))
        return self._machine(session_id, owner_id).on_share_keys(request)

    def prepare(self, owner_id: str, spec: BoostEvaluateTask) -> SecAggOwner:
        """Step 2's machine for an owner's evaluate task (public checks only, before any row is read)."""
        if spec.ring.ring or spec.secagg is None:
            raise ConfigError("a pairwise-mask secure sum carries no ring order, and its step-2 request")
        machine = self._machine(spec.ring.session_id, owner_id)
        keyed = machine.fixed_point
        if (spec.ring.frac_bits, spec.ring.n_parties, spec.ring.max_abs) != (
            keyed.frac_bits,
            keyed.n_parties,
            keyed.max_abs,
        ):  # else the masked step could fail on the release's value after its debit (audit 23, finding 2)
            raise ConfigError(
                f"the task's secure-sum encoding (frac_bits {spec.ring.frac_bits}, n_parties {spec.ring.n_parties}, "
                f"max_abs {spec.ring.max_abs}) is not the one its session was keyed with (frac_bits "
                f"{keyed.frac_bits}, n_parties {keyed.n_parties}, max_abs {keyed.max_abs})"
            )
        return machine

    def start(self, task: Task, machine: SecAggOwner, values: np.ndarray) -> tuple[MaskedInput, list[Outbound]]:
        """Step 2: the owner's evaluation release, debited by the owner core, masked by its machine."""
        from privfed.common.tasks import BoostEvaluateTask  # a boosting kind: its family imported on first use

        if not isinstance(task.spec, BoostEvaluateTask) or task.spec.secagg is None:
            raise ConfigError("a masked input answers an evaluate task of a pairwise-mask secure sum")
        return machine.masked_input(task.spec.secagg, values), []

    def unmask(self, owner_id: str, session_id: str, request: UnmaskRequest) -> UnmaskReply:
        """Step 3."""
        return self._machine(session_id, owner_id).on_unmask(request)

    def step(self, task: Task) -> tuple[Result, list[Outbound]]:
        """Steps 0, 1 and 3 (key agreement, unmasking) for a hosted owner: its answer."""
        return Result(task.task_id, task.owner_id, self._step(task.owner_id, task.spec)), []

    def _step(self, owner_id: str, spec: TaskSpec) -> KeyAdvert | KeyShares | UnmaskReply:
        if isinstance(spec, SecAggUnmaskTask):
            return self.unmask(owner_id, spec.session_id, spec.request)
        if not isinstance(spec, SecAggKeysTask):
            raise ConfigError(f"not a secure-sum step: {type(spec).__name__}")
        if spec.request is not None:
            return self.share_keys(owner_id, spec.session_id, spec.request, spec.peers, spec.certificates)
        try:
            fixed_point = FixedPoint(frac_bits=spec.frac_bits, n_parties=spec.n_parties, max_abs=spec.max_abs)
        except (TypeError, ValueError) as exc:
            raise RemoteProtocolError(f"secure-sum encoding is unusable: {exc}") from exc
        return self.advertise(owner_id, spec.session_id, fixed_point)
