"""The parameter objects of a job, one per task (issue 25 item 2): :class:`NccParams`, :class:`LrParams`,
:class:`FeddpdrParams`, :class:`BdtParams` and :class:`NbParams`, each checked by its task's table of
:mod:`privfed.server.parameter_tables` (constraint, help, flag, wire), whose names are importable from here too.
A field's default is its dataclass field's below.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from privfed.common.boosting import params as boosting
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.choices import DEFAULT_ROW_SCALING, DEFAULT_SVM_MODEL
from privfed.common.learners.logistic import DEFAULT_PARAM_BOUND
from privfed.common.learners.marginal_boost import MARGINAL_ROUNDS, MARGINAL_SMOOTHING
from privfed.common.learners.naive_bayes import NB_BINS, SMOOTHING
from privfed.common.learners.ncc import LABEL_FRACTION as DEFAULT_LABEL_FRACTION
from privfed.common.parameters import Param, check_all
from privfed.common.tasks.naive_bayes import MAX_NB_BINS
from privfed.server.parameter_tables import (
    BDT,
    BY_TASK,
    COMMON,
    FEDDPDR,
    INF_FIX,
    LABEL_FRACTION,
    LABEL_SCHEMES,
    LABELS,
    LEARNING,
    LR,
    LR_SOLVERS,
    MARGINAL_PARAMS,
    MECHANISM,
    N_BINS,
    NB,
    NCC,
    OWNER_ROWS,
    PARAM_BOUND,
    PARAMETERS,
    RELEASES,
    SHARE_ROUNDS,
    SMOOTHING_PARAM,
    SOLVER,
    TASKS,
    C,
    flag_of,
)

__all__ = [
    "BDT",
    "BY_TASK",
    "BdtParams",
    "C",
    "COMMON",
    "FEDDPDR",
    "FeddpdrParams",
    "INF_FIX",
    "LABELS",
    "LABEL_FRACTION",
    "LABEL_SCHEMES",
    "LEARNING",
    "LR",
    "LR_SOLVERS",
    "LrParams",
    "MARGINAL_PARAMS",
    "MECHANISM",
    "NB",
    "NCC",
    "N_BINS",
    "NbParams",
    "NccParams",
    "OWNER_ROWS",
    "PARAMETERS",
    "PARAMS",
    "PARAM_BOUND",
    "RELEASES",
    "SHARE_ROUNDS",
    "SMOOTHING_PARAM",
    "SOLVER",
    "TASKS",
    "TaskParams",
    "flag_of",
]


@dataclass(frozen=True, kw_only=True)
class TaskParams:
    """One task's parameters (module docstring): each subclass is one task, its fields' defaults the
    parameters' defaults, its checks its table's (:data:`TABLE`), each error naming the flag."""

    TASK: ClassVar[str]
    TABLE: ClassVar[dict[str, Param]]

    def __post_init__(self) -> None:
        check_all(self.TABLE, self, name=flag_of)

    def options(self) -> dict[str, Any]:
        """Every parameter by field name: the keyword arguments of the task's strategy."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def wire(self) -> dict[str, Any]:
        """The parameters that go on the wire (the table's ``wire``), by field name."""
        return {name: getattr(self, name) for name, param in self.TABLE.items() if param.wire}

    def _labels_auto(self) -> None:
        """``labels="auto"`` is the task's default scheme (the field's default)."""
        if getattr(self, "labels", None) == "auto":
            object.__setattr__(self, "labels", next(f.default for f in fields(self) if f.name == "labels"))


@dataclass(frozen=True, kw_only=True)
class NccParams(TaskParams):
    """``--task ncc``: nearest centroid from perturbed rows (seed 002 §3.5.1); :data:`NCC`."""

    TASK: ClassVar[str] = "ncc"
    TABLE: ClassVar[dict[str, Param]] = NCC
    mechanism: str = "pm"
    labels: str = "auto"  # by epsilon, which the strategy knows (NccStrategy, resolve_labels)
    label_fraction: float = DEFAULT_LABEL_FRACTION


@dataclass(frozen=True, kw_only=True)
class LrParams(TaskParams):
    """``--task lr``: logistic regression by LDP gradient descent (``solver="gd"``, Wang et al. ICDE 2019 §V)
    or from perturbed local models (``"local"``, seed 002 §3.5.2); :data:`LR`."""

    TASK: ClassVar[str] = "lr"
    TABLE: ClassVar[dict[str, Param]] = LR
    mechanism: str = "pm"
    param_bound: float = DEFAULT_PARAM_BOUND
    C: float = 1.0
    solver: str = "gd"


