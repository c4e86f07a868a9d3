"""``privfed simulate``: a whole federation on loopback — a coordinator, P owner node
processes over real gRPC with mTLS — once per ε, then a report and a plot.

Each ε point is a separate federation with fresh ledgers (a fresh set of owners), so the
accuracy-vs-ε curve compares like with like and each owner's ledger shows exactly one release.

Each federation is one job of the coordinator's job runner (:func:`privfed.server.job.run_federated_job`,
the one ``privfed coordinator`` runs), with its own ``report.json`` and ``model.json`` in the point's
directory; the simulation's report gathers them.

The launcher is itself the coordinator, and as lean as a bare one (issue 27, item 2): the data
splits, the non-private references (scikit-learn, scipy) and the plot (matplotlib) are computed in
child processes (:mod:`privfed.deploy.simulation_data`), and nothing heavy is imported here.

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
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from privfed.common.datasets import SPLIT_CACHE_ENV, Dataset, federation_split
from privfed.common.errors import ConfigError, JobAborted, RoundFailed
from privfed.common.schema import FederationSchema
from privfed.deploy.certs import make_certs
from privfed.deploy.child import ChildCall, call_in_child, start_in_child
from privfed.deploy.simulation_config import SimulationConfig  # re-exported
from privfed.deploy.simulation_nodes import (
    EXIT_TIMEOUT,
    NodeWatch,
    ledgers_closed,
    node_ranges,
    owner_command,
    spent_by_owner,
)
from privfed.proto.transport import TlsFiles
from privfed.server.app import CoordinatorServer
from privfed.server.config import JobConfig
from privfed.server.job import FederatedJob, run_federated_job
from privfed.server.main import federation_schema
from privfed.server.registration import Expected
from privfed.server.report import (
    JobReport,
    accuracy_warning,
    baselines,
    host_info,
    learner_label,
    new_run_dir,
    nonprivate_releases,
    version_info,
    write_json,
)
from privfed.server.strategies import make_strategy

log = logging.getLogger("privfed.simulate")
#: How far below the federation's processes the reference child runs (``os.nice``): it takes the cycles they
#: leave while they start, register and wait, and does not hold back their registration (at 10^6 owners
#: under load, a reference at equal priority beside the nodes' start kept them past the 300 s register timeout).
REFERENCE_NICENESS = 10


def run_point(
    sim: SimulationConfig,
    config: JobConfig,
    point_dir: Path,
    certs: Path | None,
    test: Dataset,
    show_progress: bool,
    schema: FederationSchema,
    split_cache: Path | None = None,
    reference: Callable[[], dict[str, object]] | None = None,
    sizes: Sequence[int] = (),
) -> dict[str, Any]:
    """One federation at ``config.epsilon`` and ``config.seed``, one job of the job runner with its
    report in ``point_dir`` (with the seed's non-private ``reference()``, read once training is over); ``sim`` says
    how to start the owner processes, which read the built-in data set's split from ``split_cache``
    when given (:data:`~privfed.common.datasets.SPLIT_CACHE_ENV`), or their own files of ``sizes`` rows, each
    file's owners in proportion to its rows (:func:`node_ranges`). Raises :class:`NodeExited` if a node process
    exits during the job."""
    epsilon = config.epsilon
    point_dir.mkdir(parents=True)
    server = CoordinatorServer(
        tls=None if certs is None else TlsFiles.in_dir(certs, "coordinator"),
        node_timeout=config.node_timeout,
        schema=schema,
    )
    port = server.start("127.0.0.1:0")
    ranges = node_ranges(sim.owners, sim.n_processes, sizes)
    ledgers = [point_dir / f"ledger-node{i}.sqlite" for i in range(len(ranges))]
    logs = [point_dir / f"node{i}.log" for i in range(len(ranges))]
    budget = epsilon
    procs: list[subprocess.Popen] = []
    env = os.environ | ({SPLIT_CACHE_ENV: str(split_cache)} if split_cache is not None else {})
    report = JobReport(point_dir, {"status": "running", "config": config.to_report()}, run_dir=point_dir)
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
        job = FederatedJob(config, strategy, schema, test, Expected(sim.owners))
        watch = NodeWatch(procs, logs, server)

        def release() -> None:
            """Tell the nodes the job is over (the watch first: they now exit on purpose)."""
            watch.stop()
            server.dispatcher.shutdown()

        try:
            done = run_federated_job(
                server,
                job,
                report,
                release=release,
                stopped=watch.reason,
                reference=reference,
                show_progress=show_progress,
                label=f"eps={epsilon:g}: ",
            )
        except JobAborted:
            if watch.exited is not None:
                raise watch.error() from None
            raise
        ledgers_closed(procs, ledgers)
        hosted = [range(len(r)) if sim.data else r for r in ranges]  # a file's owners are numbered from 0 on its node
        spent, nonprivate = spent_by_owner(ledgers, hosted, budget, config.delta)  # while the nodes exit
        for p in procs:
            try:
                p.wait(timeout=EXIT_TIMEOUT)
            except subprocess.TimeoutExpired:
                p.terminate()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        server.stop()
    outcome = done.outcome
    return (
        {"seed": config.seed, "accuracy": done.accuracy}
        | outcome.to_report()
        | {
            "nonprivate_releases": nonprivate_releases(config.clear_labels, outcome.answered),
            "nonprivate_ledger_entries": nonprivate,
            "epsilon_spent": {"max": max(spent.values(), default=0.0), "min": min(spent.values(), default=0.0)},
            "node_exit_codes": [p.returncode for p in procs],
            "_spent": spent,
        }
    )


def simulate(config: SimulationConfig, *, results: TextIO | None = None) -> dict[str, Any]:
    """Run ``config.repeats`` federations per ε of ``config.epsilons``; returns the report (also
    written to ``<run_dir>/report.json``; ``report["run_dir"]`` names the directory).

    Each ε's result line, its warnings and the report's path are printed to ``results``: stderr by default, beside
    the rounds' log, so a caller's own stdout stays its own; ``privfed simulate`` prints them to stdout, as
    ``privfed coordinator`` prints its result (walkthrough 15, W15-12: ``privfed simulate ... > out.txt`` kept nothing).

    Repeat r uses seed ``job.seed + r`` for the split, the partition and (with ``rng="seeded"``)
    the owners' noise. A failure (a node exiting, every owner refusing, ...) still writes
    ``report.json`` with ``status: failed`` and the reason, then raises it naming the report.
    """
    t0 = time.perf_counter()
    run_dir = new_run_dir(config.job.out)
    report = JobReport(
        config.job.out,
        {
            "status": "running",
            "run_dir": str(run_dir),
            "config": config.to_report(),
            "version": version_info(),
            "host": host_info(),
        },
        run_dir=run_dir,
    )
    with report.on_failure():  # every way out writes the report (issue 23, item 3), then the error goes on
        try:
            _simulate(config, run_dir, report, results or sys.stderr)
        finally:
            report.update(wall_time_s=time.perf_counter() - t0)
    path = report.write(status="ok")
    print(f"report: {path}", file=results or sys.stderr, flush=True)
    return report.fields


def _simulate(config: SimulationConfig, run_dir: Path, report: JobReport, results: TextIO) -> None:
    """The body of :func:`simulate`: fills ``report`` (points, references) as the federations run."""
    job = config.job
    show_progress = config.progress and sys.stderr.isatty()
    if not show_progress:  # no bars on a pipe or a file: one log line per round instead
        logging.getLogger("privfed.coordinator.rounds").setLevel(logging.INFO)
    seeds = [job.seed + r for r in range(config.repeats)]
    split_cache = None if config.data else run_dir / "splits"  # computed once, read with numpy alone
    if config.data:  # owners' own files: the schema's public test file is the coordinator's
        schema, public_test = federation_schema(job)
        if public_test is None:
            raise ConfigError(f'{job.schema}: simulate needs a public test file in the schema (test = "FILE")')
    # splits and the feasibility check in a child process (issue 27, item 2); then the references in
    # another, beside the first federation (simulation_data's docstring)
    prepared = call_in_child("privfed.deploy.simulation_data:prepare", config, job, seeds, split_cache)
    pending = start_in_child(
        "privfed.deploy.simulation_data:references",
        config,
        job,
        seeds,
        split_cache,
        prepared.n_samples,
        niceness=REFERENCE_NICENESS,
    )
    with pending:  # stopped if a federation fails before it is read
        if config.data:
            tests = {s: public_test for s in seeds}
        else:
            tests = {
                s: federation_split(
                    job.dataset,
                    seed=s,
                    test_fraction=job.test_fraction,
                    n_samples=prepared.n_samples[s],
                    cache_dir=split_cache,
                )[1]
                for s in seeds
            }
            schema = FederationSchema.of_dataset(tests[job.seed])
        test0 = tests[job.seed]
        # the simulation plays every owner: their row counts are public configuration here (prepare's)
        job = job.replace(rows_per_owner=prepared.rows_per_owner, n_samples=prepared.n_samples[job.seed])
        base = {s: baselines(te.y, len(te.classes)) for s, te in tests.items()}
        chance = float(np.mean([b["chance"] for b in base.values()]))
        majority = float(np.mean([b["majority_class"] for b in base.values()]))
        points: list[dict[str, Any]] = []
        report.update(
            config=dataclasses.replace(config, job=job).to_report(),
            learner=learner_label(job),
            labels_mode=job.task_options()["labels"] if job.task == "ncc" else None,
            transport="grpc+insecure" if config.insecure else "grpc+mTLS",
            rng={"kind": config.rng, "seed": job.seed, "repeats": config.repeats},
            baselines={"chance": chance, "majority_class": majority},
            train_rows=prepared.train_rows,
            test_rows=int(test0.X.shape[0]),
            points=points,
        )
        certs = None if config.insecure else make_certs(run_dir / "certs", owners=config.n_processes)
        for eps in config.epsilons:
            runs: list[dict[str, Any]] = []
            failed: list[tuple[dict[str, Any], RoundFailed]] = []
            for s in seeds:
                point_dir = run_dir / f"eps-{eps:g}" / (f"seed-{s}" if config.repeats > 1 else "")
                n_samples = prepared.n_samples[s]
                try:
                    run = run_point(
                        config
                        if n_samples == config.job.n_samples
                        else config.replace(job=config.job.replace(n_samples=n_samples)),
                        job.replace(epsilon=eps, seed=s, n_samples=n_samples),
                        point_dir,
                        certs,
                        tests[s],
                        show_progress,
                        schema,
                        split_cache,
                        partial(_reference, pending, s),
                        prepared.sizes,
                    )
                except RoundFailed as e:  # the job's outcome, not the configuration's: one of the spread (W14-16)
                    if config.repeats == 1:
                        raise
                    failed.append(
                        ({"seed": s, "status": "failed", "error": str(e), "report": _in_run(point_dir, run_dir)}, e)
                    )
                    print(f"  eps={eps:g} seed {s}: failed: {e}", file=sys.stderr)
                    continue
                spent_file = write_json(point_dir / "epsilon_spent.json", run.pop("_spent"))
                run["epsilon_spent"]["per_owner_file"] = str(spent_file.relative_to(run_dir))
                run["report"] = _in_run(point_dir, run_dir)
                runs.append(run)
            if not runs:  # every repeat failed: so does the point, as with one repeat
                raise failed[0][1]
            points.append(_point(eps, runs, [f for f, _ in failed]))
            spread = points[-1]["accuracy_std"] / math.sqrt(len(runs))
            rows_help = not job.one_report_per_owner
            warning = accuracy_warning(
                eps, points[-1]["accuracy"], majority, int(test0.y.shape[0]), spread, rows_help=rows_help
            )
            if failed:
                points[-1]["repeats_warning"] = _failed_repeats_warning(eps, len(failed), len(seeds))
            if warning:
                points[-1]["warning"] = warning
            references = pending.result()  # done: the first federation's report waited for it
            reference = float(np.mean([r["reference_accuracy"] for r in references.values()]))
            report.update(reference_accuracy=reference, reference_learner=references[job.seed]["reference_learner"])
            _print_point(points[-1], reference, chance, majority, results)
        report.update(
            warnings=[prepared.warning] * bool(prepared.warning)
            + [p[key] for p in points for key in ("repeats_warning", "warning") if key in p]
        )
        plot = run_dir / "accuracy_vs_epsilon.png"  # matplotlib, in a child process too
        call_in_child("privfed.deploy.simulation_data:plot", plot, config, job, points, reference, chance, majority)


def _reference(pending: ChildCall, seed: int) -> dict[str, object]:
    """Seed ``seed``'s non-private reference, from the child computing them (waiting for it)."""
    return dict(pending.result()[seed])


def _in_run(point_dir: Path, run_dir: Path) -> str:
    """The path of a federation's ``report.json``, relative to the simulation's run directory."""
    return str((point_dir / "report.json").relative_to(run_dir))


def _failed_repeats_warning(epsilon: float, failed: int, repeats: int) -> str:
    """The one-line warning of a point some of whose repeats failed (their reasons are in its ``failed_runs``)."""
    return (
        f"warning: eps={epsilon:g}: {failed} of {repeats} repeats failed (failed_runs in the report says why); the accuracy and "
        f"its spread are of the {repeats - failed} that finished, so they overstate what a run at this eps gives."
    )


def _point(epsilon: float, runs: list[dict], failed: Sequence[dict] = ()) -> dict:
    """One ε: its finished runs' mean accuracy and standard deviation (ddof 1; 0 for a single run), and
    the repeats that failed (``failed_runs``: seed, error, report), if any."""
    acc = np.array([r["accuracy"] for r in runs])
    point = {
        "epsilon": epsilon,
        "accuracy": float(acc.mean()),
        "accuracy_std": float(acc.std(ddof=1)) if acc.size > 1 else 0.0,
        "answered": min(r["answered"] for r in runs),
        "took_part": min(r["took_part"] for r in runs),  # evaluators too (walkthrough 9, W9-4)
        "owners": runs[0]["owners"],
        "rounds_s": float(np.mean([r["timings"]["rounds_s"] for r in runs])),
    }
    if failed:
        return point | {"runs": runs, "failed_runs": list(failed)}
    if len(runs) == 1:
        return point | {k: v for k, v in runs[0].items() if k not in point}
    return point | {"runs": runs}


def _print_point(point: dict, reference: float, chance: float, majority: float, results: TextIO) -> None:
    """A point's result line and its warnings, to ``results`` (:func:`simulate`)."""
    spread = f" ± {point['accuracy_std']:.4f}" if "runs" in point else ""
    print(
        f"  eps={point['epsilon']:<6g} accuracy={point['accuracy']:.4f}{spread}  (non-private reference "
        f"{reference:.4f}, majority class {majority:.4f}, chance {chance:.4f}; {point['took_part']}/"
        f"{point['owners']} owners released, rounds {point['rounds_s']:.2f} s)",
        file=results,
        flush=True,
    )
    for key in ("repeats_warning", "warning"):
        if key in point:
            print(f"  {point[key]}", file=results, flush=True)
