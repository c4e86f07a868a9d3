"""The ``privfed`` command line: simulate, coordinator, owner, query, certs, ledger, experiment.

One convention for every command: ε lists are ``--epsilon 0.5,1,inf``; every ``--help`` shows
defaults and units; a bad argument, a taken port or an unreadable file is one line on stderr
and exit code 2 (no traceback). Only this layer parses flags: it builds the typed configs
(:class:`~privfed.server.config.JobConfig`, :class:`~privfed.owner.main.OwnerConfig`) that
``server/`` and ``owner/`` run.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from privfed.common.errors import PrivfedError
from privfed.deploy.admin_cli import add_certs, add_ledger
from privfed.deploy.argtypes import address, epsilon_list, listen_address, one_epsilon, positive_float, positive_int
from privfed.deploy.tlsflags import add_tls as _add_tls
from privfed.deploy.tlsflags import tls_files as _tls

if TYPE_CHECKING:
    from privfed.deploy.simulation_config import SimulationConfig
    from privfed.owner.main import OwnerConfig
    from privfed.server.config import JobConfig

DATASETS = "synthetic, digits, breast_cancer, mnist5k"


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: X)`` after a flag's help, unless the flag is required, has no default
    value (None, False, an empty list) or its help already says what the default means."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if action.required or default is None or default is False or default == [] or "default" in text:
            return text
        return super()._get_help_string(action) or ""


class _Parser(argparse.ArgumentParser):
    """argparse with privfed's conventions: defaults in every ``--help``, one-line errors (exit 2),
    and values such as ``-1:16`` (negative bounds) taken as values, not as unknown flags."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)
        # argparse reads "-1:16" as an option because it starts with "-"; a leading negative
        # number followed by ":" (a lo:hi range) is a value. Only "--flags" are options here.
        self._negative_number_matcher = re.compile(r"^-\d+$|^-\d*\.\d+$|^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?:")

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _VersionAction(argparse.Action):
    """``--version``: privfed's version and, from a git checkout, its commit (looked up only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from privfed.server.report import version_info

        info = version_info()
        commit = f" (commit {info['commit']})" if info["commit"] else ""
        print(f"privfed {info['privfed'] or 'unknown version'}{commit}")
        parser.exit(0)


def _add_learning(p: argparse.ArgumentParser) -> None:
    """``--task``, the owners' rows and every task's parameters, one flag each, from their tables
    (``server/parameters.py``): its text read by the parameter's constraint, its choices and its help, with
    its default per task (the parameter objects' fields) written into the help. A flag not given is None,
    so that only the flags given reach the job (a parameter of another task is refused: ``JobConfig.from_flat``).
    (Imported here: the tables load the learners and numpy, which only the commands that learn need;
    ``privfed owner`` parses its flags before numpy loads, :mod:`privfed.deploy.threads`.)"""
    from privfed.server.parameters import LEARNING, OWNER_ROWS, TASKS

    p.add_argument("--task", choices=TASKS, default="ncc", help="what the federation learns (README, Tasks)")
    for name, param in (OWNER_ROWS | LEARNING).items():
        parse = param.check.parse
        assert param.flag is not None and parse is not None  # every task parameter has a flag
        p.add_argument(param.flag, type=parse, choices=param.check.choices, help=_with_defaults(name, param.help))


def _with_defaults(name: str, help: str) -> str:
    """``help`` and the parameter's default in each task that takes it, unless the help says it already."""
    from dataclasses import fields

    from privfed.server.parameters import PARAMS

    if "default" in help:
        return help
    defaults = {t: f.default for t, cls in PARAMS.items() for f in fields(cls) if f.name == name}
    if not defaults or None in defaults.values():
        return help
    if len(set(map(str, defaults.values()))) == 1:
        return f"{help} (default: {next(iter(defaults.values()))})"
    return f"{help} (default: {', '.join(f'{v} for {t}' for t, v in defaults.items())})"


def _add_data(p: argparse.ArgumentParser, *, dataset_group: argparse._MutuallyExclusiveGroup | None = None) -> None:
    (dataset_group or p).add_argument("--dataset", default="synthetic", help=f"built-in data set: {DATASETS}")
    p.add_argument(
        "--n-samples",
        type=int,
        default=None,
        help="rows of the synthetic data set (default: its own 10000; privfed simulate: enough for one "
        "training row per owner when --owners needs more)",
    )
    p.add_argument("--seed", type=int, default=0, help="split/partition seed (and noise seed with --rng seeded)")
    p.add_argument("--test-fraction", type=float, default=0.2, help="share of the rows in the public test split")


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

    p.add_argument("--owners", type=positive_int, default=DEFAULT_OWNERS, help="logical owners N")
    p.add_argument(
        "--min-owners",
        type=positive_int,
        help="quorum: a federation fails, before later rounds spend anyone's budget, once fewer owners are still "
        "taking part; default: 1 for the one-round ncc, nb, lr --solver local and bdt --release marginals, half "
        "of --owners for the others",
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
        "--node-timeout", type=positive_float, default=15.0, help="seconds a silent node keeps its place in a round"
    )
    p.add_argument("--round-timeout", type=positive_float, default=600.0, help="seconds a round may take")
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars even on a terminal (without a terminal: one log line per round anyway)",
    )
    _add_learning(p)
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--schema",
        type=Path,
        help="federation schema (TOML or JSON) of the --data files, sent to every owner at registration",
    )
    _add_data(p, dataset_group=source)
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
    p.add_argument("--owners", type=positive_int, help="logical owners to wait for (required to train)")
    p.add_argument(
        "--min-owners",
        type=positive_int,
        help="quorum: the job fails, before later rounds spend anyone's budget, once fewer owners are still "
        "taking part (not refused, rejected or lost); default: 1 for the one-round ncc, nb, lr --solver local and "
        "bdt --release marginals, half of --owners for the others",
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
    _add_learning(p)
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--schema",
        type=Path,
        help="federation schema (TOML or JSON: features, public bounds, class values, optional public test "
        "file) for owners' own data; sent to every owner at registration (default: --dataset's schema)",
    )
    _add_data(p, dataset_group=source)
    p.set_defaults(func=_coordinator)


