"""LDP-boosting experiments (seed 002, Wang & Chang, §4.2-4.3, Figs. 10-14).

``privfed experiment stump-hit-rate | bdt-error | boosted-ncc [--quick] --out DIR``

All three drive :mod:`privfed.common.boosting` in-process (:func:`~privfed.common.boosting.simulation.simulate`):
the owner releases, the coordinator's selection and SAMME steps are the functions the networked federation
calls; only the transport is missing (the secure sums are plain float sums by default, ``--secure-sum ring``
runs the ring state machines; they agree up to the fixed-point rounding, see
:mod:`privfed.common.boosting.simulation`).

The experiments: :mod:`privfed.deploy.experiments.stump_hit_rate` (Figs. 11-12, with the measured share
encodings) and :mod:`privfed.deploy.experiments.boosting_curves` (bdt-error, Figs. 13-14, and boosted-ncc,
Fig. 10, with the measurements behind the boosting defaults); their data sets are
:mod:`privfed.deploy.experiments.boosting_data`. This module holds their command line and report.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privfed.common.boosting.params import (
    BUDGET_SPLITS,
    EVAL_FRACTION,
    EVAL_MECHANISMS,
    EVAL_ROW_BOUND,
    SHARE_GROUPS,
)
from privfed.common.errors import ConfigError
from privfed.common.learners.stump_encodings import STUMP_ENCODINGS
from privfed.common.mechanisms import MECHANISMS
from privfed.deploy.argtypes import epsilon_list
from privfed.deploy.experiments.boosting_curves import run_curves
from privfed.deploy.experiments.boosting_data import DATASETS
from privfed.deploy.experiments.stump_hit_rate import HIT_ENCODINGS, run_hit_rate
from privfed.server.report import host_info, write_json

NAMES = ("stump-hit-rate", "bdt-error", "boosted-ncc")
PAPER = {
    "stump-hit-rate": "seed 002 Fig. 12: top-3 hit rate of PM almost 100% once eps reaches 3.0 (10,000 owners, "
    "synthetic); top-k rates increase with eps; PM above Duchi",
    "bdt-error": "seed 002 Figs. 13-14: private BDT has a similar misclassification rate to the non-private one "
    "for every number of stumps (synthetic, MNIST 4 vs 9)",
    "boosted-ncc": "seed 002 Fig. 10: at eps 3 and 5 the first-round NCC is worse than the noise-free one, and "
    "boosting lowers the misclassification below the first round",
}
DEFAULTS = {  # experiment: (runs, quick runs, epsilons, quick epsilons, datasets, mechanisms)
    "stump-hit-rate": (100, 20, tuple(range(1, 10)), (1, 3, 5, 7, 9), ("synthetic",), ("pm", "duchi")),
    "bdt-error": (10, 2, (1, 3, 5), (1, 3, 5), ("synthetic", "mnist4v9"), ("pm",)),
    "boosted-ncc": (10, 2, (3, 5), (3, 5), ("synthetic", "mnist-box"), ("pm",)),
}


def _csv(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        try:
            return [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__} values, got {text!r}") from None

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, default=Path("runs"), help="writes report.json and PNGs here (default runs/)"
    )
    parser.add_argument("--quick", action="store_true", help="small fast variant (< 30 s on 2 cores)")
    parser.add_argument("--seed", type=int, default=0, help="data seed; runs use seed+run for splits and noise")
    parser.add_argument("--runs", type=int, help="repetitions (hit rate 100, others 10; --quick 20 / 2)")
    parser.add_argument(
        "--epsilon",
        dest="epsilons",
        type=epsilon_list,
        help="comma-separated eps, inf allowed in bdt-error/boosted-ncc (hit rate 1..9; bdt 1,3,5; ncc 3,5)",
    )
    parser.add_argument(
        "--mechanisms", type=_csv(str), help=f"comma-separated, of {MECHANISMS} (hit rate pm,duchi; others pm)"
    )
    parser.add_argument("--datasets", type=_csv(str), help=f"comma-separated, of {DATASETS}")
    parser.add_argument(
        "--encodings",
        type=_csv(str),
        default=list(HIT_ENCODINGS),
        help=f"stump-hit-rate: share encodings, comma-separated, of {HIT_ENCODINGS} (default all; "
        "table and pair once per --mechanisms)",
    )
    parser.add_argument("--owners", type=int, default=10000, help="synthetic: owners = training rows (10^4)")
    parser.add_argument("--rounds", type=int, default=10, help="boosting rounds T (default 10)")
    parser.add_argument("--n-bins", type=int, default=2, help="stump thresholds lo + b(hi-lo)/B, b<B (default 2)")
    parser.add_argument(
        "--weight-bound",
        type=float,
        default=None,
        help="shares: public bound on an owner's (row's, for NCC) weight in rows (default --rows-per-owner, "
        "measured best)",
    )
    parser.add_argument(
        "--eval-row-bound",
        type=float,
        default=EVAL_ROW_BOUND,
        help="evaluations: public bound b on a row's weight; noise Lap(2b/eps_e) per owner whatever "
        f"its rows (default {EVAL_ROW_BOUND:g})",
    )
    parser.add_argument(
        "--rows-per-owner",
        type=int,
        default=1,
        help="bdt-error, boosted-ncc: rows each owner holds (default 1, the paper's setting; "
        "--owners stays the number of training rows)",
    )
    parser.add_argument(
        "--labels",
        choices=("joint", "rr", "clear"),
        default="joint",
        help="NCC label scheme (default joint: one k-RR report of (label, sign) per row; rr: the label by "
        "randomized response at 0.2 of eps; the paper's clear labels are not private)",
    )
    parser.add_argument(
        "--eval-fraction",
        type=float,
        default=EVAL_FRACTION,
        help=f"share of each owner's epsilon for its noisy (err_sum, w_sum) releases (default {EVAL_FRACTION:g})",
    )
    parser.add_argument(
        "--eval-groups",
        choices=("disjoint", "all"),
        default="disjoint",
        help="who evaluates a round: each owner once at the whole evaluation budget (default), "
        "or every owner every round at 1/T of it",
    )
    parser.add_argument(
        "--share-groups",
        choices=SHARE_GROUPS,
        default="disjoint",
        help="who releases a share in a round: a fresh group of owners/T at the whole share epsilon (default), "
        "or every owner every round at 1/T of it",
    )
    parser.add_argument(
        "--budget-split",
        choices=BUDGET_SPLITS,
        default="epsilon",
        help="epsilon: every owner shares and evaluates, ε split by --eval-fraction (default); owners: "
        "--eval-fraction of the owners only evaluate, the others only share, each at the whole ε",
    )
    parser.add_argument(
        "--eval-mechanism",
        choices=EVAL_MECHANISMS,
        default=None,
        help="the evaluation release: laplace (row-level) or rr (randomized response on a sampled category, "
        "owner-level); default: the smaller worst-case noise for the owners' rows (rr for one row)",
    )
    parser.add_argument(
        "--stump-encoding",
        choices=STUMP_ENCODINGS,
        default=None,
        help="bdt-error: the owners' stump share encoding (default: signs for two classes, cells for more)",
    )
    parser.add_argument("--secure-sum", choices=("plain", "ring"), default="plain")
    parser.add_argument("--test-fraction", type=float, default=0.2)


def _resolve(args: argparse.Namespace) -> None:
    if args.experiment not in NAMES:
        raise ConfigError(f"unknown experiment {args.experiment!r}; choose one of {NAMES}")
    runs, quick_runs, eps, quick_eps, datasets, mechs = DEFAULTS[args.experiment]
    args.runs = args.runs or (quick_runs if args.quick else runs)
    args.epsilons = args.epsilons or list(quick_eps if args.quick else eps)
    args.datasets = args.datasets or list(datasets)
    args.mechanisms = args.mechanisms or list(mechs)
    bad = [m for m in args.mechanisms if m not in MECHANISMS] + [d for d in args.datasets if d not in DATASETS]
    bad += [e for e in args.encodings if e not in HIT_ENCODINGS]
    if bad or args.runs < 1 or any(not e > 0 for e in args.epsilons):
        raise ConfigError(
            f"invalid --mechanisms/--datasets/--encodings {bad}, --runs {args.runs} or --epsilon {args.epsilons}"
        )


def out_dir(out: Path) -> Path:
    """``--out``, created: an experiment writes ``report.json`` and its PNGs straight into it
    (``make reproduce`` runs ``privfed experiment NAME ... --out DIR`` and reads ``DIR/report.json``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def write_report(run_dir: Path, args: argparse.Namespace, paper: str, start: float, results: dict[str, Any]) -> None:
    """``run_dir/report.json``: the experiment, its configuration, the host, the paper's claim, the time and results."""
    write_json(
        run_dir / "report.json",
        {
            "experiment": args.experiment,
            "config": {k: v for k, v in vars(args).items() if k != "func"},
            "host": host_info(),
            "paper": paper,
            "seconds": time.perf_counter() - start,
            "results": results,
        },
    )


def run(args: argparse.Namespace) -> Path:
    _resolve(args)
    run_dir = out_dir(args.out)
    start = time.perf_counter()
    if args.experiment == "stump-hit-rate":
        results = run_hit_rate(args, run_dir)
    else:
        results = run_curves(args, run_dir, "stump" if args.experiment == "bdt-error" else "ncc")
    write_report(run_dir, args, PAPER[args.experiment], start, results)
    print(f"wrote {run_dir}")
    return run_dir
