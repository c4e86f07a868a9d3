"""The driver of the coordinator's secure sums: runs the sans-I/O machines over a relayed transport.

Every decision of a secure sum (attempts, drops, stalls, re-keying, key reuse) is the machines'
(:mod:`privfed.common.secagg.transitions`). :class:`RelayedTransport` only moves what they ask: it
sends each :class:`~privfed.common.secagg.events.Ask` as a batch of tasks, opens and closes relay
sessions when told (contract 5: a ring is open for exactly its members, and closed whatever
happens), and feeds back the answers, the owners whose node is silent, the relay's ``HOP``
senders and the complaints it heard (A33-2). It measures the time a sum takes and logs what the machines note.

The gRPC transport (:class:`privfed.server.job.GrpcTransport`, over the dispatcher) and the
in-process one (``privfed.deploy.inprocess.InProcessTransport``) are its subclasses: they provide the
moves (``run_tasks``, ``silent_owners``, ``peer_key``, ``certificates``, ``open_ring``,
``close_ring``, ``hop_senders``), both over one :class:`~privfed.server.relay.Relay`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from privfed.common.tasks import PeerKey, Result, RingSpec, Task, TaskSpec
from privfed.server.strategies.base import SumResult, Transport, new_tasks
from privfed.server.strategies.result import SumRecord

if TYPE_CHECKING:
    from privfed.common.secagg.events import Action, Ask
    from privfed.common.secagg.transitions import KeyPreparation, SecureSum

log = logging.getLogger("privfed.coordinator")


class RelayedTransport(Transport):
    """A :class:`Transport` whose owners' sealed envelopes go through the coordinator's relay
    (module docstring). ``secure_sum``: the default protocol (``"auto"``, ``"ring"`` or ``"secagg"``)."""

    def __init__(self, secure_sum: str = "auto") -> None:
        # here, not at the top: a coordinator imports the secure sums' machines (their masking and
        # aggregation, 0.5 MB: ``bench/footprint.py``) when its job starts, not while it waits for owners
        from privfed.common.secagg.coordinator import SecureSumCoordinator

        self.secure_sums = SecureSumCoordinator(secure_sum)

    @property
    def secure_sum_protocol(self) -> str:
        return self.secure_sums.protocol

    # ------------------------------------------------------------------ the moves a subclass provides
    def run_tasks(self, tasks: list[Task], timeout: float | None = None, *, stalls: str | None = None) -> list[Result]:
        """Send ``tasks``, wait for the answers (or ``timeout``, or a stall of the open ring session
        ``stalls``), return those that came."""
        raise NotImplementedError

    def silent_owners(self) -> set[str]:
        raise NotImplementedError

    def peer_key(self, owner_id: str) -> PeerKey:
        """The owner's signed end-to-end key, as its node registered it."""
        raise NotImplementedError

    def certificates(self) -> dict[str, bytes]:
        """node id -> certificate PEM of every owner node."""
        raise NotImplementedError

    def open_ring(self, session_id: str, members: Sequence[str]) -> None:
        raise NotImplementedError

    def close_ring(self, session_id: str) -> None:
        raise NotImplementedError

    def hop_senders(self, session_id: str) -> set[str]:
        raise NotImplementedError

    def complaints(self, session_id: str) -> set[tuple[str, str]]:
        """``(complainer, accused)`` of the open ring ``session_id``: a member said what the accused sealed to it did
        not open (:meth:`~privfed.server.relay.Relay.complaints`; audit 33, A33-2). None by default."""
        return set()

    def rekeyed_owners(self, session_id: str) -> set[str]:
        """Members of the open ring ``session_id`` that cannot pass the sum on though their node calls: a new process
        took it over since the ring opened (:meth:`~privfed.server.dispatcher.Dispatcher.rekeyed_owners`). None by
        default: a transport whose nodes never restart."""
        return set()

    # ------------------------------------------------------------------ Transport
    def secure_sum(
        self,
        ring: Sequence[str],
        task_for: Callable[[RingSpec], TaskSpec],
        *,
        max_abs: float,
        round_id: str,
        timeout: float | None = None,
        protocol: str | None = None,
    ) -> SumResult:
        t0 = time.perf_counter()
        machine = self.secure_sums.secure_sum(
            ring,
            task_for,
            max_abs=max_abs,
            peer_key=self.peer_key,
            certificates=self.certificates(),
            timeout=timeout,
            protocol=protocol,
        )
        self._drive(machine, round_id)
        out = machine.result()
        seconds = time.perf_counter() - t0
        record = SumRecord(out.protocol, out.summed, out.attempts, seconds, out.dropped, dict(out.refused))
        return SumResult(out.totals, record)

    def prepare_secure_sums(
        self,
        groups: Sequence[Sequence[str]],
        *,
        max_abs: float,
        timeout: float | None = None,
        protocol: str | None = None,
    ) -> None:
        """Key the pairwise-mask runs of the planned ``groups`` in one batch (:meth:`SecureSumCoordinator.prepare`)."""
        machine = self.secure_sums.prepare(
            groups,
            max_abs=max_abs,
            peer_key=self.peer_key,
            certificates=self.certificates(),
            timeout=timeout,
            protocol=protocol,
        )
        if machine is not None:
            self._drive(machine, "keys")

    def _drive(self, machine: SecureSum | KeyPreparation, round_id: str) -> None:
        """Do what ``machine`` asks until it asks nothing more; every relay session it opened is
        closed, also when it fails (:class:`RoundFailed`) or anything else goes wrong."""
        from privfed.common.secagg.events import Answers, CloseRing, OpenRing  # loaded with the machine

        opened: set[str] = set()
        noted = 0
        try:
            actions: list[Action] = machine.start()
            while actions:
                ask: Ask | None = None
                for action in actions:
                    if isinstance(action, OpenRing):
                        self.open_ring(action.session_id, action.members)
                        opened.add(action.session_id)
                    elif isinstance(action, CloseRing):
                        self.close_ring(action.session_id)
                        opened.discard(action.session_id)
                    else:
                        ask = action
                for note in machine.notes[noted:]:
                    log.warning("%s", note)
                noted = len(machine.notes)
                if ask is None:
                    return
                tasks = new_tasks(list(ask.specs), round_id, ask.specs.__getitem__)
                results = self.run_tasks(tasks, timeout=ask.timeout, stalls=ask.stalls)
                silent = self.silent_owners()
                if ask.stalls is not None:  # a member a new process took over is blamed, not the next one (A28-1)
                    silent |= self.rekeyed_owners(ask.stalls)
                answers = Answers(
                    {r.owner_id: r.payload for r in results},
                    silent=frozenset(silent),
                    hop_senders=None if ask.stalls is None else frozenset(self.hop_senders(ask.stalls)),
                    complaints=frozenset() if ask.stalls is None else frozenset(self.complaints(ask.stalls)),
                )
                actions = machine.on_answers(answers)
        finally:
            for session_id in opened:
                self.close_ring(session_id)