@dataclass(frozen=True, kw_only=True)
class FeddpdrParams(TaskParams):
    """``--task feddpdr``: FedDPDR-DPML (seed 004 Alg. 1); :data:`FEDDPDR`."""

    TASK: ClassVar[str] = "feddpdr"
    TABLE: ClassVar[dict[str, Param]] = FEDDPDR
    k: int | None = None  # the strategy's: common.feddpdr.choices.default_k (20, or every feature if fewer)
    delta: float = 1e-5
    model: str = DEFAULT_SVM_MODEL
    scaling: str = DEFAULT_ROW_SCALING
    lam: float = 0.01
    basis: str = "dp-pca"


@dataclass(frozen=True, kw_only=True)
class BdtParams(TaskParams):
    """``--task bdt``: LDP boosting (seed 002 Alg. 2); :data:`BDT`. Its :meth:`wire` fields are the run's
    :class:`~privfed.common.boosting.params.BoostingParams` fields of the same names
    (``JobConfig.boosting_params``). ``labels`` is ``joint`` (measured better than ``rr``,
    :mod:`privfed.deploy.experiments.boosting`); ``weight_bound`` None is derived
    (``JobConfig.share_weight_bound``), as are ``group_size``, ``stump_encoding``, ``n_sampled`` and
    ``eval_mechanism`` by ``BoostingParams``."""

    TASK: ClassVar[str] = "bdt"
    TABLE: ClassVar[dict[str, Param]] = BDT
    release: str | None = None  # None: the job's default (JobConfig.release: one row per owner -> marginals)
    smoothing: float = MARGINAL_SMOOTHING  # --release marginals only
    base: str = "stump"
    mechanism: str = "pm"
    labels: str = "joint"
    label_fraction: float = DEFAULT_LABEL_FRACTION
    param_bound: float = DEFAULT_PARAM_BOUND
    C: float = 1.0
    n_rounds: int | None = None
    group_size: int | None = None
    n_bins: int = boosting.N_BINS
    weight_bound: float | None = None
    eval_fraction: float = boosting.EVAL_FRACTION
    eval_row_bound: float = boosting.EVAL_ROW_BOUND
    share_groups: str = "disjoint"
    budget_split: str = "epsilon"
    eval_mechanism: str | None = None
    eval_groups: str = "disjoint"
    stump_encoding: str | None = None
    oracle: str = "krr"
    n_sampled: int | None = None
    ring_timeout: float | None = None
    secure_sum: str = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._labels_auto()
        if self.release is not None:  # None: checked once the job settles it (JobConfig.task_params)
            self._check_release()

    @staticmethod
    def default_rounds(release: str) -> int:
        """``--rounds``' default for ``release``, each chosen on validation splits of real tables."""
        return MARGINAL_ROUNDS if release == "marginals" else SHARE_ROUNDS

    def settled(self, release: str) -> BdtParams:
        """These parameters with ``release`` (the job's default when none was given) and checked against it."""
        return self if self.release == release else dataclasses.replace(self, release=release)

    def _check_release(self) -> None:
        """Refuse a parameter of the other release; resolve ``n_rounds``' default for this one."""
        assert self.release is not None
        own = MARGINAL_PARAMS if self.release == "marginals" else tuple(n for n in BDT if n != "smoothing")
        for f in fields(self):
            if f.name not in own and getattr(self, f.name) != f.default:
                other = "shares" if self.release == "marginals" else "marginals"
                raise ConfigError(
                    f"{flag_of(f.name)} is a parameter of --release {other}, not of --release {self.release}"
                )
        if self.release == "marginals" and self.n_bins > MAX_NB_BINS:
            raise ConfigError(
                f"{N_BINS.flag} {self.n_bins}: owners answer marginal reports with at most {MAX_NB_BINS} bins"
            )
        if self.n_rounds is None:
            object.__setattr__(self, "n_rounds", self.default_rounds(self.release))


@dataclass(frozen=True, kw_only=True)
class NbParams(TaskParams):
    """``--task nb``: LDP naive Bayes over the public bins, one report per owner (issue 22 item 3;
    :mod:`privfed.common.learners.naive_bayes`); :data:`NB`. Mechanism-free: the frequency oracle is derived
    from ε, ``n_bins`` and the classes."""

    TASK: ClassVar[str] = "nb"
    TABLE: ClassVar[dict[str, Param]] = NB
    n_bins: int = NB_BINS
    smoothing: float = SMOOTHING

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_bins > MAX_NB_BINS:
            raise ConfigError(f"{N_BINS.flag} {self.n_bins}: owners answer nb with at most {MAX_NB_BINS} bins")


#: Each task's parameter object.
PARAMS: dict[str, type[TaskParams]] = {
    cls.TASK: cls for cls in (NccParams, LrParams, FeddpdrParams, BdtParams, NbParams)
}
