"""``privfed coordinator``: serve, wait for the owners, run one job, report, optionally serve."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from privfed.common.datasets import Dataset, federation_split, read_schema, read_table
from privfed.common.errors import ConfigError, JobAborted, PrivfedError
from privfed.common.schema import FederationSchema
from privfed.proto.transport import PULL_WAIT, TlsFiles
from privfed.server.app import CoordinatorServer
from privfed.server.config import JobConfig
from privfed.server.contracts import PublicLimits
from privfed.server.job import JobOutcome, run_job
from privfed.server.models import load_model, save_model
from privfed.server.registration import Expected, certificate_nodes
from privfed.server.report import (
    accuracy_warning,
    baselines,
    failure_reason,
    host_info,
    new_run_dir,
    nonprivate_releases,
    refusal_summary,
    version_info,
    write_json,
)
from privfed.server.rounds import JobBook, rejection_summary
from privfed.server.servicer import ServedModel
from privfed.server.strategies import make_strategy
from privfed.server.strategies.base import Strategy

log = logging.getLogger("privfed.coordinator")

#: Seconds a coordinator keeps serving after telling the nodes the job is over: one long poll
#: (``PULL_WAIT``) and a margin, so they hear it and exit 0 instead of finding it gone.
RELEASE_GRACE = PULL_WAIT + 0.5


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
    return schema, schema.dataset(read_table(config.schema.parent / schema.test))


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


def public_rows_per_owner(config: JobConfig) -> JobConfig:
    """``config`` with ``rows_per_owner`` from the built-in data set's public split, as ``privfed
    simulate`` sets it: its owners hold an even partition of the training split (at most
    ``ceil(rows / owners)`` each), public configuration the reply contracts bound an owner's rows
    with. Unchanged when the rows are the owners' own (``--schema``), when ``--rows-per-owner`` or
    ``--max-owner-rows`` says it, or without ``--owners``."""
    if config.schema is not None or config.owners is None or config.rows_per_owner or config.max_owner_rows:
        return config
    train, _ = federation_split(
        config.dataset, seed=config.seed, test_fraction=config.test_fraction, n_samples=config.n_samples
    )
    if config.owners > train.n:
        raise ConfigError(
            f"--owners {config.owners} exceeds the {train.n} training rows of --dataset {config.dataset}: every "
            "owner of its partition needs a row; use fewer owners or more rows (--n-samples)"
        )
    return config.replace(rows_per_owner=train.n / config.owners)


def run_coordinator(
    config: JobConfig, tls: TlsFiles | None, *, reference: Callable[[], dict[str, Any]] | None = None
) -> int:
    """Serve, wait for ``config.owners`` owners, run the job, write the report (or serve a saved model).

    ``reference``: computes the report's ``reference_accuracy`` and ``reference_learner`` once training
    is over (the CLI passes privfed's own model at ε = ∞, ``privfed.deploy.reference``); None records none.

    Every way a job ends writes ``report.json`` (issue 23, item 3): a job that fails (too few
    owners, a job that cannot be done with them, the quorum lost, every owner refusing, an
    unexpected error) writes ``status: failed`` with the reason, then raises (a
    :class:`PrivfedError` names the report); SIGTERM or SIGINT write ``status: failed`` with the
    signal and return 0 (130 for SIGINT). When training ends, well or not, the owner nodes are
    told the job is over at their next poll and exit 0; with ``serve`` the coordinator then keeps
    serving Predict until SIGTERM.
    """
    if config.load_model is not None:
        return serve_saved_model(config.load_model, config.listen, tls)
    if config.owners is None:
        raise ConfigError(
            "--owners is required to train (the number of logical owners to wait for); "
            "only --load-model serves without owners"
        )
    report = JobReport(config.out, {
        "status": "running",
        "config": config.to_report(),
        "transport": "grpc+insecure" if tls is None else "grpc+mTLS",
        "version": version_info(),
        "host": host_info(),
    })  # fmt: skip
    stopped: list[str] = []
    server: CoordinatorServer | None = None
    book: JobBook | None = None  # what became of the owners, once the job knows its limits

    def on_signal(signum: int, _: object) -> None:
        stopped.append(signal.Signals(signum).name)
        if server is not None:
            server.dispatcher.abort()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        config = public_rows_per_owner(config)
        book = JobBook(PublicLimits(max_rows=config.owner_rows_bound), quorum=config.quorum)
        strategy, schema, test = coordinator_strategy(config)
        report.update(
            config=config.to_report(),
            schema_sha256=schema.digest(),
            baselines=None if test is None else baselines(test.y, schema.n_classes),
        )
        check_feasible = getattr(strategy, "check_feasible", None)
        if check_feasible is not None:  # before the port opens: nobody is asked for anything
            check_feasible(config.owners)
        server = CoordinatorServer(tls=tls, node_timeout=config.node_timeout, schema=schema)
        server.start(config.listen)
        if stopped:
            raise JobAborted(f"{stopped[0]} before the job started")
        expected = Expected(
            owners=config.owners or 0,
            nodes=() if tls is None else certificate_nodes(tls.cert.parent),
            partition=config.owners if config.schema is None else None,
        )
        outcome = run_job(
            server,
            strategy,
            expected_owners=config.owners or 0,
            register_timeout=config.register_timeout,
            round_timeout=config.round_timeout,
            show_progress=False,
            book=book,
            expected=expected,
        )
        model_id = f"{config.task}-eps{config.epsilon:g}"
        server.models.put(model_id, outcome.model, schema=schema)  # served and saved before the owners
        save_model(report.run_dir() / "model.json", outcome.model, model_id=model_id, task=config.task, schema=schema)
        _release_owners(server)  # hear that training is over: they need not stay up, even with --serve
        _finish(config, outcome, test, report, model_id, reference)
        if config.serve:
            log.info("serving model %s until SIGTERM", f"{config.task}-eps{config.epsilon:g}")
            while not stopped:
                time.sleep(PULL_WAIT)
        return 0
    except JobAborted as exc:
        why = f"stopped by {stopped[0]}: {exc}" if stopped else str(exc)
        log.warning("%s; nodes told to exit, nothing more is released", why)
        report.fail(why, book)
        time.sleep(RELEASE_GRACE)  # let nodes see the shutdown flag at their next poll
        return 130 if stopped and stopped[0] == "SIGINT" else 0
    except BaseException as exc:  # every other way out: the report says why, then the error goes on
        path = report.fail(failure_reason(exc), book)
        if server is not None:
            _release_owners(server)
        if isinstance(exc, PrivfedError):
            raise type(exc)(f"{exc} (report: {path})") from exc
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if server is not None:
            server.stop()


class JobReport:
    """The ``report.json`` of one job, written once it ends (:meth:`fail` or :meth:`write`)."""

    def __init__(self, out: Path, fields: dict[str, Any]):
        self.out, self.fields = out, fields
        self.path: Path | None = None

    def update(self, **fields: Any) -> None:
        self.fields |= fields

    def run_dir(self) -> Path:
        """The job's run directory (made on first use): ``report.json`` and ``model.json`` go there."""
        if self.path is None:
            self.path = new_run_dir(self.out) / "report.json"
        return self.path.parent

    def write(self, **fields: Any) -> Path:
        self.fields |= fields
        path = self.run_dir() / "report.json"
        write_json(path, self.fields)
        return path

    def fail(self, reason: str, book: JobBook | None = None) -> Path:
        """A failed job's report: the reason, and what became of its owners if they had registered."""
        owners = book.to_report() if book is not None and book.owner_ids else {}
        return self.write(status="failed", error=reason, **owners)


def _finish(
    config: JobConfig,
    outcome: JobOutcome,
    test: Dataset | None,
    report: JobReport,
    model_id: str,
    reference: Callable[[], dict[str, Any]] | None,
) -> None:
    """Write the ok report of the served and saved model ``model_id`` and print the result line."""
    model: ServedModel = outcome.model
    accuracy = None if test is None else float(np.mean(model.predict(test.X) == test.y))
    warning = None
    if accuracy is not None and test is not None and report.fields.get("baselines") is not None:
        majority = report.fields["baselines"]["majority_class"]
        warning = accuracy_warning(config.epsilon, accuracy, majority, int(test.y.shape[0]))
    ref = {"reference_accuracy": None, "reference_learner": None} if reference is None else reference()
    path = report.write(
        status="ok",
        model_id=model_id,
        accuracy=accuracy,
        **ref,
        warnings=[warning] if warning else [],
        owners=outcome.n_owners,
        answered=outcome.answered,
        refused=outcome.refused,
        refusal_summary=refusal_summary(outcome.refused, outcome.n_owners),
        rejected_owners=outcome.rejected,
        rejection_summary=rejection_summary(outcome.rejected, outcome.n_owners),
        quorum=config.quorum,
        lost_nodes=outcome.lost_nodes,
        nonprivate_releases=nonprivate_releases(config.task, config.labels, config.base, outcome.answered),
        epsilon_by_owner=outcome.epsilon_by_owner,
        timings=outcome.timings,
    )
    if test is None:
        log.info("job done (the schema names no public test file: no accuracy), report %s", path)
        print(f"accuracy=none (no public test file in the schema) report={path}", flush=True)
    else:
        chance, majority = report.fields["baselines"]["chance"], report.fields["baselines"]["majority_class"]
        log.info("job done: accuracy %.4f, report %s", accuracy, path)
        shown = ref["reference_accuracy"]
        print(
            f"accuracy={accuracy:.4f} (non-private reference {'none' if shown is None else format(shown, '.4f')}, "
            f"chance {chance:.4f}, majority class {majority:.4f}) report={path}",
            flush=True,
        )
    for line in (
        warning,
        refusal_summary(outcome.refused, outcome.n_owners),
        rejection_summary(outcome.rejected, outcome.n_owners),
    ):
        if line:
            print(line, flush=True)


def serve_saved_model(path: Path, listen: str, tls: TlsFiles | None) -> int:
    """``privfed coordinator --load-model FILE``: serve a saved ``model.json`` under the id it was
    trained and served under, with its label values and schema, until SIGTERM. Needs no training
    configuration: everything Predict and GetModel answer is in the file."""
    trained = load_model(path)
    model_id = trained.model_id or "model"
    server = CoordinatorServer(tls=tls, schema=trained.schema)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.models.put(model_id, trained.model, classes=trained.classes, schema=trained.schema)
    server.start(listen)
    log.info("serving saved model %s as %r until SIGTERM", path, model_id)
    print(f"serving model_id={model_id}", flush=True)
    stop.wait()
    server.stop()
    return 0


def _release_owners(server: CoordinatorServer) -> None:
    """Tell every node the job is over (PullTasks answers ``shutdown``) and give the nodes one
    long poll to hear it, so they exit 0 instead of finding the coordinator gone."""
    server.dispatcher.shutdown()
    time.sleep(RELEASE_GRACE)
