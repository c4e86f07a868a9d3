"""``privfed coordinator``: serve, wait for the owners, run one job, report, optionally serve."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from privfed.common.dataset_files import read_schema, read_table
from privfed.common.datasets import Dataset, federation_split
from privfed.common.errors import ConfigError, JobAborted
from privfed.common.feddpdr.choices import default_k
from privfed.common.learners.ldp_gd import MIN_GROUP
from privfed.common.schema import FederationSchema
from privfed.proto.transport import PULL_WAIT, TlsFiles
from privfed.server.app import CoordinatorServer
from privfed.server.config import JobConfig
from privfed.server.contracts import PublicLimits
from privfed.server.job import FederatedJob, FinishedJob, run_federated_job
from privfed.server.models import load_model
from privfed.server.parameters import FeddpdrParams, LrParams
from privfed.server.registration import Expected, certificate_nodes
from privfed.server.report import JobReport, baselines, host_info, version_info, write_json
from privfed.server.rounds import carried_fields, most_spent, releases_may_have_spent
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


#: Says a warning about the job's settings (the command line's: logged as it is; a service's: in the job file's terms).
Warn = Callable[[str], None]


def coordinator_strategy(
    config: JobConfig, warn: Warn = log.warning
) -> tuple[Strategy, FederationSchema, Dataset | None]:
    """(strategy, schema, public test set) of the job: only public configuration (the schema's
    bounds and classes) and the public test set are read. ``warn`` says what the job's settings leave to a
    default that matters (in the flags' terms)."""
    schema, test = federation_schema(config)
    if config.task == "bdt" and config.release == "shares" and config.weight_bound_source == "default":
        warn(
            f"bdt: neither --weight-bound nor --rows-per-owner given; share weight bound {config.share_weight_bound:g} "
            "(one row per owner): owners with more rows have their share weights scaled down to it"
        )
    gd = isinstance(config.params, LrParams) and config.params.solver == "gd"
    if gd and math.isfinite(config.epsilon) and (config.owners or 0) < MIN_GROUP:
        warn(
            f"lr: gradient descent averages the gradients of at least {MIN_GROUP} owners a step, one report each; "
            f"with {config.owners or 'fewer'} owner(s) its one step is mostly noise: more owners of fewer rows each "
            "(--shards on the owner nodes: one row an owner) let it learn, and for a few owners of many rows each "
            "--solver local averages their local models, noisy too below about 100 owners"
        )
    feddpdr = config.params if isinstance(config.params, FeddpdrParams) else None
    if feddpdr is not None and feddpdr.basis == "dp-pca" and math.isfinite(config.epsilon):
        k = feddpdr.k or default_k(feddpdr.basis, schema.bounds.d)
        if k >= schema.bounds.d:  # walkthrough 8, W8-7: 0.64 against 0.72 with identity at eps 1, 10 repeats
            warn(
                f"feddpdr: k = {k} keeps every one of the rows' {schema.bounds.d} encoded columns, so DP-PCA reduces "
                "nothing and takes half of epsilon (and delta) from the classifier; --basis identity gives the "
                "classifier all of it, or give a smaller --k"
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


def coordinator_job(config: JobConfig, tls: TlsFiles | None, warn: Warn = log.warning) -> FederatedJob:
    """The job ``privfed coordinator`` runs: its strategy on the federation's public schema, waiting for
    ``config.owners`` owners (naming the nodes of the certificates it can see, and a built-in data
    set's partition), with the contracts' row bound and the quorum from ``config``; checked to be
    feasible with those owners (:class:`ConfigError` before anything listens). ``warn``: as
    :func:`coordinator_strategy`'s."""
    said: list[str] = []

    def keep(text: str) -> None:  # in the report's warnings too (walkthrough 8, W8-10: in the logs only)
        said.append(f"warning: {text}")
        warn(text)

    strategy, schema, test = coordinator_strategy(config, keep)
    job = FederatedJob(
        config=config,
        strategy=strategy,
        schema=schema,
        test=test,
        expected=Expected(
            owners=config.owners or 0,
            nodes=() if tls is None else certificate_nodes(tls.cert.parent),
            partition=config.owners if config.schema is None else None,
        ),
        limits=PublicLimits(max_rows=config.owner_rows_bound),
        quorum=config.quorum,
        quorum_after_release=config.quorum_after_release,
        settings_warnings=tuple(said),
    )
    job.check_feasible()
    return job


def journal_job_id(journal: Path) -> str:
    """The job id a ``privfed coordinator --journal`` run announces: the same for every run over that journal (a
    run resumed after a restart is the same job to its owners, and an owner node without a policy takes part in one
    job), another for another journal file."""
    digest = hashlib.sha256(str(Path(journal).resolve()).encode()).hexdigest()[:12]
    return f"journal-{digest}"


def run_coordinator(
    config: JobConfig,
    tls: TlsFiles | None,
    *,
    reference: Callable[[], dict[str, Any]] | None = None,
    revoked: Callable[[bytes], bool] = lambda _: False,
) -> int:
    """Serve, wait for ``config.owners`` owners, run the job, write the report (or serve a saved model).

    ``reference``: computes the report's ``reference_accuracy`` and ``reference_learner`` once training
    is over (the CLI passes privfed's own model at ε = ∞, ``privfed.deploy.reference``); None records none.
    ``revoked(pem)``: whether a TLS peer's certificate is revoked; every call presenting one is refused
    (``--revoked-certificates``, :class:`~privfed.server.revocation.RevokedCertificates`).

    The job is :func:`~privfed.server.job.run_federated_job`'s. Every way a job ends writes
    ``report.json`` (issue 23, item 3): a job that fails (too few owners, a job that cannot be done
    with them, the quorum lost, every owner refusing, an unexpected error) writes ``status: failed``
    with the reason, then raises (a :class:`PrivfedError` names the report); SIGTERM or SIGINT write
    ``status: failed`` with the signal and return 0 (130 for SIGINT). When training ends, well or not,
    the owner nodes are told the job is over at their next poll and exit 0; with ``serve`` the
    coordinator then keeps serving Predict until SIGTERM.
    """
    if config.load_model is not None:  # until the process ends: the command line serves it itself, stopped on SIGTERM
        return serve_saved_model(config.load_model, config.listen, tls, stop=threading.Event(), revoked=revoked)
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

    def on_signal(signum: int, _: object) -> None:
        stopped.append(signal.Signals(signum).name)
        if server is not None:
            server.dispatcher.abort()

    def release() -> None:
        if server is not None:
            _release_owners(server, failed=report.failed)

    def stop_reason() -> str | None:
        return stopped[0] if stopped else None

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with report.on_failure(stopped=stop_reason, release=release):
            config = public_rows_per_owner(config)
            report.update(config=config.to_report())  # with what it resolves (bdt's release), even if refused now
            job = coordinator_job(config, tls)  # before the port opens: nobody is asked for anything
            if config.journal is not None:  # a resumed run is the same job to its owners (one job without a policy)
                carried = _spent_in_earlier_runs(config.journal, report, resume=config.resume)
                job = replace(job, announced_id=journal_job_id(config.journal), spent_before=carried)
                report.update(**carried_fields(carried))  # kept if the run ends before its owners are back (A39-5)
            report.update(
                config=config.to_report(d=job.schema.d),  # with what the schema resolves (FedDPDR's k)
                schema_sha256=job.schema.digest(),
                baselines=None if job.test is None else baselines(job.test.y, job.schema.n_classes),
            )
            server = CoordinatorServer(
                tls=tls, node_timeout=config.node_timeout, schema=job.schema, revoked_certificates=revoked
            )
            server.start(config.listen)
            if stopped:
                raise JobAborted("before the job started")
            done = run_federated_job(
                server,
                job,
                report,
                release=release,
                stopped=stop_reason,
                reference=reference,
                write_ahead=config.journal is not None,  # a killed run's report names what it asked: --resume reads it
            )
        _print_result(done)
        if config.serve:
            log.info("serving model %s until SIGTERM", job.model_id)
            while not stopped:
                time.sleep(PULL_WAIT)
        return 0
    except JobAborted as exc:
        log.warning("stopped (%s: %s); nodes told to exit, nothing more is released", stop_reason(), exc)
        return 130 if stop_reason() == "SIGINT" else 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if server is not None:
            server.stop()


def _spent_in_earlier_runs(journal: Path, report: JobReport, *, resume: bool) -> dict[str, dict[str, float]]:
    """What each owner may have spent in the earlier runs of the unfinished job ``journal`` holds, release by release,
    by their reports (:meth:`~privfed.server.journal.Journal.note_run`; the most any of them names, as each resumed
    run's report carries the runs before it): a resumed job's report names it as its own if the run does not count
    it again (walkthrough 14, W14-2). An earlier report its run never finished (still ``running``: the process was
    killed) is marked failed, naming the later run of the journal (which may still find it cannot resume)."""
    from privfed.server.journal import Journal

    with Journal(journal) as book:
        earlier = book.note_run(report.run_dir() / "report.json", resume=resume)
    carried = []
    for path in earlier:
        try:
            fields = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            log.warning("the report of an earlier run of this job, %s, is unreadable (%s): its owners' spending "
                        "is not carried into this report; their ledgers hold it", path, exc)  # fmt: skip
            continue
        carried.append(releases_may_have_spent(fields))
        if fields.get("status") == "running":  # audit 38, A38-2: whether this run resumes it is Journal.begin's word
            fields |= {
                "status": "failed",
                "error": f"interrupted; a later run of its journal started in {report.run_dir()}",
            }
            write_json(path, fields)
    return most_spent(carried)


def _print_result(done: FinishedJob) -> None:
    """The result line of a job that ended well, and its warning and summaries."""
    fields, path = done.report.fields, done.report.run_dir() / "report.json"
    if done.accuracy is None:
        log.info("job done (the schema names no public test file: no accuracy), report %s", path)
        print(f"accuracy=none (no public test file in the schema) report={path}", flush=True)
    else:
        chance, majority = fields["baselines"]["chance"], fields["baselines"]["majority_class"]
        log.info("job done: accuracy %.4f, report %s", done.accuracy, path)
        shown = fields["reference_accuracy"]
        print(
            f"accuracy={done.accuracy:.4f} (non-private reference {'none' if shown is None else format(shown, '.4f')}, "
            f"chance {chance:.4f}, majority class {majority:.4f}) report={path}",
            flush=True,
        )
    for line in (*done.warnings, fields["refusal_summary"], fields["rejection_summary"]):
        if line:
            print(line, flush=True)


def serve_saved_model(
    path: Path,
    listen: str,
    tls: TlsFiles | None,
    *,
    stop: threading.Event,
    revoked: Callable[[bytes], bool] = lambda _: False,
) -> int:
    """``privfed coordinator --load-model FILE``: serve a saved ``model.json`` under the id it was
    trained and served under, with its label values and schema, until ``stop`` is set (the command line sets it on
    SIGTERM: :func:`privfed.deploy.signals.set_on_signals`). Needs no training configuration: everything Predict and
    GetModel answer is in the file. ``revoked``: as for :func:`run_coordinator`."""
    trained = load_model(path)
    model_id = trained.model_id or "model"
    server = CoordinatorServer(tls=tls, schema=trained.schema, revoked_certificates=revoked)
    server.models.put(model_id, trained.model, classes=trained.classes, schema=trained.schema)
    server.start(listen)
    log.info("serving saved model %s as %r until SIGTERM", path, model_id)
    print(f"serving model_id={model_id}", flush=True)
    while not stop.wait(0.2):  # timed slices: a SIGTERM another thread takes still runs the handler (see
        pass  # privfed.deploy.signals, which server/ may not import: tests/unit/test_layering.py)
    server.stop()
    return 0


def _release_owners(server: CoordinatorServer, *, failed: bool) -> None:
    """Tell every node the job is over (PullTasks answers ``shutdown``, and ``job_failed`` if it ended
    without its result) and give the nodes one long poll to hear it, so they exit 0 (2 for a failed job)
    instead of finding the coordinator gone."""
    server.dispatcher.shutdown(failed=failed)
    time.sleep(RELEASE_GRACE)
