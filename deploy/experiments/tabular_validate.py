"""``privfed experiment tabular --validate``: choose the learners' defaults on validation splits (issue 22 item 6).

The reported benchmark (:mod:`privfed.deploy.experiments.tabular`) uses stratified splits with seeds
``--seed`` .. ``--seed + splits - 1``. Validation never looks at them: it draws ``--splits`` other splits
(seeds ``VALIDATION_SEED + --seed + s``; ``--seed`` is 0 by default, so a second look at a question can use
fresh splits: ``--seed 1000`` gives seeds 2000 on), keeps only their training part, and splits that again (75 % fit, 25 %
validation; one row per owner as in the benchmark). Every candidate setting of a learner is fitted on
the fit rows and scored on the validation rows at each ε of ``--epsilon``, on every data set of
``--datasets``.

A setting's score is its mean, over data sets, ε and splits, of the *fraction of the gap closed*:
``(accuracy - majority) / max(reference - majority, 0.05)`` with the majority class and the learner's
non-private counterpart on the same validation rows, so every data set counts alike whatever its
scale. The table is printed best first and written to ``report.json``; the defaults in the code are the
best settings found (module docstrings of :mod:`~privfed.common.learners.ldp_gd`,
:mod:`~privfed.common.learners.split_points` and :mod:`~privfed.common.boosting.params` cite it).

For the grids whose settings share one release (``SAME_REPORTS``), ``paired`` in the output gives each setting
minus the first setting of the same learner on the same splits and reports, with a 95 % interval over splits
(:func:`paired`): the comparison a default change is decided on.
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from privfed.common.datasets import train_test_split
from privfed.common.learners.marginal_boost import MARGINAL_SMOOTHING
from privfed.deploy.experiments import tabular_fits as bench
from privfed.deploy.experiments.boosting import out_dir, write_report
from privfed.server.report import mean_ci

#: Seeds of the validation splits: far from the reported splits' (0..4 by default).
VALIDATION_SEED = 1000

#: Thresholds: the bounds' midpoints (B - 1 equal-width cuts), LDP quantiles from a fraction of the owners,
#: or both. A wider screening of the quantiles (fractions 0.05 / 0.1 / 0.2, B = 2 / 3, with and without the
#: midpoints, grids of 8 / 16 cells; 24 settings, 20 splits) ranked them from 0.23 to 0.31, the leaders within
#: 0.01 of each other; these are its leaders, against the midpoints.
_THRESHOLDS = {f"equal-width,n_bins={b}": {"n_bins": b} for b in (2, 3, 4)} | {
    "quantiles,split_fraction=0.1,n_grid=16": {"split_fraction": 0.1, "n_grid": 16},
    "quantiles,split_fraction=0.2,n_grid=16": {"split_fraction": 0.2, "n_grid": 16},
    "quantiles+midpoints,split_fraction=0.2,n_grid=16": {"split_fraction": 0.2, "midpoints": True, "n_grid": 16},
    "quantiles(B=3)+midpoints,split_fraction=0.1,n_grid=16": {
        "split_fraction": 0.1,
        "n_bins": 3,
        "midpoints": True,
        "n_grid": 16,
    },
}
#: The budget split and the weight bounds, at BoostingParams' default thresholds.
_BOUNDS = {
    f"eval_fraction={e},weight_bound={w},eval_row_bound={r}": {
        "eval_fraction": e,
        "weight_bound": w,
        "eval_row_bound": r,
    }
    for e, w, r in itertools.product((0.3, 0.4, 0.5), (1.0, 2.0), (1.0, 1.5))
}

#: Grids whose settings post-process one release: every setting is fitted on the same reports.
SAME_REPORTS = (
    "ncc-prior",
    "mbdt",
    "mbdt-post",
    "mbdt-scale",
    "mbdt-bins",
    "mbdt-rounds",
    "mbdt-shrink",
    "mbdt-alloc",
)

#: Candidate settings per learner: name -> keyword arguments of its fit function.
GRIDS: dict[str, dict[str, dict[str, Any]]] = {
    #: ``--task ncc --labels``: joint (one (label, sign) report per row at ε) or rr at a label share of ε.
    "ncc": {"labels=joint": {"labels": "joint"}}
    | {f"labels=rr,label_fraction={f}": {"labels": "rr", "label_fraction": f} for f in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)},
    #: The served rule on the same reports (``--labels auto``): the nearest centroid without the class priors first,
    #: then ``argmin ||t - mu_k||^2 / (2 s^2) - log pi_k`` at ``s^2`` (:data:`~privfed.common.learners.ncc_model.
    #: NCC_VARIANCE`).
    "ncc-prior": {"no priors": {"variance": None}}
    | {f"priors,variance={v:.4g}": {"variance": v} for v in (0.125, 0.25, 1.0 / 3.0, 0.5)},
    #: Alg. 4 with PM reporting one attribute at ε (``attributes=1``) or the paper's floor(ε/2.5) (None); η fixed
    #: or min(ε, 8) (None). An earlier grid ranked PM above HM at every group size and η of {10, 25, 50} x {1, 2, 3}.
    "lr": {
        f"min_group={g},learning_rate={r},attributes={a}": {"min_group": g, "learning_rate": r, "attributes": a}
        for g, r, a in itertools.product((10, 25, 50), (None, 3.0, 5.0), (1, None))
    },
    #: ``--task lr --solver``, through the federation's code, with owners of 1, 10 and 50 rows.
    "lr-solver": {
        f"solver={s},rows_per_owner={r}": {"solver": s, "rows_per_owner": r}
        for r, s in itertools.product((1, 10, 50), ("gd", "local"))
    },
    "bdt": _THRESHOLDS,
    "nb": {
        f"n_bins={b},smoothing={a}": {"n_bins": b, "smoothing": a}
        for b, a in itertools.product((2, 3, 4, 5), (0.5, 1.0, 2.0))
    },
    "bdt-bounds": _BOUNDS,
    "mbdt": {
        f"n_bins={b},n_rounds={t},smoothing={a}": {"n_bins": b, "n_rounds": t, "smoothing": a}
        for b, t, a in itertools.product((2, 3, 4, 5, 6), (10, 20, 50, 100, 200), (0.5, 1.0, 2.0, 4.0, 8.0))
    },
    #: Post-processing of the same reports (3 bins) beyond rounds and smoothing: shrinkage, pseudo-counts towards
    #: each feature's pooled bin distribution (:func:`~privfed.common.learners.naive_bayes.smoothed_marginals`),
    #: SAMME run to convergence (with nb's even pseudo-counts), and naive Bayes fitted on the very same reports
    #: (``learner``: nb's fit).
    "mbdt-post": {
        "defaults": {"smoothing": MARGINAL_SMOOTHING},
        "learning_rate=0.3,n_rounds=200": {"learning_rate": 0.3, "n_rounds": 200},
        "learning_rate=0.3,n_rounds=200,smoothing=2": {"learning_rate": 0.3, "n_rounds": 200, "smoothing": 2.0},
        "n_rounds=1000,smoothing=1,shrink_to=uniform": {"n_rounds": 1000, "smoothing": 1.0, "shrink_to": "uniform"},
        "n_rounds=1000,smoothing=4,shrink_to=uniform": {"n_rounds": 1000, "smoothing": 4.0, "shrink_to": "uniform"},
        **{
            f"shrink_to=marginal,smoothing={a:g}": {"shrink_to": "marginal", "smoothing": a}
            for a in (2.0, 4.0, 8.0, 16.0)
        },
        **{f"nb,smoothing={a:g}": {"learner": "nb", "smoothing": a} for a in (1.0, 4.0)},
    },
    #: How each feature's debiased counts are taken to all N owners (:meth:`~privfed.common.learners.naive_bayes.
    #: NaiveBayesEncoding.counts`): times d, or times N / n_j (n_j the owners that drew feature j), for mbdt and nb
    #: on the very same reports. The realised scaling lost (60 splits; the numbers are in that docstring).
    "mbdt-scale": {
        "scaling=d": {"scaling": "d", "smoothing": MARGINAL_SMOOTHING},
        "scaling=realised": {"scaling": "realised", "smoothing": MARGINAL_SMOOTHING},
        "nb,scaling=d": {"learner": "nb", "scaling": "d"},
        "nb,scaling=realised": {"learner": "nb", "scaling": "realised"},
    },
    #: Bins and rounds at the other defaults, the defaults first: does the best follow a public count (reports per
    #: feature and class N / (d K))? No (60 splits, seeds 2000-2059; :data:`~privfed.common.learners.
    #: marginal_boost.MARGINAL_ROUNDS` has the numbers): the defaults stay.
    "mbdt-bins": {f"n_bins={b}": {"n_bins": b, "smoothing": MARGINAL_SMOOTHING} for b in (3, 2, 4, 5, 6)},
    "mbdt-rounds": {f"n_rounds={t}": {"n_rounds": t, "smoothing": MARGINAL_SMOOTHING} for t in (50, 5, 10, 20, 200)},
    #: Where the pseudo-counts go (:func:`~privfed.common.learners.naive_bayes.smoothed_marginals`), the defaults
    #: before issue 22's second look first: evenly at 4 units, or towards each feature's pooled bins at 2-16 units.
    "mbdt-shrink": {"shrink_to=uniform,smoothing=4": {"shrink_to": "uniform", "smoothing": 4.0}}
    | {f"shrink_to=marginal,smoothing={a:g}": {"shrink_to": "marginal", "smoothing": a} for a in (2.0, 4.0, 8.0, 16.0)},
    #: The two-phase allocation of the reports (:mod:`~privfed.common.learners.feature_allocation`), the uniform
    #: draw first: a fraction of the owners draw uniformly, the others from a floor plus the phase-1 scores to a
    #: power; each feature's counts Horvitz-Thompson, or also scaled to the reports it expects (``evidence``);
    #: the scores from nb's smoothing (evenly, 1 unit) or mbdt's (``score=mbdt``: towards the pooled bins, 8 units).
    #: Not the same reports across settings (the release differs), but the same generator seeds: paired per split.
    "mbdt-alloc": {"uniform": {"smoothing": MARGINAL_SMOOTHING}}
    | {
        f"phase1_fraction={f},floor={a},power={w:g}": {"phase1_fraction": f, "floor": a, "power": w}
        for f, a, w in itertools.product((0.3, 0.5), (0.3, 0.6), (1.0, 2.0))
    }
    | {
        f"phase1_fraction={f},floor={a},evidence": {"phase1_fraction": f, "floor": a, "evidence": True}
        for f, a in [(0.3, 0.3), (0.3, 0.6), (0.5, 0.3), (0.5, 0.6), (0.5, 0.8)]
    }
    | {
        f"phase1_fraction=0.5,floor={a},evidence,score=mbdt": {
            "phase1_fraction": 0.5,
            "floor": a,
            "evidence": True,
            "shrink_to": "marginal",
            "smoothing": MARGINAL_SMOOTHING,
        }
        for a in (0.3, 0.6)
    },
    #: The release: one nb report at ε, or two at ε / 2 each (at the best settings of ``mbdt``).
    "mbdt-release": {
        f"reports={r},n_bins={b}": {"reports": r, "n_bins": b} for r, b in itertools.product((1, 2), (3, 4))
    },
}


def _reference(learner: str, fit: Any, val: Any) -> tuple[float, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = bench.baseline_scores(fit, val)
    return scores["majority"], scores[bench.COUNTERPART[learner]]


def paired(grid: dict[str, dict[str, Any]], score: dict[str, np.ndarray], acc: dict[str, np.ndarray]) -> dict[str, Any]:
    """Each setting minus the first setting of the same learner, on the same splits and reports. ``score`` and
    ``acc`` hold (data sets, splits, ε) fractions of the gap closed and accuracies. The unit is the split (splits
    are independent; the data sets and ε of one split are not): ``overall`` is the mean ± 95 % CI over splits of
    each split's gap-closed difference averaged over data sets and ε, ``by_dataset`` averages over ε only, and
    ``by_cell`` ([data set][ε]) is one cell's accuracy difference over its splits."""
    first: dict[str, str] = {}
    out: dict[str, Any] = {}
    for name, options in grid.items():
        base = first.setdefault(str(options.get("learner", "")), name)
        if base == name:
            continue
        diff, adiff = score[name] - score[base], acc[name] - acc[base]
        out[name] = {
            "against": base,
            "overall": mean_ci(diff.mean(axis=(0, 2))),
            "by_dataset": [mean_ci(per.mean(axis=1)) for per in diff],
            "by_cell": [[mean_ci(per[:, e]) for e in range(per.shape[1])] for per in adiff],
        }
    return out


