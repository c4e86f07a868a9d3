"""The coordinator's job configuration: one frozen, validated value built by the command line.

``deploy/cli.py`` turns the flags of ``privfed coordinator`` (and, once per ε, of ``privfed
simulate``) into a :class:`JobConfig`; nothing below ``deploy/`` sees an argparse ``Namespace``.
:func:`privfed.server.strategies.make_strategy` builds the round logic from it, and
:func:`privfed.server.main.run_coordinator` runs the job it describes.

It lives in ``server/``, not ``common/``: only the coordinator reads it. Owners receive the
parameters of each release inside the task itself (and check them against their own public
configuration), so keeping the coordinator's flags out of ``common/`` keeps them out of the
owner's import path too.

A job is the fields every task has and one parameter object of its task (``params``:
:class:`~privfed.server.parameters.NccParams`, ``LrParams``, ``FeddpdrParams``, ``BdtParams``). Every
field is public configuration. Its default is its dataclass field's; its flag, constraint, help and
whether it goes on the wire are its entry in the tables of :mod:`privfed.server.parameters`, from which
the checks, :data:`FLAGS`, the flags' arguments and the TOML keys are built. Each invalid value raises
:class:`ConfigError` naming the flag, the value received, the allowed range and the fix (STYLE rule 9).
:meth:`JobConfig.from_flat` takes the flags' fields side by side, as the command line, TOML files and job
files give them, and refuses a parameter of another task.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privfed.common.boosting.params import MAX_OWNER_ROWS, BoostingParams, default_weight_bound
from privfed.common.datasets import BUILTINS
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.choices import default_k
from privfed.common.parameters import check_all
from privfed.server.parameters import (
    BY_TASK,
    COMMON,
    LABEL_SCHEMES,
    PARAMETERS,
    PARAMS,
    TASKS,
    BdtParams,
    FeddpdrParams,
    LrParams,
    NccParams,
    TaskParams,
    flag_of,
)

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


#: The job-file key of every field a flag sets -> the field (``rounds`` -> ``n_rounds``): the keys of
#: ``privfed simulate --config`` and of ``privfed submit``'s job file.
KEYS = {key_of(flag): name for name, flag in FLAGS.items()}
__all__ = ["FLAGS", "KEYS", "LABEL_SCHEMES", "TASKS", "JobConfig", "key_of"]


def _task_params(task: str, values: dict[str, Any]) -> TaskParams:
    """``task``'s parameter object from fields by name; a field of another task (or of none) is refused."""
    for name in values:
        fault = _foreign_parameter(task, name)
        if fault:
            raise ConfigError(fault)
    return PARAMS[task](**values)


def _foreign_parameter(task: str, name: str) -> str | None:
    """What is wrong with field ``name`` in a job of ``task`` (a parameter of another task, or of none); None if it
    is ``task``'s own or a common field."""
    if name in COMMON or name in BY_TASK[task]:
        return None
    takers = [t for t, table in BY_TASK.items() if name in table]
    if not takers:
        return f"{name!r} is not a job parameter; known: {', '.join(sorted(PARAMETERS))}"
    return (
        f"{flag_of(name)} is a parameter of --task {' and '.join(takers)}, not of --task {task}: drop it "
        f"(or use --task {takers[0]})"
    )


def field_faults(values: dict[str, Any]) -> list[str]:
    """Every fault of the fields ``values`` (by name, as :meth:`JobConfig.from_flat` takes them) that each field
    shows alone: a value outside its field's constraint, a parameter of another task. A job file's faults are
    named together (walkthrough 14, W14-11: they came one at a time). ``values["task"]``, if given, must be
    valid; the faults of fields taken together are :meth:`JobConfig.from_flat`'s."""
    task = values.get("task")
    faults = []
    for name, value in values.items():
        fault = None if task is None else _foreign_parameter(str(task), name)
        param = COMMON.get(name) or (BY_TASK[str(task)].get(name) if task is not None else None)
        if fault is None and param is not None:
            try:
                param.check(value, flag_of(name))
            except ConfigError as exc:
                fault = str(exc)
        if fault:
            faults.append(fault)
    return faults


