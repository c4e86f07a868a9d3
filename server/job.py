"""One federated job on a running coordinator: wait for owners, run the rounds over the gRPC transport, fit the model."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from privfed.common.boosting.params import MAX_OWNER_ROWS
from privfed.common.errors import ConfigError, JobAborted, RoundFailed
from privfed.common.identity import node_of
from privfed.common.secagg import SECURE_SUMS, secure_sum_for
from privfed.common.secagg.aggregator import SecAggServer
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.masking import MIN_MEMBERS
from privfed.common.secagg.messages import MAX_ROUNDS, KeyAdvert, KeyShares, MaskedInput, ShareKeysRequest, UnmaskReply
from privfed.common.secagg.ring import new_session_id, ring_peers
from privfed.common.secagg.session import Phase, RingSession, attempt_timeout
from privfed.common.tasks import (
    BoostEvaluateTask,
    PeerKey,
    Result,
    RingSpec,
    RingTotal,
    SecAggKeysTask,
    SecAggUnmaskTask,
    Task,
    TaskSpec,
)
from privfed.common.validation import check_choice
from privfed.server.app import CoordinatorServer
from privfed.server.contracts import PublicLimits
from privfed.server.dispatcher import Dispatcher
from privfed.server.registration import Expected, status, wait_for_registration
from privfed.server.rounds import JobBook
from privfed.server.strategies.base import RingSum, Strategy, new_tasks, refusal_codes

log = logging.getLogger("privfed.coordinator")
#: One line per round (``privfed simulate`` shows it instead of progress bars when stderr is no terminal).
round_log = logging.getLogger("privfed.coordinator.rounds")
#: Secure sums one pairwise-mask key agreement serves before the members agree new keys, for
#: members keyed before (boosting's ``eval_groups="all"``); members keyed for the first time (a
#: disjoint evaluation group, which sums once) share seeds for SECAGG_ATTEMPTS only: each owner
#: Shamir-shares one seed per round up front, the largest cost of the key agreement.
SECAGG_ROUNDS = 16
#: Attempts of one pairwise-mask secure sum before the round fails.
SECAGG_ATTEMPTS = 3
#: Keyed pairwise-mask runs the coordinator keeps, as many as an owner node keeps sessions
#: (:data:`privfed.owner.secagg.KEPT_SESSIONS`): both forget the oldest first.
KEPT_RUNS = 64
#: Runs one :meth:`RelayedSecureSum.prepare_secure_sums` keys at most (the first groups): half
#: of what both sides keep, so runs keyed later by their first sum never evict a prepared one unused.
PREPARED_RUNS = KEPT_RUNS // 2


@dataclass
class JobOutcome:
    model: object
    n_owners: int
    answered: int
    refused: dict[str, str]
    lost_nodes: list[str]
    epsilon_by_owner: dict[str, float]  # what the coordinator received shares for
    rejected: dict[str, str] = field(default_factory=dict)  # owner -> "code: detail" of its rejected reply
    timings: dict[str, float] = field(default_factory=dict)


class RelayedSecureSum:
    """:meth:`Transport.secure_sum` for owners whose ring envelopes go through the coordinator's relay.

    The session logic (joins, refusals, drops, re-forming, attempts, stalled parties) is the
    sans-I/O :class:`~privfed.common.secagg.session.RingSession`; this driver only builds each
    owner's :class:`RingSpec`, sends the tasks, opens and closes the relay for exactly the
    attempt's members (contract 5) and feeds the answers back. A subclass provides the moves:
    ``run_tasks``, ``silent_owners``, ``peer_key(owner)``, ``certificates()``,
    ``open_ring(session, members)``, ``close_ring(session)`` and ``hop_senders(session)`` (the
    senders of the ``HOP`` envelopes relayed in an open session, for stalled-party detection).

    ``secure_sum="secagg"`` (or ``"auto"`` for a sum of at least :data:`~privfed.common.secagg.SECAGG_FROM`
    owners) runs the pairwise-mask secure sum instead (:meth:`_secagg_sum`), driving
    the sans-I/O :class:`~privfed.common.secagg.aggregator.SecAggServer` with the same tasks and
    the same evaluation releases.
    """

    secure_sum_protocol = "auto"
    _secagg_runs: tuple[SecAggServer, ...] = ()  # keyed pairwise-mask runs, newest last

    def __init__(self, secure_sum: str = "auto") -> None:
        self.secure_sum_protocol = check_choice(secure_sum, name="secure_sum", allowed=SECURE_SUMS)

    def run_tasks(self, tasks: list[Task], timeout: float | None = None) -> list[Result]:
        """Send ``tasks``, wait for the answers (or ``timeout``), return those that came."""
        raise NotImplementedError

    def silent_owners(self) -> set[str]:
        """Owners whose node stopped answering."""
        raise NotImplementedError

    def peer_key(self, owner_id: str) -> PeerKey:
        """The owner's signed end-to-end key, as its node registered it."""
        raise NotImplementedError

    def certificates(self) -> dict[str, bytes]:
        """node id -> certificate PEM of every owner node."""
        raise NotImplementedError

    def open_ring(self, session_id: str, members: Sequence[str]) -> None:
        """Allow relaying among ``members`` under ``session_id``."""
        raise NotImplementedError

    def close_ring(self, session_id: str) -> None:
        """Stop relaying for ``session_id``."""
        raise NotImplementedError

    def hop_senders(self, session_id: str) -> set[str]:
        """Senders of the ``HOP`` envelopes relayed in the open session ``session_id``."""
        raise NotImplementedError

    def secure_sum(
        self,
        ring: Sequence[str],
        task_for: Callable[[RingSpec], TaskSpec],
        *,
        max_abs: float,
        round_id: str,
        timeout: float | None = None,
        protocol: str | None = None,
    ) -> RingSum:
        """:meth:`Transport.secure_sum`; ``protocol`` (default: the transport's ``secure_sum``) picks
        the ring or the pairwise-mask secure sum, ``auto`` by the number of members (:func:`secure_sum_for`)."""
        if secure_sum_for(protocol or self.secure_sum_protocol, len(ring)) == "secagg":
            return self._secagg_sum(ring, task_for, max_abs=max_abs, round_id=round_id, timeout=timeout)
        t0 = time.perf_counter()
        session = RingSession(ring, timeout=timeout)
        certificates = self.certificates()
        while session.phase is not Phase.DONE:  # the session raises RoundFailed when it gives up
            attempt = session.attempt
            spec_for = self._ring_specs(attempt.session_id, attempt.ring, max_abs, certificates, task_for)
            self.open_ring(attempt.session_id, attempt.ring)
            try:
                # Members first: each answers at once with a join or a refusal, and nothing moves
                # until the leader starts, so a refusing member is dropped before any hop is sent.
                results = self.run_tasks(new_tasks(attempt.members, round_id, spec_for), timeout=attempt.timeout)
                refused = refusal_codes(results)
                joined = {r.owner_id for r in results} - set(refused)
                if session.on_members(joined, refused, silent=self.silent_owners()) is Phase.SUMMING:
                    results = self.run_tasks(new_tasks([attempt.leader], round_id, spec_for), timeout=attempt.timeout)
                    total = next(
                        (
                            r.payload.values
                            for r in results
                            if isinstance(r.payload, RingTotal) and r.payload.session_id == attempt.session_id
                        ),
                        None,
                    )
                    session.on_leader(
                        total,
                        refused=refusal_codes(results).get(attempt.leader),
                        silent=self.silent_owners(),
                        hop_senders=self.hop_senders(attempt.session_id),
                    )
            finally:
                self.close_ring(attempt.session_id)
            if session.phase is Phase.JOINING:
                log.warning(
                    "ring %s: %d party(ies) dropped so far (%d refused; %s...); re-running without them",
                    attempt.session_id,
                    len(session.dropped),
                    len(session.refused),
                    session.dropped[:3],
                )
        assert session.total is not None  # DONE
        return RingSum(
            totals=session.total,
            ring=session.attempt.ring,
            attempts=len(session.attempts),
            dropped=list(session.dropped),
            refused=dict(session.refused),
            seconds=time.perf_counter() - t0,
        )

    def _secagg_sum(
        self,
        owners: Sequence[str],
        task_for: Callable[[RingSpec], TaskSpec],
        *,
        max_abs: float,
        round_id: str,
        timeout: float | None,
    ) -> RingSum:
        """One pairwise-mask secure sum (Bonawitz et al. CCS 2017 §4, sparse graph of Bell et al. 2020).

        The members' key agreement (steps 0-1, :meth:`_key_agreement`) is reused while it has
        rounds left; then step 2: each owner's evaluate task carries its :class:`InputRequest`
        (with, the first time, the key shares its neighbours sealed to it, which the coordinator
        forwards unread) and is answered by the same debited release the ring would get, masked;
        step 3: the survivors' unmasking shares. A refusing or silent owner is a dropped one, its
        masks cancelled from its neighbours' key shares (no new attempt). When the server cannot
        finish a round (an owner unmasked in an earlier round dropped, or so many dropped that
        too few neighbours hold someone's shares), the sum is attempted again (at most
        :data:`SECAGG_ATTEMPTS` in all) among the owners that sent a masked input, keyed anew if
        needed; their releases are cached per (run, round), so nothing is debited twice.
        """
        t0 = time.perf_counter()
        timeout = attempt_timeout(len(owners), timeout)  # per step, as the ring's per attempt
        live, refused = list(owners), {}
        for attempt in range(1, SECAGG_ATTEMPTS + 1):
            server = self._key_agreement(live, max_abs, round_id, timeout)
            fp = server.fixed_point
            spec = task_for(RingSpec(server.run_id, (), fp.frac_bits, fp.n_parties, max_abs, (), {}))
            if not isinstance(spec, BoostEvaluateTask):
                raise ConfigError(f"a secure sum contributes evaluation releases, got {type(spec).__name__}")
            inputs = server.input_requests(live)
            results = self.run_tasks(
                new_tasks(list(inputs), round_id, lambda o: replace(spec, secagg=inputs[o])), timeout=timeout
            )
            refused.update(refusal_codes(results))
            masked = {r.owner_id: r.payload for r in results if isinstance(r.payload, MaskedInput)}
            try:
                unmask = server.on_masked(masked)
                results = self.run_tasks(
                    new_tasks(list(unmask), round_id, lambda o: SecAggUnmaskTask(server.run_id, unmask[o])),
                    timeout=timeout,
                )
                total = server.on_unmask({r.owner_id: r.payload for r in results if isinstance(r.payload, UnmaskReply)})
            except RoundFailed as exc:
                live = [o for o in live if o in masked]
                if attempt == SECAGG_ATTEMPTS or len(live) < MIN_MEMBERS:
                    raise
                log.warning("secure sum %s: %s; attempted again among %d owner(s)", server.run_id, exc, len(live))
                continue
            return RingSum(
                totals=total,
                ring=server.included,
                attempts=attempt,
                dropped=[o for o in owners if o not in set(server.included)],
                refused=refused,
                seconds=time.perf_counter() - t0,
            )
        raise AssertionError("unreachable: the last attempt returns or raises")

    def prepare_secure_sums(
        self,
        groups: Sequence[Sequence[str]],
        *,
        max_abs: float,
        round_id: str = "keys",
        timeout: float | None = None,
        protocol: str | None = None,
    ) -> None:
        """Key the pairwise-mask runs of a job's planned secure sums in one batch, before its first round.

        ``groups``: the members of each planned sum (boosting: each round's evaluators, public from
        the start). Each distinct group gets its own run (session id, graph, mask keys), with one
        self-mask seed per sum of the group plus ``SECAGG_ATTEMPTS - 1`` for attempts again; the
        steps 0 and 1 of disjoint groups go out as one batch of tasks, so each round then costs only
        its masked inputs and unmasking (Bonawitz et al. CCS 2017 §4: keys agreed once, each round's
        masks derived from (pair key, round)). At most :data:`PREPARED_RUNS` groups, the first ones;
        nothing for a group summed by the ring; a later group, one overlapping another of the
        batch, or one whose key agreement fails here, is keyed by its first sum instead.
        """
        sums: dict[tuple[str, ...], int] = {}
        for group in groups:
            if secure_sum_for(protocol or self.secure_sum_protocol, len(set(group))) != "secagg":
                continue
            members = tuple(sorted(set(group)))
            sums[members] = sums.get(members, 0) + 1
        batch: list[tuple[tuple[str, ...], int]] = []
        taken: set[str] = set()
        for members, n in sums.items():
            if len(batch) == PREPARED_RUNS:  # the rest are keyed by their first sum
                break
            if len(members) >= MIN_MEMBERS and taken.isdisjoint(members) and self._keyed(members, max_abs) is None:
                taken.update(members)
                batch.append((members, min(MAX_ROUNDS, n + SECAGG_ATTEMPTS - 1)))
        if batch:
            self._key_agreements(batch, max_abs, round_id, attempt_timeout(len(taken), timeout), strict=False)

    def _keyed(self, owners: Sequence[str], max_abs: float) -> SecAggServer | None:
        """A keyed run (same public range, rounds left) in which every one of ``owners`` can take part:
        still in the run, with ``t`` neighbours among them (owners of its members that are gone,
        e.g. a node found silent since, may leave too few around some; then keys are agreed anew)."""
        wanted = set(owners)
        for server in reversed(self._secagg_runs):
            if (
                server.rounds_left > 0
                and server.fixed_point.max_abs == max_abs
                and wanted <= server.keyed - server.burned
                and len(server.participants(owners)) == len(wanted)
            ):
                return server
        return None

    def _key_agreement(
        self, owners: Sequence[str], max_abs: float, round_id: str, timeout: float | None
    ) -> SecAggServer:
        """A keyed run whose members include ``owners`` (:meth:`_keyed`), or a new one; members keyed
        before (boosting's ``eval_groups="all"``) share seeds for SECAGG_ROUNDS sums, new ones for
        SECAGG_ATTEMPTS."""
        server = self._keyed(owners, max_abs)
        if server is not None:
            return server
        again = any(set(s.members) == set(owners) for s in self._secagg_runs)
        rounds = SECAGG_ROUNDS if again else SECAGG_ATTEMPTS
        return self._key_agreements([(tuple(sorted(owners)), rounds)], max_abs, round_id, timeout, strict=True)[0]

    def _key_agreements(
        self,
        batch: Sequence[tuple[tuple[str, ...], int]],
        max_abs: float,
        round_id: str,
        timeout: float | None,
        *,
        strict: bool,
    ) -> list[SecAggServer]:
        """New runs over disjoint member sets ``(members, rounds)``, keyed together: step 0 (each owner
        signs a fresh mask key) and step 1 (each seals key shares to its neighbours, given their box
        keys and, once per node and run, the members and the nodes' certificates: per owner they
        would cost O(N) bytes each, O(N^2) a run) each one batch of tasks for all runs. A run too
        few owners advertised in raises :class:`RoundFailed` if ``strict``, else is left out."""
        servers: dict[str, SecAggServer] = {}
        advertise: dict[str, SecAggKeysTask] = {}
        for members, rounds in batch:
            session = new_session_id()
            fp = FixedPoint.choose(n_parties=len(members), max_abs=max_abs)
            servers[session] = SecAggServer(session, members, fp, rounds=rounds)
            advertise[session] = SecAggKeysTask(session, fp.frac_bits, fp.n_parties, max_abs)
        run_of = {o: session for session, server in servers.items() for o in server.owners}
        results = self.run_tasks(new_tasks(list(run_of), round_id, lambda o: advertise[run_of[o]]), timeout=timeout)
        adverts = {r.owner_id: r.payload for r in results if isinstance(r.payload, KeyAdvert)}
        requests: dict[str, ShareKeysRequest] = {}
        for session, server in list(servers.items()):
            try:
                requests.update(server.on_adverts({o: a for o, a in adverts.items() if run_of[o] == session}))
            except RoundFailed:
                if strict:
                    raise
                log.warning("secure sum %s: too few mask keys advertised; keyed by its first sum instead", session)
                del servers[session]
        certificates, sent_to = self.certificates(), set()

        def share_keys(owner_id: str) -> SecAggKeysTask:
            session = run_of[owner_id]
            node = (session, self.peer_key(owner_id).node_id)
            first = node not in sent_to
            sent_to.add(node)
            request = requests[owner_id]
            return replace(
                advertise[session],
                request=request if first else replace(request, members=()),
                peers=tuple(self.peer_key(v) for v in servers[session].graph[owner_id]),
                certificates=certificates if first else {},
            )

        results = self.run_tasks(new_tasks(list(requests), round_id, share_keys), timeout=timeout)
        replies = {r.owner_id: r.payload for r in results if isinstance(r.payload, KeyShares)}
        for session, server in servers.items():
            server.on_key_shares({o: k for o, k in replies.items() if run_of[o] == session})
        self._secagg_runs = (*self._secagg_runs, *servers.values())[-KEPT_RUNS:]
        return list(servers.values())

    def _ring_specs(
        self,
        session_id: str,
        ring: tuple[str, ...],
        max_abs: float,
        certificates: dict[str, bytes],
        task_for: Callable[[RingSpec], TaskSpec],
    ) -> Callable[[str], TaskSpec]:
        """Each owner's task of one attempt. The ring order and the certificates go once per node
        and session (the node caches them): per owner they would cost O(N) bytes each, O(N^2) a ring."""
        fp = FixedPoint.choose(n_parties=len(ring), max_abs=max_abs)
        index = {o: i for i, o in enumerate(ring)}
        sent_to: set[str] = set()

        def spec(owner_id: str) -> TaskSpec:
            node = self.peer_key(owner_id).node_id
            first = node not in sent_to
            sent_to.add(node)
            peers = tuple(self.peer_key(p) for p in ring_peers(ring, owner_id, index[owner_id]))
            return task_for(
                RingSpec(
                    session_id,
                    ring if first else (),
                    fp.frac_bits,
                    fp.n_parties,
                    max_abs,
                    peers,
                    certificates if first else {},
                )
            )

        return spec


