"""What the coordinator of a boosting run computes: groups, the base learner from a group's shares, and
SAMME's weight α from the secure-summed evaluations (seed 002 Alg. 2 lines 9-10 and 13-16; SPEC §5, §6).

Rounds and groups (§3.4.1; issue 12 item 2). ``share_groups="disjoint"``: round t's share group is drawn
uniformly from the owners that have not shared yet (:func:`sample_groups`), so an owner releases one share
per run at the whole share ε (``T * group <= N``); ``"all"``: every owner shares in every round at 1/T of it.
At these ε a k-RR report's signal falls about like ε while its noise stays, so a share sum's
signal-to-noise ratio is about ``sqrt(n) eps``: ``sqrt(N / T) eps`` for fresh groups against ``sqrt(N) eps /
T`` for every owner at ε/T, ``sqrt(T)`` better for fresh groups. Round t's evaluators
(:func:`evaluation_groups`) are disjoint from round t's share group, so a learner is never scored on the rows
it was fitted on; each owner evaluates once (``eval_groups="disjoint"``), which leaves ``sqrt(T)`` less
relative noise in ``E / W`` than every owner at ε/T in every round. All groups are public.

:class:`CoordinatorSteps` turns a group's shares into the base learner (:meth:`~CoordinatorSteps.select`,
after decoding the wire's arrays), floors the published error total (:meth:`~CoordinatorSteps.floor_error_total`)
and applies SAMME's weight and stop rules (:meth:`~CoordinatorSteps.decide`,
:func:`~privfed.common.learners.samme.samme_decide`); everything it sees is a release or a sum of releases,
so all of it is post-processing. The round loop that calls it is :func:`privfed.common.boosting.loop.run_rounds`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from privfed.common.boosting.owner import Learner, Release
from privfed.common.boosting.params import EVAL_GROUPS
from privfed.common.boosting.releases import ReleasePlan
from privfed.common.errors import ConfigError, PrivfedError
from privfed.common.learners.logistic import lr_aggregate
from privfed.common.learners.ncc import NccShare, ncc_centroids
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.learners.samme import SammeDecision, SammeStep, samme_decide
from privfed.common.learners.stump import select_stump
from privfed.common.learners.stump_row_encoding import RowEncoding
from privfed.common.learners.stump_sampled_encoding import SampledReports
from privfed.common.validation import check_choice, check_int

#: What the coordinator does with a learner no better than chance: drop it and go on with the next group
#: (``"skip"``), or end the run (``"stop"``, scikit-learn's rule; raises in the first round).
ON_REJECT = ("skip", "stop")


def sample_groups(n_owners: int, n_rounds: int, group_size: int, rng: np.random.Generator) -> np.ndarray:
    """Disjoint uniform groups of owners, one per round (seed 002 §3.4.1, Alg. 2 lines 9-10).

    Returns
    -------
    ndarray (n_rounds, group_size) of owner indices; no owner appears twice.

    Raises
    ------
    ConfigError
        ``n_rounds * group_size > n_owners``: some owner would release twice.
    """
    n_owners, n_rounds = (
        check_int(n_owners, name="n_owners", minimum=1),
        check_int(n_rounds, name="n_rounds", minimum=1),
    )
    group_size = check_int(group_size, name="group_size", minimum=1)
    if n_rounds * group_size > n_owners:
        raise ConfigError(
            f"n_rounds * group_size = {n_rounds} * {group_size} = {n_rounds * group_size} exceeds "
            f"the {n_owners} owners: an owner would release twice; use group_size <= "
            f"{n_owners // n_rounds} or fewer rounds"
        )
    return rng.permutation(n_owners)[: n_rounds * group_size].reshape(n_rounds, group_size)


def evaluation_groups(
    groups: np.ndarray, n_owners: int, how: str, rng: np.random.Generator, *, sharers_evaluate: bool = True
) -> list[np.ndarray]:
    """The owners whose noisy ``(err_sum, w_sum)`` enter round t's secure sum, one array per round.

    ``"all"``: every owner every round. ``"disjoint"``: the owners (share groups in round order, then the
    owners in no share group, shuffled) are rotated by one share group and split into T near-equal parts, so
    round t's evaluators are disjoint from round t's share group when T >= 2 and every owner evaluates exactly
    once. When the share groups overlap (``share_groups="all"``) no evaluation group can avoid them: a uniform
    split of the owners into T parts. ``sharers_evaluate=False`` (``budget_split="owners"``): only the owners
    in no share group evaluate, every round (``"all"``) or split into T parts.
    """
    groups = np.atleast_2d(np.asarray(groups, dtype=np.int64))
    n_rounds = groups.shape[0]
    check_choice(how, name="eval_groups", allowed=EVAL_GROUPS)
    if not sharers_evaluate:
        rest = np.setdiff1d(np.arange(n_owners), groups.ravel())
        if how == "all":
            return [rest] * n_rounds
        return [np.sort(g) for g in np.array_split(rng.permutation(rest), n_rounds)]
    if how == "all":
        return [np.arange(n_owners)] * n_rounds
    if np.unique(groups).size < groups.size:
        return [np.sort(g) for g in np.array_split(rng.permutation(n_owners), n_rounds)]
    rest = np.setdiff1d(np.arange(n_owners), groups.ravel())
    order = np.concatenate([groups.ravel(), rng.permutation(rest)])
    return [np.sort(g) for g in np.array_split(np.roll(order, -groups.shape[1]), n_rounds)]


def concat_releases(releases: list[Release]) -> Release:
    """Several owners' releases of one run as one (stacked vectors, or concatenated NCC shares or sampled reports)."""
    ncc = [r for r in releases if isinstance(r, NccShare)]
    sampled = [r for r in releases if isinstance(r, SampledReports)]
    if ncc or sampled:
        return NccShare.concat(ncc) if ncc else SampledReports.concat(sampled)
    return np.concatenate([np.atleast_2d(r) for r in releases if isinstance(r, np.ndarray)])


