"""Coordinator side of a ring secure sum: forming, re-forming and giving up, sans-I/O (SPEC §11.2).

One :class:`RingSession` is one logical secure sum over a list of parties. It runs in
*attempts*, each under a fresh session id (:func:`~privfed.common.secagg.ring.new_session_id`):

1. ``JOINING``: every member but the leader is asked to join. Each answers at once with a join
   or a refusal; nothing moves before the leader starts, so a refusing member is dropped before
   any hop is sent (:meth:`RingSession.on_members`).
2. ``SUMMING``: every member joined; the leader is asked and answers with the total, or a
   refusal, or not at all within the attempt's timeout (:meth:`RingSession.on_leader`).
3. A refusing, silent or stalled party is dropped and the ring re-formed with the rest, order kept
   (:func:`~privfed.common.secagg.ring.reform_ring`), as a new attempt; at most ``max_attempts``
   attempts, and never fewer than 2 parties (one party's "sum" is its own input).

Which party stalled a timed-out attempt: first the parties whose node the transport knows to be
silent; failing that, the first party in ring order the relay saw no ``HOP`` from
(:func:`~privfed.common.secagg.ring.stalled_party`). States are an :class:`enum.Enum`; the driver
(the coordinator's transport: gRPC or in-process) owns the sockets and the clock and only moves
bytes: it asks :attr:`RingSession.attempt` whom to send what, feeds back what came, and reads
:attr:`RingSession.phase`.

Re-forming is safe for privacy because each party's input is already a debited release cached
per (run, round) at the owner (``privfed.owner.kinds.boosting``): a re-formed ring gets
the same noisy value and no new debit.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from privfed.common.errors import ConfigError, LocalProtocolError, RoundFailed
from privfed.common.secagg.ring import new_session_id, reform_ring, stalled_party

#: Attempts of one secure sum before the round fails.
MAX_ATTEMPTS = 5
#: Seconds an attempt may take: this base plus :data:`TIMEOUT_PER_PARTY` per party (hops are sequential).
BASE_TIMEOUT = 30.0
TIMEOUT_PER_PARTY = 0.01


def attempt_timeout(n_parties: int, timeout: float | None = None) -> float:
    """The deadline of one attempt in seconds: ``timeout`` if given, else ``30 + 0.01 N``."""
    return float(timeout) if timeout is not None else BASE_TIMEOUT + TIMEOUT_PER_PARTY * n_parties


class Phase(enum.Enum):
    JOINING = "joining"  # members asked, waiting for their joins or refusals
    SUMMING = "summing"  # every member joined; the leader asked, waiting for the total
    DONE = "done"  # terminal: total holds the sum over attempt.ring
    FAILED = "failed"  # terminal: failure_reason says why


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try of the secure sum: a fresh session id over the parties still in the ring."""

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