class GrpcTransport(RelayedSecureSum):
    """The :class:`~privfed.server.strategies.base.Transport` of a running coordinator: tasks go
    through the dispatcher to the owner nodes, which pull them over gRPC; ring envelopes are
    relayed only among an open session's members (contract 5)."""

    def __init__(
        self,
        execute: Callable[[list[Task], float | None], list[Result]],
        dispatcher: Dispatcher,
        *,
        secure_sum: str = "ring",
        rejected: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(secure_sum)
        self._execute = execute
        self._dispatcher = dispatcher
        self._rejected = rejected if rejected is not None else {}

    def run_tasks(self, tasks: list[Task], timeout: float | None = None) -> list[Result]:
        return self._execute(tasks, timeout)

    def silent_owners(self) -> set[str]:
        """Owners on silent nodes, and rejected owners: neither is asked into a ring."""
        return self._dispatcher.silent_owners() | set(self._rejected)

    def peer_key(self, owner_id: str) -> PeerKey:
        return self._dispatcher.peer_key(owner_id)

    def certificates(self) -> dict[str, bytes]:
        return self._dispatcher.certificates()

    def open_ring(self, session_id: str, members: Sequence[str]) -> None:
        self._dispatcher.open_ring(session_id, members)

    def close_ring(self, session_id: str) -> None:
        self._dispatcher.close_ring(session_id)

    def hop_senders(self, session_id: str) -> set[str]:
        return self._dispatcher.hop_senders(session_id)


def bar_shape() -> dict[str, int]:
    """Columns and rows for a progress bar on stderr. tqdm reads the terminal's size, and a
    pseudo-terminal that has none set (``script``, CI runners, ``docker run -t``, a pty a test
    opens) reports 0 x 0, from which tqdm draws nothing at all; there the bar gets 80 x 24."""
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError):
        return {}
    return {} if size.columns > 0 and size.lines > 0 else {"ncols": 80, "nrows": 24}


