"""The service commands of the ``privfed`` command line (issue 26, item 1): ``privfed serve`` (the
coordinator service), and the data user's ``privfed submit``, ``privfed jobs`` and ``privfed job
show|logs|cancel|model``, which call the service's job API over mTLS with a data-user certificate
(``privfed certs --data-user NAME``)."""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from privfed.common.errors import PrivfedError
from privfed.deploy.argtypes import address, listen_address, positive_float, positive_int
from privfed.deploy.signals import set_on_signals, wait_for
from privfed.deploy.tlsflags import add_revoked_certificates, add_tls, revoked_certificates
from privfed.deploy.tlsflags import tls_files as _tls

if TYPE_CHECKING:
    from privfed.proto.transport import TlsFiles

log = logging.getLogger("privfed.coordinator")

#: Seconds a job API call may take (every call only reads or writes the store).
CALL_TIMEOUT = 30.0
#: Jobs ``privfed jobs`` lists by default, the last submitted (``--all``: every one).
JOBS_SHOWN = 50


class DataFlags(Protocol):
    """Adds the data flags (``--dataset``, ``--n-samples``, ``--seed``, ``--test-fraction``) to a parser."""

    def __call__(
        self, p: argparse.ArgumentParser, *, dataset_group: argparse._MutuallyExclusiveGroup | None = None
    ) -> None: ...


def add_serve(sub: argparse._SubParsersAction, *, add_data: DataFlags) -> None:
    """``privfed serve`` on the ``privfed`` parser's subcommands ``sub``."""
    p = sub.add_parser(
        "serve",
        help="run the coordinator service: owner nodes stay connected, data users submit jobs to a queue",
        description="Serve owner nodes and a queue of jobs (privfed submit), one at a time; each job's report.json, "
        "model.json and job.log go to STORE/<id>/. Queued and running jobs survive a restart with the same "
        "--store. A read-only status page is served on --status-listen.",
    )
    p.add_argument(
        "--listen", type=listen_address, default="0.0.0.0:50051", help="HOST:PORT for owners and the job API"
    )
    add_tls(p)
    p.add_argument("--store", type=Path, required=True, help="directory of the jobs (created if missing)")
    p.add_argument(
        "--status-listen",
        default="127.0.0.1:8080",
        help="HOST:PORT of the read-only status page (default: localhost only); 'none': no page",
    )
    p.add_argument("--node-timeout", type=float, default=15.0, help="seconds a silent node keeps its place in a round")
    p.add_argument(
        "--max-job-wait",
        type=positive_float,
        metavar="SECONDS",
        help="the longest register_timeout, round_timeout or ring_timeout a job may ask (default: 3600): the queue "
        "waits for a running job, so a longer one would hold every other data user's jobs",
    )
    p.add_argument(
        "--max-job-time",
        type=positive_float,
        metavar="SECONDS",
        help="cancel a job that has run this long since it started (default: 86400): a job of many rounds, each "
        "waiting up to its round_timeout for an owner that never answers, would hold the queue for rounds x wait",
    )
    p.add_argument(
        "--revoked-data-users",
        type=Path,
        metavar="FILE",
        help="data-user certificate names to refuse, one per line (# comments), read again when it changes: their "
        "job API calls, models and predictions are refused, their queued jobs fail before any owner is asked and a "
        "running one is cancelled",
    )
    add_revoked_certificates(p)
    source = p.add_mutually_exclusive_group()
    source.add_argument("--schema", type=Path, help="federation schema of owners' own data (default: --dataset's)")
    add_data(p, dataset_group=source)
    p.set_defaults(func=_serve)


def _client(q: argparse.ArgumentParser) -> None:
    q.add_argument("--coordinator", type=address, required=True, help="HOST:PORT of the coordinator service")
    add_tls(q)
    q.add_argument("--name", help="your data-user name (the certificate's, from privfed certs --data-user)")
    q.add_argument("--target-name", help="TLS name to expect from the coordinator when dialing an address")


def add_submit(sub: argparse._SubParsersAction) -> None:
    """``privfed submit`` on ``sub``."""
    p = sub.add_parser(
        "submit",
        help="submit a job (a TOML file) to a coordinator service",
        description="Queue the job in FILE (the keys of privfed simulate --config that describe a job: task, "
        "epsilon (one value), owners, rounds, ...) and print its id.",
    )
    p.add_argument("file", type=Path, help="the job's TOML file")
    _client(p)
    p.set_defaults(func=_submit)


