"""``privfed coordinator``: serve, wait for the owners, run one job, report, optionally serve."""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

import numpy as np

from privfed.common.datasets import Dataset, federation_split, read_rows, read_schema
from privfed.common.errors import ConfigError, JobAborted, RoundFailed
from privfed.common.schema import FederationSchema
from privfed.proto.transport import PULL_WAIT, TlsFiles
from privfed.server.app import CoordinatorServer
from privfed.server.config import JobConfig
from privfed.server.job import run_job
from privfed.server.models import load_model, save_model
from privfed.server.report import (
    accuracy_warning,
    baselines,
    host_info,
    new_run_dir,
    nonprivate_releases,
    refusal_summary,
    version_info,
    write_json,
)
from privfed.server.servicer import ServedModel
from privfed.server.strategies import make_strategy
from privfed.server.strategies.base import Strategy

log = logging.getLogger("privfed.coordinator")


def federation_schema(config: JobConfig) -> tuple[FederationSchema, Dataset | None]:
    """The job's federation schema and its public test set: the ``--schema`` file and the test
    file it names (relative to the schema file; None if it names none), or the schema and the
    public evaluation split of the built-in ``--dataset``."""
    if config.schema is None:
        _, test = federation_split(
            config.dataset, seed=config.seed, test_fraction=config.test_fraction, n_samples=config.n_samples
        )
        return FederationSchema.of_dataset(test), test
    schema = read_schema(config.schema)
    if schema.test is None:
        return schema, None
    X, labels, names, where = read_rows(config.schema.parent / schema.test)
    return schema, schema.dataset(schema.test, X, labels[:, 0], where, names)


def coordinator_strategy(config: JobConfig) -> tuple[Strategy, FederationSchema, Dataset | None]:
    """(strategy, schema, public test set) of the job: only public configuration (the schema's
    bounds and classes) and the public test set are read."""
    schema, test = federation_schema(config)
    if config.task == "bdt" and config.weight_bound_source == "default":
        log.warning(
            "bdt: neither --weight-bound nor --rows-per-owner given; share weight bound %g (one row per "
            "owner): owners with more rows have their share weights scaled down to it",
            config.share_weight_bound,
        )
    return make_strategy(config, n_classes=schema.n_classes, bounds=schema.bounds), schema, test


def run_coordinator(config: JobConfig, tls: TlsFiles | None) -> int:
    """Serve, wait for ``config.owners`` owners, run the job, write the report (or serve a saved model).

    A job that fails (too few owners, every owner refused, ...) still writes ``report.json`` with
    ``status: failed`` and the reason, then raises :class:`RoundFailed` naming the report. When
    training ends, well or not, the owner nodes are told the job is over at their next poll and
    exit 0; with ``serve`` the coordinator then keeps serving Predict until SIGTERM.
    """
    owners = config.owners
    if owners is None and config.load_model is None:
        raise ConfigError(
            "--owners is required to train (the number of logical owners to wait for); "
            "only --load-model serves without owners"
        )
    strategy, schema, test = coordinator_strategy(config)
    server = CoordinatorServer(tls=tls, node_timeout=config.node_timeout, schema=schema)
    stop = threading.Event()

    def on_sigterm(*_: object) -> None:
        stop.set()
        server.dispatcher.abort()

    signal.signal(signal.SIGTERM, on_sigterm)
    if config.load_model is not None:
        model_id = config.load_model.parent.name or "model"
        server.models.put(model_id, load_model(config.load_model))
        server.start(config.listen)
        log.info("serving saved model %s as %r until SIGTERM", config.load_model, model_id)
        print(f"serving model_id={model_id}", flush=True)
        stop.wait()
        server.stop()
        return 0
    assert owners is not None  # checked above: only --load-model serves without owners
    server.start(config.listen)
    report: dict[str, Any] = {
        "status": "running",
        "config": config.to_report(),
        "transport": "grpc+insecure" if tls is None else "grpc+mTLS",
        "version": version_info(),
        "schema_sha256": schema.digest(),
        "baselines": None if test is None else baselines(test.y, schema.n_classes),
        "host": host_info(),
    }
    try:
        if stop.is_set():
            return 0
        try:
            outcome = run_job(
                server,
                strategy,
                expected_owners=owners,
                register_timeout=config.register_timeout,
                round_timeout=config.round_timeout,
                show_progress=False,
            )
        except RoundFailed as exc:
            run_dir = new_run_dir(config.out)
            write_json(run_dir / "report.json", report | {"status": "failed", "error": str(exc)})
            _release_owners(server)
            raise RoundFailed(f"{exc} (report: {run_dir / 'report.json'})") from exc
        _release_owners(server)  # training is over: owners need not stay up, even with --serve
        model: ServedModel = outcome.model
        accuracy = None if test is None else float(np.mean(model.predict(test.X) == test.y))
        warning = None
        if accuracy is not None and test is not None and report["baselines"] is not None:
            majority = report["baselines"]["majority_class"]
            warning = accuracy_warning(config.epsilon, accuracy, majority, int(test.y.shape[0]))
        model_id = f"{config.task}-eps{config.epsilon:g}"
        server.models.put(model_id, outcome.model)
        run_dir = new_run_dir(config.out)
        save_model(run_dir / "model.json", outcome.model)
        write_json(
            run_dir / "report.json",
            report
            | {
                "status": "ok",
                "model_id": model_id,
                "accuracy": accuracy,
                "warnings": [warning] if warning else [],
                "owners": outcome.n_owners,
                "answered": outcome.answered,
                "refused": outcome.refused,
                "refusal_summary": refusal_summary(outcome.refused, outcome.n_owners),
                "lost_nodes": outcome.lost_nodes,
                "nonprivate_releases": nonprivate_releases(config.task, config.labels, config.base, outcome.answered),
                "epsilon_by_owner": outcome.epsilon_by_owner,
                "timings": outcome.timings,
            },
        )
        if test is None:
            log.info("job done (the schema names no public test file: no accuracy), report %s", run_dir)
            print(f"accuracy=none (no public test file in the schema) report={run_dir / 'report.json'}", flush=True)
        else:
            chance, majority = report["baselines"]["chance"], report["baselines"]["majority_class"]
            log.info("job done: accuracy %.4f, report %s", accuracy, run_dir / "report.json")
            print(
                f"accuracy={accuracy:.4f} (chance {chance:.4f}, majority class {majority:.4f}) "
                f"report={run_dir / 'report.json'}",
                flush=True,
            )
            if warning:
                print(warning, flush=True)
        if outcome.refused:
            print(refusal_summary(outcome.refused, outcome.n_owners), flush=True)
        if config.serve:
            log.info("serving model %s until SIGTERM", model_id)
            stop.wait()
        return 0
    except JobAborted as exc:
        log.warning("SIGTERM: %s; nodes told to exit, nothing more is released", exc)
        write_json(new_run_dir(config.out) / "report.json", report | {"status": "aborted", "error": f"SIGTERM: {exc}"})
        time.sleep(PULL_WAIT + 0.5)  # let nodes see the shutdown flag at their next poll
        return 0
    finally:
        server.stop()


def _release_owners(server: CoordinatorServer) -> None:
    """Tell every node the job is over (PullTasks answers ``shutdown``) and give the nodes one
    long poll to hear it, so they exit 0 instead of finding the coordinator gone."""
    server.dispatcher.shutdown()
    time.sleep(PULL_WAIT + 0.5)
