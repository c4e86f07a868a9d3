"""The ``privfed`` command line: coordinator, owner, certs, simulate, experiment."""

from __future__ import annotations

import argparse
import importlib
import logging
import math
import signal
import sys
from pathlib import Path

from privfed.common.errors import PrivfedError

TASK_CHOICES = ("ncc", "lr", "feddpdr", "bdt")


def _epsilons(text: str) -> list[float]:
    try:
        values = [math.inf if v.strip() in ("inf", "∞") else float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--epsilon takes numbers separated by commas (or inf), got {text!r}"
        ) from None
    if not values or any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"every epsilon must be > 0, got {text!r}")
    return values


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _add_learning(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", choices=TASK_CHOICES, default="ncc")
    p.add_argument("--mechanism", choices=("pm", "duchi", "laplace"), default="pm")
    p.add_argument(
        "--labels",
        choices=("clear", "rr"),
        default="rr",
        help="ncc and bdt with --base ncc: labels by k-ary randomized response (default), or in the "
        "clear (the paper's scheme; owners refuse it unless started with --allow-clear-labels)",
    )
    p.add_argument(
        "--label-fraction", type=float, default=0.2, help="share of epsilon spent on labels with --labels rr"
    )
    p.add_argument("--param-bound", type=_positive_float, default=4.0, help="lr only: public clip bound of parameters")
    p.add_argument("--C", type=_positive_float, default=1.0, help="lr only: inverse L2 strength of local fits")
    p.add_argument("--k", type=int, default=20, help="feddpdr only: subspace dimension")
    p.add_argument("--delta", type=float, default=1e-5, help="feddpdr only: delta of the DP-PCA phase")
    p.add_argument("--lam", type=_positive_float, default=0.01, help="feddpdr only: SVM regularisation")
    p.add_argument("--base", choices=("stump", "ncc", "lr"), default="stump", help="bdt only: base learner")
    p.add_argument("--rounds", type=int, default=10, help="bdt only: boosting rounds T")
    p.add_argument("--group-size", type=int, default=None, help="bdt only: owners per round (default N // T)")
    p.add_argument("--n-bins", type=int, default=4, help="bdt only: public thresholds per attribute + 1")
    p.add_argument(
        "--weight-bound",
        type=_positive_float,
        default=None,
        help="bdt only: public bound on an owner's total SAMME "
        "weight in a share (mean-1 weights; default: 2 x --rows-per-owner rounded up, else 2, the bound "
        "for one row per owner)",
    )
    p.add_argument(
        "--rows-per-owner",
        type=_positive_float,
        default=None,
        help="bdt only: rows each owner holds, "
        "when that is public configuration; sets the default --weight-bound (simulate computes it)",
    )
    p.add_argument(
        "--eval-fraction",
        type=float,
        default=None,
        help="bdt only: share of epsilon for the noisy (err_sum, w_sum) evaluation releases (default 0.3)",
    )
    p.add_argument(
        "--eval-row-bound",
        type=_positive_float,
        default=None,
        help="bdt only: public bound b on one "
        "row's SAMME weight in an evaluation release; noise Lap(2b/eps_e) whatever the owner's rows (default 1)",
    )
    p.add_argument(
        "--max-owner-rows",
        type=int,
        default=None,
        help="bdt only: public bound on the rows an owner "
        "holds; sizes the ring's range only, never the noise (default 10^6)",
    )
    p.add_argument("--ring-timeout", type=_positive_float, default=None, help="bdt only: seconds per ring")


def _add_data(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", default="synthetic", help="built-in: digits, breast_cancer, synthetic, mnist5k")
    p.add_argument("--n-samples", type=int, default=None, help="rows of the synthetic data set")
    p.add_argument("--seed", type=int, default=0, help="split/partition seed (and noise seed with --rng seeded)")
    p.add_argument("--test-fraction", type=float, default=0.2)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="privfed", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("simulate", help="coordinator + P owner node processes on loopback, once per epsilon")
    p.add_argument("--owners", type=int, default=200, help="logical owners N")
    p.add_argument("--processes", type=int, default=2, help="owner node processes P")
    p.add_argument("--epsilon", type=_epsilons, default=_epsilons("0.5,1,2,4,8"), help="comma-separated list")
    p.add_argument("--out", type=Path, default=Path("runs"))
    p.add_argument("--insecure", action="store_true", help="no TLS (byte-capture tests only)")
    p.add_argument(
        "--rng",
        choices=("seeded", "secure"),
        default="seeded",
        help="owners' noise: seeded from --seed (reproducible simulation) or secure",
    )
    p.add_argument("--node-timeout", type=float, default=15.0)
    p.add_argument("--round-timeout", type=float, default=600.0)
    p.add_argument("--no-progress", action="store_true")
    _add_learning(p)
    _add_data(p)
    p.set_defaults(func=_simulate)

    p = sub.add_parser("coordinator", help="run the coordinator for one job")
    p.add_argument("--listen", default="0.0.0.0:50051")
    p.add_argument("--certs", type=Path, help="directory written by `privfed certs`")
    p.add_argument("--insecure", action="store_true")
    p.add_argument("--owners", type=int, required=True, help="logical owners to wait for")
    p.add_argument("--epsilon", type=float, required=True)
    p.add_argument("--out", type=Path, default=Path("runs"))
    p.add_argument("--register-timeout", type=float, default=300.0)
    p.add_argument("--round-timeout", type=float, default=600.0)
    p.add_argument("--node-timeout", type=float, default=15.0)
    p.add_argument("--serve", action="store_true", help="keep serving Predict after training until SIGTERM")
    p.add_argument(
        "--load-model",
        type=Path,
        help="serve this saved model.json (from a run directory) instead of training; implies --serve",
    )
    _add_learning(p)
    _add_data(p)
    p.set_defaults(func=_coordinator)

    p = sub.add_parser("owner", help="run an owner node hosting one or many logical owners")
    p.add_argument("--coordinator", required=True, help="HOST:PORT")
    p.add_argument("--name", required=True, help="node identity: the CN of its certificate (owner-<i>)")
    p.add_argument("--certs", type=Path)
    p.add_argument("--insecure", action="store_true")
    p.add_argument("--data", help="this owner's own rows (CSV: features then label; or NPZ with X, y)")
    p.add_argument("--bounds", help="public bounds for --data: lo:hi or a JSON file {lo: [...], hi: [...]}")
    p.add_argument(
        "--classes",
        type=int,
        default=2,
        help="with --data: the public number of classes K (default 2); labels must be 0..K-1, a row "
        "with another label is rejected when the file is loaded",
    )
    p.add_argument(
        "--allow-clear-labels",
        action="store_true",
        help="answer tasks that ask for labels in the clear (NCC, boosting with the ncc base); each such "
        "release is recorded in the ledger as non-private. Off by default: they are refused",
    )
    p.add_argument("--n-owners", type=int, default=1, help="logical owners in the whole federation partition")
    p.add_argument("--shards", default="1", help="logical owners hosted here: A:B, or a count K")
    p.add_argument("--ledger", type=Path, required=True, help="SQLite privacy ledger of this node")
    p.add_argument("--epsilon-budget", type=float, required=True)
    p.add_argument("--delta-budget", type=float, default=0.0, help="needed by (ε, δ) releases such as DP-PCA")
    p.add_argument("--rng", choices=("seeded", "secure"), default="secure")
    p.add_argument("--connect-timeout", type=float, default=120.0)
    p.add_argument("--target-name", help="TLS name to expect from the coordinator when dialing an address")
    _add_data(p)
    p.set_defaults(func=_owner)

    p = sub.add_parser(
        "query",
        help="clean query rows locally (projection onto what the model reads by default; "
        "null-space cleaning on opt-in), then ask a served model for labels",
    )
    from privfed.deploy.query_flags import add_arguments as add_query_arguments

    add_query_arguments(p)
    p.set_defaults(func=_query)

    p = sub.add_parser("certs", help="make a federation CA and mTLS certificates")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--owners", type=int, required=True, help="owner node certificates owner-0..owner-<N-1>")
    p.add_argument("--san", action="append", default=[], help="extra coordinator name or IP (repeatable)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--force",
        action="store_true",
        help="replace an existing CA and every key in --out (certificates already handed out stop working)",
    )
    mode.add_argument(
        "--add",
        action="store_true",
        help="keep the CA and existing pairs in --out; issue only the missing ones (e.g. a larger --owners)",
    )
    p.set_defaults(func=_certs)

    p = sub.add_parser("experiment", help="run a named experiment (JSON + PNG)")
    from privfed.deploy.experiments import EXPERIMENTS

    p.add_argument("experiment", choices=sorted(EXPERIMENTS))
    p.set_defaults(func=_experiment)
    return parser


def _tls(args, name: str):
    from privfed.proto.transport import TlsFiles

    if args.insecure:
        return None
    if args.certs is None:
        raise PrivfedError(
            "--certs DIR is required (mTLS is the default); --insecure exists only for byte-capture tests"
        )
    return TlsFiles.in_dir(args.certs, name)


def job_config(args: argparse.Namespace, **overrides):
    """The :class:`~privfed.server.config.JobConfig` of a parsed command line: every field whose
    flag the command has and was given (or has a default), then ``overrides``; the rest keep the
    JobConfig defaults. Validation (ConfigError naming the flag) happens in JobConfig."""
    from privfed.server.config import FLAGS, JobConfig

    values = {}
    for name, flag in FLAGS.items():
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if value is not None:
            values[name] = value
    return JobConfig(**(values | overrides))


def _simulate(args) -> int:
    from privfed.deploy.simulate import simulate

    if args.processes < 1 or args.owners < args.processes:
        raise PrivfedError(f"need 1 <= --processes <= --owners, got {args.processes} and {args.owners}")
    if not args.verbose:  # the progress bars and one line per epsilon say enough
        logging.getLogger("privfed").setLevel(logging.WARNING)
    simulate(args)
    return 0


def _coordinator(args) -> int:
    from privfed.server.main import run_coordinator

    return run_coordinator(job_config(args), _tls(args, "coordinator"))


def _owner(args) -> int:
    from privfed.owner.main import run_owner

    return run_owner(args, _tls(args, args.name))


def _query(args) -> int:
    from privfed.deploy.query_flags import query_config
    from privfed.owner.query import run_query

    return run_query(query_config(args), _tls(args, args.name))


def _certs(args) -> int:
    from privfed.deploy.certs import make_certs

    out = make_certs(args.out, owners=args.owners, sans=args.san, force=args.force, add=args.add)
    what = (
        "issued the missing certificates under the existing CA"
        if args.add
        else f"wrote the CA to {out}/ca (keep it offline)"
    )
    print(f"{what}; one directory per party under {out}: give party X only {out}/X")
    return 0


def _experiment(args) -> int:
    from privfed.deploy.experiments import EXPERIMENTS

    module = importlib.import_module(EXPERIMENTS[args.experiment])
    sub = argparse.ArgumentParser(prog=f"privfed experiment {args.experiment}")
    module.add_arguments(sub)
    sub_args = sub.parse_args(args.rest)
    sub_args.experiment = args.experiment
    path = module.run(sub_args)
    print(f"results: {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    # Until a command installs its own graceful handler, SIGTERM means "stop, nothing started".
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command != "experiment" and rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    try:
        return args.func(args)
    except PrivfedError as exc:
        print(f"privfed {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"privfed {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"privfed {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
