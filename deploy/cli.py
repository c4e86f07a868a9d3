"""The ``privfed`` command line: simulate, coordinator, owner, query, certs, ledger, experiment.

One convention for every command: ε lists are ``--epsilon 0.5,1,inf``; every ``--help`` shows
defaults and units; a bad argument, a taken port or an unreadable file is one line on stderr
and exit code 2 (no traceback). Only this layer parses flags: it builds the typed configs
(:class:`~privfed.server.config.JobConfig`, :class:`~privfed.owner.main.OwnerConfig`) that
``server/`` and ``owner/`` run.

This module builds the parser (:func:`build_parser`) and runs ``privfed simulate`` and ``privfed
coordinator``; the other commands' flags and handlers are in :mod:`privfed.deploy.owner_cli` (owner,
query), :mod:`privfed.deploy.offline_cli` (experiment, reproduce, export), :mod:`privfed.deploy.admin_cli`
(certs, ledger) and :mod:`privfed.deploy.service_cli` (serve, submit, jobs, job); the conventions are
:mod:`privfed.deploy.cli_parser`, the flags every job shares :mod:`privfed.deploy.job_flags`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privfed.common.errors import PrivfedError, reason
from privfed.common.gc_thresholds import raised_gc_thresholds
from privfed.deploy.argtypes import epsilon_list, listen_address, one_epsilon, positive_float, positive_int
from privfed.deploy.cli_parser import Parser, VersionAction
from privfed.deploy.job_flags import add_data, add_learning
from privfed.deploy.quiet import quiet_unless
from privfed.deploy.signals import set_on_signals
from privfed.deploy.tlsflags import add_revoked_certificates, revoked_certificates
from privfed.deploy.tlsflags import add_tls as _add_tls
from privfed.deploy.tlsflags import tls_files as _tls

if TYPE_CHECKING:
    from privfed.deploy.simulation_config import SimulationConfig
    from privfed.server.config import JobConfig


def _add_simulate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="coordinator + P owner node processes on loopback, once per epsilon",
        description="A whole federation on loopback (a coordinator and P owner node processes over gRPC with "
        "mTLS), once per epsilon with fresh ledgers; writes OUT/<timestamp>/report.json and a plot.",
    )
    p.add_argument(
        "--config",
        type=Path,
        help="a TOML file of settings (keys: the flags' names without the dashes, e.g. task, owners, rounds, C, "
        "epsilon = [1, 4]; also read under [tool.privfed]); flags given on the command line override it",
    )
    from privfed.deploy.simulation_config import DEFAULT_EPSILONS, DEFAULT_OWNERS

    p.add_argument(
        "--owners",
        type=positive_int,
        default=DEFAULT_OWNERS,
        help="logical owners N (with --data: split over the files by their rows; their rows in all is one per owner)",
    )
    p.add_argument(
        "--min-owners",
        type=positive_int,
        help="quorum: a federation fails, before later rounds spend anyone's budget, once fewer owners are still "
        "taking part (checked once the accept round is over, and after each release of a multi-round task); "
        "default: half of --owners",
    )
    p.add_argument(
        "--processes",
        type=positive_int,
        default=None,
        help="owner node processes P (default 2; not with --data, which runs one per file)",
    )
    p.add_argument(
        "--data",
        nargs="+",
        type=Path,
        help="owners' own files, one owner node process each, checked against --schema (which must name a "
        "public test file); default: partitions of --dataset",
    )
    p.add_argument(
        "--epsilon",
        type=epsilon_list,
        default=",".join(f"{e:g}" for e in DEFAULT_EPSILONS),
        help="each owner's budget per run, comma-separated (inf: no noise)",
    )
    p.add_argument(
        "--repeats",
        type=positive_int,
        default=1,
        help="federations per epsilon (seeds --seed, --seed+1, ...); the plot shows mean ± std",
    )
    p.add_argument("--out", type=Path, default=Path("runs"), help="directory that receives the run directory")
    p.add_argument("--insecure", action="store_true", help="no TLS (byte-capture tests only)")
    p.add_argument(
        "--rng",
        choices=("seeded", "secure"),
        default="seeded",
        help="owners' noise: seeded from --seed (reproducible simulation) or secure",
    )
    p.add_argument(
        "--work-rows",
        type=positive_int,
        metavar="P",
        help="each owner node's --work-rows: every owner's computations work on P rows (a power of two, at least "
        "its rows), so their timing does not tell the row counts apart",
    )
    p.add_argument(
        "--node-timeout", type=positive_float, default=15.0, help="seconds a silent node keeps its place in a round"
    )
    p.add_argument("--round-timeout", type=positive_float, default=600.0, help="seconds a round may take")
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars even on a terminal (without a terminal: one log line per round anyway)",
    )
    add_learning(p)
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--schema",
        type=Path,
        help="federation schema (TOML or JSON) of the --data files, sent to every owner at registration",
    )
    add_data(p, dataset_group=source)
    p.set_defaults(func=_simulate)


def _add_coordinator(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "coordinator",
        help="run the coordinator for one job",
        description="Serve owners over gRPC, wait for --owners logical owners, run one job, write "
        "OUT/<timestamp>/report.json (also when the job fails, saying why).",
    )
    p.add_argument("--listen", type=listen_address, default="0.0.0.0:50051", help="HOST:PORT to serve on")
    _add_tls(p)
    add_revoked_certificates(p)
    p.add_argument("--owners", type=positive_int, help="logical owners to wait for (required to train)")
    p.add_argument(
        "--min-owners",
        type=positive_int,
        help="quorum: the job fails, before later rounds spend anyone's budget, once fewer owners are still "
        "taking part (not refused, rejected or lost; checked once the accept round is over, and after each release "
        "of a multi-round task); default: half of --owners",
    )
    p.add_argument(
        "--epsilon", type=one_epsilon, help="each owner's budget for the job (inf: no noise; required to train)"
    )
    p.add_argument("--out", type=Path, default=Path("runs"), help="directory that receives the run directory")
    p.add_argument(
        "--register-timeout", type=positive_float, default=300.0, help="seconds to wait for the owners to register"
    )
    p.add_argument("--round-timeout", type=positive_float, default=600.0, help="seconds a round may take")
    p.add_argument(
        "--node-timeout", type=positive_float, default=15.0, help="seconds a silent node keeps its place in a round"
    )
    serving = p.add_mutually_exclusive_group()
    serving.add_argument(
        "--serve",
        action="store_true",
        help="after training, release the owner nodes and keep serving Predict until SIGTERM",
    )
    p.add_argument(
        "--journal",
        type=Path,
        default=None,
        help="bdt only: checkpoint every round in this SQLite file, so a killed coordinator can --resume",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the job the --journal file holds (same task, data set, epsilon, seed and owners)",
    )
    serving.add_argument(
        "--load-model",
        type=Path,
        help="serve this saved model.json (from a run directory) under the id it was trained as, instead of "
        "training, until SIGTERM; takes no training flags (only --listen and --certs/--insecure)",
    )
    add_learning(p)
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--schema",
        type=Path,
        help="federation schema (TOML or JSON: features, public bounds, class values, optional public test "
        "file) for owners' own data; sent to every owner at registration (default: --dataset's schema)",
    )
    add_data(p, dataset_group=source)
    p.set_defaults(func=_coordinator)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``privfed`` command line: every command, or only ``command``'s when it names one.

    A process builds only the parser of the command it runs (:func:`main`): the others' flags
    import their defaults' modules (data sets, experiments, learners), which an owner node never
    needs, and ``privfed owner`` must parse its flags before numpy loads (``privfed.deploy.owner_cli._owner``)."""
    parser = Parser(
        prog="privfed",
        description="Federated learning with local differential privacy: owners keep their rows and "
        "release only noised, ledger-debited shares to an untrusted coordinator. "
        "`privfed COMMAND --help` lists each command's options with their defaults.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action=VersionAction, help="print privfed's version and git commit, then exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, add in _COMMANDS.items():
        if command not in _COMMANDS or command == name:
            add(sub)
    return parser


def _add_serve(sub: argparse._SubParsersAction) -> None:
    from privfed.deploy.service_cli import add_serve

    add_serve(sub, add_data=add_data)


def _add_submit(sub: argparse._SubParsersAction) -> None:
    from privfed.deploy.service_cli import add_submit

    add_submit(sub)


def _add_jobs(sub: argparse._SubParsersAction) -> None:
    from privfed.deploy.service_cli import add_jobs

    add_jobs(sub)


def _add_job(sub: argparse._SubParsersAction) -> None:
    from privfed.deploy.service_cli import add_job

    add_job(sub)


def _from(module: str, name: str) -> Callable[[argparse._SubParsersAction], None]:
    """The parser builder ``module.name``, imported when its command's parser is built: a node
    never imports the other commands' modules (``privfed owner`` neither ``admin_cli`` nor
    ``offline_cli``; issue 27, idle RSS)."""

    def add(sub: argparse._SubParsersAction) -> None:
        getattr(importlib.import_module(module), name)(sub)

    return add


#: ``privfed COMMAND`` -> the function that adds its parser.
_COMMANDS = {
    "simulate": _add_simulate,
    "coordinator": _add_coordinator,
    "owner": _from("privfed.deploy.owner_cli", "add_owner"),
    "query": _from("privfed.deploy.owner_cli", "add_query"),
    "export": _from("privfed.deploy.offline_cli", "add_export"),
    "certs": _from("privfed.deploy.admin_cli", "add_certs"),
    "ledger": _from("privfed.deploy.admin_cli", "add_ledger"),
    "experiment": _from("privfed.deploy.offline_cli", "add_experiment"),
    "reproduce": _from("privfed.deploy.offline_cli", "add_reproduce"),
    "serve": _add_serve,
    "submit": _add_submit,
    "jobs": _add_jobs,
    "job": _add_job,
}


def job_config(args: argparse.Namespace, **overrides: Any) -> JobConfig:
    """The :class:`~privfed.server.config.JobConfig` of a parsed command line: every field whose
    flag the command has and was given (or has a default), then ``overrides``; the rest keep the
    defaults. Validation (ConfigError naming the flag, a parameter of another task) happens in
    :meth:`JobConfig.from_flat`."""
    from privfed.server.config import FLAGS, JobConfig

    values = {}
    for name, flag in FLAGS.items():
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if value is not None:
            values[name] = value
    return JobConfig.from_flat(**(values | overrides))


def simulation_config(args: argparse.Namespace) -> SimulationConfig:
    """The :class:`~privfed.deploy.simulation_config.SimulationConfig` of a parsed ``privfed simulate``:
    the ``--config`` file's settings, overridden by every flag given with a value other than its
    default (without ``--config``: every flag). A flag's key is its argparse destination, which is
    also its TOML key (:data:`~privfed.deploy.simulation_config.KEYS`)."""
    from privfed.deploy.simulation_config import KEYS, SimulationConfig

    def settings(ns: argparse.Namespace) -> dict[str, Any]:
        values = {key: getattr(ns, key) for key in KEYS}
        values["data"] = list(values["data"]) if values["data"] else None
        return {k: v for k, v in values.items() if v is not None}

    given = settings(args)
    if args.config is None:
        return SimulationConfig.from_mapping(given)
    defaults = settings(build_parser().parse_args(["simulate"]))
    doc = SimulationConfig.toml_file(args.config)
    return SimulationConfig.from_mapping(
        doc | {k: v for k, v in given.items() if v != defaults.get(k)}, source=str(args.config)
    )


def _simulate(args: argparse.Namespace) -> int:
    from privfed.deploy.simulate import simulate

    config = simulation_config(args)  # validated before any process starts
    with quiet_unless(args.verbose):  # the progress bars (or one line per round) and one line per epsilon say enough
        simulate(config, results=sys.stdout)  # its results on stdout, as the coordinator's (W15-12)
    return 0


#: ``privfed coordinator`` flags that still mean something with ``--load-model``.
SERVING_FLAGS = ("listen", "certs", "insecure", "revoked_certificates", "load_model", "verbose", "command", "func")


def _coordinator(args: argparse.Namespace) -> int:
    from privfed.server.main import run_coordinator, serve_saved_model
    from privfed.server.revocation import RevokedCertificates

    revoked = RevokedCertificates(revoked_certificates(args), optional=args.revoked_certificates is None).revoked
    if args.load_model is not None:
        defaults = vars(build_parser().parse_args(["coordinator", "--insecure"]))
        given = sorted(k for k, v in vars(args).items() if k not in SERVING_FLAGS and v != defaults.get(k))
        if given:
            flags = ", ".join("--" + k.replace("_", "-") for k in given)
            verb, them = ("does", "it") if len(given) == 1 else ("do", "them")
            raise PrivfedError(f"--load-model serves a saved model; {flags} {verb} nothing with it (drop {them})")
        stop = threading.Event()
        set_on_signals(stop)  # not Event.set in the handler: it can wait for itself (W11-11)
        return serve_saved_model(args.load_model, args.listen, _tls(args, "coordinator"), stop=stop, revoked=revoked)
    missing = [flag for flag, value in (("--owners", args.owners), ("--epsilon", args.epsilon)) if value is None]
    if missing:
        raise PrivfedError(f"{' and '.join(missing)} required to train (or --load-model FILE to serve a saved model)")
    config = job_config(args)
    from privfed.deploy.child import reference_in_child

    tls = _tls(args, "coordinator")
    return run_coordinator(config, tls, reference=lambda: reference_in_child(config), revoked=revoked)


#: The commands whose process lives as long as a job and allocates by the million, an owner node or a
#: coordinator: their cyclic collector runs at :data:`~privfed.common.gc_thresholds.GC_THRESHOLDS`.
LONG_LIVED = frozenset({"owner", "coordinator", "simulate", "serve"})


def _in_words(exc: Exception) -> str:
    """An error's line: an OSError about a file as "path: No such file or directory", not Python's
    "[Errno 2] No such file or directory: 'path'"."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {reason(exc)}"
    return reason(exc)


def main(argv: list[str] | None = None) -> int:
    """``privfed``: parse, run one command, map every expected failure to one line and exit 2."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # Until a command installs its own graceful handler, SIGTERM means "stop, nothing started".
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if not {"-v", "--verbose"} & set(argv):  # gRPC's C core logs e.g. a failed bind on its own lines
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    name = next((a for a in argv if not a.startswith("-")), None)  # the command: the top level has no valued flag
    if name in ("coordinator", "serve") and not {"--insecure", "-v", "--verbose"} & set(argv):
        from privfed.server.handshakes import log_rejected_handshakes

        log_rejected_handshakes()  # a log line per rejected TLS handshake: before the parser imports gRPC
    args = build_parser(name).parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    command = args.command + (f" {args.ledger_command}" if args.command == "ledger" else "")
    try:
        with raised_gc_thresholds() if args.command in LONG_LIVED else contextlib.nullcontext():
            return args.func(args)
    except BrokenPipeError:  # the reader went away (`privfed ledger show | head`): what it read was all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's last flush does not fail again
        return 0
    except (PrivfedError, OSError) as exc:  # OSError: an unreadable, missing or unwritable file or directory
        print(f"privfed {command}: error: {_in_words(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"privfed {command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
