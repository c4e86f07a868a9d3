"""FedDPDR's row scalings on real tables: ``box`` (each feature by its own public half-width, the default) against
``ball`` (one radius for the whole row), one row per owner, paired on the same split and noise (walkthrough 13,
W13-3). Through the federation's strategy in process (:func:`~privfed.deploy.experiments.federated.federated_fit`).

``--validate`` (the default choice's own splits): the training part of each 80/20 split, split again 75/25 into fit
and validation rows, seeds from 100; without it, the reported splits, seeds from 0. The box default was chosen on the
former only (README, "What changed (issue 22)")."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from privfed.common.datasets import load_builtin, train_test_split
from privfed.common.errors import ConfigError
from privfed.deploy.argtypes import epsilon_list
from privfed.deploy.experiments.boosting import out_dir, write_report
from privfed.deploy.experiments.federated import federated_fit

SCALINGS = ("ball", "box")
PAPER = "FedDPDR-DPML maps rows into the unit ball with public bounds only (SPEC section 4); which map is not fixed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("runs"), help="writes report.json here (default runs/)")
    parser.add_argument("--datasets", default="breast_cancer,wine,iris,anes96,star98", help="comma-separated")
    parser.add_argument("--epsilon", type=epsilon_list, default=[1.0, 3.0, 5.0, 8.0, math.inf], help="ε values")
    parser.add_argument("--splits", type=int, default=10, help="splits, seeds seed..seed+splits-1 (default 10)")
    parser.add_argument("--seed", type=int, default=None, help="first seed (default 0; 100 with --validate)")
    parser.add_argument("--validate", action="store_true", help="validation splits of the training rows")


def _mean_ci(values: list[float]) -> tuple[float, float]:
    v = np.asarray(values, dtype=float)
    half = 1.96 * float(v.std(ddof=1)) / math.sqrt(v.size) if v.size > 1 else math.nan
    return float(v.mean()), half


def run(args: argparse.Namespace) -> Path:
    if args.splits < 1:
        raise ConfigError(f"--splits must be >= 1, got {args.splits}")
    start = time.perf_counter()
    first = args.seed if args.seed is not None else (100 if args.validate else 0)
    results: dict[str, Any] = {"seeds": [first, first + args.splits - 1], "validate": args.validate, "cells": []}
    for di, name in enumerate(args.datasets.split(",")):
        ds = load_builtin(name, seed=0)
        acc: dict[tuple[float, str], list[float]] = {}
        majority: list[float] = []
        for seed in range(first, first + args.splits):
            train, test = train_test_split(ds, test_fraction=0.2, seed=seed)
            fit, val = train_test_split(train, test_fraction=0.25, seed=seed) if args.validate else (train, test)
            owners = [(fit.X[i : i + 1], fit.y[i : i + 1]) for i in range(fit.n)]  # one row per owner
            majority.append(float(np.max(np.bincount(val.y, minlength=ds.n_classes)) / val.n))
            for ei, eps in enumerate(args.epsilon):
                for scaling in SCALINGS:
                    rng = np.random.default_rng([seed, di, ei, 7])  # the same for both scalings: paired
                    model = federated_fit(owners, ds.bounds, ds.n_classes, rng, epsilon=eps, scaling=scaling)
                    acc.setdefault((eps, scaling), []).append(float(model.score(val.X, val.y)))
        for eps in args.epsilon:
            ball, box = acc[(eps, "ball")], acc[(eps, "box")]
            cell = {
                "dataset": name,
                "epsilon": eps,
                "owners": len(owners),
                "majority": float(np.mean(majority)),
                "ball": _mean_ci(ball),
                "box": _mean_ci(box),
                "box_minus_ball": _mean_ci(list(np.subtract(box, ball))),
            }
            results["cells"].append(cell)
            print(f"{name} eps {eps:g}: ball {cell['ball'][0]:.3f} ± {cell['ball'][1]:.3f}, box {cell['box'][0]:.3f} "
                  f"± {cell['box'][1]:.3f}, paired {cell['box_minus_ball'][0]:+.3f} ± {cell['box_minus_ball'][1]:.3f}"
                  f" (majority {cell['majority']:.3f})")  # fmt: skip
    run_dir = out_dir(args.out)
    write_report(run_dir, args, PAPER, start, results)
    print(f"wrote {run_dir}")
    return run_dir
