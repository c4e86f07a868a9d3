"""The parameters of a job, one declarative table per task (issue 25 item 2; :mod:`privfed.common.parameters`).

Each table maps a :class:`~privfed.server.config.JobConfig` field to its :class:`Param`: constraint, help,
flag and whether it goes on the wire (into the task specs; for ``bdt``, into
:class:`~privfed.common.boosting.params.BoostingParams`, the boosting tasks' payload). The field's default is
the ``JobConfig`` field's. A flag shared by several tasks (``--mechanism``: ncc, lr and bdt) is one
:class:`Param` that each task's table lists. From these tables come ``JobConfig``'s checks, :data:`FLAGS`,
the learning flags of ``privfed simulate`` and ``privfed coordinator`` (``privfed.deploy.cli``), the TOML
keys (``privfed.deploy.simulation_config``), each strategy's options and the run's ``BoostingParams``.

:data:`COMMON` holds the fields every task has; their flags are declared by each command (their help and
defaults differ between ``simulate`` and ``coordinator``), so they carry no help here.
"""

from __future__ import annotations

import dataclasses

from privfed.common.boosting import params as boosting
from privfed.common.feddpdr.basis import BASES
from privfed.common.feddpdr.choices import DEFAULT_ROW_SCALING, DEFAULT_SVM_MODEL, ROW_SCALINGS, SVM_MODELS
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

TASKS = ("ncc", "lr", "feddpdr", "bdt")
#: ``--solver`` of ``--task lr``.
LR_SOLVERS = ("gd", "local")
#: ``--labels``: ``auto`` becomes ``joint`` for bdt and ``rr`` for the other tasks (``JobConfig``).
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

MECHANISM = Param(
    options(MECHANISMS), "LDP mechanism of the ncc, lr and bdt releases (feddpdr uses none)", flag="--mechanism"
)
LABELS = Param(
    options(LABEL_SCHEMES),
    "ncc and bdt with --base ncc: joint (bdt only: one k-ary randomized response of (label, sign of one "
    "sampled feature) per row), rr (the label by k-ary randomized response), or clear (the paper's scheme; "
    "owners refuse it unless started with --allow-clear-labels); auto: joint for bdt, rr for ncc",
    flag="--labels",
)
LABEL_FRACTION = Param(
    fraction,
    "share of epsilon spent on labels with --labels rr (chosen on validation splits of real tables)",
    flag="--label-fraction",
)
PARAM_BOUND = Param(positive(), "lr only: public clip bound of parameters", flag="--param-bound")
C = Param(positive(), "lr only: inverse L2 strength of local fits", flag="--C")
SOLVER = Param(
    options(LR_SOLVERS),
    "lr only: gd (LDP gradient descent: disjoint groups of owners each report one perturbed gradient at the "
    "current model; learns with one row per owner) or local (each owner's perturbed local model, averaged; "
    "seed 002 §3.5.2; better for owners of 10 or more rows each); default gd, chosen on validation splits",
    wire=False,
    flag="--solver",
)

NCC: dict[str, Param] = {"mechanism": MECHANISM, "labels": LABELS, "label_fraction": LABEL_FRACTION}
LR: dict[str, Param] = {"mechanism": MECHANISM, "param_bound": PARAM_BOUND, "c": C, "solver": SOLVER}
FEDDPDR: dict[str, Param] = {
    "k": Param(integer(1), "feddpdr only: subspace dimension", flag="--k"),
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
        "feddpdr only: public map of rows into the unit ball: ball (bounds' centre and radius; a served "
        f"model stays linear for query cleaning) or normalise (each row by its own norm); default {DEFAULT_ROW_SCALING}",
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


#: ``--task bdt``. ``wire``: the field goes into the run's :class:`BoostingParams` (under its own name;
#: ``c`` is ``C`` there, and ``weight_bound``, ``max_owner_rows`` go in resolved: ``JobConfig.boosting_params``).
BDT: dict[str, Param] = {
    "base": _boost("base", "base learner", "--base"),
    "mechanism": MECHANISM,
    "labels": LABELS,
    "label_fraction": LABEL_FRACTION,
    "param_bound": PARAM_BOUND,
    "c": C,
    "n_rounds": _boost("n_rounds", "boosting rounds T", "--rounds"),
    "group_size": _boost("group_size", "owners per round (default: --owners // --rounds)", "--group-size"),
    "n_bins": _boost(
        "n_bins",
        f"public thresholds per attribute + 1 (default {boosting.N_BINS}: cuts at thirds of each feature's public "
        "range, chosen on validation splits of real tables; 2 is the midpoint, the paper's synthetic set's best)",
        "--n-bins",
    ),
    "weight_bound": _boost(
        "weight_bound",
        "public bound on an owner's total SAMME weight in a share (mean-1 weights; default: "
        "--rows-per-owner rounded up, else 1, the bound for one row per owner)",
        "--weight-bound",
        optional=True,
    ),
    "rows_per_owner": Param(
        positive(optional=True),
        "bdt only: rows each owner holds, when that is public configuration; sets the default "
        "--weight-bound (default: unknown; simulate computes it)",
        wire=False,
        flag="--rows-per-owner",
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
    "max_owner_rows": _boost(
        "max_owner_rows",
        "public bound on the rows an owner holds; sizes the ring's range and chooses the "
        "evaluation mechanism (default: --rows-per-owner rounded up, else 10^6)",
        "--max-owner-rows",
        optional=True,
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
BY_TASK: dict[str, dict[str, Param]] = {"ncc": NCC, "lr": LR, "feddpdr": FEDDPDR, "bdt": BDT}
#: The task parameters of every task, each once, in the order of the flags' ``--help``.
LEARNING: dict[str, Param] = {name: p for table in (NCC, LR, FEDDPDR, BDT) for name, p in table.items()}
#: Every field of ``JobConfig``.
PARAMETERS: dict[str, Param] = COMMON | LEARNING
