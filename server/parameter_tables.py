"""The tables of a job's parameters, one declarative table per task (issue 25 item 2; :mod:`privfed.common.parameters`).

A job (:class:`~privfed.server.config.JobConfig`) is the fields every task has (:data:`COMMON`) and one
parameter object of its task: :class:`NccParams`, :class:`LrParams`, :class:`FeddpdrParams` or
:class:`BdtParams` or :class:`NbParams` (:mod:`privfed.server.parameters`, the objects). Each table maps a field to its :class:`Param`: constraint, help, flag and whether it
goes on the wire (into the task specs; for ``bdt``, into :class:`~privfed.common.boosting.params.BoostingParams`,
the boosting tasks' payload, under the same name). A field's default is its dataclass field's below. A flag
shared by several tasks (``--mechanism``: ncc, lr and bdt) is one :class:`Param` that each task's table
lists. From these tables come the parameter objects' checks, :data:`~privfed.server.config.FLAGS`, the
learning flags of ``privfed simulate`` and ``privfed coordinator`` (``privfed.deploy.cli``), the TOML keys
(``privfed.deploy.simulation_config``), each strategy's options and the run's ``BoostingParams``.

:data:`COMMON` holds the fields every task has. The flags of :data:`OWNER_ROWS` are built from their entries
here, like the tasks'; the others are declared by each command (their help and defaults differ between
``simulate`` and ``coordinator``), so they carry no help here.
"""

from __future__ import annotations

import dataclasses

from privfed.common.boosting import params as boosting
from privfed.common.feddpdr.basis import BASES
from privfed.common.feddpdr.choices import DEFAULT_ROW_SCALING, DEFAULT_SVM_MODEL, ROW_SCALINGS, SVM_MODELS
from privfed.common.jobinfo import JOB_TASKS
from privfed.common.learners.marginal_boost import MARGINAL_ROUNDS, MARGINAL_SMOOTHING
from privfed.common.learners.naive_bayes import NB_BINS, SMOOTHING
from privfed.common.learners.ncc import JOINT_BELOW
from privfed.common.mechanisms import MECHANISMS
from privfed.common.parameters import (
    Param,
    anything,
    below_one,
    fraction,
    integer,
    options,
    positive,
    switch,
)
from privfed.common.secagg import SECAGG_FROM, SECURE_SUMS

TASKS = JOB_TASKS
#: ``--solver`` of ``--task lr``.
LR_SOLVERS = ("gd", "local")
#: ``--labels``: ``auto`` is the task's default (``joint`` for bdt; for ncc ``joint`` or ``rr`` by ε, ``resolve_labels``).
LABEL_SCHEMES = ("auto", "joint", "rr", "clear")
INF_FIX = "math.inf (or 'inf') means no noise"

COMMON: dict[str, Param] = {
    "task": Param(options(TASKS), flag="--task"),
    "epsilon": Param(positive(allow_inf=True, fix=INF_FIX), flag="--epsilon"),
    "seed": Param(integer(0), flag="--seed"),
    "dataset": Param(anything, flag="--dataset"),  # one of BUILTINS, with its own message (JobConfig)
    "n_samples": Param(integer(1, optional=True), flag="--n-samples"),
    "test_fraction": Param(fraction, flag="--test-fraction"),
    "owners": Param(integer(1, optional=True), flag="--owners"),
    "min_owners": Param(integer(1, optional=True), flag="--min-owners"),
    "register_timeout": Param(positive(), flag="--register-timeout"),
    "round_timeout": Param(positive(), flag="--round-timeout"),
    "node_timeout": Param(positive(), flag="--node-timeout"),
    "listen": Param(anything, flag="--listen"),
    "out": Param(anything, flag="--out"),
    "serve": Param(switch, flag="--serve"),
    "load_model": Param(anything, flag="--load-model"),
    "journal": Param(anything, flag="--journal"),
    "resume": Param(switch, flag="--resume"),
    "schema": Param(anything, flag="--schema"),
}

