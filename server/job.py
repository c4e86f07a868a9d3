"""A federated job on a running coordinator: the one job runner of ``privfed coordinator``, ``privfed
simulate`` (one job per ε and repeat) and, later, a service's queue.

:func:`run_job` trains: it waits for the owners, checks that the job can be done with them, asks them
whether they take part (:func:`accept_round`, before any release) and runs the strategy over those that
do, over the gRPC transport (:class:`GrpcTransport`), every reply checked against its
task's contract by the job's :class:`~privfed.server.rounds.JobBook`. :func:`run_federated_job` is
the whole job around it: the model is served and saved before the owners are released, and every
way the job ends writes its ``report.json`` (issue 23, item 3).

Nothing here assumes one job per process: no module state, no signal handler, no ``sys.exit``,
and the server is started and stopped by the caller. How the owners are released
(``privfed coordinator``: tell every node the job is over; ``privfed simulate``: that, then wait for
its node processes) and what stopped a job (a signal, a node process that exited) are the caller's.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from privfed.common.boosting.params import MAX_OWNER_ROWS
from privfed.common.datasets import Dataset
from privfed.common.errors import ConfigError, JobAborted, RoundFailed
from privfed.common.identity import node_of
from privfed.common.jobinfo import JobInfo
from privfed.common.schema import FederationSchema
from privfed.common.tasks import JoinAccepted, JoinTask, PeerKey, Result, Task
from privfed.server.app import CoordinatorServer
from privfed.server.config import JobConfig
from privfed.server.contracts import PublicLimits
from privfed.server.dispatcher import Dispatcher
from privfed.server.models import save_model
from privfed.server.progress import progress_bar
from privfed.server.registration import Expected, status, wait_for_registration
from privfed.server.report import (
    JobReport,
    accuracy_warning,
    baselines,
    few_reports_warning,
    fewer_owners_warning,
    nonprivate_releases,
    refusal_summary,
)
from privfed.server.rounds import JobBook, declined_owners, rejection_summary
from privfed.server.securesum import RelayedTransport
from privfed.server.strategies.base import Fold, OnProgress, Strategy, new_tasks
from privfed.server.strategies.result import StrategyResult, TrainedModel

log = logging.getLogger("privfed.coordinator")
#: One line per round (``privfed simulate`` shows it instead of progress bars when stderr is no terminal).
round_log = logging.getLogger("privfed.coordinator.rounds")

#: Sends one batch of tasks and returns the answers: (tasks, timeout, ring session whose stall ends the
#: wait, a fold the answers are handed to as they come instead: then none are returned).
Execute = Callable[[list[Task], float | None, str | None, Fold | None], list[Result]]
#: Told after every batch of a job: (its round id, tasks answered, tasks sent) (``privfed serve``'s status). A
#: job's progress is not its batches (a boosting round is many: ring hops, secure-sum steps) but its strategy's
#: steps (:data:`~privfed.server.strategies.base.OnProgress`).
OnBatch = Callable[[str, int, int], None]


class GrpcTransport(RelayedTransport):
    """The :class:`~privfed.server.strategies.base.Transport` of a running coordinator: tasks go
    through the dispatcher to the owner nodes, which pull them over gRPC; ring envelopes are
    relayed only among an open session's members (contract 5); secure sums are driven by
    :class:`~privfed.server.securesum.RelayedTransport`."""

    def __init__(
        self,
        execute: Execute,
        dispatcher: Dispatcher,
        *,
        secure_sum: str = "ring",
        book: JobBook | None = None,
        on_progress: OnProgress | None = None,
    ) -> None:
        super().__init__(secure_sum)
        self._execute = execute
        self._dispatcher = dispatcher
        self._book = book if book is not None else JobBook(PublicLimits(max_rows=MAX_OWNER_ROWS))
        self._on_progress = on_progress

    def run_tasks(self, tasks: list[Task], timeout: float | None = None, *, stalls: str | None = None) -> list[Result]:
        return self._execute(tasks, timeout, stalls, None)

    def fold_tasks(self, tasks: list[Task], fold: Fold, timeout: float | None = None) -> None:
        """The answers go to ``fold`` as the dispatcher hands them over, each checked first (the job's book)."""
        self._execute(tasks, timeout, None, fold)

    def silent_owners(self) -> set[str]:
        """Owners on silent nodes, rejected owners, and a resumed job's owners whose node did not come back (the
        book's ``gone``): none is asked into a ring."""
        return self._dispatcher.silent_owners() | set(self._book.rejected) | self._book.gone

    def progressed(self, done: int, planned: int) -> None:
        if self._on_progress is not None:
            self._on_progress(done, planned)

    def account(self) -> dict[str, object]:
        return self._book.account()

    def replay(self, account: Mapping[str, object]) -> None:
        self._book.replay(account)

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

    def complaints(self, session_id: str) -> set[tuple[str, str]]:
        return self._dispatcher.complaints(session_id)

    def rekeyed_owners(self, session_id: str) -> set[str]:
        return self._dispatcher.rekeyed_owners(session_id)


#: The round id of the accept round's tasks.
ACCEPT_ROUND = "accept"


def accept_round(
    execute: Execute, owner_ids: Sequence[str], ask_again: Callable[[list[str]], list[str]] | None = None
) -> list[str]:
    """The owners of ``owner_ids`` that take part in the announced job, in their order (walkthrough 5, F1).

    Before the job's first release each owner is sent a ``join`` task (:mod:`privfed.common.tasks.join`) and
    answers from its policy alone (the announcement and its ledger's totals; no policy: it takes part). The
    job's book takes the refusals as any round's (code ``policy``: the report's ``declined_owners``) and checks
    the quorum after it, so a job too few owners take part in fails here, before anyone released anything.
    Nothing is debited. An owner that does not answer (its node fell silent), or whose answer breaks the
    contract, does not take part either, unless ``ask_again(the owners that did not answer)`` names some to ask
    once more (nothing was released yet, so asking again costs nothing: walkthrough 10, W10-8)."""
    answers = execute(new_tasks(owner_ids, ACCEPT_ROUND, JoinTask()), None, None, None)
    if ask_again is not None:
        answered = {r.owner_id for r in answers}
        again = ask_again([o for o in owner_ids if o not in answered])
        if again:
            answers += execute(new_tasks(again, ACCEPT_ROUND, JoinTask()), None, None, None)
    accepted = {r.owner_id for r in answers if isinstance(r.payload, JoinAccepted)}
    return [o for o in owner_ids if o in accepted]


def _asked_again(
    dispatcher: Dispatcher, book: JobBook, unanswered: list[str], *, n_owners: int, asked: int, wait: float, label: str
) -> list[str]:
    """The owners of the accept round to ask once more (:func:`accept_round`'s ``ask_again``): of ``unanswered``,
    those on nodes that fell silent during it, once back within ``wait`` seconds, if the job would otherwise start
    with fewer owners than the ``asked`` it asked for (a node that blipped as the job started was left out of the
    whole job: walkthrough 10, W10-8)."""
    silent = dispatcher.silent_nodes() & {node_of(o) for o in unanswered}
    if not silent or n_owners - len(unanswered) >= asked:
        return []
    log.warning(
        "%saccept round: node(s) %s fell silent; the job asked for %d owners and %d answered, so it waits up to "
        "%.0f s for them to call again (nothing was released yet)",
        label,
        ", ".join(sorted(silent)),
        asked,
        n_owners - len(unanswered),
        wait,
    )
    back = dispatcher.wait_for_nodes(silent, wait)
    if dispatcher.aborted:
        raise JobAborted("job aborted while its accept round waited for silent nodes")
    book.lost_nodes -= back
    if back:
        log.info("%saccept round: node(s) %s called again and are asked once more", label, ", ".join(sorted(back)))
    return [o for o in unanswered if node_of(o) in back]


def _missing_planned(planned: Sequence[str], live: Iterable[str], waited: float | None = None) -> str | None:
    """Why a resumed job cannot start (None: it can): the nodes of the owners its journal ran over that are not
    registered (within ``waited`` seconds), with their owner counts and the first ids (walkthrough 7, W7-10: the
    wait's message named only the nodes present, and advised a larger register-timeout or fewer owners, which a
    resumed job's journal fixes)."""
    missing = sorted(set(planned) - set(live))
    if not missing:
        return None
    by_node = Counter(node_of(o) for o in missing)
    nodes = ", ".join(f"{node} ({k} owner(s))" for node, k in sorted(by_node.items()))
    within = "" if waited is None else f" within {waited:.0f} s"
    return (
        f"the job resumes over the {len(planned)} owners its journal ran over, and {len(missing)} of them are not "
        f"registered{within} ({', '.join(missing[:10])}{', ...' if len(missing) > 10 else ''}): nodes {nodes}"
    )


#: What to do about a resumed job's missing owners (:func:`_missing_planned`).
START_THEM = "start those nodes again (same --name and --shards), or submit the job anew"


def _gone(planned: Sequence[str], live: Iterable[str], waited: float, quorum: int) -> list[str]:
    """The owners of a resumed job's plan that did not register again within ``waited`` seconds: the job goes on
    without them if at least ``quorum`` of its plan came back, as it would have without a restart when their node
    left (walkthrough 7, W7-10: it failed and threw away the rounds its owners had paid for), else RoundFailed."""
    why = _missing_planned(planned, live, waited)
    if why is None:  # every planned owner is back (the job had asked for more than took part)
        return []
    gone = sorted(set(planned) - set(live))
    if len(planned) - len(gone) < quorum:
        raise RoundFailed(
            f"{why}; the {len(planned) - len(gone)} that did are fewer than its quorum ({quorum}): {START_THEM}"
        )
    log.warning(
        "%s; the job goes on over the %d that did (quorum %d), asking the others nothing more",
        why,
        len(planned) - len(gone),
        quorum,
    )
    return gone


def _resumed_plan(planned: Sequence[str], registered: Sequence[str]) -> list[str]:
    """A resumed job's owners: those its journal recorded when it first ran, whose accept round they were the
    accepting owners of, in that order (its rounds are planned from them and its seed, so they come out the
    same); each must be registered again (:func:`_missing_planned`)."""
    why = _missing_planned(planned, registered)
    if why is not None:
        raise RoundFailed(f"{why}; {START_THEM}")
    return list(planned)


@dataclass(frozen=True)
class JobOutcome:
    """A trained job: the strategy's result and what the job's book says about its owners."""

    result: StrategyResult[TrainedModel]
    n_owners: int
    answered: int  # owners whose contribution (a share, a report) was used
    refused: dict[str, str]  # owner -> "code: text" of every refusal
    lost_nodes: list[str]
    epsilon_by_owner: dict[str, float]  # what the coordinator received releases for
    rejected: dict[str, str] = field(default_factory=dict)  # owner -> "code: detail" of its rejected release
    timings: dict[str, float] = field(default_factory=dict)
    #: Owners with any release the job used and debited, its evaluations too (:attr:`JobBook.took_part
    #: <privfed.server.rounds.JobBook.took_part>`; None: as :attr:`answered`), and why the others released none
    #: (:meth:`JobBook.absent <privfed.server.rounds.JobBook.absent>`): walkthrough 9, W9-4.
    took_part: int | None = None
    absent: dict[str, int] = field(default_factory=dict)
    #: What owners asked for releases whose answers never came may have spent beyond :attr:`epsilon_by_owner`
    #: (:meth:`JobBook.unanswered_epsilon <privfed.server.rounds.JobBook.unanswered_epsilon>`).
    epsilon_unanswered: dict[str, float] = field(default_factory=dict)

    @property
    def released(self) -> int:
        """The owners that took part: released anything the job used (:attr:`took_part`)."""
        return self.answered if self.took_part is None else self.took_part

    @property
    def model(self) -> TrainedModel:
        return self.result.model

    def to_report(self) -> dict[str, object]:
        """What a report says about the job's owners and rounds."""
        return {
            "owners": self.n_owners,
            "answered": self.answered,
            "took_part": self.released,
            "refused": self.refused,
            "declined_owners": declined_owners(self.refused),
            "refusal_summary": refusal_summary(self.refused, self.n_owners),
            "rejected_owners": self.rejected,
            "rejection_summary": rejection_summary(self.rejected, self.n_owners),
            "lost_nodes": self.lost_nodes,
            "epsilon_unanswered_by_owner": self.epsilon_unanswered,
            "timings": self.timings,
            **self.result.to_report(),
        }


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
    on_batch: OnBatch | None = None,
    on_progress: OnProgress | None = None,
    planned: Sequence[str] | None = None,
) -> JobOutcome:
    """Wait for ``expected_owners`` owners, check the job can be done with them, ask them whether they take
    part (:func:`accept_round`), and run ``strategy`` over those that do.

    Every reply is checked against its task's contract before the strategy sees it; an owner
    whose reply breaks it is rejected and asked for nothing more. ``book``
    (:class:`~privfed.server.rounds.JobBook`) keeps that account, with the contracts' public limits
    and the quorum: after every batch, fewer owners still taking part end the job
    (:class:`~privfed.common.errors.QuorumLost`); the caller reads it for its report, also when the
    job fails. Default: no quorum, :data:`~privfed.common.boosting.params.MAX_OWNER_ROWS` rows
    per owner. ``expected``: who to name while waiting (:mod:`privfed.server.registration`). ``on_batch`` is told
    of every batch, ``on_progress`` of every step of the strategy (:meth:`Transport.progressed`). ``planned``: the
    owners a resumed job's journal recorded (:func:`_resumed_plan`): the strategy runs over them again, whoever
    takes part now (the accept round still books who declines now; such an owner refuses its tasks, as an owner
    whose policy changed mid-job does).
    """
    expected = expected or Expected(expected_owners)
    t0 = time.perf_counter()
    with progress_bar(show_progress, expected_owners, f"{label}owners registered") as bar:
        n = wait_for_registration(
            server.dispatcher, expected, register_timeout, progress=lambda k: bar.update(k - bar.n)
        )
    if server.dispatcher.aborted:
        raise JobAborted("job aborted while waiting for owners")
    book = book if book is not None else JobBook(PublicLimits(max_rows=MAX_OWNER_ROWS))
    gone: list[str] = []
    if n < expected_owners:
        if planned is None:
            raise RoundFailed(
                f"only {status(server.dispatcher, expected)} within {register_timeout:.0f} s; "
                "start the missing owner nodes, or pass a larger --register-timeout or a smaller --owners"
            )
        gone = _gone(planned, server.dispatcher.live_owners(), register_timeout, book.quorum)
    t1 = time.perf_counter()
    owner_ids = sorted(server.dispatcher.live_owners())  # not those of a node that has gone away
    strategy.check_feasible(len(owner_ids))  # before any owner is asked for anything
    book.begin(owner_ids, asked=expected_owners)
    book.lose(gone)

    accept_asked: list[str] = []  # the accept round's batches sent (none: no owner to ask, no quorum to check)

    def execute(
        tasks: list[Task], timeout: float | None = None, stalls: str | None = None, fold: Fold | None = None
    ) -> list[Result]:
        """Send one batch of tasks (none to a rejected owner), wait, keep only replies that fit their
        contract: returned, or handed to ``fold`` as they come."""
        tasks = book.to_ask(tasks, server.dispatcher.silent_owners())
        if not tasks:
            return []
        refusals = book.refusals
        name = tasks[0].round_name
        with progress_bar(show_progress, len(tasks), f"{label}round {name}") as bar:
            outcome = server.dispatcher.run(
                tasks,
                timeout=timeout or round_timeout,
                progress=lambda done, total: bar.update(done - bar.n),
                stalls=stalls,
                sink=None if fold is None else lambda answers: fold(book.take(answers)),
            )
        if outcome.lost:
            why = outcome.unanswered_line() or "their owners' nodes are no longer registered"
            if stalls is not None:  # a ring's leader waits for the hops; the ring's note names where it stopped (W10-4)
                why = f"the ring did not close in time; its leader's node: {why}"
            log.warning("round %s completed with %d task(s) unanswered (%s)", name, len(outcome.lost), why)
        silent = server.dispatcher.silent_owners()
        results = book.record(tasks, outcome, {node_of(o) for o in silent})
        refused = book.refusals - refusals  # answers, but no release (walkthrough 4, m5: "20 of 20 answered")
        round_log.info(
            "%sround %s: %d of %d task(s) answered%s",
            label,
            name,
            outcome.answered,
            len(tasks),
            f" ({refused} refused)" if refused else "",
        )
        if on_batch is not None:
            on_batch(name, outcome.answered, len(tasks))
        if tasks[0].round_id == ACCEPT_ROUND:  # checked once the accept round is over (it may ask again)
            accept_asked.append(name)
        elif book.check_after_release:
            book.check_quorum(silent)
        return results

    ask_again = None
    if planned is None:  # a resumed job plans over its journal's owners (_resumed_plan)
        ask_again = partial(
            _asked_again, server.dispatcher, book, n_owners=len(owner_ids), asked=expected_owners,
            wait=register_timeout, label=label,
        )  # fmt: skip

    try:
        transport = GrpcTransport(execute, server.dispatcher, book=book, on_progress=on_progress)
        taking_part = accept_round(execute, owner_ids, ask_again)
        if accept_asked:
            book.check_quorum(server.dispatcher.silent_owners())
        plan = taking_part if planned is None else _resumed_plan(planned, [*owner_ids, *gone])
        try:
            strategy.check_feasible(len(plan))
        except ConfigError as exc:
            raise RoundFailed(
                f"only {len(taking_part)} of {len(owner_ids)} owners take part in the job (the accept round, before "
                f"any release: nothing was released or debited): {exc}"
            ) from exc
        result = strategy.run(plan, transport)
    except RoundFailed as exc:  # say why owners did not answer: their refusals, rejections, the nodes lost
        raise type(exc)("; ".join(w for w in (str(exc), book.why()) if w)) from exc
    t2 = time.perf_counter()
    return JobOutcome(
        result=result,
        n_owners=len(owner_ids),
        answered=book.contributed(),
        refused=book.refused,
        lost_nodes=sorted(book.lost_nodes),
        epsilon_by_owner=book.epsilon_by_owner,
        rejected=book.rejected | {o: why for o, why in result.rejected.items() if o not in book.rejected},
        timings={"register_s": t1 - t0, "rounds_s": t2 - t1},
        took_part=len(book.took_part),
        absent=book.absent(result.rejected),
        epsilon_unanswered=book.unanswered_epsilon(),
    )


