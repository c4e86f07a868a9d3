"""The commands of the ``privfed`` command line that run without a federation: ``privfed experiment`` (a named
experiment, in process), ``privfed reproduce`` (every table and figure of the seed papers in one report) and
``privfed export`` (a trained model.json as a scikit-learn classifier file).
"""

from __future__ import annotations

import argparse
import importlib
import os
from pathlib import Path

from privfed.deploy.cli_parser import Parser
from privfed.deploy.quiet import quiet_unless


def add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a trained model (model.json) as a scikit-learn classifier file, used without the network",
        description="Read a model.json a job wrote and write it as a pickled scikit-learn classifier "
        "(privfed.TrainedClassifier: predict gives label values, predict_proba where the model has "
        "probabilities, raw rows read by the federation schema). Load it with joblib.load or pickle.load.",
    )
    p.add_argument("--model", type=Path, required=True, help="a model.json from a run directory")
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="the estimator file to write (e.g. model.pkl); never over one that exists",
    )
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.set_defaults(func=_export)


def add_experiment(sub: argparse._SubParsersAction) -> None:
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


def add_reproduce(sub: argparse._SubParsersAction) -> None:
    from privfed.deploy import reproduce

    p = sub.add_parser("reproduce", help="every table and figure of the seed papers in one report (README)")
    reproduce.add_arguments(p)
    p.set_defaults(func=reproduce.run)


def _export(args: argparse.Namespace) -> int:
    import pickle

    from privfed.common.errors import ConfigError
    from privfed.common.learners.exported import TrainedClassifier

    if not args.out.parent.is_dir():
        raise ConfigError(f"--out {args.out}: its folder {args.out.parent} does not exist")
    if args.out.is_dir():
        raise ConfigError(f"--out {args.out} is a folder; name the file to write, e.g. {args.out / 'model.pkl'}")
    exists = f"--out {args.out} exists; give another file, or --force to replace it (nothing was written)"
    if args.out.exists() and not args.force:  # before reading the model: an earlier export is not lost (W6-14)
        raise ConfigError(exists)
    estimator = TrainedClassifier.from_file(args.model)
    partial = args.out.with_name(args.out.name + ".partial")
    try:
        partial.write_bytes(pickle.dumps(estimator, protocol=pickle.HIGHEST_PROTOCOL))
        if args.force:
            partial.replace(args.out)
        else:
            os.link(partial, args.out)  # never over a file that appeared since the check
    except FileExistsError:
        raise ConfigError(exists) from None
    except OSError as exc:  # a full disk, a folder made meanwhile: no half-written file left behind
        raise ConfigError(f"--out {args.out}: cannot write it ({exc.strerror or exc})") from exc
    finally:
        partial.unlink(missing_ok=True)
    kinds = "predict, predict_proba" if hasattr(estimator, "predict_proba") else "predict (no probabilities)"
    print(
        f"wrote {args.out}: model {estimator.model_id_ or '(no id)'} as a scikit-learn classifier "
        f"({kinds}; classes {estimator.classes_.tolist()}); load it with joblib.load or pickle.load"
    )
    return 0


def _experiment(args: argparse.Namespace) -> int:
    from privfed.deploy.experiments import EXPERIMENTS

    module = importlib.import_module(EXPERIMENTS[args.experiment])
    sub = Parser(
        prog=f"privfed experiment {args.experiment}",
        description=(module.__doc__ or "").strip().split("\n\n")[0] or None,
    )
    module.add_arguments(sub)
    sub_args = sub.parse_args(args.options)
    sub_args.experiment = args.experiment
    with quiet_unless(args.verbose):  # as privfed simulate: the owners' INFO lines (one per owner batch) for -v
        path = module.run(sub_args)
    print(f"results: {path}")
    return 0
