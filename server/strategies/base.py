"""What every strategy shares: the Strategy and Transport protocols, task construction, reply filtering.

A strategy builds tasks and aggregates results (STYLE rule 12); it never sends anything: the
:class:`Transport` it is given does. Two transports implement it: gRPC over the dispatcher
(:class:`privfed.server.job.GrpcTransport`) and in-process, calling the owner handlers and state
machines directly (``privfed.deploy.inprocess.InProcessTransport``), so a federation and a
simulation run the same strategy code.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np

from privfed.common.tasks import Refusal, Result, RingSpec, Task, TaskSpec
from privfed.server.strategies.result import PrivacySplit, RoundReport, StrategyResult, SumRecord, TrainedModel

#: Takes one batch of a round's results as they come (:meth:`Transport.fold_tasks`).
Fold = Callable[[list[Result]], None]
#: Told how far a job is, in its strategy's own units (:meth:`Transport.progressed`): (done, planned).
OnProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class SumResult:
    """A secure sum's outcome: the ``totals`` over the parties it summed, and its record."""

    totals: np.ndarray
    record: SumRecord


@runtime_checkable
class Transport(Protocol):
    """How a strategy reaches the owners: a batch of tasks, a secure sum, and who is silent.

    No row counts (contract 2): a registration carries none, and a strategy needs only public bounds.
    A class that implements it subclasses it, and so inherits the no-op :meth:`prepare_secure_sums`.
    """

    def run_tasks(self, tasks: list[Task], timeout: float | None = None) -> list[Result]:
        """Send ``tasks``, wait for the answers (or ``timeout``), return the results that came."""
        ...

    def fold_tasks(self, tasks: list[Task], fold: Fold, timeout: float | None = None) -> None:
        """Send ``tasks`` and hand the results to ``fold`` batch by batch as they come, keeping
        none of them (issue 27: a round's replies are never all held at once). Default: one batch,
        :meth:`run_tasks`'s."""
        fold(self.run_tasks(tasks, timeout))

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
        """A secure sum of the owners ``ring`` (in order; ``ring[0]`` leads a ring), each asked with
        ``task_for(its ring spec)``, refusing and silent owners dropped
        (:class:`privfed.common.secagg.transitions.SecureSum`). ``max_abs`` bounds every
        contribution (public); ``timeout`` is per attempt; ``protocol`` ``"ring"``, ``"secagg"``
        (pairwise masks) or ``"auto"`` (None: the transport's default). Raises :class:`RoundFailed`
        when it gives up."""
        ...

    def prepare_secure_sums(
        self,
        groups: Sequence[Sequence[str]],
        *,
        max_abs: float,
        timeout: float | None = None,
        protocol: str | None = None,
    ) -> None:
        """Get ready for the secure sums of a job's planned ``groups`` (public), before its first
        round: a transport with pairwise masks keys them in one batch. Default: nothing."""
        return None

    def silent_owners(self) -> set[str]:
        """Owners whose node stopped answering."""
        ...

    def progressed(self, done: int, planned: int) -> None:
        """``done`` of the job's ``planned`` steps are over, in the strategy's own units, one per round its
        report records (a boosting round, its ring hops and secure-sum steps included; a gradient step; a
        one-round job's round), those a resumed job takes from its journal included. Default: nothing."""
        return None

    def account(self) -> dict[str, object]:
        """What the job's book (:class:`~privfed.server.rounds.JobBook`) booked of the owners since the last call, as
        JSON, for a journal to keep with a checkpoint (:meth:`JobBook.account`). Default: nothing (no book)."""
        return {}

    def replay(self, account: Mapping[str, object]) -> None:
        """Book again what :meth:`account` returned: a resumed job's step taken from its journal. Default: nothing."""
        return None


@runtime_checkable
class Strategy(Protocol):
    """Round logic of one task: builds tasks, aggregates results, returns the model and its record."""

    def privacy(self) -> PrivacySplit:
        """The job's per-owner ε split over its releases (public: known before any round)."""
        ...

    def check_feasible(self, n_owners: int) -> None:
        """Raise :class:`ConfigError` unless ``n_owners`` owners can run the job; called before any
        owner is asked for anything (issue 23, item 2)."""
        ...

    def run(self, owner_ids: list[str], transport: Transport) -> StrategyResult[TrainedModel]: ...


def new_tasks(
    owner_ids: Sequence[str], round_id: str, spec: TaskSpec | Callable[[str], TaskSpec], *, step: str = ""
) -> list[Task]:
    """One task per owner with a fresh random task id; ``spec`` is the same for all, or per owner ``spec(owner_id)``;
    ``step`` names the batch within its run in the logs (:attr:`Task.round_name`)."""
    spec_for = spec if callable(spec) else (lambda _: spec)
    return [
        Task(task_id=f"{round_id}-{secrets.token_hex(6)}", owner_id=o, round_id=round_id, spec=spec_for(o), step=step)
        for o in owner_ids
    ]


P = TypeVar("P")


def shares_of(results: list[Result], kind: type[P]) -> list[P]:
    """The payloads of ``results`` that are ``kind`` (the shares; refusals and others left out)."""
    return [r.payload for r in results if isinstance(r.payload, kind)]


class Running(Protocol):
    """A round's aggregate as its results come: :meth:`add` folds one batch into running sums
    (the batch is not kept), :meth:`model` is the model from everything added."""

    def add(self, results: list[Result]) -> None: ...

    def model(self) -> TrainedModel: ...


class SingleRound:
    """A strategy whose job is one round: every owner releases once (:meth:`spec`), and the replies
    are folded into running sums as they come (:meth:`running`), so the coordinator holds no
    reply longer than its batch."""

    def spec(self) -> TaskSpec:
        """The task every owner is asked."""
        raise NotImplementedError

    def running(self) -> Running:
        """An empty running aggregate of this strategy's replies."""
        raise NotImplementedError

    def aggregate(self, results: list[Result]) -> TrainedModel:
        """The model of ``results`` taken as one batch."""
        running = self.running()
        running.add(results)
        return running.model()

    def configure(self, owner_ids: Sequence[str], round_id: str) -> list[Task]:
        return new_tasks(owner_ids, round_id, self.spec())

    def privacy(self) -> PrivacySplit:
        """One release of :meth:`spec` per owner."""
        return PrivacySplit.from_entries([(self.spec().ledger_entries(), 1)])

    def check_feasible(self, n_owners: int) -> None:
        """Any number of owners can release once."""

    def run(self, owner_ids: list[str], transport: Transport) -> StrategyResult[TrainedModel]:
        t0 = time.perf_counter()
        running, refused, released = self.running(), dict[str, str](), 0

        def fold(results: list[Result]) -> None:
            nonlocal released
            codes = refusal_codes(results)
            refused.update(codes)
            released += sum(1 for r in results if r.owner_id not in codes)
            running.add(results)

        transport.fold_tasks(self.configure(owner_ids, "r1"), fold)
        transport.progressed(1, 1)
        model = running.model()
        record = RoundReport(1, "share", len(owner_ids), released, time.perf_counter() - t0)
        return StrategyResult(model, self.privacy(), (record,), refused=refused)


def refusals(results: list[Result]) -> dict[str, str]:
    """owner_id -> refusal message, for the report."""
    return {r.owner_id: r.payload.line() for r in results if isinstance(r.payload, Refusal)}


def refusal_codes(results: list[Result]) -> dict[str, str]:
    """owner_id -> refusal code."""
    return {r.owner_id: r.payload.code for r in results if isinstance(r.payload, Refusal)}
