"""``privfed simulate``: a whole federation on loopback — a coordinator, P owner node
processes over real gRPC with mTLS — once per ε, then a report and a plot.

Each ε point is a separate federation with fresh ledgers (a fresh set of owners), so the
accuracy-vs-ε curve compares like with like and each owner's ledger shows exactly one release.

``--labels clear`` is the one non-private choice: the simulated owners are then started with
``--allow-clear-labels`` (the person running a simulation plays every owner and chose it), and the
report names the release and counts the non-private entries the owners' ledgers recorded.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from privfed.common.datasets import federation_split
from privfed.common.identity import owner_id
from privfed.common.learners.reference import reference_accuracy
from privfed.common.ledger import Ledger
from privfed.deploy.certs import make_certs
from privfed.deploy.cli import job_config
from privfed.proto.transport import TlsFiles
from privfed.server.app import CoordinatorServer
from privfed.server.config import JobConfig
from privfed.server.job import run_job
from privfed.server.models import save_model
from privfed.server.report import host_info, new_run_dir, nonprivate_releases, plot_lines, write_json
from privfed.server.strategies import make_strategy

log = logging.getLogger("privfed.simulate")


def node_ranges(n_owners: int, processes: int) -> list[range]:
    edges = np.linspace(0, n_owners, processes + 1).astype(int)
    return [range(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def owner_command(
    args, *, node: int, shards: range, port: int, certs: Path | None, ledger: Path, budget: float
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
        "--dataset",
        args.dataset,
        "--n-owners",
        str(args.owners),
        "--shards",
        f"{shards.start}:{shards.stop}",
        "--seed",
        str(args.seed),
        "--test-fraction",
        str(args.test_fraction),
        "--ledger",
        str(ledger),
        "--epsilon-budget",
        repr(budget),
        "--rng",
        args.rng,
        "--connect-timeout",
        "60",
        "--delta-budget",
        repr(args.delta if args.task == "feddpdr" else 0.0),
    ]
    if args.n_samples:
        cmd += ["--n-samples", str(args.n_samples)]
    if args.labels == "clear":
        cmd += ["--allow-clear-labels"]
    cmd += ["--insecure"] if certs is None else ["--certs", str(certs)]
    return cmd


def _spent(ledgers: list[Path], ranges: list[range], budget: float, args_delta: float) -> tuple[dict[str, float], int]:
    """ε spent per owner and the number of non-private entries, read from each node's own ledger after the run."""
    spent, nonprivate = {}, 0
    for node, (path, shards) in enumerate(zip(ledgers, ranges)):
        with Ledger(path, epsilon_budget=budget, delta_budget=args_delta) as ledger:
            ids = [owner_id(f"owner-{node}", i) for i in shards]
            spent.update({o: ledger.spent(o).epsilon for o in ids})
            nonprivate += sum(ledger.nonprivate_count(o) for o in ids)
    return spent, nonprivate


def run_point(args, config: JobConfig, run_dir: Path, certs: Path | None, test) -> dict:
    """One federation at ``config.epsilon``; ``args`` only says how to start the owner processes."""
    epsilon = config.epsilon
    point_dir = run_dir / f"eps-{epsilon:g}"
    point_dir.mkdir()
    server = CoordinatorServer(
        tls=None if certs is None else TlsFiles.in_dir(certs, "coordinator"), node_timeout=config.node_timeout
    )
    port = server.start("127.0.0.1:0")
    ranges = node_ranges(args.owners, args.processes)
    ledgers = [point_dir / f"ledger-node{i}.sqlite" for i in range(len(ranges))]
    budget = epsilon
    procs = []
    try:
        for i, shards in enumerate(ranges):
            logf = open(point_dir / f"node{i}.log", "w")
            procs.append(
                subprocess.Popen(
                    owner_command(
                        args, node=i, shards=shards, port=port, certs=certs, ledger=ledgers[i], budget=budget
                    ),
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                )
            )
        strategy = make_strategy(config, n_classes=len(test.classes), bounds=test.bounds)
        outcome = run_job(
            server,
            strategy,
            expected_owners=config.owners,
            show_progress=not args.no_progress,
            label=f"eps={epsilon:g}: ",
            round_timeout=config.round_timeout,
        )
        accuracy = float(np.mean(outcome.model.predict(test.X) == test.y))
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
        server.stop()
    spent, nonprivate = _spent(ledgers, ranges, budget, config.delta if config.task == "feddpdr" else 0.0)
    boosting = getattr(strategy, "rounds", None)
    return {
        "epsilon": epsilon,
        "accuracy": accuracy,
        "boosting_rounds": boosting,
        "dropped_from_ring": getattr(strategy, "dropped", None),
        "owners": outcome.n_owners,
        "answered": outcome.answered,
        "refused": outcome.refused,
        "lost_nodes": outcome.lost_nodes,
        "timings": outcome.timings,
        "nonprivate_releases": nonprivate_releases(config.task, config.labels, config.base, outcome.answered),
        "nonprivate_ledger_entries": nonprivate,
        "epsilon_spent": {
            "max": max(spent.values(), default=0.0),
            "min": min(spent.values(), default=0.0),
            "per_owner_file": f"eps-{epsilon:g}/epsilon_spent.json",
        },
        "node_exit_codes": [p.returncode for p in procs],
    } | {"_spent": spent}


