"""``privfed simulate``: a whole federation on loopback — a coordinator, P owner node
processes over real gRPC with mTLS — once per ε, then a report and a plot.

Each ε point is a separate federation with fresh ledgers (a fresh set of owners), so the
accuracy-vs-ε curve compares like with like and each owner's ledger shows exactly one release.

``--labels clear`` is the one non-private choice: the simulated owners are then started with
``--allow-clear-labels`` (the person running a simulation plays every owner and chose it), and the
report names the release and counts the non-private entries the owners' ledgers recorded.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import subprocess
import sys
import threading
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privfed.common.datasets import SPLIT_CACHE_ENV, SYNTHETIC_N_SAMPLES, Dataset, federation_split
from privfed.common.errors import ConfigError, JobAborted, PrivfedError
from privfed.common.identity import owner_id
from privfed.common.learners.reference import reference_accuracy
from privfed.common.ledger import Ledger
from privfed.common.schema import FederationSchema
from privfed.common.validation import check_choice, check_int, check_positive
from privfed.deploy.certs import make_certs
from privfed.owner.data import check_owner_rows, read_owner_rows
from privfed.proto.transport import TlsFiles
from privfed.server.app import CoordinatorServer
from privfed.server.config import TASKS, JobConfig
from privfed.server.job import run_job
from privfed.server.main import federation_schema
from privfed.server.models import save_model
from privfed.server.report import (
    accuracy_warning,
    baselines,
    host_info,
    learner_label,
    new_run_dir,
    nonprivate_releases,
    plot_lines,
    refusal_summary,
    version_info,
    write_json,
)
from privfed.server.servicer import ServedModel
from privfed.server.strategies import make_strategy

log = logging.getLogger("privfed.simulate")

#: How often the launcher checks that its owner node processes are still running (seconds).
WATCH_INTERVAL = 0.1

REFERENCE_LEARNERS = {
    "ncc": "sklearn NearestCentroid",
    "lr": "sklearn LogisticRegression",
    "feddpdr": "PCA + Huber SVM without noise (one owner)",
    "bdt": "sklearn AdaBoost (SAMME) with depth-1 trees, T rounds",
}


#: The keys of a simulation config that are not :class:`JobConfig` fields.
SIMULATION_KEYS = ("epsilon", "processes", "repeats", "rng", "insecure", "progress", "data")


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
        The coordinator's job (task, learning parameters, data set, ``owners``, timeouts, ``out``);
        its ``epsilon`` is ignored in favour of ``epsilons``. ``owners`` is required.
    epsilons : tuple of float > 0 (math.inf: no noise)
        ``--epsilon``: one federation per value, each with fresh ledgers. Default: ``(job.epsilon,)``.
    processes : int >= 1, <= job.owners
        ``--processes``: owner node processes sharing the owners.
    repeats : int >= 1
        ``--repeats``: federations per ε, with seeds ``job.seed``, ``job.seed + 1``, ...
    rng : {"seeded", "secure"}
        ``--rng``: the owners' noise (seeded from the seed: reproducible).
    insecure : bool
        ``--insecure``: no TLS (byte-capture tests only).
    progress : bool
        Progress bars when stderr is a terminal (``--no-progress`` turns them off).
    data : tuple of Path
        ``--data``: owners' own files, one owner node process each (``processes`` is their
        number), checked against the federation schema ``job.schema`` (required with them, and
        naming a public test file). Empty: partitions of the built-in ``job.dataset``.
    """

    job: JobConfig
    epsilons: tuple[float, ...] = ()
    processes: int = 2
    repeats: int = 1
    rng: str = "seeded"
    insecure: bool = False
    progress: bool = True
    data: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", tuple(Path(p) for p in self.data))
        if bool(self.data) != (self.job.schema is not None):
            raise ConfigError(
                "--data FILE ... (owners' own files, one node each) and --schema FILE go together: the files "
                "are checked against the schema, and a schema describes owners' files"
            )
        if self.data and self.processes != len(self.data):
            raise ConfigError(f"--processes is the number of --data files ({len(self.data)}), got {self.processes}")
        if not isinstance(self.job, JobConfig):
            raise ConfigError(f"job must be a privfed.JobConfig, got {type(self.job).__name__}")
        epsilons = tuple(self.epsilons) or (self.job.epsilon,)
        for eps in epsilons:
            check_positive(eps, name="--epsilon", allow_inf=True, fix="math.inf (or 'inf') means no noise")
        object.__setattr__(self, "epsilons", tuple(float(e) for e in epsilons))
        if self.job.owners is None:
            raise ConfigError("--owners is required: the number of logical owners to simulate")
        check_int(
            self.processes, name="--processes", minimum=1, maximum=self.job.owners, fix="need --processes <= --owners"
        )
        check_int(self.repeats, name="--repeats", minimum=1)
        if self.job.dataset == "synthetic" and self.job.n_samples is None and not self.data:
            rows = synthetic_rows(self.job.owners, self.job.test_fraction)
            object.__setattr__(self, "job", self.job.replace(n_samples=rows))
        check_choice(self.rng, name="--rng", allowed=("seeded", "secure"))

    @property
    def owners(self) -> int:
        assert self.job.owners is not None  # __post_init__
        return self.job.owners

    @classmethod
    def from_mapping(cls, doc: dict[str, Any], *, source: str = "config") -> SimulationConfig:
        """A config from flat keys: :class:`JobConfig` field names, ``epsilon`` (a number or a
        list; TOML's ``inf`` is no noise) and the other fields of this class (``owners``: 200 if
        not given, as ``privfed simulate``)."""
        doc = dict(doc)
        fields = {f.name for f in dataclasses.fields(JobConfig)}
        unknown = sorted(set(doc) - fields - set(SIMULATION_KEYS))
        if unknown:
            raise ConfigError(
                f"{source}: unknown key(s) {unknown}; keys are {', '.join(SIMULATION_KEYS)} and the job's: "
                f"{', '.join(sorted(fields - {'epsilon'}))}"
            )
        if "task" not in doc:
            raise ConfigError(f"{source}: task is required (one of {', '.join(TASKS)})")
        eps = doc.pop("epsilon", 1.0)
        epsilons = tuple(eps) if isinstance(eps, (list, tuple)) else (eps,)
        if not epsilons:
            raise ConfigError(f"{source}: epsilon must be a number or a non-empty list")
        sim = {k: doc.pop(k) for k in SIMULATION_KEYS if k in doc}
        if "data" in sim:
            sim["data"] = tuple(sim["data"]) if isinstance(sim["data"], (list, tuple)) else (sim["data"],)
            sim.setdefault("processes", len(sim["data"]))
        doc.setdefault("owners", 200)
        return cls(job=JobConfig(epsilon=epsilons[0], **doc), epsilons=epsilons, **sim)

    @staticmethod
    def toml_mapping(text: str, *, source: str = "config") -> dict[str, Any]:
        """The settings of TOML text: its top level, or its ``[tool.privfed]`` table if it has one."""
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: invalid TOML ({exc})") from None
        tool = doc.get("tool")
        return dict(tool["privfed"]) if isinstance(tool, dict) and isinstance(tool.get("privfed"), dict) else doc

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


