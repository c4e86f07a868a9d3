"""What every strategy shares: the Strategy and Transport protocols, task construction, reply filtering.

A strategy builds tasks and aggregates results (STYLE rule 12); it never sends anything: the
:class:`Transport` it is given does. Two transports implement it: gRPC over the dispatcher
(:class:`privfed.server.job.GrpcTransport`) and in-process, calling the owner handlers and state
machines directly (``privfed.deploy.inprocess.InProcessTransport``), so a federation and a
simulation run the same strategy code.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from privfed.common.tasks import Refusal, Result, RingSpec, Task, TaskSpec


@dataclass(frozen=True)
class RingSum:
    """The outcome of a ring secure sum: the totals over ``ring``, the parties actually summed."""

    totals: np.ndarray
    ring: tuple[str, ...]
    attempts: int = 1
    dropped: list[str] = field(default_factory=list)  # parties removed (refusing, silent or stalled)
    refused: dict[str, str] = field(default_factory=dict)  # party -> refusal code
    seconds: float = 0.0


@runtime_checkable
class Transport(Protocol):
    """How a strategy reaches the owners: a batch of tasks, a ring secure sum, and who is silent.

    No row counts (contract 2): a registration carries none, and a strategy needs only public bounds.
    """

    def run_tasks(self, tasks: list[Task], timeout: float | None = None) -> list[Result]:
        """Send ``tasks``, wait for the answers (or ``timeout``), return the results that came."""
        ...

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
        """A ring secure sum of the owners ``ring`` (in order; ``ring[0]`` leads), each asked with
        ``task_for(its ring spec)``, with refusing and silent owners dropped and the ring re-formed
        (:class:`privfed.common.secagg.session.RingSession`). ``max_abs`` bounds every contribution
        (public); ``timeout`` is per attempt; ``protocol`` ``"ring"`` or ``"secagg"`` (pairwise masks; None: the
        transport's default). Raises :class:`RoundFailed` when it gives up."""
        ...

    def silent_owners(self) -> set[str]:
        """Owners whose node stopped answering."""
        ...


@runtime_checkable
class Strategy(Protocol):
    """Round logic of one task: builds tasks, aggregates results, returns the model."""

    def run(self, owner_ids: list[str], transport: Transport) -> Any: ...


def new_tasks(owner_ids: Sequence[str], round_id: str, spec: TaskSpec | Callable[[str], TaskSpec]) -> list[Task]:
    """One task per owner with a fresh random task id; ``spec`` is the same for all, or per owner ``spec(owner_id)``."""
    spec_for = spec if callable(spec) else (lambda _: spec)
    return [
        Task(task_id=f"{round_id}-{secrets.token_hex(6)}", owner_id=o, round_id=round_id, spec=spec_for(o))
        for o in owner_ids
    ]


P = TypeVar("P")


def shares_of(results: list[Result], kind: type[P]) -> list[P]:
    """The payloads of ``results`` that are ``kind`` (the shares; refusals and others left out)."""
    return [r.payload for r in results if isinstance(r.payload, kind)]


class SingleRound:
    """A strategy whose job is one round: every owner releases once, then aggregate."""

    def configure(self, owner_ids: Sequence[str], round_id: str) -> list[Task]:
        raise NotImplementedError

    def aggregate(self, results: list[Result]) -> Any:
        raise NotImplementedError

    def run(self, owner_ids: list[str], transport: Transport) -> Any:
        return self.aggregate(transport.run_tasks(self.configure(owner_ids, "r1")))


def refusals(results: list[Result]) -> dict[str, str]:
    """owner_id -> refusal message, for the report."""
    return {r.owner_id: f"{r.payload.code}: {r.payload.message}" for r in results if isinstance(r.payload, Refusal)}


def refusal_codes(results: list[Result]) -> dict[str, str]:
    """owner_id -> refusal code."""
    return {r.owner_id: r.payload.code for r in results if isinstance(r.payload, Refusal)}