def simulate(args) -> Path:
    t0 = time.perf_counter()
    run_dir = new_run_dir(args.out)
    train, test = federation_split(
        args.dataset, seed=args.seed, test_fraction=args.test_fraction, n_samples=args.n_samples
    )
    certs = None if args.insecure else make_certs(run_dir / "certs", owners=args.processes)
    # The simulation plays every owner: their row count is public configuration here.
    rows = args.rows_per_owner if args.rows_per_owner is not None else train.X.shape[0] / args.owners
    job = job_config(args, epsilon=args.epsilon[0], rows_per_owner=rows)  # validated before any process starts
    reference = reference_accuracy(
        job.task, train, test, C=job.c, k=job.k, lam=job.lam, boost={"n_rounds": job.n_rounds}
    )
    points = []
    for eps in args.epsilon:
        point = run_point(args, job.replace(epsilon=eps), run_dir, certs, test)
        write_json(run_dir / point["epsilon_spent"]["per_owner_file"], point.pop("_spent"))
        points.append(point)
        print(
            f"  eps={eps:<6g} accuracy={point['accuracy']:.4f}  (non-private reference {reference:.4f}, "
            f"{point['answered']}/{point['owners']} owners released, rounds {point['timings']['rounds_s']:.2f} s)",
            file=sys.stderr,
        )
    report = {
        "config": {k: v for k, v in vars(args).items() if k not in ("func",)}
        | {
            k: v
            for k, v in job.to_report().items()
            if k in ("rows_per_owner", "share_weight_bound", "weight_bound_source")
        },
        "labels_mode": args.labels if args.task == "ncc" else None,
        "transport": "grpc+insecure" if args.insecure else "grpc+mTLS",
        "rng": {"kind": args.rng, "seed": args.seed},
        "reference_accuracy": reference,
        "reference_learner": {
            "ncc": "sklearn NearestCentroid",
            "lr": "sklearn LogisticRegression",
            "feddpdr": "PCA + Huber SVM without noise (one owner)",
            "bdt": "sklearn AdaBoost (SAMME) with depth-1 trees, T rounds",
        }[args.task],
        "train_rows": int(train.X.shape[0]),
        "test_rows": int(test.X.shape[0]),
        "points": points,
        "host": host_info(),
        "wall_time_s": time.perf_counter() - t0,
    }
    write_json(run_dir / "report.json", report)
    if len(points) > 0:
        plot_lines(
            run_dir / "accuracy_vs_epsilon.png",
            [p["epsilon"] for p in points],
            {
                f"{args.task} ({args.mechanism}, labels={args.labels})"
                if args.task == "ncc"
                else f"{args.task} ({args.mechanism})": [p["accuracy"] for p in points],
                "non-private reference": [reference] * len(points),
            },
            xlabel="epsilon",
            ylabel="test accuracy",
            logx=True,
            title=f"{args.dataset}: {args.owners} owners, {args.processes} node processes",
        )
    print(f"report: {run_dir / 'report.json'}", file=sys.stderr)
    return run_dir