@dataclass(frozen=True, kw_only=True)
class JobConfig:
    """One federated job as the coordinator runs it: the fields every task has, and its task's parameters.

    ``JobConfig(task="bdt", epsilon=3.0, owners=200, params=BdtParams(n_rounds=5))``; or, with the flags'
    fields side by side, ``JobConfig.from_flat(task="bdt", epsilon=3.0, owners=200, n_rounds=5)``.

    Parameters
    ----------
    task : {"ncc", "lr", "feddpdr", "bdt", "nb"}
        ``--task``: nearest centroid, logistic regression (seed 002 §3.5.1-2), FedDPDR-DPML
        (seed 004 Alg. 1), LDP boosting (seed 002 Alg. 2) or LDP naive Bayes (issue 22 item 3).
    epsilon : float > 0 or math.inf
        ``--epsilon``: each owner's budget for the job (``inf``: no noise, the non-private reference).
    params : TaskParams or None
        The task's parameters (:mod:`privfed.server.parameters`; ``privfed simulate --help`` prints each
        one's flag, help and default): an ``NccParams``, ``LrParams``, ``FeddpdrParams`` or ``BdtParams``
        for ``task``. None: the task's defaults.
    rows_per_owner : float > 0 or None
        ``--rows-per-owner``: the rows each owner holds, when that is public configuration of the
        federation (``privfed simulate`` knows it: it plays every owner). Only sets defaults: the
        bound on an owner's rows, :attr:`owner_rows_bound`, and bdt's share weight bound,
        ``ceil(rows_per_owner)`` (:attr:`share_weight_bound`).
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
        :attr:`quorum`'s default per task (1 for the one-round ncc, nb, bdt by marginals and lr by local models,
        half the owners for the others).
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
    params: TaskParams | None = None
    rows_per_owner: float | None = None
    max_owner_rows: int | None = None
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
        check_all(COMMON, self, name=FLAGS.__getitem__)  # each field's constraint (server/parameters.py)
        if self.params is None:
            object.__setattr__(self, "params", PARAMS[self.task]())
        elif type(self.params) is not PARAMS[self.task]:
            raise ConfigError(
                f"--task {self.task} takes {PARAMS[self.task].__name__}, got {type(self.params).__name__} "
                f"(the parameters of --task {getattr(self.params, 'TASK', '?')})"
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
        if isinstance(self.params, BdtParams) and (
            self.params.release is not None or self.rows_per_owner is not None or self.max_owner_rows is not None
        ):  # the release is settled: check the job against it now (else when it is used: task_params)
            self._settled_bdt(self.params)

    @classmethod
    def from_flat(cls, **values: Any) -> JobConfig:
        """A job from every field by name, common and the task's side by side, as the flags, a TOML file
        and a job file give them (``task="bdt", epsilon=1.0, n_rounds=5``). A parameter of another task
        raises :class:`ConfigError` naming its flag and the tasks that take it."""
        common = {name: value for name, value in values.items() if name in COMMON}
        COMMON["task"].check(values.get("task"), FLAGS["task"])  # before its table is looked up
        own = {name: value for name, value in values.items() if name not in COMMON}
        return cls(**common, params=_task_params(str(values.get("task")), own))

    def replace(self, **changes: Any) -> JobConfig:
        """A copy with ``changes`` applied and validated again (e.g. one ε of a simulation): common fields
        and the task's parameters by name, as :meth:`from_flat` takes them."""
        common = {name: value for name, value in changes.items() if name in COMMON or name == "params"}
        own = {name: value for name, value in changes.items() if name not in common}
        if own:  # the parameters as given: bdt's default release follows the copy's rows
            assert self.params is not None  # __post_init__
            common["params"] = _task_params(self.task, self.params.options() | own)
        return dataclasses.replace(self, **common)

    @property
    def task_params(self) -> TaskParams:
        """The task's parameters (``params``, resolved to the task's defaults when None was given); bdt's
        with :attr:`release` settled and checked against it (:class:`ConfigError` names the fix)."""
        assert self.params is not None  # __post_init__
        return self._settled_bdt(self.params) if isinstance(self.params, BdtParams) else self.params

    def _settled_bdt(self, given: BdtParams) -> BdtParams:
        """bdt's parameters ``given`` with :attr:`release` settled and checked against it."""
        try:
            return given.settled(self.release)
        except ConfigError as exc:  # a parameter of the other release, with the default release (an explicit one
            other = "shares" if self.release == "marginals" else "marginals"  # is refused by BdtParams itself)
            raise ConfigError(
                f"{exc}{self.default_release_note()}: give {FLAGS['release']} {other} to use it"
            ) from None

    def task_options(self) -> dict[str, Any]:
        """This task's own parameters by field name (its table in :mod:`privfed.server.parameters`)."""
        return self.task_params.options()

    def _bdt(self) -> BdtParams:
        """bdt's parameters as given (``release`` None: the default, :attr:`release`)."""
        if not isinstance(self.params, BdtParams):
            raise TypeError(f"boosting's parameters are --task bdt's; this job is --task {self.task}")
        return self.params

    @property
    def release(self) -> str:
        """bdt: each owner's one release: ``--release`` if given, else ``marginals`` when the public bound on
        an owner's rows (:attr:`owner_rows_bound`) is 1 -- one marginal report (issue 22;
        :mod:`privfed.server.strategies.marginal_boost`) then holds the owner's whole data, and measured closer
        to AdaBoost-10 on validation splits of real tables -- else ``shares`` (seed 002 Alg. 2), which use
        every row an owner holds."""
        given = self._bdt().release
        if given is not None:
            return given
        return "marginals" if self.owner_rows_bound == 1 else "shares"

    @property
    def release_source(self) -> str:
        """bdt: where :attr:`release` comes from: ``--release``, or ``default`` (the owners' rows bound)."""
        return FLAGS["release"] if self._bdt().release is not None else "default"

    def default_release_note(self) -> str:
        """`` (the default, ...)``: why the job runs :attr:`release` when ``--release`` was not given, for errors."""
        if self.release_source != "default":
            return ""
        return f" (the default release, as the public bound on an owner's rows is {self.owner_rows_bound})"

    @property
    def share_weight_bound(self) -> float:
        """bdt: the public bound on an owner's total weight (a row's, with the ncc base) in a boosting share
        that the job uses: ``weight_bound`` if given, else :data:`NCC_ROW_WEIGHT_BOUND` for the ncc base, else
        ``ceil(rows_per_owner)`` (mean-1 weights sum to about the
        row count), else :data:`DEFAULT_WEIGHT_BOUND` (:func:`~privfed.common.boosting.params.default_weight_bound`)."""
        params = self._bdt()
        if params.weight_bound is not None:
            return float(params.weight_bound)
        if params.base == "ncc":
            return NCC_ROW_WEIGHT_BOUND
        return default_weight_bound(self.rows_per_owner)

    @property
    def weight_bound_source(self) -> str:
        """bdt: where :attr:`share_weight_bound` comes from: ``--weight-bound``, ``--rows-per-owner`` or ``default``."""
        params = self._bdt()
        if params.weight_bound is not None:
            return FLAGS["weight_bound"]
        if params.base == "ncc":
            return "ncc row bound"
        return FLAGS["rows_per_owner"] if self.rows_per_owner is not None else "default"

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
        """The fewest owners still taking part for the job to go on (``min_owners``); by default half of ``owners``,
        rounded up, for every task. It is checked once the accept round is over and before each batch that
        releases, so a job too few owners take part in stops before anyone spends (walkthrough 13, W13-4: a one-round
        ncc job, its quorum 1, ran on 5 of its 455 owners, who paid, and was listed done 0.8333); a multi-round job
        also stops after a batch that leaves fewer (:attr:`quorum_after_release`)."""
        if self.min_owners is not None:
            return int(self.min_owners)
        return max(1, math.ceil((self.owners or 1) / 2))

    @property
    def quorum_after_release(self) -> bool:
        """Whether the quorum is checked after a batch that released too: not for the one-round tasks (ncc, nb, bdt
        by marginals, lr by local models), whose one round has spent every budget it will by the time that check
        could fail, so a degraded model with its report (who was lost, refused or rejected) is worth more than none;
        the multi-round ones (bdt by shares, feddpdr, lr by gradient descent) stop before later rounds spend the
        budgets of a federation that lost most of its owners."""
        if self.task in ("ncc", "nb") or (isinstance(self.params, LrParams) and self.params.solver == "local"):
            return False
        return not (self.task == "bdt" and self.release == "marginals")  # nb's one round

    @property
    def one_report_per_owner(self) -> bool:
        """Whether each owner's release is one report of one row whatever its row count (nb, bdt by marginals, lr
        by gradient descent): more rows per owner do not help such a job, more owners do."""
        if self.task == "nb" or (self.task == "bdt" and self.release == "marginals"):
            return True
        return isinstance(self.params, LrParams) and self.params.solver == "gd"

    @property
    def local_lr(self) -> bool:
        """Whether the job is lr by averaged local models (``--solver local``): one release an owner too, and with few
        owners one run's accuracy is one draw of a wide spread (walkthrough 12, W12-2: 20 owners of 20 rows at eps 4
        gave 0.655 +- 0.147 over 10 runs, the majority class 0.61)."""
        return isinstance(self.params, LrParams) and self.params.solver == "local"

    @property
    def delta(self) -> float:
        """Each owner's δ for the job: feddpdr's ``delta``; 0 for the tasks whose releases are pure ε-DP."""
        return float(self.params.delta) if isinstance(self.params, FeddpdrParams) else 0.0

    @property
    def clear_labels(self) -> bool:
        """Whether the job asks for clear labels, the one release without a DP guarantee (issue 9, contract 6):
        ncc with ``labels="clear"``, or bdt with the ncc base and clear labels."""
        params = self.params
        if isinstance(params, BdtParams):
            return params.base == "ncc" and params.labels == "clear"
        return isinstance(params, NccParams) and params.labels == "clear"

    def boosting_params(self, *, n_classes: int, bounds: Bounds) -> BoostingParams:
        """The run's public parameters, the boosting tasks' payload, for a federation with this public schema:
        the bdt parameters' wire fields as they are (the same names), the share weight bound and the owners'
        rows bound resolved (:attr:`share_weight_bound`, :attr:`owner_rows_bound`), the job's ε."""
        if self.release != "shares":  # also a TypeError for another task
            raise TypeError("a --release marginals job asks for nb's reports: it has no boosting shares to configure")
        wire = self.task_params.wire() | {"weight_bound": self.share_weight_bound}
        return BoostingParams(
            **wire, epsilon=self.epsilon, max_owner_rows=self.owner_rows_bound, n_classes=n_classes, bounds=bounds
        )

    def to_report(self, d: int | None = None) -> dict[str, Any]:
        """Every common field and every parameter of the task by name (one flat mapping, as the flags
        name them; ``dataset`` says ``owners' files (SCHEMA)`` with a schema), plus the values it resolves: bdt's release and where it came from (``--release`` or
        ``default``), its rounds, its share weight bound and where that came from, the owners' rows bound
        and the quorum; given the schema's number of features ``d``, FedDPDR's ``k`` when none was given
        (:func:`~privfed.common.feddpdr.choices.default_k`, with ``k_source``)."""
        common = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "params"}
        if self.schema is not None:  # the owners serve their own files: no built-in set (``dataset`` is its default)
            common["dataset"] = f"owners' files ({self.schema.name})"
        resolved: dict[str, Any] = {"owner_rows_bound": self.owner_rows_bound, "quorum": self.quorum}
        assert self.params is not None  # __post_init__
        options = self.params.options()  # as given: a job not yet settled is reported, not checked
        if isinstance(self.params, BdtParams):
            release, rounds = self.release, self.params.n_rounds
            resolved |= {
                "release": release,
                "release_source": self.release_source,
                "n_rounds": BdtParams.default_rounds(release) if rounds is None else rounds,
                "share_weight_bound": self.share_weight_bound,
                "weight_bound_source": self.weight_bound_source,
            }
        if isinstance(self.params, FeddpdrParams) and self.params.k is not None:
            resolved["k_source"] = "--k"
        elif isinstance(self.params, FeddpdrParams) and d is not None:  # the strategy's own default
            resolved |= {"k": default_k(self.params.basis, d), "k_source": "default"}
        return common | options | resolved