@dataclass(frozen=True, eq=False)
class CoordinatorSteps:
    """The coordinator's steps of a run with the releases ``plan`` (module docstring).

    Parameters
    ----------
    plan : ReleasePlan
        The run's public parameters and the mechanisms of its releases.
    on_reject : {"skip", "stop"}
        A learner no better than chance: ``"skip"`` (default) drops it and goes on with the next group, which
        releases a different learner (unlike the centralised case, where the same one would come back);
        ``"stop"`` ends the run (scikit-learn; raises in the first round). The coordinator's own choice: not on
        the wire.
    """

    plan: ReleasePlan
    on_reject: str = "skip"

    def __post_init__(self) -> None:
        if not isinstance(self.plan, ReleasePlan):
            raise ConfigError(f"plan must be a ReleasePlan, got {type(self.plan).__name__}")
        check_choice(self.on_reject, name="on_reject", allowed=ON_REJECT)

    # ------------------------------------------------------------------ decoding the owners' replies
    def stump_reports(self, reports: np.ndarray, coordinates: np.ndarray) -> np.ndarray | SampledReports:
        """Stump shares received as arrays (the wire: report rows, and each owner's sampled coordinates, if any)
        in the form :meth:`select` takes."""
        enc = self.plan.share_encoding
        if isinstance(enc, RowEncoding):
            reports = np.asarray(reports, dtype=np.float64)
            if np.asarray(coordinates).size or reports.ndim != 2 or reports.shape[1] != enc.dim:
                raise ConfigError(f"a {enc.kind!r} stump share is (n, {enc.dim}) reports and no sampled coordinates")
            return reports
        return enc.reports_of(coordinates, reports)

    def ncc_reports(self, reports: Any, labels: Any, coordinates: Any) -> NccShare | SampledReports:
        """An NCC share received as arrays (the wire: report rows, labels, sampled coordinates) in the form
        :meth:`select` takes: :class:`SampledReports` under ``labels="joint"``, else an :class:`NccShare`."""
        joint = self.plan.joint_encoding
        if joint is not None:
            if np.asarray(labels).size:
                raise ConfigError("a joint NCC share carries its labels inside the reports, not beside them")
            return joint.reports_of(coordinates, reports)
        if np.asarray(coordinates).size:
            raise ConfigError(f"an NCC share with labels={self.plan.params.labels!r} has no sampled coordinates")
        return NccShare(reports=reports, labels=labels)

    # ------------------------------------------------------------------ the round's decisions
    def select(self, releases: Any) -> Learner:
        """Aggregate one group's releases into the base learner (Alg. 2 line 10)."""
        plan, p = self.plan, self.plan.params
        if p.base == "stump":
            tables = plan.share_encoding.aggregate(releases)
            return select_stump(tables, bounds=p.bounds, n_bins=p.n_bins, split_points=p.split_points)
        if p.base == "ncc":
            if plan.joint_encoding is not None:
                return NearestCentroidModel(plan.joint_encoding.centroids(releases, bounds=p.bounds))
            return NearestCentroidModel(
                ncc_centroids(releases, n_classes=p.n_classes, bounds=p.bounds, label_rr=plan.label_rr())
            )
        return lr_aggregate(np.atleast_2d(releases), param_bound=p.param_bound, n_classes=p.n_classes, bounds=p.bounds)

    def floor_error_total(self, err_total: float, n_evaluators: int) -> float:
        """The published ``E``: at least one noise standard deviation of the sum when the totals are noisy.

        A noisy ``E <= 0`` would trigger SAMME's "zero error: keep and stop" rule with the huge ``alpha`` of
        ``e0 = 1e-10`` (SPEC §5), a rule meant for exact sums; flooring ``E`` at the standard deviation
        ``sqrt(2 n) * scale`` of its noise (public: ring size and scale) is post-processing and keeps ``alpha``
        finite. Exact totals (ε = ∞) are unchanged.
        """
        scale = self.plan.eval_noise_scale
        if scale == 0.0:
            return err_total
        return max(err_total, math.sqrt(2.0 * max(n_evaluators, 1)) * scale)

    def decide(self, err_total: float, weight_total: float, n_kept: int) -> SammeDecision | None:
        """SAMME weight and stop rules from the secure sums (SPEC §5); ``None``: skip this round's learner.

        Raises
        ------
        PrivfedError
            ``on_reject="stop"`` and the first learner is no better than chance.
        """
        try:
            decision = samme_decide(err_total, weight_total, self.plan.params.n_classes, n_kept=n_kept)
        except PrivfedError:
            if self.on_reject == "stop":
                raise
            return None
        if decision.step is SammeStep.DISCARD_AND_STOP and self.on_reject == "skip":
            return None
        return decision

    def nothing_to_boost(self, rounds: Iterable[tuple[int, float, float]]) -> str:
        """One line saying why no round kept a learner, with the numbers and what to change.

        ``rounds``: per round ``(ring size n, E, W)`` as published (noisy sums). Compares the noise standard
        deviation of a ring's total, ``sqrt(2 n) * 2 b / eval_round_epsilon``, with the weight totals W: when
        it is more than a tenth of W the evaluation noise is the cause (more owners or rows per ring, a larger
        ε or eval fraction); otherwise the learners the shares selected are themselves no better than chance
        (larger share groups, a larger ε).
        """
        p, scale = self.plan.params, self.plan.eval_noise_scale
        rounds = [(int(n), float(e), float(w)) for n, e, w in rounds]
        chance = 1.0 - 1.0 / p.n_classes
        ratios = [round(e / w, 3) if w > 0 else None for _, e, w in rounds]
        ring = int(np.median([n for n, _, _ in rounds])) if rounds else 0
        noise_std = math.sqrt(2.0 * max(1, ring)) * scale
        w_med = float(np.median([w for _, _, w in rounds])) if rounds else math.nan
        head = (
            f"no base learner was better than chance (error < {chance:.3g}) in any of {len(rounds)} round(s): "
            f"noisy E/W per round {ratios}; evaluation noise: Laplace scale 2b/eps_e = "
            f"2*{p.eval_row_bound:g}/{p.eval_round_epsilon:.3g} = {scale:.3g} per owner, "
            f"std ~{noise_std:.3g} for a ring of {ring} owners, against weight totals W ~{w_med:.3g} "
            f"(about the ring's rows)"
        )
        if not w_med > 10.0 * noise_std:
            return (
                f"{head}: the noise drowns the error; use more owners or rows per evaluation ring (more owners "
                f"or fewer rounds), a larger epsilon (now {p.epsilon:g}) or a larger eval fraction "
                f"(now {p.eval_fraction:g})"
            )
        return (
            f"{head}: the noise is small, the selected learners themselves are no better than chance (their "
            f"shares are too noisy); use more owners per share group (more owners or fewer rounds) or a larger "
            f"epsilon (now {p.epsilon:g}, eval fraction {p.eval_fraction:g})"
        )