class NodeExited(PrivfedError):
    """An owner node process exited while the job still needed it."""


def node_ranges(n_owners: int, processes: int) -> list[range]:
    edges = np.linspace(0, n_owners, processes + 1).astype(int)
    return [range(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def owner_command(
    config: SimulationConfig,
    *,
    node: int,
    shards: range,
    port: int,
    certs: Path | None,
    ledger: Path,
    budget: float,
    seed: int,
) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "privfed.deploy.cli",
        "owner",
        "--coordinator",
        f"127.0.0.1:{port}",
        "--name",
        f"owner-{node}",
        *(
            ["--data", str(config.data[node]), "--shards", str(len(shards))]  # checked against the coordinator's schema
            if config.data
            else [
                "--dataset",
                config.job.dataset,
                "--n-owners",
                str(config.owners),
                "--shards",
                f"{shards.start}:{shards.stop}",
            ]
        ),
        "--seed",
        str(seed),
        "--test-fraction",
        str(config.job.test_fraction),
        "--ledger",
        str(ledger),
        "--epsilon-budget",
        repr(budget),
        "--rng",
        config.rng,
        "--connect-timeout",
        "60",
        "--delta-budget",
        repr(config.job.delta if config.job.task == "feddpdr" else 0.0),
    ]
    if config.job.n_samples and not config.data:
        cmd += ["--n-samples", str(config.job.n_samples)]
    if config.job.labels == "clear":
        cmd += ["--allow-clear-labels"]
    cmd += ["--insecure"] if certs is None else ["--certs", str(certs)]
    return cmd


def last_line(path: Path) -> str:
    """The last non-empty line of a log file (a node's one-line error, or a traceback's last line)."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


class NodeWatch:
    """Stops a job within :data:`WATCH_INTERVAL` of an owner node process exiting.

    The job needs every node it started: a node that exits (a bad configuration, more owners
    than rows, a crash) aborts the dispatcher, so the job raises ``JobAborted`` at once instead of
    waiting out the registration or round timeout; :meth:`error` then names the node and its
    last log line. Call :meth:`stop` before telling the nodes the job is over.
    """

    def __init__(self, procs: list[subprocess.Popen], logs: list[Path], server: CoordinatorServer):
        self._procs, self._logs, self._server = procs, logs, server
        self._done = threading.Event()
        self.exited: tuple[int, int] | None = None  # (node index, exit code)
        self._thread = threading.Thread(target=self._watch, name="node-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(WATCH_INTERVAL):
            for i, p in enumerate(self._procs):
                if p.poll() is not None:
                    self.exited = (i, p.returncode)
                    self._server.dispatcher.abort()
                    return

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def error(self) -> NodeExited:
        if self.exited is None:
            return NodeExited("no owner node has exited")
        i, code = self.exited
        return NodeExited(f"owner node {i} exited with code {code} during the job: {last_line(self._logs[i])}")


def _spent(ledgers: list[Path], ranges: list[range], budget: float, delta: float) -> tuple[dict[str, float], int]:
    """ε spent per owner and the number of non-private entries, read from each node's own ledger after the run."""
    spent, nonprivate = {}, 0
    for node, (path, shards) in enumerate(zip(ledgers, ranges)):
        with Ledger(path, epsilon_budget=budget, delta_budget=delta) as ledger:
            ids = [owner_id(f"owner-{node}", i) for i in shards]
            spent.update({o: ledger.spent(o).epsilon for o in ids})
            nonprivate += sum(ledger.nonprivate_count(o) for o in ids)
    return spent, nonprivate


def run_point(
    sim: SimulationConfig,
    config: JobConfig,
    point_dir: Path,
    certs: Path | None,
    test: Dataset,
    show_progress: bool,
    schema: FederationSchema,
    split_cache: Path | None = None,
) -> dict[str, Any]:
    """One federation at ``config.epsilon`` and ``config.seed``; ``sim`` says how to start the
    owner processes, which read the built-in data set's split from ``split_cache`` when given
    (:data:`~privfed.common.datasets.SPLIT_CACHE_ENV`). Raises :class:`NodeExited` if a node
    process exits during the job."""
    epsilon = config.epsilon
    point_dir.mkdir(parents=True)
    server = CoordinatorServer(
        tls=None if certs is None else TlsFiles.in_dir(certs, "coordinator"),
        node_timeout=config.node_timeout,
        schema=schema,
    )
    port = server.start("127.0.0.1:0")
    ranges = node_ranges(sim.owners, sim.processes)
    ledgers = [point_dir / f"ledger-node{i}.sqlite" for i in range(len(ranges))]
    logs = [point_dir / f"node{i}.log" for i in range(len(ranges))]
    budget = epsilon
    procs = []
    env = os.environ | ({SPLIT_CACHE_ENV: str(split_cache)} if split_cache is not None else {})
    try:
        for i, shards in enumerate(ranges):
            with open(logs[i], "w") as logf:
                cmd = owner_command(
                    sim,
                    node=i,
                    shards=shards,
                    port=port,
                    certs=certs,
                    ledger=ledgers[i],
                    budget=budget,
                    seed=config.seed,
                )
                procs.append(subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env))
        strategy = make_strategy(config, n_classes=len(test.classes), bounds=test.bounds)
        watch = NodeWatch(procs, logs, server)
        try:
            outcome = run_job(
                server,
                strategy,
                expected_owners=sim.owners,
                show_progress=show_progress,
                label=f"eps={epsilon:g}: ",
                round_timeout=config.round_timeout,
            )
        except JobAborted:
            if watch.exited is not None:
                raise watch.error() from None
            raise
        finally:
            watch.stop()
        model: ServedModel = outcome.model
        accuracy = float(np.mean(model.predict(test.X) == test.y))
        server.models.put(f"{config.task}-eps{epsilon:g}", outcome.model)
        save_model(point_dir / "model.json", outcome.model)
        server.dispatcher.shutdown()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.terminate()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        server.stop()
    hosted = [range(len(r)) if sim.data else r for r in ranges]  # a file's owners are numbered from 0 on its node
    spent, nonprivate = _spent(ledgers, hosted, budget, config.delta if config.task == "feddpdr" else 0.0)
    return {
        "seed": config.seed,
        "accuracy": accuracy,
        "boosting_rounds": getattr(strategy, "rounds", None),
        "dropped_from_ring": getattr(strategy, "dropped", None),
        "owners": outcome.n_owners,
        "answered": outcome.answered,
        "refused": outcome.refused,
        "refusal_summary": refusal_summary(outcome.refused, outcome.n_owners),
        "lost_nodes": outcome.lost_nodes,
        "timings": outcome.timings,
        "nonprivate_releases": nonprivate_releases(config.task, config.labels, config.base, outcome.answered),
        "nonprivate_ledger_entries": nonprivate,
        "epsilon_spent": {
            "max": max(spent.values(), default=0.0),
            "min": min(spent.values(), default=0.0),
        },
        "node_exit_codes": [p.returncode for p in procs],
    } | {"_spent": spent}


