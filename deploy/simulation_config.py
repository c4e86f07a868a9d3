"""What ``privfed simulate`` runs: :class:`SimulationConfig`, from flags, a TOML file or Python.

One configuration surface: a TOML file (``privfed simulate --config run.toml``, or a project's
``pyproject.toml`` under ``[tool.privfed]``) takes exactly the flags' names as keys, without the
leading dashes (``rounds = 10`` for ``--rounds``, ``C = 0.5`` for ``--C``, ``n-samples`` or
``n_samples`` for ``--n-samples``, ``no-progress = true``); :data:`KEYS` maps each key to the
field it sets, and ``tests/unit/test_config_surface.py`` walks every flag of ``privfed simulate``
to check that its key gives what the flag gives.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfed.common.datasets import SYNTHETIC_N_SAMPLES
from privfed.common.errors import ConfigError
from privfed.common.validation import check_choice, check_int, check_positive
from privfed.common.work_rows import check_declared_rows
from privfed.server.config import KEYS as CONFIG_KEYS
from privfed.server.config import TASKS, JobConfig

#: :class:`JobConfig` fields whose flags only ``privfed coordinator`` has (a simulation starts its
#: own coordinator, trains once per ε and does not serve or resume).
COORDINATOR_ONLY = frozenset({"listen", "register_timeout", "serve", "load_model", "journal", "resume"})


#: The key of every ``privfed simulate`` setting -> the :class:`JobConfig` field or task parameter it sets
#: (``rounds`` -> ``n_rounds``).
JOB_KEYS = {key: field for key, field in CONFIG_KEYS.items() if field not in COORDINATOR_ONLY | {"epsilon"}}
#: The keys of the simulation's own settings -> the :class:`SimulationConfig` field
#: (``no_progress`` sets ``progress`` to its negation).
SIMULATION_KEYS = {
    "epsilon": "epsilons",
    "processes": "processes",
    "repeats": "repeats",
    "rng": "rng",
    "insecure": "insecure",
    "no_progress": "progress",
    "data": "data",
    "work_rows": "work_rows",
}
#: ``--epsilon``'s default: one federation per value.
DEFAULT_EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
#: ``--owners``' default.
DEFAULT_OWNERS = 200
#: Every key a simulation config may hold: exactly ``privfed simulate``'s flags.
KEYS = tuple(sorted(JOB_KEYS.keys() | SIMULATION_KEYS.keys(), key=str.lower))


def synthetic_rows(owners: int, test_fraction: float) -> int:
    """Rows of the synthetic set when ``--n-samples`` is not given: at least
    :data:`~privfed.common.datasets.SYNTHETIC_N_SAMPLES`, and enough that every one of ``owners`` holds a
    training row after the split (seed 002 §4.3: 10^4 owners of one row each). One row of slack covers
    the split's rounding per class (``train_test_split``)."""
    return max(SYNTHETIC_N_SAMPLES, math.ceil((owners + 1) / (1.0 - test_fraction)))


