"""The public parameters of a federated boosting run (seed 002 Alg. 2; SPEC §5, §6, §11): one frozen
dataclass, validated once, and the table of its constraints.

:class:`BoostingParams` is the run's public configuration: every field is known to the coordinator and
to every owner, and travels in every boosting task (:data:`PARAMETERS` says which fields go on the wire;
``proto/serde.py`` maps them). It holds no data and no coordinator-only option (the simulation's secure
sum and vectorisation, the coordinator's ``on_reject``: :mod:`.simulation`, :mod:`.coordinator`). What it
implies is derived elsewhere: the ε of each release (the properties below, pure arithmetic of the
fields), the mechanisms of the releases (:class:`~privfed.common.boosting.releases.ReleasePlan`), the
owner's steps (:mod:`.owner`) and the coordinator's (:mod:`.coordinator`).

Budget split. A run's ``epsilon`` per owner is ``share_epsilon + eval_epsilon`` with ``eval_epsilon =
eval_fraction * epsilon`` (default :data:`EVAL_FRACTION` = 0.4): the shares spend ``(1 - eval_fraction)
epsilon``, the evaluations ``eval_epsilon`` (basic composition). ``budget_split="owners"`` splits the
owners instead: a fraction ``eval_fraction`` of them only evaluates and the others only share, each at the
whole ε (one release per owner and run; an owner node refuses the other role of the run,
``privfed.owner.kinds.boosting.check_one_role``). ``eval_groups="disjoint"`` (default): each owner
evaluates in one round at the whole ``eval_epsilon``; ``"all"``: every owner evaluates every round at
``eval_epsilon / T``. ``share_groups="disjoint"`` (default): an owner releases one share per run at the
whole share ε; ``"all"``: every owner shares in every round at ``share_epsilon / T`` (sequential
composition, each debited). SAMME only needs the ratio ``E / W``, so noisy totals of a sub-population serve.

The defaults were chosen by measurement (``privfed experiment bdt-error`` and ``privfed experiment tabular
--validate``; the tables are in :mod:`privfed.deploy.experiments.boosting_curves`, "Design of the boosting
defaults").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.ncc import LABEL_FRACTION, LABEL_SCHEMES
from privfed.common.learners.stump import check_split_points
from privfed.common.learners.stump_encodings import STUMP_ENCODINGS, default_encoding
from privfed.common.mechanisms.base import MECHANISMS
from privfed.common.mechanisms.frequency import ORACLES
from privfed.common.mechanisms.laplace import error_pair_scale
from privfed.common.mechanisms.randomized_response import ErrorPairResponse
from privfed.common.parameters import Param, anything, fraction, integer, options, positive, public_bounds
from privfed.common.validation import check_positive

#: The base learners a boosting run can hold: stumps from perturbed weighted cross tables (§3.5.3), nearest
#: centroid from perturbed weighted rows (§3.5.1), logistic regression from perturbed local models (§3.5.2).
BASE_LEARNERS = ("stump", "ncc", "lr")
#: Who evaluates each round: each owner once at the whole evaluation budget, or every owner every round.
EVAL_GROUPS = ("disjoint", "all")
#: Who releases a share in a round (module docstring): a fresh group of N/T owners at the whole share ε,
#: or every owner in every round at 1/T of it.
SHARE_GROUPS = ("disjoint", "all")
#: How an owner's ε is split (module docstring): between its share and its evaluation, or between owners.
BUDGET_SPLITS = ("epsilon", "owners")
#: The evaluation release's mechanism: Laplace on the row-clipped pair (row-level DP,
#: :class:`~privfed.common.mechanisms.laplace.ErrorPairLaplace`), or randomized response on one sampled
#: category (owner-level LDP, :class:`~privfed.common.mechanisms.randomized_response.ErrorPairResponse`).
EVAL_MECHANISMS = ("laplace", "rr")
#: Default public per-row bound ``b`` on a row's SAMME weight in an evaluation release.
EVAL_ROW_BOUND = 1.0
#: Default share of an owner's ε for its evaluation release(s).
EVAL_FRACTION = 0.4
#: Default stump thresholds per attribute + 1 (``--n-bins``): 3, the cuts at a third and two thirds of each
#: feature's public range (issue 22). It was 2, the midpoint.
N_BINS = 3
#: Default public bound on the rows an owner holds: sizes the clip range of a noisy evaluation pair
#: (and the ring's fixed-point range) only, never the noise.
MAX_OWNER_ROWS = 10**6


#: Every field of :class:`BoostingParams`, in the order they are checked (scikit-learn's
#: ``_parameter_constraints``, with the help text and the wire flag beside each;
#: :mod:`privfed.common.parameters`). The defaults are the dataclass fields'.
#: The most boosting rounds a run may ask (a public limit: a job's plan holds rounds x owners entries with
#: ``share_groups="all"``, and a data user's 50 000 rounds over 1000 owners took 400 MB and 3.6 s of the service's
#: one job loop to plan, audit 26, A26-6; the defaults are 10 and 50).
MAX_ROUNDS = 1000

PARAMETERS: dict[str, Param] = {
    "base": Param(options(BASE_LEARNERS), "base learner: stump, ncc (nearest centroid) or lr"),
    "mechanism": Param(options(MECHANISMS), "row mechanism of table/pair stump, NCC and LR shares"),
    "eval_groups": Param(options(EVAL_GROUPS), "who evaluates each round: each owner once, or all every round"),
    "share_groups": Param(options(SHARE_GROUPS), "who shares each round: fresh groups, or every owner at 1/T"),
    "budget_split": Param(options(BUDGET_SPLITS), "split each owner's epsilon, or split the owners"),
    "eval_fraction": Param(fraction, "share of epsilon (or of the owners) for the evaluation releases"),
    "epsilon": Param(positive(allow_inf=True, fix="math.inf: no noise"), "each owner's budget for the run"),
    "n_classes": Param(integer(2), "number of classes K"),
    "n_rounds": Param(integer(1, maximum=MAX_ROUNDS), "rounds T"),
    "n_bins": Param(integer(2), "stumps: thresholds per feature + 1"),
    "group_size": Param(integer(1, optional=True), "owners per share group (default N // T)"),
    "max_owner_rows": Param(integer(1), "public bound on an owner's rows (sizes the evaluation's clip range)"),
    "weight_bound": Param(positive(), "public bound on an owner's (stump) or a row's (NCC) share weight"),
    "C": Param(positive(), "LR: inverse regularisation"),
    "param_bound": Param(positive(), "LR: public clip bound of the local model's parameters"),
    "eval_row_bound": Param(positive(), "public bound b on a row's weight in an evaluation release"),
    "bounds": Param(public_bounds, "public feature bounds"),
    "labels": Param(options(LABEL_SCHEMES), "NCC labels: joint (default), rr, or clear (owner opt-in only)"),
    "label_fraction": Param(fraction, "NCC, labels='rr': share of the share epsilon for the label"),
    "split_points": Param(anything, "stumps: public thresholds chosen before the run", wire=False),
    "stump_encoding": Param(options(STUMP_ENCODINGS, optional=True), "stumps: the share's encoding"),
    "oracle": Param(options(ORACLES), "stumps, 'cells': the frequency oracle"),
    "n_sampled": Param(integer(1, optional=True), "stumps, 'signs'/'cells': coordinates each owner samples"),
    "eval_mechanism": Param(options(EVAL_MECHANISMS, optional=True), "the evaluation release: laplace or rr"),
}


def default_weight_bound(rows_per_owner: float | None) -> float:
    """The default public share weight bound for owners of ``rows_per_owner`` rows: ``max(1, ceil(rows))``.

    Mean-1 SAMME weights sum to about an owner's row count; a larger bound leaves room for reweighting but
    the share noise grows linearly with it, and the noise wins (measured: one-row owners 0.333 at bound 1
    against 0.352 at 2; two-row owners 0.355 at 2 against 0.375 at 4). None (rows unknown): 1, the one-row
    setting.
    """
    if rows_per_owner is None:
        return 1.0
    return float(max(1, math.ceil(check_positive(rows_per_owner, name="rows_per_owner"))))


def default_eval_mechanism(row_bound: float, epsilon: float, max_rows: int) -> str:
    """The evaluation mechanism with the smaller worst-case noise per coordinate at this public configuration.

    Laplace's standard deviation ``sqrt(2) 2 b / epsilon`` does not depend on the rows an owner holds;
    randomized response's ``b max_rows / (2 (p - q))`` (:attr:`~privfed.common.mechanisms.randomized_response.
    ErrorPairResponse.max_std`) grows with them. ``"rr"`` wins for owners of one row at evaluation ε up to
    about 5.6 (a 4x smaller variance at ε = 1.5, the default split of ε = 5), Laplace for owners of three or
    more rows (two rows: a tie near ε = 1.5). ``epsilon = inf``: ``"laplace"`` (both exact). Public
    configuration only.
    """
    if math.isinf(epsilon):
        return "laplace"
    laplace = math.sqrt(2.0) * error_pair_scale(row_bound, epsilon)
    rr = ErrorPairResponse(epsilon=epsilon, row_bound=row_bound, max_rows=max_rows)
    return "rr" if rr.max_std <= laplace else "laplace"


@dataclass(frozen=True, kw_only=True)
class BoostingParams:
    """The public configuration of a federated boosting run (seed 002 Alg. 2; SPEC §5, §6, §11).

    Parameters
    ----------
    base : {"stump", "ncc", "lr"}
        Base learner (:data:`BASE_LEARNERS`).
    epsilon : float > 0 or math.inf
        Each owner's budget for the whole run (``inf``: no noise): ``(1 - eval_fraction) epsilon`` for its
        share(s), ``eval_fraction * epsilon`` for its evaluation release(s) (module docstring).
    mechanism : {"pm", "hm", "duchi", "laplace"}
    n_classes : int >= 2
    bounds : Bounds
        Public feature bounds.
    n_rounds : int >= 1
        T.
    group_size : int or None
        Owners per share group; default ``n_owners // n_rounds``.
    n_bins : int >= 2
        Stumps: thresholds ``lo + b (hi - lo) / n_bins`` (SPEC §6), or ``split_points``. Default :data:`N_BINS`.
    split_points : (d, n_bins - 1) thresholds or None
        Stumps: public thresholds chosen before the run, e.g. LDP quantiles from a group of owners that takes
        no other part (:mod:`privfed.common.learners.split_points`); None: equal-width. Not on the wire (the
        networked path uses equal-width thresholds).
    weight_bound : float > 0
        Public bound on an owner's total weight (stump) or a row's weight (NCC, and LR's local fit, whose Newton
        steps it sets: :func:`~privfed.common.learners.logistic.fit_local_logistic`), in rows (weights have mean
        1). Larger weights are scaled down before release (biases the selection, never the privacy); the
        share noise grows linearly with it (:func:`default_weight_bound`).
    labels, label_fraction : NCC label scheme of the share budget
        (:func:`~privfed.common.learners.ncc.split_label_budget`); default ``"joint"`` (one k-RR report of
        (label, sign) per row at the whole share ε, :class:`~privfed.common.learners.ncc_joint.JointLabelEncoding`);
        ``"rr"`` (the label by randomized response at ``label_fraction`` of ε); the paper's ``"clear"`` only
        by owner opt-in.
    C, param_bound : LR regularisation and public parameter clip bound.
    eval_fraction : float in (0, 1)
        Share of ``epsilon`` spent on the evaluation releases (module docstring, "Budget split").
    eval_groups : {"disjoint", "all"}
        Who evaluates each round (:func:`~privfed.common.boosting.coordinator.evaluation_groups`).
    eval_row_bound : float > 0
        Public per-row bound ``b`` on a row's SAMME weight in an evaluation release: rows are clipped to it
        before the sums, and the noise is calibrated to it whatever the owner's row count. Default
        :data:`EVAL_ROW_BOUND`.
    max_owner_rows : int >= 1
        Public bound on the rows an owner holds; sizes only the clip range of a noisy evaluation pair and
        the ring's fixed-point range, and the ``"rr"`` evaluation's scale.
    stump_encoding : {"signs", "cells", "pair", "table"} or None
        Stumps: how an owner encodes its share (:mod:`privfed.common.learners.stump_encodings`). None:
        ``"signs"`` for two classes, ``"cells"`` for more (measured best, issue 12).
    oracle : {"krr", "oue", "olh"}
        The frequency oracle of ``"cells"`` (``"signs"`` uses k-RR).
    n_sampled : int or None
        Coordinates each owner samples in ``"signs"``/``"cells"``; None: the variance-optimal number for ε.
    budget_split : {"epsilon", "owners"}
        Module docstring, "Budget split".
    share_groups : {"disjoint", "all"}
        Module docstring, "Budget split".
    eval_mechanism : {"laplace", "rr"} or None
        The evaluation release (:data:`EVAL_MECHANISMS`). None: the one with the smaller worst-case noise at
        this public configuration (:func:`default_eval_mechanism`).

    Raises
    ------
    ConfigError
        A parameter outside its constraint (:data:`PARAMETERS`), or parameters that do not go together.
    """

    base: str = "stump"
    epsilon: float
    mechanism: str = "pm"
    n_classes: int
    bounds: Bounds
    n_rounds: int
    group_size: int | None = None
    n_bins: int = N_BINS
    weight_bound: float = 1.0
    labels: str = "joint"
    label_fraction: float = LABEL_FRACTION
    C: float = 1.0
    param_bound: float = 1.0
    eval_fraction: float = EVAL_FRACTION
    eval_groups: str = "disjoint"
    eval_row_bound: float = EVAL_ROW_BOUND
    max_owner_rows: int = MAX_OWNER_ROWS
    stump_encoding: str | None = None
    oracle: str = "krr"
    n_sampled: int | None = None
    share_groups: str = "disjoint"
    eval_mechanism: str | None = None
    budget_split: str = "epsilon"
    split_points: tuple[tuple[float, ...], ...] | None = None

    def __post_init__(self) -> None:
        for name, param in PARAMETERS.items():
            param.check(getattr(self, name), name)
        if self.budget_split == "owners" and self.share_groups == "all":
            raise ConfigError(
                "budget_split='owners' gives sharing and evaluating to different owners; "
                "share_groups='all' would make every owner share: use share_groups='disjoint'"
            )
        if self.split_points is not None:
            sp = check_split_points(self.split_points, self.bounds, self.n_bins)
            object.__setattr__(self, "split_points", tuple(tuple(float(v) for v in row) for row in sp))
        if self.stump_encoding is None:
            object.__setattr__(self, "stump_encoding", default_encoding(self.n_classes))
        if self.eval_mechanism is None:
            resolved = default_eval_mechanism(self.eval_row_bound, self.eval_round_epsilon, self.max_owner_rows)
            object.__setattr__(self, "eval_mechanism", resolved)

    # ------------------------------------------------------------------ the ε of each release (derived)
    @property
    def share_epsilon(self) -> float:
        """ε of all of an owner's share releases in a run: ``(1 - eval_fraction) epsilon`` (``epsilon``
        under ``budget_split="owners"``)."""
        if self.budget_split == "owners":
            return float(self.epsilon)
        return float(self.epsilon) * (1.0 - float(self.eval_fraction))

    @property
    def shares_per_owner(self) -> int:
        """Share releases an owner makes in a run: 1, or T under ``share_groups="all"``."""
        return self.n_rounds if self.share_groups == "all" else 1

    @property
    def share_round_epsilon(self) -> float:
        """ε of one share release: ``share_epsilon / shares_per_owner`` (the debit of each share)."""
        return self.share_epsilon / self.shares_per_owner

    @property
    def eval_epsilon(self) -> float:
        """ε of all of an owner's evaluation releases in a run: ``eval_fraction * epsilon`` (``epsilon``
        under ``budget_split="owners"``)."""
        if self.budget_split == "owners":
            return float(self.epsilon)
        return float(self.epsilon) * float(self.eval_fraction)

    @property
    def eval_round_epsilon(self) -> float:
        """ε of one evaluation release (whole ``eval_epsilon``, or ``1/T`` of it under ``eval_groups="all"``)."""
        return self.eval_epsilon / (self.n_rounds if self.eval_groups == "all" else 1)


#: The fields of :class:`BoostingParams` that travel in every boosting task (all but ``split_points``).
WIRE_FIELDS = tuple(f.name for f in fields(BoostingParams) if PARAMETERS[f.name].wire)
