"""The round loop of federated SAMME boosting, written once (seed 002 Alg. 2; SPEC §5).

Per round t: a fresh group of owners (never reused: :func:`~privfed.common.boosting.coordinator.sample_groups`)
releases perturbed shares with their SAMME weights; the coordinator fits the base learner from
them (:meth:`CoordinatorSteps.select <privfed.common.boosting.coordinator.CoordinatorSteps.select>`); round t's
evaluation group (:func:`~privfed.common.boosting.coordinator.evaluation_groups`) puts its noisy ``(err_sum,
w_sum)`` releases into a secure sum; the coordinator floors ``E`` (``CoordinatorSteps.floor_error_total``),
applies SAMME's weight and stop rules (``CoordinatorSteps.decide``,
:func:`~privfed.common.learners.samme.samme_decide`) and publishes (learner, α, E, W), from which
owners update their weights (:func:`~privfed.common.boosting.owner.update_weights`).

:func:`run_rounds` is that loop, pure: what differs between a federation and a simulation is
*who* releases and sums, which a :class:`RoundSteps` object supplies. The networked strategy
(``privfed.server.strategies.boosting``) supplies steps that send tasks over a transport (gRPC
or in-process); :func:`privfed.common.boosting.simulation.simulate` supplies the vectorised in-process
owner steps. The centralised reference :class:`~privfed.common.learners.samme.SammeBoost` uses the same
``samme_decide`` / ``samme_update``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

from privfed.common.boosting.coordinator import CoordinatorSteps, evaluation_groups, sample_groups
from privfed.common.boosting.owner import Learner
from privfed.common.boosting.params import BoostingParams
from privfed.common.errors import ConfigError, RoundFailed
from privfed.common.learners.samme import BoostedModel, SammeStep


class Evaluation(NamedTuple):
    """A round's secure sum: ``E``, ``W`` (sums of noisy releases) over ``n_parties`` owners; none (0 parties:
    :data:`NOT_EVALUATED`) when fewer than two of its evaluators were left, whose sum would be one owner's release."""

    err_total: float
    weight_total: float
    n_parties: int


#: A round nobody could evaluate (:class:`Evaluation`): its learner is skipped and the run goes on.
NOT_EVALUATED = Evaluation(0.0, 0.0, 0)


class RoundSteps(Protocol):
    """Who releases and sums in :func:`run_rounds` (owners over a transport, or simulated)."""

    def release(self, round_no: int, group: np.ndarray) -> Any:
        """The releases of owner indices ``group`` in round ``round_no`` (0-based), in the form
        :meth:`CoordinatorSteps.select` takes."""
        ...

    def evaluate(self, round_no: int, evaluators: np.ndarray, learner: Any) -> Evaluation:
        """The secure sum of the evaluators' noisy ``(err_sum, w_sum)`` releases for ``learner``."""
        ...

    def keep(self, round_no: int, learner: Any, alpha: float, err_total: float, weight_total: float) -> None:
        """The round's learner was kept with weight ``alpha``: publish it (owners update their weights)."""
        ...

    def decided(self, record: RoundRecord) -> None:
        """What the coordinator decided in a round (for a report); called for every round."""
        ...


class RoundJournal(Protocol):
    """What the coordinator wrote down of earlier rounds, so a restarted coordinator continues a
    run instead of starting it over (issue 14: the coordinator's journal, ``privfed.server.journal``).

    Each round has two checkpoints: the learner the shares selected, and the secure sum of its
    evaluation. :func:`run_rounds` records each one before it is used and, on a rerun, takes a
    recorded one instead of asking owners again: owners that released for a recorded step are
    never asked twice, and the decisions replayed from the recorded sums are the same.
    """

    def learner(self, round_no: int) -> Any | None:
        """The recorded learner of round ``round_no``, or None."""
        ...

    def record_learner(self, round_no: int, learner: Any) -> None: ...

    def evaluation(self, round_no: int) -> Evaluation | None:
        """The recorded secure sum of round ``round_no``, or None."""
        ...

    def record_evaluation(self, round_no: int, evaluation: Evaluation) -> None: ...


@dataclass(frozen=True)
class RoundRecord:
    """What the coordinator learned in one round."""

    round: int
    group_size: int
    learner: Learner  # the selected base learner
    error: float  # E / W from the secure sums
    alpha: float | None  # None: rejected
    step: str  # "keep", "keep_and_stop", "skip" or "stop"
    err_total: float = math.nan  # E as published (floored)
    weight_total: float = math.nan  # W
    n_evaluators: int = 0  # owners whose releases the secure sum added


@dataclass
class BoostingRun:
    """Result of :func:`run_rounds` (and of :func:`~privfed.common.boosting.simulation.simulate`)."""

    model: BoostedModel
    rounds: list[RoundRecord]
    groups: np.ndarray
    weights: np.ndarray | None
    stop_reason: str
    evaluators: list = field(default_factory=list)  # per round: the owners whose noisy sums were added

    def staged_misclassification(self, X: Any, y: Any) -> np.ndarray:
        """Misclassification of the ensemble after each round, on class indices ``y``.

        A rejected round repeats the previous value; before the first kept learner the empty vote
        predicts class 0 (ties go to the lowest class, SPEC §5).
        """
        y = np.asarray(y)
        votes = np.zeros((y.shape[0], self.model.classes.shape[0]))
        out, rows = [], np.arange(y.shape[0])
        for rec in self.rounds:
            if rec.alpha is not None:
                votes[rows, np.asarray(rec.learner.predict(X), dtype=np.int64)] += rec.alpha
            out.append(float(np.mean(np.argmax(votes, axis=1) != y)))
        return np.asarray(out)