@dataclass(frozen=True, kw_only=True)
class SimulationConfig:
    """A whole simulated federation: the job, the ε values it is run at, and how its owners run.

    Parameters
    ----------
    job : JobConfig
        The coordinator's job (task, its parameters, data set, ``owners``, timeouts, ``out``);
        its ``epsilon`` is ignored in favour of ``epsilons``. ``owners`` is required.
    epsilons : tuple of float > 0 (math.inf: no noise)
        ``--epsilon``: one federation per value, each with fresh ledgers. Default: ``(job.epsilon,)``.
    processes : int >= 1, <= job.owners, or None
        ``--processes``: owner node processes sharing the owners (None: 2). With ``data`` it is
        their number; another value is refused.
    repeats : int >= 1
        ``--repeats``: federations per ε, with seeds ``job.seed``, ``job.seed + 1``, ...
    rng : {"seeded", "secure"}
        ``--rng``: the owners' noise (seeded from the seed: reproducible).
    insecure : bool
        ``--insecure``: no TLS (byte-capture tests only).
    progress : bool
        Progress bars when stderr is a terminal (``--no-progress`` turns them off).
    data : tuple of Path
        ``--data``: owners' own files, one owner node process each, checked against the federation
        schema ``job.schema`` (required with them, and naming a public test file). Empty:
        partitions of the built-in ``job.dataset``.
    work_rows : int or None
        ``--work-rows``: every owner node's ``privfed owner --work-rows`` (a power of two; a node whose owners
        hold more rows stops with the error). None: each owner works on its count's power-of-two cell.
    """

    job: JobConfig
    epsilons: tuple[float, ...] = ()
    processes: int | None = None
    repeats: int = 1
    rng: str = "seeded"
    insecure: bool = False
    progress: bool = True
    data: tuple[Path, ...] = ()
    work_rows: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.job, JobConfig):
            raise ConfigError(f"job must be a privfed.JobConfig, got {type(self.job).__name__}")
        object.__setattr__(self, "data", tuple(Path(p) for p in self.data))
        if bool(self.data) != (self.job.schema is not None):
            raise ConfigError(
                "--data FILE ... (owners' own files, one node each) and --schema FILE go together: the files "
                "are checked against the schema, and a schema describes owners' files"
            )
        if self.job.owners is None:
            raise ConfigError("--owners is required: the number of logical owners to simulate")
        if self.data:
            seen: dict[Path, Path] = {}
            for path in self.data:  # one file twice would host its rows twice: two owners, each budget its own
                same = seen.setdefault(path.resolve(), path)
                if same is not path:
                    raise ConfigError(
                        f"--data names {path} twice{'' if same == path else f' (as {same} too)'}: each file is one "
                        "owner node's rows, and the same rows hosted twice would be two owners with a budget each"
                    )
            if self.processes is not None and self.processes != len(self.data):
                raise ConfigError(
                    f"--processes is the number of --data files ({len(self.data)}), got {self.processes}: each file "
                    "has its own owner node process (drop --processes)"
                )
            if self.job.owners < len(self.data):
                raise ConfigError(
                    f"--owners {self.job.owners} is fewer than the {len(self.data)} --data files: each file's node "
                    "hosts at least one owner"
                )
            object.__setattr__(self, "processes", len(self.data))
        elif self.processes is None:
            object.__setattr__(self, "processes", min(2, self.job.owners))
        epsilons = tuple(self.epsilons) or (self.job.epsilon,)
        for eps in epsilons:
            check_positive(eps, name="--epsilon", allow_inf=True, fix="math.inf (or 'inf') means no noise")
        object.__setattr__(self, "epsilons", tuple(float(e) for e in epsilons))
        check_int(
            self.processes, name="--processes", minimum=1, maximum=self.job.owners, fix="need --processes <= --owners"
        )
        check_int(self.repeats, name="--repeats", minimum=1)
        if self.job.dataset == "synthetic" and self.job.n_samples is None and not self.data:
            rows = synthetic_rows(self.job.owners, self.job.test_fraction)
            object.__setattr__(self, "job", self.job.replace(n_samples=rows))
        check_choice(self.rng, name="--rng", allowed=("seeded", "secure"))
        if self.work_rows is not None:  # the rows it must hold are each node's: checked there
            check_declared_rows(self.work_rows, 0)

    @property
    def sized_to_owners(self) -> bool:
        """Whether the synthetic set's size is :func:`synthetic_rows`' (not ``--n-samples``) and
        larger than the default: one training row per owner, so each seed's split is then sized to
        exactly ``owners`` training rows (:func:`~privfed.deploy.simulation_data.prepare`)."""
        guess = synthetic_rows(self.owners, self.job.test_fraction)
        return self.job.dataset == "synthetic" and not self.data and self.job.n_samples == guess > SYNTHETIC_N_SAMPLES

    @property
    def owners(self) -> int:
        assert self.job.owners is not None  # __post_init__
        return self.job.owners

    @property
    def n_processes(self) -> int:
        """The number of owner node processes (``processes`` resolved)."""
        assert self.processes is not None  # __post_init__
        return self.processes

    @classmethod
    def from_mapping(cls, doc: dict[str, Any], *, source: str = "config") -> SimulationConfig:
        """A config from the flags' names (:data:`KEYS`; ``-`` or ``_`` alike): ``epsilon`` is a number
        or a list (TOML's ``inf`` is no noise), ``data`` a file or a list. A key left out takes the
        flag's default (``owners`` :data:`DEFAULT_OWNERS`, ``epsilon`` :data:`DEFAULT_EPSILONS`)."""
        doc = {key.replace("-", "_"): value for key, value in doc.items()}
        unknown = sorted(set(doc) - set(KEYS))
        if unknown:
            renamed = {f: k for k, f in JOB_KEYS.items() if k != f} | {k.lower(): k for k in KEYS if k != k.lower()}
            hints = [f"{u} is --{renamed[u]}: write {renamed[u]}" for u in unknown if u in renamed]
            raise ConfigError(
                f"{source}: unknown key(s) {unknown}{' (' + '; '.join(hints) + ')' if hints else ''}; keys are the "
                f"flags of privfed simulate without the dashes: {', '.join(KEYS)}"
            )
        if "task" not in doc:
            raise ConfigError(f"{source}: task is required (one of {', '.join(TASKS)})")
        eps = doc.pop("epsilon", list(DEFAULT_EPSILONS))
        epsilons = tuple(eps) if isinstance(eps, (list, tuple)) else (eps,)
        if not epsilons:
            raise ConfigError(f"{source}: epsilon must be a number or a non-empty list")
        sim: dict[str, Any] = {SIMULATION_KEYS[k]: doc.pop(k) for k in list(doc) if k in SIMULATION_KEYS}
        if "progress" in sim:
            sim["progress"] = not sim["progress"]
        if "data" in sim:
            sim["data"] = tuple(sim["data"]) if isinstance(sim["data"], (list, tuple)) else (sim["data"],)
        job = {JOB_KEYS[k]: v for k, v in doc.items()}
        job.setdefault("owners", DEFAULT_OWNERS)
        return cls(job=JobConfig.from_flat(epsilon=epsilons[0], **job), epsilons=epsilons, **sim)

    @staticmethod
    def toml_mapping(text: str, *, source: str = "config") -> dict[str, Any]:
        """The settings of TOML text: its top level, or its ``[tool.privfed]`` table if it has one."""
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: invalid TOML ({exc})") from None
        tool = doc.get("tool")
        return dict(tool["privfed"]) if isinstance(tool, dict) and isinstance(tool.get("privfed"), dict) else doc

    @staticmethod
    def toml_file(path: Path) -> dict[str, Any]:
        """:meth:`toml_mapping` of the TOML file ``path`` (UTF-8, with or without a byte-order mark); a
        :class:`ConfigError` naming it if it is not UTF-8 text (a walkthrough's Latin-1 job file gave a traceback)."""
        try:
            text = Path(path).read_text(encoding="utf-8-sig")
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not UTF-8 text; save it as UTF-8") from None
        return SimulationConfig.toml_mapping(text, source=str(path))

    @classmethod
    def from_toml(cls, text: str, *, source: str = "config") -> SimulationConfig:
        """A config from TOML text (see :meth:`from_mapping` and :meth:`toml_mapping`)."""
        return cls.from_mapping(cls.toml_mapping(text, source=source), source=source)

    def to_report(self) -> dict[str, Any]:
        """Every setting by name, as report.json records it."""
        return self.job.to_report() | {
            "epsilon": list(self.epsilons),
            "processes": self.processes,
            "repeats": self.repeats,
            "rng": self.rng,
            "insecure": self.insecure,
            "data": [str(p) for p in self.data],
        }

    def replace(self, **changes: Any) -> SimulationConfig:
        return dataclasses.replace(self, **changes)
