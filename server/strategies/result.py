"""What a strategy's run hands back: the model and the record a report shows (Flower's ``Result``).

:class:`StrategyResult` is returned by every :meth:`Strategy.run <privfed.server.strategies.base.Strategy.run>`,
over gRPC or in-process alike, and read back field by field (no ``getattr``):

* ``model``: the trained model (:class:`TrainedModel`: it predicts class indices);
* ``rounds``: one :class:`RoundReport` per round (a share round, a DP-PCA or SVM phase, a
  boosting round with its secure sum and SAMME decision);
* ``privacy``: the job's :class:`PrivacySplit`, the ε (and δ) of each release an owner makes, from
  the strategy's own accounting: the ledger entries of the very task specs it sends;
* ``dropped``: owners the run dropped: removed from a secure sum (refusing, silent or stalled), or asked and
  never answered (lr by gradient descent);
* ``rejected``: owner -> why the strategy discarded a release it received (a share that does not
  fit the run's encoding); the job's contract checks (``privfed.server.rounds.JobBook``) add theirs;
* ``refused``: owner -> refusal code of every refusal the strategy saw.

Every record is a frozen dataclass with a ``to_report()`` giving its JSON form.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

#: Public noise parameters a report shows beside the ε split (scales, bounds, choices).
Parameter = float | int | str


@runtime_checkable
class TrainedModel(Protocol):
    """What every strategy's model does: predict class indices of rows in the schema's feature space."""

    def predict(self, X: np.ndarray) -> np.ndarray: ...


#: A strategy's model type (each strategy's result says which model it trains).
M = TypeVar("M", bound=TrainedModel, covariant=True)


@dataclass(frozen=True)
class BudgetPart:
    """One kind of release an owner makes in a job, as the owners' ledgers debit it.

    ``purpose`` is the ledger purpose (the part before ``:``), ``epsilon`` and ``delta`` those of
    one release, ``releases`` the most releases of this kind one owner makes in the job.
    """

    purpose: str
    epsilon: float
    delta: float = 0.0
    releases: int = 1

    def to_report(self) -> dict[str, object]:
        return {"purpose": self.purpose, "epsilon": self.epsilon, "delta": self.delta, "releases": self.releases}


@dataclass(frozen=True)
class PrivacySplit:
    """The job's per-owner privacy: at most (``epsilon``, ``delta``) per owner, split into ``parts``.

    Built by each strategy from the ledger entries of the task specs it sends
    (:meth:`from_entries`), so the split a report shows is what the owners debit.
    """

    epsilon: float
    delta: float
    parts: tuple[BudgetPart, ...]
    parameters: Mapping[str, Parameter] = field(default_factory=dict)

    @classmethod
    def from_entries(
        cls,
        entries: Iterable[tuple[Iterable[tuple[float, float, str]], int]],
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        parameters: Mapping[str, Parameter] | None = None,
    ) -> PrivacySplit:
        """The split of releases given as ``(ledger entries of one task spec, releases per owner)``;
        ``epsilon``/``delta`` default to their sum by basic composition (every owner makes every release)."""
        parts = tuple(BudgetPart(purpose, e, d, n) for spec_entries, n in entries for e, d, purpose in spec_entries)
        return cls(
            epsilon=math.fsum(p.epsilon * p.releases for p in parts) if epsilon is None else float(epsilon),
            delta=math.fsum(p.delta * p.releases for p in parts) if delta is None else float(delta),
            parts=parts,
            parameters=dict(parameters or {}),
        )

    def part(self, purpose: str) -> BudgetPart:
        """The part debited under ``purpose`` (KeyError if the job makes no such release)."""
        for p in self.parts:
            if p.purpose == purpose:
                return p
        raise KeyError(f"no release with purpose {purpose!r} in this job; parts: {[p.purpose for p in self.parts]}")

    def to_report(self) -> dict[str, object]:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "releases": [p.to_report() for p in self.parts],
            **dict(self.parameters),
        }


@dataclass(frozen=True)
class SumRecord:
    """One secure sum as it ended: the parties ``summed`` (those whose releases the total holds), its
    attempts, seconds and protocol, and the parties dropped or refusing on the way."""

    protocol: str  # "ring" or "secagg"
    summed: tuple[str, ...]
    attempts: int = 1
    seconds: float = 0.0
    dropped: tuple[str, ...] = ()
    refused: Mapping[str, str] = field(default_factory=dict)  # party -> refusal code

    def to_report(self) -> dict[str, object]:
        return self.to_json() | {"summed": len(self.summed)}

    def to_json(self) -> dict[str, object]:
        """All of it, as JSON (a journal keeps it: :meth:`from_json` reads it back)."""
        return {
            "protocol": self.protocol,
            "summed": list(self.summed),
            "attempts": self.attempts,
            "seconds": self.seconds,
            "dropped": list(self.dropped),
            "refused": dict(self.refused),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SumRecord:
        return cls(
            str(data["protocol"]),
            tuple(data["summed"]),
            int(data["attempts"]),
            float(data["seconds"]),
            tuple(data["dropped"]),
            dict(data["refused"]),
        )


@dataclass(frozen=True)
class BoostDecision:
    """What the coordinator decided in a boosting round from its secure sums (seed 002 Alg. 2; SPEC §5)."""

    err_total: float  # E, floored, as published
    weight_total: float  # W
    alpha: float | None  # None: the learner was not kept
    step: str  # "keep", "keep_and_stop", "skip" or "discard_and_stop"

    @property
    def error(self) -> float | None:
        return self.err_total / self.weight_total if self.weight_total > 0 else None


@dataclass(frozen=True)
class RoundReport:
    """One round of a job.

    ``phase`` names what was released (``"share"``, ``"pca"``, ``"svm"``); ``asked`` owners were
    asked, ``released`` answered with a release that was used; ``seconds`` the release batch took.
    Boosting adds the round's ``evaluators`` (the owners asked into its secure sum), the
    ``secure_sum`` and the ``decision``. A round a resumed job took from its journal says which
    part (``from_journal``: ``"learner"`` or ``"learner and sums"``): its ``released`` and ``secure_sum``
    are those the journal recorded (None from a journal of older code), its ``seconds`` None.
    """

    round: int  # 1-based
    phase: str
    asked: int
    released: int | None = None
    seconds: float | None = None
    evaluators: tuple[str, ...] = ()
    secure_sum: SumRecord | None = None
    decision: BoostDecision | None = None
    from_journal: str | None = None

    def to_report(self) -> dict[str, object]:
        out: dict[str, object] = {
            "round": self.round,
            "phase": self.phase,
            "asked": self.asked,
            "released": self.released,
            "seconds": self.seconds,
        }
        if self.evaluators:
            out["evaluators"] = len(self.evaluators)
        if self.secure_sum is not None:
            out["secure_sum"] = self.secure_sum.to_report()
        if self.decision is not None:
            d = self.decision
            out |= {"err_total": d.err_total, "weight_total": d.weight_total, "error": d.error, "alpha": d.alpha}
            out["step"] = d.step
        if self.from_journal is not None:
            out["from_journal"] = self.from_journal
        return out


@dataclass(frozen=True)
class StrategyResult(Generic[M]):
    """A strategy's run: the model and its record (module docstring)."""

    model: M
    privacy: PrivacySplit
    rounds: tuple[RoundReport, ...] = ()
    dropped: tuple[str, ...] = ()
    rejected: Mapping[str, str] = field(default_factory=dict)
    refused: Mapping[str, str] = field(default_factory=dict)

    def to_report(self) -> dict[str, object]:
        """The report's fields of this run (``rounds``, ``privacy``, ``dropped``: the owners the run dropped, from a
        secure sum in bdt, or asked and never answered in lr by gradient descent)."""
        return {
            "rounds": [r.to_report() for r in self.rounds],
            "privacy": self.privacy.to_report(),
            "dropped": list(self.dropped),
        }


def single_round(phase: str, asked: Sequence[str], released: int, seconds: float, round_no: int = 1) -> RoundReport:
    """The record of a round that asked every owner of ``asked`` for one release."""
    return RoundReport(round=round_no, phase=phase, asked=len(asked), released=released, seconds=seconds)
