"""``privfed coordinator``: serve, wait for the owners, run one job, report, optionally serve."""

from __future__ import annotations

import logging
import signal
import threading
import time

import numpy as np

from privfed.owner.data import federation_split
from privfed.proto.transport import PULL_WAIT
from privfed.server.app import CoordinatorServer
from privfed.common.errors import JobAborted
from privfed.server.job import run_job
from privfed.server.models import load_model, save_model
from privfed.server.report import host_info, new_run_dir, nonprivate_releases, write_json
from privfed.server.strategies import boosting_options, make_strategy

log = logging.getLogger("privfed.coordinator")


def run_coordinator(args, tls) -> int:
    # Only public metadata (bounds, classes) and the public evaluation split are used here.
    _, test = federation_split(args.dataset, seed=args.seed, test_fraction=args.test_fraction,
                               n_samples=args.n_samples)
    strategy = make_strategy(args.task, mechanism=args.mechanism, epsilon=args.epsilon, n_classes=len(test.classes),
                             bounds=test.bounds, labels=args.labels, label_fraction=args.label_fraction,
                             param_bound=args.param_bound, c=args.C, k=args.k, delta=args.delta,
                             lam=args.lam, **boosting_options(args))
    server = CoordinatorServer(tls=tls, node_timeout=args.node_timeout)
    stop = threading.Event()

    def on_sigterm(*_):
        stop.set()
        server.dispatcher.abort()

    signal.signal(signal.SIGTERM, on_sigterm)
    if args.load_model is not None:
        model_id = args.load_model.parent.name or "model"
        server.models.put(model_id, load_model(args.load_model))
        server.start(args.listen)
        log.info("serving saved model %s as %r until SIGTERM", args.load_model, model_id)
        print(f"serving model_id={model_id}", flush=True)
        stop.wait()
        server.stop()
        return 0
    server.start(args.listen)
    try:
        if stop.is_set():
            return 0
        outcome = run_job(server, strategy, expected_owners=args.owners, register_timeout=args.register_timeout,
                          round_timeout=args.round_timeout, show_progress=False)
        accuracy = float(np.mean(outcome.model.predict(test.X) == test.y))
        model_id = f"{args.task}-eps{args.epsilon:g}"
        server.models.put(model_id, outcome.model)
        run_dir = new_run_dir(args.out)
        save_model(run_dir / "model.json", outcome.model)
        write_json(run_dir / "report.json", {
            "config": {k: v for k, v in vars(args).items() if k not in ("func", "rest")},
            "transport": "grpc+insecure" if tls is None else "grpc+mTLS", "model_id": model_id,
            "accuracy": accuracy, "owners": outcome.n_owners, "answered": outcome.answered,
            "refused": outcome.refused, "lost_nodes": outcome.lost_nodes,
            "nonprivate_releases": nonprivate_releases(args.task, args.labels, args.base, outcome.answered),
            "epsilon_by_owner": outcome.epsilon_by_owner, "timings": outcome.timings, "host": host_info()})
        log.info("job done: accuracy %.4f, report %s", accuracy, run_dir / "report.json")
        print(f"accuracy={accuracy:.4f} report={run_dir / 'report.json'}", flush=True)
        if args.serve:
            log.info("serving model %s until SIGTERM", model_id)
            stop.wait()
        server.dispatcher.shutdown()
        stop.wait(2.0)  # let nodes see the shutdown flag at their next poll
        return 0
    except JobAborted as exc:
        log.warning("SIGTERM: %s; nodes told to exit, nothing more is released", exc)
        time.sleep(PULL_WAIT + 0.5)  # let nodes see the shutdown flag at their next poll
        return 0
    finally:
        server.stop()