#: What the federation declares about its owners' rows: public configuration every task's reply contracts
#: bound an owner's rows with (``JobConfig.owner_rows_bound``), and bdt's default share weight bound.
OWNER_ROWS: dict[str, Param] = {
    "rows_per_owner": Param(
        positive(optional=True),
        "rows each owner holds, when that is public configuration; bounds an owner's rows in every task's "
        "replies and sets bdt's default --weight-bound (default: unknown; simulate computes it)",
        flag="--rows-per-owner",
    ),
    "max_owner_rows": Param(
        integer(1, optional=True),
        "public bound on the rows an owner holds, for every task's replies; bdt: also sizes the ring's range "
        "and chooses the evaluation mechanism (default: --rows-per-owner rounded up, else 10^6)",
        flag="--max-owner-rows",
    ),
}
COMMON |= OWNER_ROWS

MECHANISM = Param(
    options(MECHANISMS), "LDP mechanism of the ncc, lr and bdt releases (feddpdr uses none)", flag="--mechanism"
)
LABELS = Param(
    options(LABEL_SCHEMES),
    "ncc and bdt with --base ncc: joint (one k-ary randomized response of (label, sign of one sampled feature) "
    "per row at the whole epsilon), rr (the label by k-ary randomized response at --label-fraction of it), or "
    "clear (the paper's scheme; owners refuse it unless started with --allow-clear-labels); auto: joint for bdt, "
    f"for ncc joint below epsilon {JOINT_BELOW:g} and rr from it on (chosen on validation splits of real tables)",
    flag="--labels",
)
LABEL_FRACTION = Param(
    fraction,
    "share of epsilon spent on labels with --labels rr (chosen on validation splits of real tables)",
    flag="--label-fraction",
)
PARAM_BOUND = Param(
    positive(), "lr, and bdt with --base lr: public clip bound of the model parameters", flag="--param-bound"
)
C = Param(positive(), "lr, and bdt with --base lr: inverse L2 strength of the local fits", flag="--C")
SOLVER = Param(
    options(LR_SOLVERS),
    "lr only: gd (LDP gradient descent: disjoint groups of owners each report one perturbed gradient at the "
    "current model; learns with one row per owner) or local (each owner's perturbed local model, averaged; "
    "seed 002 §3.5.2; better for owners of 10 or more rows each); default gd, chosen on validation splits",
    wire=False,
    flag="--solver",
)

NCC: dict[str, Param] = {"mechanism": MECHANISM, "labels": LABELS, "label_fraction": LABEL_FRACTION}
LR: dict[str, Param] = {"mechanism": MECHANISM, "param_bound": PARAM_BOUND, "C": C, "solver": SOLVER}
FEDDPDR: dict[str, Param] = {
    "k": Param(
        integer(1, optional=True),
        "feddpdr only: subspace dimension (default: 20, or every feature if fewer)",
        flag="--k",
    ),
    "delta": Param(below_one, "feddpdr only: delta per owner (split across phases)", flag="--delta"),
    "model": Param(
        options(SVM_MODELS),
        "feddpdr only: the phase-2 classifier: centroid (DP class sums), mc-huber (multiclass Huber SVM by "
        "objective perturbation, one budget for all classes), softmax (the same with the logistic loss), "
        f"ovr-huber (the paper's one-vs-rest Huber SVMs at eps/K each); default {DEFAULT_SVM_MODEL}",
        flag="--model",
    ),
    "scaling": Param(
        options(ROW_SCALINGS),
        "feddpdr only: public map of rows into the unit ball: ball (bounds' centre and the whole box's radius), box "
        "(each feature by its own half-range, the row by sqrt(d); both keep a served model linear for query "
        f"cleaning) or normalise (each row by its own norm); default {DEFAULT_ROW_SCALING}",
        flag="--scaling",
    ),
    "lam": Param(positive(), "feddpdr --model ovr-huber only: SVM lambda", flag="--lam"),
    "basis": Param(
        options(BASES),
        "feddpdr only: phase 1, the paper's DP-PCA (spends eps/2) or a public basis that spends nothing "
        "(dct: square images; identity: --k = number of features)",
        flag="--basis",
    ),
}