def run_job(
    server: CoordinatorServer,
    strategy: Strategy,
    *,
    expected_owners: int,
    register_timeout: float = 120.0,
    round_timeout: float = 600.0,
    show_progress: bool = True,
    label: str = "",
    book: JobBook | None = None,
    expected: Expected | None = None,
) -> JobOutcome:
    """Wait for ``expected_owners`` owners, check the job can be done with them, run ``strategy``.

    Every reply is checked against its task's contract before the strategy sees it; an owner
    whose reply breaks it is rejected and asked for nothing more. ``book``
    (:class:`~privfed.server.rounds.JobBook`) keeps that account, with the contracts' public limits
    and the quorum: after every batch, fewer owners still taking part end the job
    (:class:`~privfed.common.errors.QuorumLost`); the caller reads it for its report, also when the
    job fails. Default: no quorum, :data:`~privfed.common.boosting.params.MAX_OWNER_ROWS` rows
    per owner. ``expected``: who to name while waiting (:mod:`privfed.server.registration`).
    """
    from tqdm import tqdm  # here: a coordinator that shows no progress never loads it

    expected = expected or Expected(expected_owners)
    shape = bar_shape() if show_progress else {}
    t0 = time.perf_counter()
    with tqdm(
        total=expected_owners,
        desc=f"{label}owners registered",
        disable=not show_progress,
        leave=False,
        unit="owner",
        **shape,
    ) as bar:
        n = wait_for_registration(
            server.dispatcher, expected, register_timeout, progress=lambda k: bar.update(k - bar.n)
        )
    if server.dispatcher.aborted:
        raise JobAborted("job aborted while waiting for owners")
    if n < expected_owners:
        raise RoundFailed(
            f"only {status(server.dispatcher, expected)} within {register_timeout:.0f} s; "
            "start the missing owner nodes, or pass a larger --register-timeout or a smaller --owners"
        )
    t1 = time.perf_counter()
    owner_ids = sorted(server.dispatcher.owners())
    check_feasible = getattr(strategy, "check_feasible", None)
    if check_feasible is not None:  # before any owner is asked for anything
        check_feasible(len(owner_ids))
    book = book if book is not None else JobBook(PublicLimits(max_rows=MAX_OWNER_ROWS))
    book.begin(owner_ids)

    def execute(tasks: list[Task], timeout: float | None = None) -> list[Result]:
        """Send one batch of tasks (none to a rejected owner), wait, keep only replies that fit their contract."""
        tasks = book.to_ask(tasks)
        if not tasks:
            return []
        with tqdm(
            total=len(tasks),
            desc=f"{label}round {tasks[0].round_id}",
            disable=not show_progress,
            leave=False,
            unit="owner",
            **shape,
        ) as bar:
            outcome = server.dispatcher.run(
                tasks, timeout=timeout or round_timeout, progress=lambda done, total: bar.update(done - bar.n)
            )
        if outcome.lost:
            log.warning(
                "round %s completed with %d task(s) unanswered (silent nodes: %s)",
                tasks[0].round_id,
                len(outcome.lost),
                outcome.lost_nodes or "none",
            )
        silent = server.dispatcher.silent_owners()
        results = book.record(tasks, outcome, {node_of(o) for o in silent})
        round_log.info(
            "%sround %s: %d of %d task(s) answered", label, tasks[0].round_id, len(outcome.results), len(tasks)
        )
        book.check_quorum(silent)
        return results

    try:
        model = strategy.run(owner_ids, GrpcTransport(execute, server.dispatcher, rejected=book.rejected))
    except RoundFailed as exc:  # say why owners did not answer: their refusals, rejections, the nodes lost
        raise type(exc)("; ".join(w for w in (str(exc), book.why()) if w)) from exc
    t2 = time.perf_counter()
    return JobOutcome(
        model=model,
        n_owners=len(owner_ids),
        answered=book.contributed(),
        refused=book.refused,
        lost_nodes=sorted(book.lost_nodes),
        epsilon_by_owner=book.epsilon_by_owner,
        rejected=book.rejected,
        timings={"register_s": t1 - t0, "rounds_s": t2 - t1},
    )
