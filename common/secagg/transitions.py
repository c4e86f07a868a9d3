"""The coordinator's secure sums, sans-I/O: every transition of one lives in this file (SPEC §11).

As h11's ``_state.py``: the transitions are data (:data:`TRANSITIONS`, :data:`PREPARATION`) and every
decision that moves a sum is a method here; :class:`~privfed.common.secagg.coordinator.SecureSumCoordinator`
(h11's ``Connection``) builds the machines. The driver (``privfed.server.securesum``) owns sockets,
relay and clock: it sends each :class:`Ask`, opens and closes relay sessions (:class:`OpenRing`,
:class:`CloseRing`) and feeds back :class:`Answers` (payloads, owners whose node is silent, the relay's
``HOP`` senders). A machine that gives up raises :class:`RoundFailed` and is ``FAILED`` from then on.
Each sum is a :class:`SecureSum`:

* **Ring** (seed 002 §3.3; :mod:`~privfed.common.secagg.ring`), in attempts, each under a fresh session
  id. ``JOINING``: every member but the leader joins or refuses, and a refusing member is dropped
  before any hop is sent. ``SUMMING``: the leader answers with the total, a refusal or nothing. A
  refusing, silent or stalled party is dropped and the ring re-formed, order kept (``REFORMED``); at
  most :data:`MAX_ATTEMPTS` attempts, never fewer than 2 parties. An attempt a member complained in (what
  the accused sealed to it did not open; audit 33, A33-2) drops both ends of each such hop
  (:func:`~privfed.common.secagg.ring_topology.complained_hops`), with no stretched deadline: it is no slow link.
  A timed-out attempt blames the
  parties whose node is silent, failing that the first party the relay saw no ``HOP`` from; then every node
  was online and the ring may only be slow (a long link: N sequential hops), so the next attempts wait twice
  as long each (walkthrough 10, W10-1: each attempt of a ring that needed 50 s timed out at 30.5 s, dropped
  a healthy owner, and the job failed after five with its owners' releases spent).
* **Pairwise masks** (Bonawitz et al. CCS 2017 §4 on Bell et al.'s sparse graph;
  :mod:`~privfed.common.secagg.aggregator`). A kept run that serves the sum's owners is reused, else
  ``KEYS`` and ``SHARES`` agree keys. ``MASKING`` asks the masked releases, ``UNMASKING`` the
  survivors' shares; a refusing or silent owner is dropped, its masks cancelled from its neighbours'
  shares. An owner whose neighbour's key shares do not open at it refuses naming that neighbour (code
  ``unopened``; audit 33, A33-2): the attempt is given up before anything is unmasked and the named owner left out
  (:meth:`~privfed.common.secagg.aggregator.SecAggServer.on_complaints`: alone when ``t`` of its neighbours name it,
  else with its accusers), the others keyed anew. A run that cannot finish the round is attempted again among the
  owners that sent a masked input (``AGAIN`` over the same run, ``REKEY`` when it no longer serves them), at most
  :data:`~privfed.common.secagg.runs.SECAGG_ATTEMPTS` attempts. :class:`KeyPreparation` keys a job's
  planned groups in one batch (``KEYS``, ``SHARES``, ``DONE``).

Re-forming and attempting again are safe for privacy: each owner's input is a debited release cached
per (run, round) at the owner (``privfed.owner.kinds.boosting``); a new attempt gets the same noisy
value and no new debit.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from privfed.common.errors import ConfigError, LocalProtocolError, RoundFailed, TooFewParties
from privfed.common.secagg.aggregator import SecAggServer
from privfed.common.secagg.events import Action, Answers, Ask, CloseRing, OpenRing, PeerKeys, RingAttempt, SumOutcome
from privfed.common.secagg.masking import MIN_MEMBERS
from privfed.common.secagg.messages import MaskedInput, UnmaskReply
from privfed.common.secagg.requests import KeyAgreement, ring_specs
from privfed.common.secagg.ring import new_session_id
from privfed.common.secagg.ring_topology import complained_hops, reform_ring, stalled_party
from privfed.common.secagg.runs import SECAGG_ATTEMPTS, KeyedRuns
from privfed.common.tasks import BoostEvaluateTask, Refusal, RingSpec, RingTotal, SecAggUnmaskTask, TaskSpec
from privfed.common.validation import check_int

#: Attempts of one ring secure sum before the round fails.
MAX_ATTEMPTS = 5
#: Seconds an attempt (a ring) or a step (pairwise masks) may take: this base plus
#: :data:`TIMEOUT_PER_PARTY` per party (ring hops are sequential).
BASE_TIMEOUT = 30.0
TIMEOUT_PER_PARTY = 0.01


def attempt_timeout(n_parties: int, timeout: float | None = None) -> float:
    """The deadline of one attempt in seconds: ``timeout`` if given, else ``30 + 0.01 N``."""
    return float(timeout) if timeout is not None else BASE_TIMEOUT + TIMEOUT_PER_PARTY * n_parties


class Phase(enum.Enum):
    """What a machine waits for."""

    JOINING = "joining"  # ring: the members' joins or refusals
    SUMMING = "summing"  # ring: the leader's total
    KEYS = "keys"  # pairwise masks, step 0: the mask keys' adverts
    SHARES = "shares"  # step 1: the key shares sealed to each neighbour
    MASKING = "masking"  # step 2: the masked releases
    UNMASKING = "unmasking"  # step 3: the survivors' unmasking shares
    DONE = "done"  # terminal
    FAILED = "failed"  # terminal: failure_reason says why


class Outcome(enum.Enum):
    """What one batch of answers amounted to."""

    JOINED = "joined"  # every member joined
    REFORMED = "reformed"  # parties dropped: a new ring attempt without them
    TOTAL = "total"  # the sum is known
    ADVERTISED = "advertised"  # enough mask keys came
    KEYED = "keyed"  # the key shares came (owners that sent none are out of the run)
    MASKED = "masked"  # the run can finish the round
    AGAIN = "again"  # a new attempt over a run that still serves its owners
    REKEY = "rekey"  # a new attempt that agrees keys anew
    GAVE_UP = "gave_up"


#: Phase -> outcome -> next phase, for one secure sum (:class:`SecureSum`).
TRANSITIONS: dict[Phase, dict[Outcome, Phase]] = {
    Phase.JOINING: {Outcome.JOINED: Phase.SUMMING, Outcome.REFORMED: Phase.JOINING, Outcome.GAVE_UP: Phase.FAILED},
    Phase.SUMMING: {Outcome.TOTAL: Phase.DONE, Outcome.REFORMED: Phase.JOINING, Outcome.GAVE_UP: Phase.FAILED},
    Phase.KEYS: {Outcome.ADVERTISED: Phase.SHARES, Outcome.GAVE_UP: Phase.FAILED},
    Phase.SHARES: {Outcome.KEYED: Phase.MASKING},
    Phase.MASKING: {
        Outcome.MASKED: Phase.UNMASKING,
        Outcome.AGAIN: Phase.MASKING,
        Outcome.REKEY: Phase.KEYS,
        Outcome.GAVE_UP: Phase.FAILED,
    },
    Phase.UNMASKING: {
        Outcome.TOTAL: Phase.DONE,
        Outcome.AGAIN: Phase.MASKING,
        Outcome.REKEY: Phase.KEYS,
        Outcome.GAVE_UP: Phase.FAILED,
    },
}
#: The same for a batch key agreement (:class:`KeyPreparation`).
PREPARATION: dict[Phase, dict[Outcome, Phase]] = {
    Phase.KEYS: {Outcome.ADVERTISED: Phase.SHARES, Outcome.GAVE_UP: Phase.DONE},
    Phase.SHARES: {Outcome.KEYED: Phase.DONE},
}


class _Machine:
    """A phase, a transition table and the rule that a terminal machine takes no more events."""

    table: dict[Phase, dict[Outcome, Phase]] = {}

    def __init__(self, phase: Phase) -> None:
        self.phase = phase
        self.failure_reason: str | None = None
        self.notes: list[str] = []  # what the driver may log (drops, attempts again)

    def _expect(self, *phases: Phase) -> None:
        if self.phase not in phases:
            raise LocalProtocolError(f"secure sum is {self.phase.name}, this event needs {[p.name for p in phases]}")

    def _move(self, outcome: Outcome) -> Phase:
        allowed = self.table.get(self.phase, {})
        if outcome not in allowed:
            raise LocalProtocolError(f"no transition from {self.phase.name} on {outcome.name}")
        self.phase = allowed[outcome]
        return self.phase

    def _fail(self, reason: str) -> RoundFailed:
        """Move to ``FAILED``; returns the error to raise."""
        self._move(Outcome.GAVE_UP)
        self.failure_reason = reason
        return RoundFailed(reason)


class SecureSum(_Machine):
    """The machine of one secure sum (module docstring), over the ``coordinator``'s keyed runs; built by
    :meth:`SecureSumCoordinator.secure_sum <privfed.common.secagg.coordinator.SecureSumCoordinator.secure_sum>`."""

    table = TRANSITIONS

    def __init__(
        self,
        coordinator: KeyedRuns,
        protocol: str,
        parties: Sequence[str],
        task_for: Callable[[RingSpec], TaskSpec],
        max_abs: float,
        peer_key: PeerKeys,
        certificates: Mapping[str, bytes],
        timeout: float | None,
        *,
        max_attempts: int | None = None,
        new_id: Callable[[], str] = new_session_id,
    ) -> None:
        parties = tuple(parties)
        least = 2 if protocol == "ring" else MIN_MEMBERS
        if len(set(parties)) != len(parties) or len(parties) < least:
            raise ConfigError(
                f"a {protocol} secure sum needs at least {least} distinct parties, got {list(parties)[:5]}"
            )
        default = MAX_ATTEMPTS if protocol == "ring" else SECAGG_ATTEMPTS
        self.max_attempts = check_int(default if max_attempts is None else max_attempts, name="max_attempts", minimum=1)
        super().__init__(Phase.JOINING if protocol == "ring" else Phase.KEYS)
        self.coordinator, self.protocol, self.parties = coordinator, protocol, parties
        self.task_for, self.max_abs, self.peer_key, self.certificates = task_for, max_abs, peer_key, certificates
        self._timeout, self._new_id = timeout, new_id
        self._stretch = 1.0  # ring: the deadline's factor, doubled by each timeout with every node online
        self.dropped: list[str] = []  # ring: in the order dropped
        self.refused: dict[str, str] = {}
        self.attempts: list[RingAttempt] = []  # ring
        self.attempt_number = 0
        self.total: np.ndarray | None = None
        self._live = list(parties)  # pairwise masks: the owners a new attempt asks
        self._server: SecAggServer | None = None
        self._keying: KeyAgreement | None = None
        self._masked: set[str] = set()

    @property
    def attempt(self) -> RingAttempt:
        """The current (or last) ring attempt."""
        return self.attempts[-1]

    # ------------------------------------------------------------------ start
    def start(self) -> list[Action]:
        """The first actions: the first ring attempt, or the pairwise-mask sum's first step."""
        if self.attempt_number:
            raise LocalProtocolError("a secure sum starts once")
        if self.protocol == "ring":
            return self._ring_attempt(self.parties)
        keyed = self.coordinator.keyed(self._live, self.max_abs) is not None  # a run keyed before serves it
        self.phase = Phase.MASKING if keyed else Phase.KEYS
        return self._secagg_attempt()

    def on_answers(self, answers: Answers) -> list[Action]:
        """The answers to the last :class:`Ask`; returns what to do next (nothing once ``DONE``).

        Raises
        ------
        RoundFailed
            The sum gave up (phase ``FAILED``); :attr:`failure_reason` says why.
        """
        self._expect(Phase.JOINING, Phase.SUMMING, Phase.KEYS, Phase.SHARES, Phase.MASKING, Phase.UNMASKING)
        handler = {
            Phase.JOINING: self._on_joins,
            Phase.SUMMING: self._on_total,
            Phase.KEYS: self._on_adverts,
            Phase.SHARES: self._on_key_shares,
            Phase.MASKING: self._on_masked,
            Phase.UNMASKING: self._on_unmask,
        }[self.phase]
        return handler(answers)

    def result(self) -> SumOutcome:
        self._expect(Phase.DONE)
        assert self.total is not None
        if self.protocol == "ring":
            summed, attempts, dropped = self.attempt.ring, len(self.attempts), tuple(self.dropped)
        else:
            assert self._server is not None
            summed, attempts = self._server.included, self.attempt_number
            included = set(summed)  # once: built per party, it made this O(N^2) (~17% of a 10^5-owner coordinator)
            dropped = tuple(o for o in self.parties if o not in included)
        return SumOutcome(self.protocol, self.total, summed, attempts, dropped, dict(self.refused))

    # ------------------------------------------------------------------ ring
    def _ring_attempt(self, ring: tuple[str, ...]) -> list[Action]:
        self.attempt_number += 1
        deadline = self._stretch * attempt_timeout(len(ring), self._timeout)
        attempt = RingAttempt(self.attempt_number, self._new_id(), ring, deadline)
        self.attempts.append(attempt)
        self._spec_for = ring_specs(
            attempt.session_id, ring, self.max_abs, self.peer_key, self.certificates, self.task_for
        )
        specs = {m: self._spec_for(m) for m in attempt.members}
        return [OpenRing(attempt.session_id, ring), Ask(specs, attempt.timeout)]

    def _on_joins(self, answers: Answers) -> list[Action]:
        attempt = self.attempt
        members = set(attempt.members)
        refused = {p: c for p, c in answers.refused().items() if p in members}
        self.refused.update(refused)
        joined = (set(answers.payloads) & members) - set(refused)
        gone = (members - joined) | (answers.silent & {attempt.leader})
        if not gone:
            self._move(Outcome.JOINED)
            lead = {attempt.leader: self._spec_for(attempt.leader)}
            return [Ask(lead, attempt.timeout, stalls=attempt.session_id)]
        return self._reform(gone)

    def _on_total(self, answers: Answers) -> list[Action]:
        attempt = self.attempt
        total = next(
            (p for p in answers.payloads.values() if isinstance(p, RingTotal) and p.session_id == attempt.session_id),
            None,
        )
        if total is not None:
            self.total = np.asarray(total.values, dtype=np.float64)
            self._move(Outcome.TOTAL)
            return [CloseRing(attempt.session_id)]
        leader = answers.payloads.get(attempt.leader)
        if isinstance(leader, Refusal):
            self.refused[attempt.leader] = leader.code
            return self._reform({attempt.leader})
        gone = set(answers.silent) & set(attempt.ring)
        if framed := complained_hops(attempt.ring, answers.complaints):
            gone |= framed  # both ends of each hop that did not open: no stall, no stretch (A33-2)
            heard = sorted(answers.complaints)
            self.notes.append(
                f"ring {attempt.session_id}: {', '.join(f'{c} could not open what {a} sealed to it' for c, a in heard)}"
                " (a complaint); both ends of that hop dropped"
            )
        if not gone and answers.hop_senders is not None:
            gone = {stalled_party(attempt.ring, answers.hop_senders)}
            self._stretch *= 2  # every node online: a slow ring, maybe, rather than a dead party (W10-1)
            next_wait = self._stretch * attempt_timeout(len(attempt.ring) - 1, self._timeout)
            self.notes.append(
                f"ring {attempt.session_id} did not close within {attempt.timeout:.0f} s with every node online "
                f"(a slow link?): it stopped at {sorted(gone)[0]}, dropped; the next attempt waits {next_wait:.0f} s"
            )
        if not gone:
            raise self._fail(
                f"ring {attempt.session_id} did not close within {attempt.timeout:.0f} s and no party is known to be gone"
            )
        return self._reform(gone)

    def _reform(self, gone: Iterable[str]) -> list[Action]:
        """Drop ``gone`` and start a new attempt over the rest (order kept), or give up."""
        ring = self.attempt.ring
        gone = set(gone)
        dropped = [p for p in ring if p in gone]  # ring order, for a stable report
        self.dropped += dropped
        left = tuple(p for p in ring if p not in gone)
        close = CloseRing(self.attempt.session_id)
        if len(left) < 2:
            failed = self._fail(
                f"ring secure sum: fewer than 2 parties left after dropping {dropped[:3]}... "
                f"({len(self.dropped)} dropped in all); nothing to sum"
            )
            raise TooFewParties(str(failed), tuple(self.dropped)) from None
        if len(self.attempts) >= self.max_attempts:
            slow = (
                "; its rings timed out with every node online: on slow links raise ring_timeout in the job file or "
                'use secure_sum = "secagg" (O(1) round trips)'
                if self._stretch > 1
                else ""
            )
            raise self._fail(
                f"the ring secure sum failed {self.max_attempts} times ({len(self.dropped)} parties dropped){slow}"
            )
        self._move(Outcome.REFORMED)
        self.notes.append(
            f"ring {self.attempt.session_id}: {len(self.dropped)} party(ies) dropped so far ({len(self.refused)} "
            f"refused; {self.dropped[:3]}...); re-running without them"
        )
        return [close, *self._ring_attempt(tuple(reform_ring(ring, dropped)))]

    # ------------------------------------------------------------------ pairwise masks
    def _secagg_attempt(self) -> list[Action]:
        """A new attempt among the live owners: over a keyed run that serves them, or keyed anew."""
        self.attempt_number += 1
        self._timeout_s = attempt_timeout(len(self.parties), self._timeout)  # per step
        server = self.coordinator.keyed(self._live, self.max_abs)
        if server is not None:
            return self._mask(server)
        members = tuple(sorted(self._live))
        self._keying = KeyAgreement(
            [(members, self.coordinator.rounds_for(members))],
            self.max_abs,
            self.peer_key,
            self.certificates,
            strict=True,
        )
        return [Ask(self._keying.advert_specs(), self._timeout_s)]

    def _on_adverts(self, answers: Answers) -> list[Action]:
        assert self._keying is not None
        try:
            specs = self._keying.on_adverts(answers.payloads)
        except RoundFailed as exc:
            raise self._fail(str(exc)) from exc
        self._move(Outcome.ADVERTISED)
        return [Ask(specs, self._timeout_s)]

    def _on_key_shares(self, answers: Answers) -> list[Action]:
        assert self._keying is not None
        (server,) = self._keying.on_key_shares(answers.payloads)
        self.coordinator.keep([server])
        self._move(Outcome.KEYED)
        return self._mask(server)

    def _mask(self, server: SecAggServer) -> list[Action]:
        """Step 2: each owner's evaluation release, asked with its masking request."""
        self._server = server
        fp = server.fixed_point
        spec = self.task_for(RingSpec(server.run_id, (), fp.frac_bits, fp.n_parties, self.max_abs, (), {}))
        if not isinstance(spec, BoostEvaluateTask):
            raise ConfigError(f"a secure sum contributes evaluation releases, got {type(spec).__name__}")
        inputs = server.input_requests(self._live)
        return [Ask({o: replace(spec, secagg=r) for o, r in inputs.items()}, self._timeout_s)]

    def _on_masked(self, answers: Answers) -> list[Action]:
        server = self._server
        assert server is not None
        self.refused.update(answers.refused())
        masked = {o: p for o, p in answers.payloads.items() if isinstance(p, MaskedInput)}
        self._masked = set(masked)
        complaints = {o: p.accused for o, p in answers.payloads.items() if isinstance(p, Refusal) and p.accused}
        if complaints:
            out, heard = server.on_complaints(self._masked, complaints)
            if out:  # shares that did not open: leave their sender out, attempt again keyed anew (A33-2)
                self._masked = (self._masked | heard) - out
                return self._again(
                    RoundFailed(
                        f"round given up before unmasking: {len(heard)} owner(s) could not open the key shares of "
                        f"{sorted(out)[:3]} (left out with {len(out)} in all)"
                    )
                )
        try:
            unmask = server.on_masked(masked)
        except RoundFailed as exc:
            return self._again(exc)
        self._move(Outcome.MASKED)
        specs = {o: SecAggUnmaskTask(server.run_id, r) for o, r in unmask.items()}
        return [Ask(specs, self._timeout_s)]

    def _on_unmask(self, answers: Answers) -> list[Action]:
        server = self._server
        assert server is not None
        replies = {o: p for o, p in answers.payloads.items() if isinstance(p, UnmaskReply)}
        try:
            self.total = server.on_unmask(replies)
        except RoundFailed as exc:
            return self._again(exc)
        self._move(Outcome.TOTAL)
        return []

    def _again(self, exc: RoundFailed) -> list[Action]:
        """The run could not finish the round: attempt again among the owners that sent a masked input."""
        self._live = [o for o in self._live if o in self._masked]
        if self.attempt_number >= self.max_attempts or len(self._live) < MIN_MEMBERS:
            raise self._fail(str(exc)) from exc
        rekey = self.coordinator.keyed(self._live, self.max_abs) is None
        self._move(Outcome.REKEY if rekey else Outcome.AGAIN)
        run = self._server.run_id if self._server is not None else "?"
        self.notes.append(f"secure sum {run}: {exc}; attempted again among {len(self._live)} owner(s)")
        return self._secagg_attempt()


class KeyPreparation(_Machine):
    """Steps 0 and 1 of several pairwise-mask runs in one batch, kept in the ``coordinator``'s runs
    (:meth:`SecureSumCoordinator.prepare <privfed.common.secagg.coordinator.SecureSumCoordinator.prepare>`)."""

    table = PREPARATION

    def __init__(self, coordinator: KeyedRuns, agreement: KeyAgreement, timeout: float) -> None:
        super().__init__(Phase.KEYS)
        self.coordinator, self.agreement, self.timeout = coordinator, agreement, timeout

    def start(self) -> list[Action]:
        return [Ask(self.agreement.advert_specs(), self.timeout)]

    def on_answers(self, answers: Answers) -> list[Action]:
        self._expect(Phase.KEYS, Phase.SHARES)
        if self.phase is Phase.KEYS:
            specs = self.agreement.on_adverts(answers.payloads)
            self.notes += self.agreement.notes
            if not specs:
                self._move(Outcome.GAVE_UP)
                return []
            self._move(Outcome.ADVERTISED)
            return [Ask(specs, self.timeout)]
        self.coordinator.keep(self.agreement.on_key_shares(answers.payloads))
        self._move(Outcome.KEYED)
        return []