def _add_owner(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "owner",
        help="run an owner node hosting one or many logical owners",
        description="Serve a coordinator with this node's logical owners: the shards of a built-in data "
        "set (--dataset) or the node's own rows (--data). Every release is debited in --ledger first.",
    )
    p.add_argument("--coordinator", type=address, required=True, help="HOST:PORT of the coordinator")
    p.add_argument(
        "--name",
        required=True,
        help="node identity: the CN of its certificate (e.g. hospital-a from privfed certs --names, or owner-<i>); "
        "its owners' ids are NAME.o00000, NAME.o00001, ...",
    )
    _add_tls(p)
    source = p.add_mutually_exclusive_group()
    source.add_argument("--data", help="this owner's own rows (CSV: features then label; or NPZ with X, y)")
    declared = p.add_mutually_exclusive_group()
    declared.add_argument(
        "--schema",
        type=Path,
        help="the federation schema file; must be the coordinator's (same sha256). Default: the schema the "
        "coordinator sends at registration",
    )
    declared.add_argument(
        "--bounds",
        help="shorthand schema for --data: public bounds lo:hi (e.g. -1:16) or a JSON file {lo: [...], hi: [...]}, "
        "with class values 0..K-1 (--classes); must match the coordinator's schema",
    )
    p.add_argument(
        "--classes",
        type=int,
        default=2,
        help="with --bounds: the public number of classes K; labels must be 0..K-1",
    )
    p.add_argument(
        "--allow-clear-labels",
        action="store_true",
        help="answer tasks that ask for labels in the clear (NCC, boosting with the ncc base); each such "
        "release is recorded in the ledger as non-private. Off: they are refused",
    )
    p.add_argument("--n-owners", type=positive_int, default=1, help="logical owners in the whole federation partition")
    p.add_argument("--shards", default="1", help="logical owners hosted here: A:B (owners A..B-1), or a count K")
    p.add_argument("--ledger", type=Path, required=True, help="SQLite privacy ledger of this node")
    p.add_argument(
        "--epsilon-budget", type=float, required=True, help="each hosted owner's total epsilon (inf: unlimited)"
    )
    p.add_argument("--delta-budget", type=float, default=0.0, help="each hosted owner's total delta (DP-PCA needs > 0)")
    p.add_argument("--rng", choices=("seeded", "secure"), default="secure", help="noise stream (seeded: tests only)")
    p.add_argument(
        "--connect-timeout", type=positive_float, default=120.0, help="seconds to keep trying to reach the coordinator"
    )
    p.add_argument("--target-name", help="TLS name to expect from the coordinator when dialing an address")
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="BLAS/OpenMP threads of this node's computations. Default: OPENBLAS_NUM_THREADS or OMP_NUM_THREADS "
        "if set, else every CPU this process may use (a node alone on its machine has them to itself, and its "
        "larger products, e.g. d x d covariances for DP-PCA, gain from them). Launchers that start several nodes "
        "on one host give each its share (privfed simulate, owner_entry: CPUs // nodes, at least 1)",
    )
    p.add_argument(
        "--policy",
        type=Path,
        help="the node's policy (TOML: tasks, max_epsilon_per_job, max_delta_per_job, max_epsilon_per_day, "
        "max_epsilon_total, data_users, schema_sha256); with it the node is a daemon serving job after job "
        "(privfed serve) until SIGTERM. Without it: one job, then exit",
    )
    _add_data(p, dataset_group=source)
    p.set_defaults(func=_owner)