def add_jobs(sub: argparse._SubParsersAction) -> None:
    """``privfed jobs`` on ``sub``."""
    p = sub.add_parser("jobs", help="list a coordinator service's jobs")
    _client(p)
    p.add_argument("--json", action="store_true", help="print JSON (a list of the jobs shown)")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument(
        "--last",
        type=positive_int,
        default=JOBS_SHOWN,
        metavar="N",
        help=f"the N last submitted jobs (default {JOBS_SHOWN}); a line says how many earlier ones are left out",
    )
    shown.add_argument("--all", action="store_true", help="every job the service holds")
    p.set_defaults(func=_jobs)


def add_job(sub: argparse._SubParsersAction) -> None:
    """``privfed job show|logs|cancel|model|delete`` on ``sub``."""
    p = sub.add_parser(
        "job",
        help="show, read the log of, cancel, download the model of, or delete one job of a coordinator service",
        description="show prints the job's record and report (JSON); logs its log, as its data user may read it; "
        "cancel stops a queued or running job (what its owners released stays spent); model writes its model.json "
        "(--out); delete removes a finished job from the service: its record, log, report and model (download "
        "the model first if you need it). Owners' ledgers keep what they released for it: deleting gives no budget "
        "back.",
    )
    p.add_argument("action", choices=("show", "logs", "cancel", "model", "delete"))
    p.add_argument("job_id", metavar="ID")
    p.add_argument(
        "--out",
        type=Path,
        help="model only: the file to write the job's model.json to (default model-ID.json; an existing file is "
        "left as it is); privfed export --model FILE makes it a scikit-learn classifier",
    )
    _client(p)
    p.set_defaults(func=_job)


def _serve(args: argparse.Namespace) -> int:
    from privfed.server.service import CoordinatorService, ServiceConfig

    tls = _tls(args, "coordinator")
    config = ServiceConfig(
        store=args.store,
        listen=args.listen,
        status_listen=None if args.status_listen == "none" else args.status_listen,
        dataset=args.dataset,
        n_samples=args.n_samples,
        test_fraction=args.test_fraction,
        seed=args.seed,
        schema=args.schema,
        node_timeout=args.node_timeout,
        **({} if args.max_job_wait is None else {"max_job_wait": args.max_job_wait}),
        **({} if args.max_job_time is None else {"max_job_time": args.max_job_time}),
        revoked_data_users=args.revoked_data_users,
        revoked_certificates=revoked_certificates(args),
        revoked_certificates_optional=args.revoked_certificates is None,  # the default: read once it is made
    )
    from privfed.deploy.child import reference_in_child

    service = CoordinatorService(config, tls, reference=reference_in_child)
    stop = threading.Event()
    set_on_signals(stop, (signal.SIGTERM, signal.SIGINT))  # not Event.set in the handler (W11-11)
    port = service.start()
    page = (
        "no status page"
        if service.status_port is None
        else f"status page http://{args.status_listen.rpartition(':')[0]}:{service.status_port}/"
    )
    # one write with its newline: print() writes the line and its end apart, and a log line of the service's threads
    # could land between them when output and log go to one file (walkthrough 10, W10-10)
    sys.stdout.write(f"serving on port {port}; {page}; jobs in {args.store}\n")
    sys.stdout.flush()
    if tls is not None:
        threading.Thread(target=_warn_expiry_daily, args=(tls, stop), name="privfed-expiry", daemon=True).start()
    wait_for(stop)  # timed: the handler runs whichever thread the signal reaches
    log.info("stopping: the running job (if any) is queued again at the next start")
    service.stop()
    return 0


def _warn_expiry_daily(tls: TlsFiles, stop: threading.Event) -> None:
    """The coordinator's certificate or CA expiring soon, at the start and then once a day (W9-3)."""
    from privfed.deploy.tlsflags import warn_expiry
    from privfed.server.joblog import outside_jobs

    while True:
        with outside_jobs():  # the operator's, not a running job's log
            warn_expiry(tls, "coordinator", log)
        if stop.wait(DAY):
            return


#: Seconds between two of the service's checks that its certificates are not about to expire.
DAY = 86400.0