def validate(args: argparse.Namespace) -> dict[str, Any]:
    """Scores of every candidate setting of every learner in ``args.learners`` (module docstring); ``args.seed``
    shifts the validation seeds (``VALIDATION_SEED + seed + s``), so a second look uses fresh splits."""
    datasets = bench._datasets(args)
    base_seed = VALIDATION_SEED + int(args.seed)
    out: dict[str, Any] = {}
    extra = (
        (["lr-solver"] if "lr" in args.learners else [])
        + (["bdt-bounds"] if "bdt" in args.learners else [])
        + (["mbdt-post", "mbdt-release"] if "mbdt" in args.learners else [])
    )
    for learner in args.learners + extra:
        grid = GRIDS[learner]
        shape = (len(datasets), args.splits, len(args.epsilon))
        score = {name: np.zeros(shape) for name in grid}
        acc = {name: np.zeros(shape) for name in grid}
        gap = {name: np.zeros(shape) for name in grid}  # counterpart - accuracy
        for di, ds in enumerate(datasets):
            for s in range(args.splits):
                train, _ = train_test_split(ds, test_fraction=0.2, seed=base_seed + s)
                fit, val = train_test_split(train, test_fraction=0.25, seed=base_seed + s)
                majority, ref = _reference(learner.split("-")[0], fit, val)
                for ci, (name, options) in enumerate(grid.items()):
                    for ei, eps in enumerate(args.epsilon):
                        # mbdt's settings post-process one release: they are compared on the same reports (common
                        # random numbers), so the ranking is not the reports' noise
                        rng = bench._rng(base_seed, di, s, 0 if learner in SAME_REPORTS else ci, ei)
                        if learner.startswith("bdt"):
                            model = bench.fit_bdt(fit, eps, rng, **dict(options))[0]
                        else:
                            kw = dict(options)
                            model = bench.FITTERS[kw.pop("learner", learner.split("-")[0])](fit, eps, rng, **kw)
                        a = bench._score(model, val)
                        acc[name][di, s, ei], gap[name][di, s, ei] = a, ref - a
                        score[name][di, s, ei] = (a - majority) / max(ref - majority, 0.05)
        cells = [f"{ds.name}@{eps:g}" for ds in datasets for eps in args.epsilon]

        def by_cell(v: np.ndarray) -> dict[str, float]:
            return dict(zip(cells, v.mean(axis=1).reshape(-1).tolist(), strict=True))

        ranked = sorted(grid, key=lambda n: -float(score[n].mean()))
        out[learner] = [
            {
                "setting": name,
                "seeds": [base_seed, base_seed + args.splits - 1],
                "gap_closed": float(score[name].mean()),
                "accuracy": by_cell(acc[name]),
                "gap_to_counterpart": by_cell(gap[name]),
            }
            for name in ranked
        ]
        print(f"{learner}: settings best first (mean fraction of the majority-to-non-private gap closed; "
              f"at eps 3, the counterpart minus the learner on {', '.join(ds.name for ds in datasets)}; "
              f"seeds {base_seed}-{base_seed + args.splits - 1})")  # fmt: skip
        for row in out[learner]:
            at3 = [v for k, v in row["gap_to_counterpart"].items() if k.endswith("@3")]
            print(
                f"  {row['gap_closed']:+.3f}  {row['setting']}"
                + ("  eps=3: " + " ".join(f"{g:+.3f}" for g in at3) if at3 else "")
            )
        if learner in SAME_REPORTS:
            _print_paired(learner, out, paired(grid, score, acc), datasets, args.epsilon)
    return out


def _print_paired(
    learner: str, out: dict[str, Any], diffs: dict[str, Any], datasets: list[Any], eps: list[float]
) -> None:
    out.setdefault("paired", {})[learner] = diffs
    print(f"{learner}: paired on the same reports, mean ± 95% CI over splits: the gap closed per data set, "
          "the accuracy per ε")  # fmt: skip
    for name, d in diffs.items():
        o = d["overall"]
        print(f"  {name} minus {d['against']}: {o['mean']:+.3f} ± {o['ci']:.3f}")
        for ds, per, row in zip(datasets, d["by_dataset"], d["by_cell"], strict=True):
            cells = " ".join(f"{e:g}:{c['mean']:+.3f}±{c['ci']:.3f}" for e, c in zip(eps, row, strict=True))
            print(f"    {ds.name:14s} {per['mean']:+.3f} ± {per['ci']:.3f}   {cells}")


def run(args: argparse.Namespace) -> Path:
    run_dir = out_dir(args.out)
    start = time.perf_counter()
    results = validate(args)
    write_report(run_dir, args, "issue 22 item 6: defaults chosen on validation splits", start, results)
    print(f"wrote {run_dir}")
    return run_dir