def _add_query(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "query",
        help="clean query rows locally (projection onto what the model reads by default; "
        "null-space cleaning on opt-in), then ask a served model for labels",
    )
    from privfed.deploy.query_flags import add_arguments as add_query_arguments

    add_query_arguments(p)
    p.set_defaults(func=_query)


def _add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a trained model (model.json) as a scikit-learn classifier file, used without the network",
        description="Read a model.json a job wrote and write it as a pickled scikit-learn classifier "
        "(privfed.TrainedClassifier: predict gives label values, predict_proba where the model has "
        "probabilities, raw rows read by the federation schema). Load it with joblib.load or pickle.load.",
    )
    p.add_argument("--model", type=Path, required=True, help="a model.json from a run directory")
    p.add_argument("--out", type=Path, required=True, help="the estimator file to write (e.g. model.pkl)")
    p.set_defaults(func=_export)


def _add_experiment(sub: argparse._SubParsersAction) -> None:
    from privfed.deploy.experiments import EXPERIMENTS

    p = sub.add_parser(
        "experiment",
        help="run a named experiment (JSON + PNG); privfed experiment NAME --help for its options",
        description="Run a named experiment; each writes report.json and PNGs. "
        "`privfed experiment NAME --help` lists NAME's own options.",
    )
    p.add_argument("experiment", metavar="NAME", choices=sorted(EXPERIMENTS), help=", ".join(sorted(EXPERIMENTS)))
    p.add_argument("options", nargs=argparse.REMAINDER, help="the experiment's own options")
    p.set_defaults(func=_experiment)