#: Job API calls that a lost answer may send again: those that change nothing, and Submit, whose token makes the
#: service answer a repeat with the job it queued the first time (walkthrough 10, W10-2).
SENT_AGAIN = frozenset({"Submit", "List", "Show", "Logs", "Model"})
#: Tries of such a call whose answer did not come (the connection lost or the call timed out), and the seconds
#: before the second and third.
CALL_TRIES, CALL_BACKOFF = 3, (1.0, 4.0)


def call(args: argparse.Namespace, method: str, request: dict[str, Any]) -> dict[str, Any]:
    """One job API call to ``--coordinator`` as the data user ``--name``; one of :data:`SENT_AGAIN` is sent again,
    the same, when no answer came (up to :data:`CALL_TRIES` tries)."""
    import grpc

    from privfed.proto.jobwire import JOB_SERVICE, decode_answer, encode_json
    from privfed.proto.transport import channel_credentials, channel_options, tls_failure

    if not args.insecure and not args.name:
        raise PrivfedError("--name NAME is required with --certs (your data-user certificate's name)")
    tls = _tls(args, args.name or "")
    opts = channel_options(args.target_name)
    channel = (
        grpc.insecure_channel(args.coordinator, options=opts)
        if tls is None
        else grpc.secure_channel(args.coordinator, channel_credentials(tls), options=opts)
    )
    with channel:
        stub = channel.unary_unary(
            f"/{JOB_SERVICE}/{method}", request_serializer=encode_json, response_deserializer=decode_answer
        )
        lost = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        for attempt in range(CALL_TRIES):
            try:
                return dict(stub(request, timeout=CALL_TIMEOUT))
            except grpc.RpcError as exc:
                details = exc.details() or ""
                tls_refused = tls_failure(details)
                failure = tls_refused or _call_failure(exc.code(), details, args.coordinator)
                never_sent = "failed to connect" in details.lower()  # nothing reached a service: no use asking again
                if exc.code() not in lost or method not in SENT_AGAIN or tls_refused or never_sent:
                    raise PrivfedError(failure) from None
                if attempt + 1 == CALL_TRIES:
                    if method == "Submit":  # it may have been queued before its answer was lost
                        failure += (
                            "; if the service received the submission before the connection was lost, the job is "
                            "queued: `privfed jobs` lists it, and submitting the file again queues another"
                        )
                    raise PrivfedError(failure) from None
                print(f"no answer ({failure}); asking again", file=sys.stderr, flush=True)
                time.sleep(CALL_BACKOFF[attempt])
        raise AssertionError("unreachable")


def _call_failure(code: Any, details: str, coordinator: str) -> str:
    """A job API call's failure for its user: what the service said, without gRPC's status names."""
    import grpc

    if code == grpc.StatusCode.UNAVAILABLE:
        return (
            f"no privfed service answers at {coordinator} ({details}); is `privfed serve` running there, on that port?"
        )
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"the service at {coordinator} did not answer within {CALL_TIMEOUT:g} s"
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return f"the service refused it: {details}"
    return details or code.name


def _submit(args: argparse.Namespace) -> int:
    from privfed.deploy.simulation_config import SimulationConfig
    from privfed.server.jobapi import job_config, job_file_errors, job_settings

    doc = SimulationConfig.toml_file(args.file)
    # an unknown key, one of the service's, a parameter of another task or a bad value is refused here, as the
    # service would refuse it (the same tables and checks; the service's own fields are left at their defaults)
    with job_file_errors():
        job_config(job_settings(doc), {})
    doc = {k: ("inf" if isinstance(v, float) and v == float("inf") else v) for k, v in doc.items()}
    # the same token each try: a submission whose answer was lost is answered with the job it queued (W10-2)
    answer = call(args, "Submit", {"job": doc, "submission": secrets.token_hex(16)})
    print(f"submitted job {answer['job_id']} ({answer['state']})", flush=True)
    if answer.get("warning"):
        print(f"warning: {answer['warning']}", file=sys.stderr, flush=True)
    return 0