def simulate(config: SimulationConfig) -> dict[str, Any]:
    """Run ``config.repeats`` federations per ε of ``config.epsilons``; returns the report (also
    written to ``<run_dir>/report.json``; ``report["run_dir"]`` names the directory).

    Repeat r uses seed ``job.seed + r`` for the split, the partition and (with ``rng="seeded"``)
    the owners' noise. A failure (a node exiting, every owner refusing, ...) still writes
    ``report.json`` with ``status: failed`` and the reason, then raises it naming the report.
    """
    t0 = time.perf_counter()
    job = config.job
    run_dir = new_run_dir(job.out)
    show_progress = config.progress and sys.stderr.isatty()
    if not show_progress:  # no bars on a pipe or a file: one log line per round instead
        logging.getLogger("privfed.coordinator.rounds").setLevel(logging.INFO)
    seeds = [job.seed + r for r in range(config.repeats)]
    split_cache = None
    if config.data:  # owners' own files: pooled only for the non-private reference, never shipped
        schema, public_test = federation_schema(job)
        if public_test is None:
            raise ConfigError(f'{job.schema}: simulate needs a public test file in the schema (test = "FILE")')
        pooled = _pooled(config.data, schema)
        splits = {s: (pooled, public_test) for s in seeds}
    else:  # computed once here, read by the owner processes with numpy alone
        split_cache = run_dir / "splits"
        splits = {
            s: federation_split(
                job.dataset, seed=s, test_fraction=job.test_fraction, n_samples=job.n_samples, cache_dir=split_cache
            )
            for s in seeds
        }
    train0, test0 = splits[job.seed]
    if not config.data:
        schema = FederationSchema.of_dataset(test0)
    if job.rows_per_owner is None:  # the simulation plays every owner: their row count is public configuration here
        job = job.replace(rows_per_owner=train0.n / config.owners)
    references = {
        s: reference_accuracy(job.task, tr, te, C=job.c, k=job.k, lam=job.lam, boost={"n_rounds": job.n_rounds})
        for s, (tr, te) in splits.items()
    }
    base = {s: baselines(te.y, len(te.classes)) for s, (_, te) in splits.items()}
    reference = float(np.mean(list(references.values())))
    chance = float(np.mean([b["chance"] for b in base.values()]))
    majority = float(np.mean([b["majority_class"] for b in base.values()]))
    points: list[dict[str, Any]] = []
    report: dict[str, Any] = {
        "status": "running",
        "run_dir": str(run_dir),
        "config": dataclasses.replace(config, job=job).to_report(),
        "version": version_info(),
        "learner": learner_label(job),
        "labels_mode": job.labels if job.task == "ncc" else None,
        "transport": "grpc+insecure" if config.insecure else "grpc+mTLS",
        "rng": {"kind": config.rng, "seed": job.seed, "repeats": config.repeats},
        "reference_accuracy": reference,
        "reference_learner": REFERENCE_LEARNERS[job.task],
        "baselines": {"chance": chance, "majority_class": majority},
        "train_rows": int(train0.X.shape[0]),
        "test_rows": int(test0.X.shape[0]),
        "points": points,
        "host": host_info(),
    }
    certs = None if config.insecure else make_certs(run_dir / "certs", owners=config.processes)
    try:
        for eps in config.epsilons:
            runs = []
            for s in seeds:
                point_dir = run_dir / f"eps-{eps:g}" / (f"seed-{s}" if config.repeats > 1 else "")
                run = run_point(
                    config,
                    job.replace(epsilon=eps, seed=s),
                    point_dir,
                    certs,
                    splits[s][1],
                    show_progress,
                    schema,
                    split_cache,
                )
                spent_file = write_json(point_dir / "epsilon_spent.json", run.pop("_spent"))
                run["epsilon_spent"]["per_owner_file"] = str(spent_file.relative_to(run_dir))
                runs.append(run)
            points.append(_point(eps, runs))
            spread = points[-1]["accuracy_std"] / math.sqrt(len(runs))
            warning = accuracy_warning(eps, points[-1]["accuracy"], majority, int(test0.y.shape[0]), spread)
            if warning:
                points[-1]["warning"] = warning
            _print_point(points[-1], reference, chance, majority)
    except PrivfedError as exc:
        report |= {"status": "failed", "error": str(exc), "wall_time_s": time.perf_counter() - t0}
        write_json(run_dir / "report.json", report)
        raise type(exc)(f"{exc} (report: {run_dir / 'report.json'})") from exc
    report |= {"status": "ok", "warnings": [p["warning"] for p in points if "warning" in p]}
    report |= {"wall_time_s": time.perf_counter() - t0}
    write_json(run_dir / "report.json", report)
    _plot(run_dir / "accuracy_vs_epsilon.png", config, job, points, reference, chance, majority)
    print(f"report: {run_dir / 'report.json'}", file=sys.stderr)
    return report