def _add_reproduce(sub: argparse._SubParsersAction) -> None:
    from privfed.deploy import reproduce

    p = sub.add_parser("reproduce", help="every table and figure of the seed papers in one report (README)")
    reproduce.add_arguments(p)
    p.set_defaults(func=reproduce.run)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``privfed`` command line: every command, or only ``command``'s when it names one.

    A process builds only the parser of the command it runs (:func:`main`): the others' flags
    import their defaults' modules (data sets, experiments, learners), which an owner node never
    needs, and ``privfed owner`` must parse its flags before numpy loads (:func:`_owner`)."""
    parser = _Parser(
        prog="privfed",
        description="Federated learning with local differential privacy: owners keep their rows and "
        "release only noised, ledger-debited shares to an untrusted coordinator. "
        "`privfed COMMAND --help` lists each command's options with their defaults.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action=_VersionAction, help="print privfed's version and git commit, then exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, add in _COMMANDS.items():
        if command not in _COMMANDS or command == name:
            add(sub)
    return parser


def _add_serve(sub: argparse._SubParsersAction) -> None:
    from privfed.deploy.service_cli import add_serve

    add_serve(sub, add_data=_add_data)


def _add_submit(sub: argparse._SubParsersAction) -> None:
    from privfed.deploy.service_cli import add_submit

    add_submit(sub)


def _add_jobs(sub: argparse._SubParsersAction) -> None:
    from privfed.deploy.service_cli import add_jobs

    add_jobs(sub)


def _add_job(sub: argparse._SubParsersAction) -> None:
    from privfed.deploy.service_cli import add_job

    add_job(sub)


#: ``privfed COMMAND`` -> the function that adds its parser.
_COMMANDS = {
    "simulate": _add_simulate,
    "coordinator": _add_coordinator,
    "owner": _add_owner,
    "query": _add_query,
    "export": _add_export,
    "certs": add_certs,
    "ledger": add_ledger,
    "experiment": _add_experiment,
    "reproduce": _add_reproduce,
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


def owner_config(args: argparse.Namespace) -> OwnerConfig:
    """The :class:`~privfed.owner.main.OwnerConfig` of a parsed ``privfed owner`` command line."""
    from dataclasses import fields

    from privfed.owner.main import OwnerConfig

    return OwnerConfig(**{f.name: getattr(args, f.name) for f in fields(OwnerConfig)})


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
    text = args.config.read_text(encoding="utf-8")
    doc = SimulationConfig.toml_mapping(text, source=str(args.config))
    return SimulationConfig.from_mapping(
        doc | {k: v for k, v in given.items() if v != defaults.get(k)}, source=str(args.config)
    )


def _simulate(args: argparse.Namespace) -> int:
    from privfed.deploy.simulate import simulate

    config = simulation_config(args)  # validated before any process starts
    if not args.verbose:  # the progress bars (or one line per round) and one line per epsilon say enough
        logging.getLogger("privfed").setLevel(logging.WARNING)
    simulate(config)
    return 0


#: ``privfed coordinator`` flags that still mean something with ``--load-model``.
SERVING_FLAGS = ("listen", "certs", "insecure", "load_model", "verbose", "command", "func")


def _coordinator(args: argparse.Namespace) -> int:
    from privfed.server.main import run_coordinator, serve_saved_model

    if args.load_model is not None:
        defaults = vars(build_parser().parse_args(["coordinator", "--insecure"]))
        given = sorted(k for k, v in vars(args).items() if k not in SERVING_FLAGS and v != defaults.get(k))
        if given:
            flags = ", ".join("--" + k.replace("_", "-") for k in given)
            raise PrivfedError(f"--load-model serves a saved model; {flags} do nothing with it (drop them)")
        return serve_saved_model(args.load_model, args.listen, _tls(args, "coordinator"))
    missing = [flag for flag, value in (("--owners", args.owners), ("--epsilon", args.epsilon)) if value is None]
    if missing:
        raise PrivfedError(f"{' and '.join(missing)} required to train (or --load-model FILE to serve a saved model)")
    config = job_config(args)
    return run_coordinator(config, _tls(args, "coordinator"), reference=lambda: _reference(config))


def _reference(config: JobConfig) -> dict[str, Any]:
    """The coordinator report's non-private reference, fitted once training is over in a child
    process (issue 27, item 2): the coordinator never holds the reference's learners and data."""
    from privfed.deploy.child import call_in_child

    reference: dict[str, Any] = call_in_child("privfed.deploy.reference:coordinator_reference", config)
    return reference


def _owner(args: argparse.Namespace) -> int:
    from privfed.deploy.threads import host_threads, pin_threads

    pin_threads(args.threads or host_threads())  # first: numpy is not loaded yet (build_parser("owner") needs none)
    from privfed.common.identity import check_node_name
    from privfed.owner.main import run_owner

    check_node_name(args.name)
    return run_owner(owner_config(args), _tls(args, args.name))


def _query(args: argparse.Namespace) -> int:
    from privfed.deploy.query_flags import query_config
    from privfed.owner.query import run_query

    return run_query(query_config(args), _tls(args, args.name))


def _export(args: argparse.Namespace) -> int:
    import pickle

    from privfed.common.learners.exported import TrainedClassifier

    estimator = TrainedClassifier.from_file(args.model)
    partial = args.out.with_name(args.out.name + ".partial")
    partial.write_bytes(pickle.dumps(estimator, protocol=pickle.HIGHEST_PROTOCOL))
    partial.replace(args.out)
    kinds = "predict, predict_proba" if hasattr(estimator, "predict_proba") else "predict (no probabilities)"
    print(
        f"wrote {args.out}: model {estimator.model_id_ or '(no id)'} as a scikit-learn classifier "
        f"({kinds}; classes {estimator.classes_.tolist()}); load it with joblib.load or pickle.load"
    )
    return 0


def _experiment(args: argparse.Namespace) -> int:
    from privfed.deploy.experiments import EXPERIMENTS

    module = importlib.import_module(EXPERIMENTS[args.experiment])
    sub = _Parser(
        prog=f"privfed experiment {args.experiment}",
        description=(module.__doc__ or "").strip().split("\n\n")[0] or None,
    )
    module.add_arguments(sub)
    sub_args = sub.parse_args(args.options)
    sub_args.experiment = args.experiment
    path = module.run(sub_args)
    print(f"results: {path}")
    return 0


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
        return args.func(args)
    except BrokenPipeError:  # the reader went away (`privfed ledger show | head`): what it read was all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's last flush does not fail again
        return 0
    except (PrivfedError, OSError) as exc:  # OSError: an unreadable, missing or unwritable file or directory
        print(f"privfed {command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"privfed {command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
