"""``privfed experiment tabular --decompose``: where BDT's gap to AdaBoost-10 comes from (issue 22).

On validation splits only (:mod:`.tabular_validate`'s: seeds ``VALIDATION_SEED + s``, training rows split
again 75 % fit / 25 % validation, one row per owner), every data set of ``--datasets``, one factor changed
at a time from the default run at ε = 3 (``--epsilon``, first value):

* ``central``: the ceiling of the threshold grid: every owner in every round, no noise (exact SAMME over
  the public thresholds on all fit rows);
* ``federated, no noise``: the default groups and rounds at ε = ∞ (a round's stump from N/T owners, its
  error from the round's evaluators);
* ``shares noisy only`` / ``evaluations noisy only``: the default run with the other release exact;
* then the default run with one public parameter changed (thresholds, T, encodings, groups, budget split);
* LDP naive Bayes (one (feature, bin, class) report per owner) at ε, and two floors of that design: the sampling
  alone (ε = ∞, each owner's exact cell of one sampled feature) and every feature of every owner, no noise.

Each cell is AdaBoost-10's accuracy minus the variant's on the validation rows (the gap; lower is better),
mean over the splits. Exact releases are the ε = ∞ plan's (:class:`~privfed.common.boosting.releases.ReleasePlan`),
substituted for one release at a time; nothing here is a deployable setting unless its name says so.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from privfed.common.boosting.coordinator import CoordinatorSteps
from privfed.common.boosting.loop import plan_rounds, run_rounds
from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.releases import ReleasePlan
from privfed.common.boosting.simulation import SimulatedOwners
from privfed.common.datasets import Dataset, train_test_split
from privfed.common.errors import RoundFailed
from privfed.common.learners.marginal_boost import fit_marginal_boost
from privfed.common.learners.naive_bayes import NB_BINS, fit_naive_bayes, ldp_counts
from privfed.common.learners.split_points import grid_cells
from privfed.deploy.experiments import tabular_fits as bench
from privfed.deploy.experiments.boosting import out_dir, write_report
from privfed.deploy.experiments.tabular_validate import VALIDATION_SEED

#: Variants: name -> (BoostingParams keywords, which release is exact: "" | "shares" | "evaluations" | "both").
VARIANTS: dict[str, tuple[dict[str, Any], str]] = {
    "central (all owners every round, no noise)": ({"share_groups": "all", "eval_groups": "all"}, "both"),
    "federated, no noise": ({}, "both"),
    "shares noisy only": ({}, "evaluations"),
    "evaluations noisy only": ({}, "shares"),
    "default": ({}, ""),
    "n_bins=2": ({"n_bins": 2}, ""),
    "n_bins=4": ({"n_bins": 4}, ""),
    "n_bins=6": ({"n_bins": 6}, ""),
    "T=1": ({"n_rounds": 1}, ""),
    "T=2": ({"n_rounds": 2}, ""),
    "T=3": ({"n_rounds": 3}, ""),
    "T=5": ({"n_rounds": 5}, ""),
    "T=3, no noise": ({"n_rounds": 3}, "both"),
    "split points at LDP quantiles (10 % of the owners)": ({"split_fraction": 0.1, "n_grid": 16}, ""),
    "encoding=cells,krr": ({"stump_encoding": "cells", "oracle": "krr"}, ""),
    "encoding=cells,oue": ({"stump_encoding": "cells", "oracle": "oue"}, ""),
    "encoding=cells,olh": ({"stump_encoding": "cells", "oracle": "olh"}, ""),
    "share_groups=all": ({"share_groups": "all"}, ""),
    "budget_split=owners": ({"budget_split": "owners"}, ""),
    "eval_fraction=0.2": ({"eval_fraction": 0.2}, ""),
    "eval_fraction=0.6": ({"eval_fraction": 0.6}, ""),
}


#: The additive model from one report per owner (:mod:`privfed.common.learners.naive_bayes`), and its floors:
#: the sampling alone (ε = ∞: each owner's exact cell of one sampled feature) and every feature of every owner.
NB_VARIANTS = ("nb at ε", "nb, sampling only (ε = ∞)", "nb, every feature of every owner (no noise)")
#: The same three releases, fitted by SAMME over bdt's stumps on their product model
#: (``--task bdt --release marginals``, :mod:`privfed.common.learners.marginal_boost`).
MARGINAL_VARIANTS = (
    "bdt --release marginals at ε",
    "bdt --release marginals, sampling only (ε = ∞)",
    "bdt --release marginals, every feature of every owner (no noise)",
)


def fit_nb_variant(fit: Dataset, epsilon: float, rng: np.random.Generator, name: str) -> Any:
    """One of :data:`NB_VARIANTS` or :data:`MARGINAL_VARIANTS` at the default bins and smoothing."""
    marginal = name in MARGINAL_VARIANTS
    which = (MARGINAL_VARIANTS if marginal else NB_VARIANTS).index(name)
    if which == 2:
        counts = np.zeros((fit.d, NB_BINS, fit.n_classes))
        cells = grid_cells(fit.X, fit.bounds, NB_BINS)
        for f in range(fit.d):
            np.add.at(counts[f], (cells[:, f], fit.y), 1.0)
    else:
        eps = epsilon if which == 0 else math.inf
        counts = ldp_counts(fit.X, fit.y, bounds=fit.bounds, n_classes=fit.n_classes, epsilon=eps, rng=rng)[0]
    return fit_marginal_boost(counts, fit.n, fit.bounds) if marginal else fit_naive_bayes(counts, fit.n, fit.bounds)


def _exact(params: BoostingParams) -> ReleasePlan:
    return ReleasePlan(BoostingParams(**{**_fields(params), "epsilon": math.inf}))


def _fields(params: BoostingParams) -> dict[str, Any]:
    return {k: getattr(params, k) for k in params.__dataclass_fields__}


def fit_variant(fit: Dataset, epsilon: float, rng: np.random.Generator, options: dict[str, Any], exact: str) -> Any:
    """The federated SAMME model of one variant (module docstring), or None when no round kept a learner."""
    if "split_fraction" in options:  # the benchmark's own path: those owners report quantiles, then sit out
        return bench.fit_bdt(fit, epsilon, rng, **dict(options))[0]
    kw: dict[str, Any] = {"n_rounds": bench.ROUNDS, "max_owner_rows": 1} | options
    eps = math.inf if exact == "both" else epsilon
    params = BoostingParams(epsilon=eps, n_classes=fit.n_classes, bounds=fit.bounds, **kw)
    plan = ReleasePlan(params)
    if exact in ("shares", "evaluations"):  # one release exact: the ε = ∞ plan's mechanism for it
        name = "share_encoding" if exact == "shares" else "evaluation"
        plan.__dict__[name] = getattr(_exact(params), name)
    steps = SimulatedOwners(plan, fit.X, fit.y, None, rng)
    try:
        return run_rounds(CoordinatorSteps(plan), steps, *plan_rounds(params, steps.n_owners, rng)).model
    except RoundFailed:
        return None


def decompose(args: argparse.Namespace) -> dict[str, Any]:
    """Per data set and variant: the mean gap to AdaBoost-10 on the validation rows (module docstring)."""
    eps = float(args.epsilon[0])
    out: dict[str, Any] = {}
    for di, ds in enumerate(bench._datasets(args)):
        gaps: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for s in range(args.splits):
            train, _ = train_test_split(ds, test_fraction=0.2, seed=VALIDATION_SEED + s)
            fit, val = train_test_split(train, test_fraction=0.25, seed=VALIDATION_SEED + s)
            ada = bench.baseline_scores(fit, val)["adaboost10_stumps"]
            for vi, (name, (options, exact)) in enumerate(VARIANTS.items()):
                model = fit_variant(fit, eps, bench._rng(VALIDATION_SEED, di, s, vi), options, exact)
                gaps[name].append(ada - bench._score(model, val))
            for vi, name in enumerate((*NB_VARIANTS, *MARGINAL_VARIANTS), start=len(VARIANTS)):
                model = fit_nb_variant(fit, eps, bench._rng(VALIDATION_SEED, di, s, vi), name)
                gaps.setdefault(name, []).append(ada - bench._score(model, val))
        out[ds.name] = {name: float(np.mean(v)) for name, v in gaps.items()}
        out[ds.name]["owners"] = int(round(ds.n * 0.8 * 0.75))
        print(ds.name, {k: round(v, 3) for k, v in out[ds.name].items()}, flush=True)
    return out


def _table(results: dict[str, Any], eps: float) -> str:
    names = list(results)
    head = f"| BDT at ε = {eps:g}: gap to AdaBoost-10 | " + " | ".join(f"{n} ({results[n]['owners']})" for n in names)
    lines = [head + " |", "|---" * (len(names) + 1) + "|"]
    for v in (*VARIANTS, *NB_VARIANTS, *MARGINAL_VARIANTS):
        lines.append(f"| {v} | " + " | ".join(f"{results[n][v]:+.3f}" for n in names) + " |")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> Path:
    run_dir = out_dir(args.out)
    start = time.perf_counter()
    results = decompose(args)
    table = _table(results, float(args.epsilon[0]))
    print(table)
    (run_dir / "decomposition.md").write_text(table + "\n")
    write_report(run_dir, args, "issue 22: where BDT's gap to AdaBoost-10 comes from (validation splits)", start,
                 results)  # fmt: skip
    print(f"wrote {run_dir}")
    return run_dir