@dataclass(frozen=True)
class FederatedJob:
    """One job: its configuration and strategy, the federation's public schema and test set (None:
    no accuracy), whom it waits for, the contracts' public limits and its quorum, and the id its
    model is served and saved under."""

    config: JobConfig
    strategy: Strategy
    schema: FederationSchema
    test: Dataset | None
    expected: Expected
    limits: PublicLimits = PublicLimits(max_rows=MAX_OWNER_ROWS)
    quorum: int = 1
    #: Whether the quorum is checked after a batch that released too (:attr:`JobConfig.quorum_after_release
    #: <privfed.server.config.JobConfig.quorum_after_release>`).
    quorum_after_release: bool = True
    job_id: str = ""  # the id the owners see it under (empty: the run directory's name)
    data_user: str = ""  # who submitted it (``privfed serve``; empty: the coordinator's operator)
    #: The id the owners see a job without one under (empty: the run directory's name): a journaled ``privfed
    #: coordinator`` run's, the same when it resumes (``privfed.server.main.journal_job_id``).
    announced_id: str = ""
    #: What the job's settings leave to a default that matters, one "warning: ..." line each (its report's too).
    settings_warnings: tuple[str, ...] = ()
    #: A resumed job's owners -> what its earlier runs' reports say they may have spent, {release key: ε}
    #: (:func:`~privfed.server.rounds.releases_may_have_spent`) or one number: what this run does not count is named
    #: unanswered (:meth:`~privfed.server.rounds.JobBook.carry`).
    spent_before: Mapping[str, float | Mapping[str, float]] = field(default_factory=dict)

    @property
    def model_id(self) -> str:
        """The job's id when it has one (``privfed serve``: each job's model is served on its own, two
        data users' jobs of the same task and ε side by side), else ``TASK-epsE``."""
        return self.job_id or f"{self.config.task}-eps{self.config.epsilon:g}"

    def check_feasible(self) -> None:
        """Raise :class:`ConfigError` unless the expected owners can run the job (before any server is asked)."""
        self.strategy.check_feasible(self.expected.owners)