def _pooled(files: tuple[Path, ...], schema: FederationSchema) -> Dataset:
    """The rows of every owner file, each checked against ``schema``, pooled (the reference's training set)."""
    parts = [check_owner_rows(read_owner_rows(str(path)), schema) for path in files]
    return Dataset(
        "+".join(p.name for p in parts),
        np.vstack([p.X for p in parts]),
        np.concatenate([p.y for p in parts]),
        schema.bounds,
        np.array(schema.classes),
    )


def _point(epsilon: float, runs: list[dict]) -> dict:
    """One ε: its runs' mean accuracy and standard deviation (ddof 1; 0 for a single run)."""
    acc = np.array([r["accuracy"] for r in runs])
    point = {
        "epsilon": epsilon,
        "accuracy": float(acc.mean()),
        "accuracy_std": float(acc.std(ddof=1)) if acc.size > 1 else 0.0,
        "answered": min(r["answered"] for r in runs),
        "owners": runs[0]["owners"],
        "rounds_s": float(np.mean([r["timings"]["rounds_s"] for r in runs])),
    }
    if len(runs) == 1:
        return point | {k: v for k, v in runs[0].items() if k not in point}
    return point | {"runs": runs}


def _print_point(point: dict, reference: float, chance: float, majority: float) -> None:
    spread = f" ± {point['accuracy_std']:.4f}" if "runs" in point else ""
    print(
        f"  eps={point['epsilon']:<6g} accuracy={point['accuracy']:.4f}{spread}  (non-private reference "
        f"{reference:.4f}, majority class {majority:.4f}, chance {chance:.4f}; {point['answered']}/"
        f"{point['owners']} owners released, rounds {point['rounds_s']:.2f} s)",
        file=sys.stderr,
    )
    if "warning" in point:
        print(f"  {point['warning']}", file=sys.stderr)


def _plot(
    path: Path,
    config: SimulationConfig,
    job: JobConfig,
    points: list[dict],
    reference: float,
    chance: float,
    majority: float,
) -> None:
    eps = [p["epsilon"] for p in points]
    label = learner_label(job)
    plot_lines(
        path,
        eps,
        {label: [p["accuracy"] for p in points], "non-private reference": [reference] * len(points)},
        errors={label: [p["accuracy_std"] for p in points]} if config.repeats > 1 else None,
        hlines={"majority class": majority, "chance": chance},
        xlabel="epsilon",
        ylabel="test accuracy" + (f" (mean ± std of {config.repeats} runs)" if config.repeats > 1 else ""),
        logx=True,
        title=f"{job.dataset}: {config.owners} owners, {config.processes} node processes",
    )