def _boost(name: str, help: str, flag: str, *, optional: bool = False) -> Param:
    """A bdt flag that sets the :class:`BoostingParams` field ``name``: that field's constraint (``optional``:
    None too, for a value the job derives)."""
    check = boosting.PARAMETERS[name].check
    return Param(dataclasses.replace(check, optional=True) if optional else check, f"bdt only: {help}", flag=flag)


def _defaults_by_task(**defaults: object) -> str:
    """``3`` when every task's default is 3, else ``3 for bdt, 4 for nb``: a help text's defaults."""
    values = set(defaults.values())
    return str(values.pop()) if len(values) == 1 else ", ".join(f"{v} for {task}" for task, v in defaults.items())


#: ``--n-bins``, one meaning for bdt and nb: the equal-width bins of each feature's public range.
N_BINS = Param(
    boosting.PARAMETERS["n_bins"].check,
    f"bdt and nb: equal-width bins of each feature's public range (bdt: its stumps' thresholds + 1; nb: the "
    f"naive Bayes bins; default {_defaults_by_task(bdt=boosting.N_BINS, nb=NB_BINS)}: thirds of the range, chosen on "
    "validation splits of real tables; 2 is the midpoint, the paper's synthetic set's best for bdt)",
    flag="--n-bins",
)
#: ``--smoothing``, one meaning for nb and bdt's marginal release: the coordinator's pseudo-counts.
SMOOTHING_PARAM = Param(
    positive(),
    "nb and bdt --release marginals: pseudo-counts per (bin, class) cell, in units of an even spread of the "
    f"reports (the coordinator's, never sent; default {SMOOTHING:g} for nb, spread evenly over the bins, and "
    f"{MARGINAL_SMOOTHING:g} for bdt --release marginals, spread over the bins as each feature's pooled counts; "
    "each chosen on validation splits of real tables)",
    wire=False,
    flag="--smoothing",
)
NB: dict[str, Param] = {"n_bins": N_BINS, "smoothing": SMOOTHING_PARAM}
#: ``--rounds`` of ``--task bdt --release shares`` (seed 002's T).
SHARE_ROUNDS = 10
#: ``--release`` of ``--task bdt``: what each owner's one release is.
RELEASES = ("shares", "marginals")
#: The bdt parameters ``--release marginals`` uses (its owners answer nb's report; the rest are the shares').
MARGINAL_PARAMS = ("release", "n_rounds", "n_bins", "smoothing")