def _jobs(args: argparse.Namespace) -> int:
    from privfed.server.statuspage import refused_line

    answer = call(args, "List", {} if args.all else {"last": args.last})
    jobs, earlier = answer.get("jobs"), int(answer.get("earlier") or 0)
    if not isinstance(jobs, list):  # a service before walkthrough 12's fix renamed the key of a relative --store
        raise PrivfedError(
            f"the service at {args.coordinator} answered without its job list: a privfed serve older than walkthrough "
            "12 does so when its --store is a relative path (W12-1); its operator upgrades it, or restarts it with an "
            "absolute --store"
        )
    if args.json:
        print(json.dumps(jobs, indent=2))
        return 0
    header = ("id", "state", "task", "epsilon", "owners", "data user", "progress", "accuracy", "refused by")
    rows = [
        (
            j["job_id"],
            j["state"],
            str(j["task"]),
            str(j["epsilon"]),
            _owners_cell(j),
            j["data_user"],
            f"{100 * j['progress']:.0f}%",
            "" if j["accuracy"] is None else f"{j['accuracy']:.4f}",
            refused_line(j.get("refused_by_node") or {}),
        )
        for j in jobs
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    first: dict[tuple[str, str], str] = {}  # (state, note) -> the first job that said it
    for j in jobs:  # why a job failed or was cancelled, what a running one waits for, what a done one warns of
        if j.get("note"):  # a note said already is named, not repeated (walkthrough 14, W14-14: 50 identical lines)
            said = first.setdefault((j["state"], j["note"]), j["job_id"])
            print(f"{j['job_id']} {j['state']}: {j['note'] if said == j['job_id'] else f'as {said}'}")
    if earlier:
        print(f"{earlier} earlier job(s) not shown; --all lists every job, --last N the N last")
    return 0


def _owners_cell(job: dict[str, Any]) -> str:
    """``released/asked`` (``20/30``), or, when more owners released than the job's ``owners`` (the least it starts
    with: it runs on every owner registered), ``18 (8+ asked)``: ``18/8`` read as a counting bug (walkthrough 8).
    Released: the owners that took part, with any release the job used, an evaluation too (``took_part``; a
    listing without it: ``answered``, those whose contribution was used): walkthrough 9, W9-4, a bdt job's 4
    evaluators-only owners paid, yet the listing said ``32/36``."""
    released, asked = job.get("took_part", job.get("answered")), job["owners"]
    if released is None:
        return str(asked)
    return f"{released}/{asked}" if asked is None or released <= asked else f"{released} ({asked}+ asked)"


def _job(args: argparse.Namespace) -> int:
    from privfed.server.jobstore import FINAL

    if args.out is not None and args.action != "model":
        raise PrivfedError(f"--out is for privfed job model; privfed job {args.action} writes nothing")
    out = args.out or Path(f"model-{args.job_id}.json")
    if args.action == "model" and out.exists():  # before the call: nothing is lost, nothing is fetched in vain
        raise PrivfedError(f"{out} exists; give --out another file (nothing was written)")
    method = args.action.capitalize()  # the job API's method of each action (privfed.proto.jobwire.JOB_METHODS)
    answer = call(args, method, {"job_id": args.job_id})
    if args.action == "model":
        _write_model(answer["model"], out, answer["job_id"])
    elif args.action == "logs":
        print(answer["log"], end="")
    elif args.action == "cancel":
        state, was = answer["state"], answer.get("was", "")
        if was in FINAL:
            said = f"already {was}: nothing to cancel"
        else:
            said = "cancelled" if state == "cancelled" else "stopping (it was running; its report will say so)"
        print(f"job {answer['job_id']}: {said}", flush=True)
    elif args.action == "delete":
        print(
            f"job {answer['job_id']} ({answer['state']}) deleted: its record, log, report and model are removed from "
            "the service; owners' ledgers keep what they released for it",
            flush=True,
        )
    else:
        print(json.dumps(answer, indent=2))
    return 0


def _write_model(document: Any, out: Path, job_id: str) -> None:
    """Write a job's model document to ``out`` once it reads as a model (what ``privfed export`` and
    ``privfed coordinator --load-model`` will read), and say what it is."""
    from privfed.common.learners.trained import read_document

    trained = read_document(document, source=f"the model of job {job_id}")
    try:
        with out.open("x", encoding="utf-8") as f:  # never over a file that appeared since the check
            f.write(json.dumps(document) + "\n")
    except OSError as exc:
        raise PrivfedError(f"cannot write {out}: {exc.strerror or exc}") from None
    print(
        f"wrote {out}: the {trained.task} model of job {job_id} ({len(trained.classes)} classes); "
        f"privfed export --model {out} --out model.pkl makes it a scikit-learn classifier",
        flush=True,
    )


__all__ = ["add_job", "add_jobs", "add_serve", "add_submit", "call"]
