"""The ring secure sum at an owner node (SPEC §11.2): the mod an evaluation release goes through.

:class:`RingMod` holds the sans-I/O :class:`~privfed.common.secagg.ring.RingParty` of each hosted
owner and only moves messages in and out of them. ``prepare`` builds an owner's party for an
evaluate task from public material (the ring order and the nodes' certificates, sent once per node
and session; the peers' keys, accepted only when signed by their node, :class:`OwnerKeys`);
``start`` gives it the owner's release, already debited by the owner core; ``step`` delivers a
relayed envelope. The ring only keeps individual noisy pairs from a curious relay: the noise, not
the ring, is the guarantee.

A party whose expected envelope does not open sends its complaint naming the sender (audit 33, A33-2;
:meth:`RingParty.take_complaint`): the coordinator then drops both ends of that hop instead of blaming this owner's
silence as a stall. The complaint is a function of the envelope's header, not of the owner's data.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from privfed.common.errors import ConfigError, ProtocolError, RemoteProtocolError
from privfed.common.secagg.boxes import Box
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.ring import Inbound, Outbound, RingParty
from privfed.common.tasks import (
    Payload,
    Result,
    RingJoined,
    RingMessageTask,
    RingSpec,
    RingTotal,
    Task,
)
from privfed.owner.keys import OwnerKeys

if TYPE_CHECKING:
    from privfed.common.tasks import BoostEvaluateTask

log = logging.getLogger("privfed.owner")


class RingMod:
    """The ring parties of the owners one node hosts (module docstring)."""

    def __init__(self, keys: OwnerKeys) -> None:
        self._keys = keys
        self._parties: dict[str, RingParty] = {}  # owner_id -> its party in the current session
        self._sessions: dict[str, tuple[tuple[str, ...], dict[str, bytes]]] = {}  # session -> (ring, certificates)
        self._evaluate_task: dict[str, str] = {}  # owner_id -> its evaluate task (answered by the leader's total)

    def _session(self, ring_spec: RingSpec) -> tuple[tuple[str, ...], dict[str, bytes]]:
        if ring_spec.ring:
            self._sessions = {ring_spec.session_id: (ring_spec.ring, ring_spec.certificates)}
        if ring_spec.session_id not in self._sessions:
            raise ConfigError(f"ring session {ring_spec.session_id} arrived without its ring order")
        return self._sessions[ring_spec.session_id]

    def prepare(self, owner_id: str, spec: BoostEvaluateTask) -> RingParty:
        """The ring party of one evaluate task; nothing is computed from rows."""
        ring = spec.ring
        # The ring order and certificates come once per node and session: keep them even if this
        # owner's own task is refused, the node's other members of the ring need them.
        order, certificates = self._session(ring)
        if owner_id not in order:
            raise RemoteProtocolError(f"{owner_id} is not in the ring of session {ring.session_id}")
        if len(order) < 2:
            raise RemoteProtocolError("a ring needs at least 2 parties")
        bound = min(float(ring.max_abs), spec.config.releases.contribution_bound)
        try:
            fixed_point = FixedPoint(frac_bits=ring.frac_bits, n_parties=ring.n_parties, max_abs=bound)
        except (TypeError, ValueError) as exc:
            raise RemoteProtocolError(f"ring encoding is unusable: {exc}") from exc
        peers = {p.owner_id: p for p in ring.peers}
        try:
            boxes = {
                pid: Box(owner_id, self._keys.own_key(owner_id), pid, self._keys.peer_key(certificates, peers[pid]))
                for pid in peers
                if pid != owner_id
            }
            return RingParty(owner_id, order, ring.session_id, fixed_point, boxes)
        except KeyError as exc:
            raise ConfigError(f"ring session {ring.session_id}: no key for {exc}") from exc
        except ValueError as exc:  # an unparsable certificate or key from the coordinator
            if isinstance(exc, ConfigError):
                raise
            raise RemoteProtocolError(f"ring session {ring.session_id}: unusable peer material: {exc}") from exc

    def start(self, task: Task, party: RingParty, values: np.ndarray) -> tuple[Payload | None, list[Outbound]]:
        """The owner's party is ``party`` now; it starts with the owner's release. Members answer at
        once (:class:`RingJoined`); the leader answers with the total when the ring closes."""
        old = self._parties.get(task.owner_id)
        if old is not None and old.session_id != party.session_id:
            # A previous session the coordinator gave up on (it re-forms a ring only after the attempt's deadline).
            old.on_timeout()
            if old.failure_reason:
                log.info("ring session %s abandoned: %s", old.session_id, old.failure_reason)
        self._parties[task.owner_id] = party
        self._evaluate_task[task.owner_id] = task.task_id
        out = party.start(values)
        return (None if party.index == 0 else RingJoined(party.session_id)), out

    def step(self, task: Task) -> tuple[Result | None, list[Outbound]]:
        """A relayed envelope: the leader's total answers its evaluate task, and its RESULT envelopes go
        to every member (the seed's "distributes to all other data owners"). A bad envelope is dropped."""
        party = self._parties.get(task.owner_id)
        if party is None or not isinstance(task.spec, RingMessageTask):
            log.warning("ring message for %s, which is in no ring here: dropped", task.owner_id)
            return None, []
        try:
            out = party.on_message(Inbound.from_bytes(task.spec.data))
        except (ProtocolError, ValueError) as exc:
            complaint = party.take_complaint()
            log.warning("ring party %s failed: %s%s", task.owner_id, exc, "; complaint sent" if complaint else "")
            return None, [] if complaint is None else [complaint]
        total = party.result()
        if total is None:
            return None, out
        self._parties.pop(task.owner_id)
        if party.index == 0:
            evaluate = self._evaluate_task.get(task.owner_id)
            result = RingTotal(party.session_id, np.asarray(total))
            return (None if evaluate is None else Result(evaluate, task.owner_id, result)), out
        log.debug("ring session %s closed for %s", party.session_id, task.owner_id)
        return None, out