#: ``--task bdt``. ``wire``: the field goes into the run's :class:`BoostingParams` under its own name (``weight_bound``
#: resolved: ``JobConfig.share_weight_bound``); these are every field of it but the run's ε, the schema's
#: ``n_classes`` and ``bounds``, the federation's ``max_owner_rows`` and the simulation's ``split_points``.
BDT: dict[str, Param] = {
    "release": Param(
        options(RELEASES, optional=True),
        "bdt only: each owner's one release: a boosting round's share (shares: seed 002 Alg. 2) or one "
        "(feature, bin, class) report as --task nb's, SAMME then run on the coordinator over the product model "
        "of those marginals (marginals: no epsilon per round; uses only --rounds, --n-bins, --smoothing); "
        "default: marginals when the public bound on an owner's rows is 1 (--max-owner-rows 1, or one row per "
        "owner as simulate computes it), since a report of one row then holds the owner's whole data and "
        "measured closer to AdaBoost on real tables, else shares, which use every row of an owner",
        wire=False,
        flag="--release",
    ),
    "smoothing": SMOOTHING_PARAM,
    "base": _boost("base", "base learner", "--base"),
    "mechanism": MECHANISM,
    "labels": LABELS,
    "label_fraction": LABEL_FRACTION,
    "param_bound": PARAM_BOUND,
    "C": C,
    "n_rounds": _boost(
        "n_rounds",
        f"boosting rounds T (default: {SHARE_ROUNDS} for --release shares, each round a fresh group's shares; "
        f"{MARGINAL_ROUNDS} for --release marginals, where rounds cost no epsilon, chosen on validation splits of real tables)",
        "--rounds",
        optional=True,
    ),
    "group_size": _boost("group_size", "owners per round (default: --owners // --rounds)", "--group-size"),
    "n_bins": N_BINS,
    "weight_bound": _boost(
        "weight_bound",
        "public bound on an owner's total SAMME weight in a share (mean-1 weights; default: "
        "--rows-per-owner rounded up, else 1, the bound for one row per owner)",
        "--weight-bound",
        optional=True,
    ),
    "eval_fraction": _boost(
        "eval_fraction",
        f"share of epsilon for the noisy (err_sum, w_sum) evaluation releases (default: {boosting.EVAL_FRACTION})",
        "--eval-fraction",
    ),
    "eval_row_bound": _boost(
        "eval_row_bound",
        "public bound b on one row's SAMME weight in an evaluation release; noise "
        f"Lap(2b/eps_e) whatever the owner's rows (default: {boosting.EVAL_ROW_BOUND:g})",
        "--eval-row-bound",
    ),
    "share_groups": _boost(
        "share_groups",
        "who releases a share in a round: a fresh group of owners/rounds at the whole share "
        "epsilon (default), or every owner every round at 1/rounds of it",
        "--share-groups",
    ),
    "budget_split": _boost(
        "budget_split",
        "epsilon: every owner shares and evaluates, epsilon split by --eval-fraction (default); "
        "owners: --eval-fraction of the owners only evaluate, the others only share, each at the whole epsilon",
        "--budget-split",
    ),
    "eval_mechanism": _boost(
        "eval_mechanism",
        "the evaluation release, Laplace (row-level) or randomized response on a sampled "
        "category (owner-level); default: the smaller noise for --max-owner-rows (rr for one row)",
        "--eval-mechanism",
    ),
    "eval_groups": _boost(
        "eval_groups",
        "who evaluates each round: each owner once (disjoint), or every owner every round",
        "--eval-groups",
    ),
    "stump_encoding": _boost(
        "stump_encoding",
        "stump base: the share's encoding (default: signs for two classes, cells for more)",
        "--stump-encoding",
    ),
    "oracle": _boost("oracle", "stump base, cells encoding: the frequency oracle", "--oracle"),
    "n_sampled": _boost(
        "n_sampled",
        "stump base, signs or cells encoding: coordinates each owner samples (default: the variance-optimal number)",
        "--n-sampled",
    ),
    "ring_timeout": Param(
        positive(optional=True),
        "bdt only: seconds per ring secure sum (default: 30 s + 10 ms per member)",
        wire=False,
        flag="--ring-timeout",
    ),
    "secure_sum": Param(
        options(SECURE_SUMS),
        "bdt only: the evaluations' secure sum: the paper's ring (N sequential hops) or pairwise masks "
        "(secagg: Bonawitz et al. 2017, O(1) round trips, dropped owners recovered); auto: secagg for sums of "
        f"at least {SECAGG_FROM} owners, the ring below",
        wire=False,
        flag="--secure-sum",
    ),
}

#: Each task's own parameters.
BY_TASK: dict[str, dict[str, Param]] = {"ncc": NCC, "lr": LR, "feddpdr": FEDDPDR, "bdt": BDT, "nb": NB}
#: The task parameters of every task, each once, in the order of the flags' ``--help``.
LEARNING: dict[str, Param] = {name: p for table in (NCC, LR, FEDDPDR, BDT, NB) for name, p in table.items()}
#: Every parameter of a job: the common fields and every task's.
PARAMETERS: dict[str, Param] = COMMON | LEARNING


def flag_of(name: str) -> str:
    """The flag of the parameter ``name`` (its name if no flag sets it), for error messages."""
    return PARAMETERS[name].flag or name