@dataclass(frozen=True)
class FinishedJob:
    """A job that ended well: what it trained and where its report is."""

    outcome: JobOutcome
    accuracy: float | None
    warnings: tuple[str, ...]  # one line each: a model that learned nothing usable, fewer owners than asked for
    report: JobReport

    @property
    def model(self) -> TrainedModel:
        return self.outcome.model


def run_federated_job(
    server: CoordinatorServer,
    job: FederatedJob,
    report: JobReport,
    *,
    release: Callable[[], None],
    stopped: Callable[[], str | None] = lambda: None,
    reference: Callable[[], Mapping[str, object]] | None = None,
    show_progress: bool = False,
    label: str = "",
    on_batch: OnBatch | None = None,
    on_progress: OnProgress | None = None,
    write_ahead: bool = False,
) -> FinishedJob:
    """Run ``job`` on ``server`` (started by the caller, with the owners on their way) and write its report.

    The report gets the job's privacy split at once; training (:func:`run_job`) follows; the model
    is served on ``server`` and saved to the run directory's ``model.json`` before ``release()``
    tells the owners the job is over (they need not stay up, even when the coordinator goes on
    serving); then ``reference()`` (the non-private reference, computed once training is over) and
    the ``status: ok`` report with the accuracy on the public test set, its baselines and the
    owners' account (:meth:`JobOutcome.to_report`).

    The job is announced to the owners first (:class:`~privfed.common.jobinfo.JobInfo`: its id, data
    user, task, per-owner ε and δ, schema digest) and goes with its tasks: an owner's policy judges it,
    and owners record its releases under its id. ``on_batch`` is told of every batch (:data:`OnBatch`),
    ``on_progress`` of every step of the strategy (:data:`~privfed.server.strategies.base.OnProgress`).
    ``write_ahead``: the report is written, what each owner was asked for and what it answered, before every batch
    that asks for new releases goes out, so a process killed mid-batch (SIGKILL, a crash) leaves a report that
    accounts for every owner that may have paid, which the next start fails the job with (walkthrough 10, W10-3).

    Every other way out writes ``status: failed`` with the reason (``stopped()`` names what aborted
    the job, e.g. ``"SIGTERM"``) and what became of the owners, releases them, and raises
    (:meth:`JobReport.on_failure`).
    """
    book = JobBook(job.limits, quorum=job.quorum, check_after_release=job.quorum_after_release)
    book.carry(job.spent_before)
    if write_ahead:

        def written() -> None:
            report.write(**book.to_report())

        book.on_ask = written
    released: list[bool] = []

    def release_once() -> None:
        if not released:
            released.append(True)
            release()

    with report.on_failure(book=lambda: book, stopped=stopped, release=release_once):
        privacy = job.strategy.privacy()
        report.update(privacy=privacy.to_report())
        server.dispatcher.begin_job(
            JobInfo(
                job_id=job.job_id or job.announced_id or report.run_dir().name,
                data_user=job.data_user,
                task=job.config.task,
                epsilon=privacy.epsilon,
                delta=privacy.delta,
                schema_sha256=job.schema.digest(),
            )
        )
        expected, planned = job.expected, None
        if job.config.journal is not None and job.config.resume:  # the owners it ran over, all of them
            from privfed.server.journal import resumed_owners  # a boosting job's: loaded for one only

            planned = resumed_owners(job.config.journal) or None
            expected = replace(expected, owners=max(expected.owners, len(planned or ())))
        outcome = run_job(
            server,
            job.strategy,
            expected_owners=expected.owners,
            register_timeout=job.config.register_timeout,
            round_timeout=job.config.round_timeout,
            show_progress=show_progress,
            label=label,
            book=book,
            expected=expected,
            on_batch=on_batch,
            on_progress=on_progress,
            planned=planned,
        )
        server.models.put(
            job.model_id, outcome.model, schema=job.schema, data_user=job.data_user
        )  # served and saved before the owners
        save_model(
            report.run_dir() / "model.json",
            outcome.model,
            model_id=job.model_id,
            task=job.config.task,
            schema=job.schema,
        )
        release_once()
        accuracy, warning, base = None, None, None
        if job.test is not None:
            test = job.test
            accuracy = float(np.mean(np.asarray(outcome.model.predict(test.X)) == test.y))
            base = baselines(test.y, len(job.schema.classes))
            warning = accuracy_warning(
                job.config.epsilon,
                accuracy,
                base["majority_class"],
                int(test.y.shape[0]),
                rows_help=not job.config.one_report_per_owner,
            )
        few = few_reports_warning(
            f"{job.config.task}{' --solver local' * job.config.local_lr}",
            job.config.epsilon,
            outcome.answered,
            job.config.one_report_per_owner or job.config.local_lr,
        )
        fewer = fewer_owners_warning(job.config.owners, outcome.released, outcome.absent)
        warnings = [w for w in (*job.settings_warnings, warning, few, fewer) if w]
        ref = {"reference_accuracy": None, "reference_learner": None} if reference is None else dict(reference())
        report.write(
            status="ok",
            model_id=job.model_id,
            accuracy=accuracy,
            baselines=base,
            **ref,
            warnings=warnings,
            quorum=job.quorum,
            nonprivate_releases=nonprivate_releases(job.config.clear_labels, outcome.answered),
            epsilon_by_owner=outcome.epsilon_by_owner,
            **outcome.to_report(),
        )
        return FinishedJob(outcome, accuracy, tuple(warnings), report)
    raise AssertionError("unreachable: on_failure re-raises")  # for type checkers: the block returns or raises
