"""``privfed experiment pca-svm``: the non-private baseline of seed 004 (Wang et al., CMC 2024,
§5.1 "Non-Priv": PCA to k dimensions, then a linear SVM, no noise), on the splits of the
FedDPDR experiments.

Same data set and split as ``privfed experiment feddpdr-*`` (``load_builtin``, stratified
``train_test_split`` with test fraction ``--test-fraction`` and seed ``--seed + run``), so
``privfed reproduce`` pairs it with their numbers seed by seed. The pipeline is
:class:`privfed.common.learners.reference.PaperPipeline` (the one ``privfed simulate --task feddpdr``
reports as its reference and ``feddpdr-*`` as ``Non-Priv-paper``): pixels mapped to [0, 1] by the
public bounds, ``PCA(k)`` fitted on all training rows, ``LinearSVC`` (one-vs-rest, squared hinge,
``C = --C``). It is the strong reference a private pipeline is
measured against, not the experiments' own ``Non-Priv`` (their basis and classifier without
noise), which is weaker (issue 21: 0.70-0.72 against 0.86 on MNIST-5k).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from privfed.common.datasets import load_builtin, train_test_split
from privfed.common.errors import ConfigError
from privfed.common.learners.reference import paper_nonprivate_pipeline
from privfed.deploy.experiments.boosting import out_dir, write_report

NAMES = ("pca-svm",)
PAPER = "seed 004 §5.1: Non-Priv, PCA to k = 20 then a linear SVM without noise"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("runs"), help="writes report.json here (default runs/)")
    parser.add_argument(
        "--dataset", choices=("mnist5k", "digits"), default=None, help="default mnist5k (digits with --quick)"
    )
    parser.add_argument("--quick", action="store_true", help="scikit-learn digits, as feddpdr-* --quick")
    parser.add_argument("--runs", type=int, default=5, help="splits, seeds seed..seed+runs-1 (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--k", type=int, default=20, help="PCA dimension (seed 004: 20)")
    parser.add_argument("--C", type=float, default=1.0, help="LinearSVC C (default 1)")
    parser.add_argument("--test-fraction", type=float, default=0.2, help="as feddpdr-* (default 0.2)")


def run(args: argparse.Namespace) -> Path:
    if args.runs < 1 or args.k < 1 or not args.C > 0:
        raise ConfigError(f"--runs and --k must be >= 1 and --C > 0, got {args.runs}, {args.k}, {args.C}")
    start = time.perf_counter()
    ds = load_builtin(args.dataset or ("digits" if args.quick else "mnist5k"))
    accuracy = []
    for r in range(args.runs):
        train, test = train_test_split(ds, test_fraction=args.test_fraction, seed=args.seed + r)
        model = paper_nonprivate_pipeline(train.X, train.y, ds.bounds, args.k, C=args.C, random_state=args.seed + r)
        accuracy.append(model.score(test.X, test.y))
    results = {
        "dataset": ds.name,
        "k": args.k,
        "chance": 1.0 / ds.n_classes,
        "seeds": [args.seed + r for r in range(args.runs)],
        "accuracy": {"mean": float(np.mean(accuracy)), "sd": float(np.std(accuracy)), "values": accuracy},
    }
    run_dir = out_dir(args.out)
    write_report(run_dir, args, PAPER, start, results)
    print(f"pca-svm: {ds.name}, PCA-{args.k} + LinearSVC, accuracy {np.mean(accuracy):.3f} ± {np.std(accuracy):.3f} "
          f"over {args.runs} splits (chance {1 / ds.n_classes:.3f})")  # fmt: skip
    print(f"wrote {run_dir}")
    return run_dir
