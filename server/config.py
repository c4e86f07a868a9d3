"""The coordinator's job configuration: one frozen, validated value built by the command line.

``deploy/cli.py`` turns the flags of ``privfed coordinator`` (and, once per ε, of ``privfed
simulate``) into a :class:`JobConfig`; nothing below ``deploy/`` sees an argparse ``Namespace``.
:func:`privfed.server.strategies.make_strategy` builds the round logic from it, and
:func:`privfed.server.main.run_coordinator` runs the job it describes.

It lives in ``server/``, not ``common/``: only the coordinator reads it. Owners receive the
parameters of each release inside the task itself (and check them against their own public
configuration), so keeping the coordinator's flags out of ``common/`` keeps them out of the
owner's import path too.

Every field is public configuration. Its default is its field's below; its flag, constraint, help and
whether it goes on the wire are its entry in the tables of :mod:`privfed.server.parameters`, from which
the checks, :data:`FLAGS`, the flags' arguments and the TOML keys are built. Each invalid value raises
:class:`ConfigError` naming the flag, the value received, the allowed range and the fix (STYLE rule 9).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privfed.common.boosting.params import (
    EVAL_FRACTION,
    EVAL_ROW_BOUND,
    MAX_OWNER_ROWS,
    N_BINS,
    BoostingParams,
    default_weight_bound,
)
from privfed.common.datasets import BUILTINS
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.choices import DEFAULT_ROW_SCALING, DEFAULT_SVM_MODEL
from privfed.common.learners.logistic import DEFAULT_PARAM_BOUND
from privfed.common.learners.ncc import LABEL_FRACTION
from privfed.common.parameters import check_all
from privfed.server.parameters import BDT, BY_TASK, LABEL_SCHEMES, PARAMETERS, TASKS

if TYPE_CHECKING:
    from privfed.common.bounds import Bounds


#: Share weight bound used for ``--task bdt`` when neither ``--weight-bound`` nor
#: ``--rows-per-owner`` is given: the bound for owners holding one row each (the local-DP setting;
#: :func:`~privfed.common.boosting.params.default_weight_bound`). An owner holding more rows has
#: its share's weights scaled down to this total before release -- a biased share, never a privacy
#: loss -- so a federation of multi-row owners should declare ``--rows-per-owner`` or ``--weight-bound``.
DEFAULT_WEIGHT_BOUND = default_weight_bound(None)
#: Share weight bound of ``--task bdt --base ncc`` when ``--weight-bound`` is not given: NCC bounds each
#: *row's* weight (:func:`~privfed.common.learners.ncc.ncc_share`), whatever the rows per owner, and a row
#: takes part in a ``labels="joint"`` share with probability ``w / B``, so 1 (the round-1 weight) keeps every
#: row in round 1. Measured (``privfed experiment boosted-ncc --datasets mnist-box --runs 10``, round 1 ->
#: round 10 at ε = 5): joint 0.866 -> 0.811 with B = 1 against 0.874 -> 0.853 with B = 2 (``--weight-bound 2``);
#: clear labels 0.732 -> 0.628 against 0.764 -> 0.704.
NCC_ROW_WEIGHT_BOUND = 1.0

#: The command-line flag of each field (:mod:`privfed.server.parameters`), for error messages and for
#: ``deploy/cli.py``, which reads the flag's argparse destination (``--label-fraction`` -> ``label_fraction``).
FLAGS = {name: param.flag for name, param in PARAMETERS.items() if param.flag is not None}


def key_of(flag: str) -> str:
    """The TOML key of a flag: its name without the dashes, ``-`` written ``_`` (``--n-samples`` -> ``n_samples``)."""
    return flag.lstrip("-").replace("-", "_")


#: The job-file key of every field a flag sets -> the field (``rounds`` -> ``n_rounds``, ``C`` -> ``c``): the
#: keys of ``privfed simulate --config`` and of ``privfed submit``'s job file.
KEYS = {key_of(flag): name for name, flag in FLAGS.items()}
__all__ = ["FLAGS", "KEYS", "LABEL_SCHEMES", "TASKS", "JobConfig", "key_of"]


@dataclass(frozen=True, kw_only=True)
class JobConfig:
    """One federated job as the coordinator runs it.

    Parameters
    ----------
    task : {"ncc", "lr", "feddpdr", "bdt"}
        ``--task``: nearest centroid, logistic regression (seed 002 §3.5.1-2), FedDPDR-DPML
        (seed 004 Alg. 1) or LDP boosting (seed 002 Alg. 2).
    epsilon : float > 0 or math.inf
        ``--epsilon``: each owner's budget for the job (``inf``: no noise, the non-private reference).
    mechanism, labels, label_fraction, param_bound, c, solver, k, delta, lam, basis, model, scaling, base, ...
        The tasks' parameters (the fields from ``mechanism`` to ``secure_sum``; the three below are the
        ones whose None derives a value): each one's flag, constraint and help are its entry in its task's
        table (:mod:`privfed.server.parameters`; ``privfed simulate --help`` prints them), its default is its
        field's below. ``labels="auto"`` becomes ``"joint"`` for bdt (measured better than ``"rr"``,
        :mod:`privfed.deploy.experiments.boosting`) and ``"rr"`` for the other tasks.
    weight_bound : float > 0 or None
        ``--weight-bound``: public bound on an owner's total SAMME weight in a boosting share
        (mean-1 weights, so about its row count; with ``--base ncc`` a row's weight). None:
        :data:`NCC_ROW_WEIGHT_BOUND` with ``--base ncc``, else derived from ``rows_per_owner``, else
        :data:`DEFAULT_WEIGHT_BOUND`; :attr:`share_weight_bound` is the value used.
    rows_per_owner : float > 0 or None
        ``--rows-per-owner``: the rows each owner holds, when that is public configuration of the
        federation (``privfed simulate`` knows it: it plays every owner). Only sets defaults: the
        share weight bound, ``ceil(rows_per_owner)`` (:func:`~privfed.common.boosting.params.default_weight_bound`),
        and the bound on an owner's rows, :attr:`owner_rows_bound`.
    max_owner_rows : int >= 1 or None
        ``--max-owner-rows``: the public bound on an owner's rows; None: :attr:`owner_rows_bound`.
    seed : int >= 0
        ``--seed``: the public split and partition, and boosting's public group sampling.
    dataset : str; n_samples : int >= 1 or None; test_fraction : float in (0, 1)
        ``--dataset``, ``--n-samples``, ``--test-fraction``: the public evaluation split and the
        data set's public schema (bounds, classes).
    owners : int >= 1 or None
        ``--owners``: logical owners to wait for (None only for a config that just builds a strategy).
    min_owners : int >= 1 or None
        ``--min-owners``: the quorum, the fewest owners that must still be taking part (neither
        refused, rejected for a reply that broke its contract, nor on a lost node) after every batch
        of tasks; below it the job fails before a later batch spends anyone's budget. None:
        :attr:`quorum`'s default per task (1 for ncc and lr, half the owners for bdt and feddpdr).
    register_timeout, round_timeout, node_timeout : float > 0
        ``--register-timeout``, ``--round-timeout``, ``--node-timeout``, in seconds.
    listen : str; out : Path; serve : bool; load_model : Path or None
        ``--listen``, ``--out``, ``--serve``, ``--load-model``: where to serve, where run
        directories go, whether to keep serving Predict, and a saved model to serve instead of training.
    journal : Path or None; resume : bool
        ``--journal``, ``--resume``: bdt only: the SQLite file where each round is checkpointed
        (:mod:`privfed.server.journal`), and whether to continue the job it holds.
    schema : Path or None
        ``--schema``: the federation schema file (:mod:`privfed.common.schema`): features, public
        bounds and class values of owners' own data, and optionally a public test file. Sent to
        every owner at registration. None: the schema of the built-in ``dataset``.
    """

    task: str
    epsilon: float
    mechanism: str = "pm"
    labels: str = "auto"
    label_fraction: float = LABEL_FRACTION
    param_bound: float = DEFAULT_PARAM_BOUND
    c: float = 1.0
    solver: str = "gd"
    k: int = 20
    delta: float = 1e-5
    lam: float = 0.01
    basis: str = "dp-pca"
    model: str = DEFAULT_SVM_MODEL
    scaling: str = DEFAULT_ROW_SCALING
    base: str = "stump"
    n_rounds: int = 10
    group_size: int | None = None
    n_bins: int = N_BINS
    weight_bound: float | None = None
    rows_per_owner: float | None = None
    eval_fraction: float = EVAL_FRACTION
    eval_row_bound: float = EVAL_ROW_BOUND
    max_owner_rows: int | None = None
    share_groups: str = "disjoint"
    eval_mechanism: str | None = None
    budget_split: str = "epsilon"
    ring_timeout: float | None = None
    secure_sum: str = "auto"
    seed: int = 0
    dataset: str = "synthetic"
    n_samples: int | None = None
    test_fraction: float = 0.2
    owners: int | None = None
    min_owners: int | None = None
    register_timeout: float = 300.0
    round_timeout: float = 600.0
    node_timeout: float = 15.0
    listen: str = "0.0.0.0:50051"
    out: Path = Path("runs")
    serve: bool = False
    load_model: Path | None = None
    journal: Path | None = None
    resume: bool = False
    schema: Path | None = None

    def __post_init__(self) -> None:
        check_all(PARAMETERS, self, name=FLAGS.__getitem__)  # each field's constraint (server/parameters.py)
        if self.labels == "auto":
            object.__setattr__(self, "labels", "joint" if self.task == "bdt" else "rr")
        if self.labels == "joint" and self.task != "bdt":
            raise ConfigError(
                f"{FLAGS['labels']} joint is boosted NCC's scheme (--task bdt --base ncc); --task {self.task} "
                "takes rr or clear"
            )
        if self.min_owners is not None and self.owners is not None and self.min_owners > self.owners:
            raise ConfigError(
                f"{FLAGS['min_owners']} {self.min_owners} exceeds {FLAGS['owners']} {self.owners}: the job could "
                f"never reach its quorum; choose {FLAGS['min_owners']} between 1 and {self.owners}"
            )
        if self.dataset not in BUILTINS:
            raise ConfigError(
                f"--dataset must be one of {', '.join(BUILTINS)}, got {self.dataset!r}; for owners' own files give "
                "the coordinator a federation schema instead (--schema FILE; README, 'Your own data')"
            )
        if not isinstance(self.listen, str) or not self.listen:
            raise ConfigError(f"--listen must be HOST:PORT, got {self.listen!r}")
        if self.resume and self.journal is None:
            raise ConfigError("--resume needs --journal FILE (the journal of the job to continue)")
        if self.journal is not None and self.task != "bdt":
            raise ConfigError(
                f"--journal checkpoints boosting rounds; --task {self.task} runs one round and has nothing to "
                "resume (drop --journal, or use --task bdt)"
            )
        object.__setattr__(self, "out", Path(self.out))
        for name in ("load_model", "journal", "schema"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, Path(getattr(self, name)))

    @property
    def share_weight_bound(self) -> float:
        """The public bound on an owner's total weight (a row's, with the ncc base) in a boosting share that
        the job uses: ``weight_bound`` if given, else :data:`NCC_ROW_WEIGHT_BOUND` for the ncc base, else
        ``ceil(rows_per_owner)`` (mean-1 weights sum to about the
        row count), else :data:`DEFAULT_WEIGHT_BOUND` (:func:`~privfed.common.boosting.params.default_weight_bound`)."""
        if self.weight_bound is not None:
            return float(self.weight_bound)
        if self.base == "ncc":
            return NCC_ROW_WEIGHT_BOUND
        return default_weight_bound(self.rows_per_owner)

    @property
    def owner_rows_bound(self) -> int:
        """The public bound on an owner's rows the job uses: ``max_owner_rows`` if given, else
        ``ceil(rows_per_owner)`` (an even split: sizes differ by at most one row), else
        :data:`~privfed.common.boosting.params.MAX_OWNER_ROWS`. An owner holding more is clipped
        or scaled down in its evaluation release (biased, never less private)."""
        if self.max_owner_rows is not None:
            return int(self.max_owner_rows)
        if self.rows_per_owner is not None:
            return max(1, math.ceil(self.rows_per_owner))
        return MAX_OWNER_ROWS

    @property
    def quorum(self) -> int:
        """The fewest owners still taking part for the job to go on (``min_owners``). By default, per task:
        1 for the one-round tasks (ncc, lr), whose one round has spent every budget it will by the time
        the check can fail, so a degraded model with its report (who was lost, refused or rejected) is
        worth more than none; half of ``owners``, rounded up, for the multi-round ones (bdt, feddpdr),
        which then stop before later rounds spend the budgets of a federation that lost most of its owners."""
        if self.min_owners is not None:
            return int(self.min_owners)
        if self.task in ("ncc", "lr"):
            return 1
        return max(1, math.ceil((self.owners or 1) / 2))

    @property
    def weight_bound_source(self) -> str:
        """Where :attr:`share_weight_bound` comes from: ``--weight-bound``, ``--rows-per-owner`` or ``default``."""
        if self.weight_bound is not None:
            return FLAGS["weight_bound"]
        if self.base == "ncc":
            return "ncc row bound"
        return FLAGS["rows_per_owner"] if self.rows_per_owner is not None else "default"

    def task_options(self) -> dict[str, Any]:
        """This task's own parameters by field name (its table in :mod:`privfed.server.parameters`)."""
        return {name: getattr(self, name) for name in BY_TASK[self.task]}

    def boosting_params(self, *, n_classes: int, bounds: Bounds) -> BoostingParams:
        """The run's public parameters, the boosting tasks' payload, for a federation with this public schema:
        every ``bdt`` field that goes on the wire, by name (``c`` is ``C`` there), with the share weight
        bound and the owners' rows bound resolved (:attr:`share_weight_bound`, :attr:`owner_rows_bound`)."""
        wire = {name: getattr(self, name) for name, param in BDT.items() if param.wire}
        wire |= {"C": wire.pop("c"), "weight_bound": self.share_weight_bound, "max_owner_rows": self.owner_rows_bound}
        return BoostingParams(**wire, epsilon=self.epsilon, n_classes=n_classes, bounds=bounds)

    def replace(self, **changes: Any) -> JobConfig:
        """A copy with ``changes`` applied and validated again (e.g. one ε of a simulation)."""
        return dataclasses.replace(self, **changes)

    def to_report(self) -> dict[str, Any]:
        """Every field by name, plus the share weight bound used and where it came from."""
        return dataclasses.asdict(self) | {
            "share_weight_bound": self.share_weight_bound,
            "weight_bound_source": self.weight_bound_source,
            "owner_rows_bound": self.owner_rows_bound,
            "quorum": self.quorum,
        }