def plan_rounds(params: BoostingParams, n_owners: int, rng: np.random.Generator) -> tuple[np.ndarray, list]:
    """The run's share groups and evaluation groups (owner indices), drawn from ``rng`` in that order.

    Public: they need no secrecy. ``share_groups="disjoint"``: fresh groups (:func:`sample_groups`;
    raises :class:`ConfigError` when ``n_rounds * group_size`` exceeds the owners, some owner would
    release twice); ``"all"``: every owner in every round (``group_size`` must then be unset or N).
    ``budget_split="owners"``: groups of ``(1 - eval_fraction) N / T`` sharers, and the other owners
    evaluate.
    """
    if params.share_groups == "all":
        if params.group_size not in (None, n_owners):
            raise ConfigError(
                f"share_groups='all' asks every owner every round; group_size={params.group_size} must be unset"
            )
        groups = np.tile(np.arange(n_owners), (params.n_rounds, 1))
        return groups, evaluation_groups(groups, n_owners, params.eval_groups, rng)
    groups = sample_groups(n_owners, params.n_rounds, share_group_size(params, n_owners), rng)
    owners = params.budget_split == "owners"
    return groups, evaluation_groups(groups, n_owners, params.eval_groups, rng, sharers_evaluate=not owners)


def share_group_size(params: BoostingParams, n_owners: int) -> int:
    """How many owners share in each round of disjoint share groups (:func:`plan_rounds`): ``group_size``, or the
    sharers split over the rounds, at least one. ``budget_split="owners"``: only the ``(1 - eval_fraction) N``
    sharers are in share groups."""
    owners = params.budget_split == "owners"
    sharers = int(n_owners * (1.0 - params.eval_fraction)) if owners else n_owners
    return max(params.group_size or sharers // params.n_rounds, 1)


def run_rounds(
    coordinator: CoordinatorSteps,
    steps: RoundSteps,
    groups: np.ndarray,
    evaluators: list,
    journal: RoundJournal | None = None,
) -> BoostingRun:
    """Seed 002 Alg. 2 over the planned rounds (:func:`plan_rounds`): the one SAMME loop.

    Parameters
    ----------
    coordinator : CoordinatorSteps
        The run's public configuration, its releases and the coordinator's rules.
    steps : RoundSteps
        Releases, secure sums and publication (networked or simulated).
    groups, evaluators : from :func:`plan_rounds`
    journal : RoundJournal, optional
        Checkpoints of a run that may be resumed: recorded learners and sums are used instead
        of new releases, and new ones are recorded before they are used.

    Raises
    ------
    RoundFailed
        No round kept a learner (the message says why, :meth:`CoordinatorSteps.nothing_to_boost`).
    """
    learners: list = []
    alphas: list[float] = []
    rounds: list[RoundRecord] = []
    published: list[tuple[int, float, float]] = []
    stop = "n_rounds"
    for t, group in enumerate(groups):
        learner = journal.learner(t) if journal is not None else None
        if learner is None:
            learner = coordinator.select(steps.release(t, group))
            if journal is not None:
                journal.record_learner(t, learner)
        ev = journal.evaluation(t) if journal is not None else None
        if ev is None:
            ev = steps.evaluate(t, evaluators[t], learner)
            if journal is not None:
                journal.record_evaluation(t, ev)
        if ev.n_parties == 0:  # no sum: its evaluators' nodes left or fell silent (SAMME has no error to weigh it by)
            rounds.append(RoundRecord(t, len(group), learner, math.nan, None, "skip", err_total=0.0, weight_total=0.0))
            steps.decided(rounds[-1])
            continue
        err, wsum = coordinator.floor_error_total(float(ev.err_total), ev.n_parties), float(ev.weight_total)
        decision = coordinator.decide(err, wsum, n_kept=len(learners))
        published.append((ev.n_parties, err, wsum))
        sums: dict[str, Any] = dict(err_total=err, weight_total=wsum, n_evaluators=ev.n_parties)
        if decision is None:
            error = err / wsum if wsum > 0 else math.nan
            rounds.append(RoundRecord(t, len(group), learner, error, None, "skip", **sums))
        elif decision.step is SammeStep.DISCARD_AND_STOP:
            rounds.append(RoundRecord(t, len(group), learner, decision.error, None, "stop", **sums))
            stop = "no_better_than_chance"
        else:
            alpha = decision.kept_alpha
            learners.append(learner)
            alphas.append(alpha)
            rounds.append(RoundRecord(t, len(group), learner, decision.error, alpha, decision.step.value, **sums))
            if decision.step is SammeStep.KEEP_AND_STOP:
                stop = "zero_error"
        steps.decided(rounds[-1])
        if stop != "n_rounds":
            break
        kept_alpha = rounds[-1].alpha
        if kept_alpha is not None:
            steps.keep(t, learner, kept_alpha, err, wsum)
    if not learners:
        raise RoundFailed(f"nothing to boost: {coordinator.nothing_to_boost(published)}")
    model = BoostedModel(learners, alphas, n_classes=coordinator.plan.params.n_classes)
    return BoostingRun(model, rounds, groups, None, stop, evaluators)