class RingSession:
    """The coordinator's machine for one secure sum (module docstring).

    Parameters
    ----------
    ring : sequence of str
        Party ids in ring order; ``ring[0]`` leads. At least 2 distinct ids.
    max_attempts : int >= 1
    timeout : float or None
        Seconds per attempt (default :func:`attempt_timeout` of the ring size).
    new_id : callable
        Session ids (default :func:`new_session_id`; fresh and random for every attempt).

    Raises
    ------
    ConfigError
        Fewer than 2 or duplicate parties, or a bad ``max_attempts``.
    """

    def __init__(
        self,
        ring: Sequence[str],
        *,
        max_attempts: int = MAX_ATTEMPTS,
        timeout: float | None = None,
        new_id: Callable[[], str] = new_session_id,
    ):
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigError(f"max_attempts must be an int >= 1, got {max_attempts!r}")
        self.max_attempts = max_attempts
        self._timeout = timeout
        self._new_id = new_id
        self.dropped: list[str] = []  # parties removed, in the order they were dropped
        self.refused: dict[str, str] = {}  # party -> refusal code
        self.failure_reason: str | None = None
        self.total: np.ndarray | None = None
        self.attempts: list[Attempt] = []
        self._phase = Phase.JOINING
        if len(set(ring)) != len(ring) or len(ring) < 2:
            raise ConfigError(f"a ring secure sum needs at least 2 distinct parties, got {list(ring)[:5]}...")
        self._begin(tuple(ring))

    # ------------------------------------------------------------------ introspection
    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def attempt(self) -> Attempt:
        """The current (or last) attempt."""
        return self.attempts[-1]

    # ------------------------------------------------------------------ transitions
    def _begin(self, ring: tuple[str, ...]) -> None:
        number = len(self.attempts) + 1
        self.attempts.append(Attempt(number, self._new_id(), ring, attempt_timeout(len(ring), self._timeout)))
        self._phase = Phase.JOINING

    def _expect(self, phase: Phase) -> None:
        if self._phase is not phase:
            raise LocalProtocolError(f"ring session is {self._phase.name}, this event needs {phase.name}")

    def _fail(self, reason: str) -> None:
        self._phase, self.failure_reason = Phase.FAILED, reason
        raise RoundFailed(reason)

    def _drop(self, gone: Iterable[str]) -> Phase:
        ring = self.attempt.ring
        gone = [p for p in ring if p in set(gone)]  # ring order, for a stable report
        self.dropped += gone
        left = [p for p in ring if p not in set(gone)]
        if len(left) < 2:
            self._fail(
                f"ring secure sum: fewer than 2 parties left after dropping {gone[:3]}... "
                f"({len(self.dropped)} dropped in all); nothing to sum"
            )
        if len(self.attempts) >= self.max_attempts:
            self._fail(f"the ring secure sum failed {self.max_attempts} times ({len(self.dropped)} parties dropped)")
        self._begin(tuple(reform_ring(ring, gone)))
        return self._phase

    def on_members(self, joined: Iterable[str], refused: Mapping[str, str], *, silent: Iterable[str] = ()) -> Phase:
        """The members' answers to the join request (a member in neither did not answer in time).

        Returns ``SUMMING`` when every member joined and the leader is not known ``silent`` (ask
        the leader next), else ``JOINING`` of a new attempt without the refusing, unanswering and
        silent parties.

        Raises
        ------
        RoundFailed
            Fewer than 2 parties would be left, or the attempts are used up (phase ``FAILED``).
        """
        self._expect(Phase.JOINING)
        members = set(self.attempt.members)
        joined, refused = set(joined) & members, {p: c for p, c in refused.items() if p in members}
        self.refused.update(refused)
        gone = (members - joined) | set(refused) | (set(silent) & {self.attempt.leader})
        if not gone:
            self._phase = Phase.SUMMING
            return self._phase
        return self._drop(gone)

    def on_leader(
        self,
        total: np.ndarray | None,
        *,
        refused: str | None = None,
        silent: Iterable[str] = (),
        hop_senders: Iterable[str] | None = None,
    ) -> Phase:
        """The leader answered with ``total``, refused (its code), or the attempt timed out (neither).

        On a timeout the parties known ``silent`` (their node stopped polling) are dropped; if
        none is, the one the relay saw stall (:func:`stalled_party` of ``hop_senders``, the
        senders of the ``HOP`` envelopes relayed in this attempt).

        Raises
        ------
        RoundFailed
            Nobody can be blamed for a timeout, fewer than 2 parties would be left, or the
            attempts are used up (phase ``FAILED``).
        """
        self._expect(Phase.SUMMING)
        ring = self.attempt.ring
        if total is not None:
            self.total = np.asarray(total, dtype=np.float64)
            self._phase = Phase.DONE
            return self._phase
        if refused is not None:
            self.refused[ring[0]] = refused
            return self._drop([ring[0]])
        gone = set(silent) & set(ring)
        if not gone and hop_senders is not None:
            gone = {stalled_party(ring, hop_senders)}
        if not gone:
            self._fail(
                f"ring {self.attempt.session_id} did not close within {self.attempt.timeout:.0f} s "
                "and no party is known to be gone"
            )
        return self._drop(gone)
