"""``privfed experiment stump-hit-rate`` (seed 002, Wang & Chang, §4.3, Figs. 11-12): how often the stump
selected from the owners' LDP shares is among the best ones.

The synthetic set (2 classes, 20 attributes: 10 informative, 10 linear combinations; seed 002
§4.3), ``--owners`` rows (10^4), one row per owner, weight 1 each. Each numeric attribute is
binarised at its public midpoint (``--n-bins 2``, SPEC §6), so the binary attributes are the 20
attributes. Per run, every owner releases one share of its cross tables in each encoding of
``--encodings`` (:func:`~privfed.common.learners.stump.stump_shares`, vectorised over owners;
``table`` and ``pair`` once per ``--mechanisms``, the sampled ``signs`` / ``cells-<oracle>`` with
the variance-optimal number m of sampled coordinates) and the coordinator picks the stump from
the aggregated shares (``stump_aggregate`` + ``select_stump``).

**Hit (our precise definition of the paper's "top-k hitting rate").** Rank the binary
attributes by their misclassification error on the *exact* summed tables (SPEC §6). The
top-k set is every attribute whose exact error is <= the k-th smallest exact error (ties at
the k-th place are all in). A run hits at k when the attribute of the stump selected from the
perturbed tables is in the top-k set; the hit rate is the fraction of ``--runs`` runs (100)
that hit, with its binomial standard error; ``hits1`` / ``hits3`` keep every run's outcome (0 or
1) for the confidence intervals of ``privfed reproduce``. The synthetic set is drawn afresh every
run (seed ``--seed`` + run), so runs differ in the data and the noise; the MNIST sets are fixed
(every row is an owner, there is nothing to split) and runs differ in the noise only. With ``--n-bins > 2`` the ranked units are (attribute, threshold) pairs.
Diagnostics in the report: the exact errors of the top attributes, the gaps in weighted
rows, and the standard deviation over runs of the estimated correctly classified weight
of the best attribute ("score sd", in rows; for ``signs`` it matches the closed form
``sqrt(n (A + 1) / (m (p - q)^2)) / 2``, 188 rows at ε = 3).

Measured (issue 12 item 1, on one fixed synthetic set, before runs drew fresh data; 2 cores;
top-3 hit rate; standard errors <= 0.035 synthetic, <= 0.05 MNIST):
``privfed experiment stump-hit-rate --runs 200 --epsilon 1,3,5,8`` (synthetic, 10^4
one-row owners; gap best-4th 493 rows) and ``--datasets mnist4v9-pool --runs 100
--mechanisms pm`` (1000 owners, 16 attributes, chance 0.19; gap best-4th 126 rows):

==============  =========================  =========================
encoding        synthetic ε=1/3/5/8        MNIST 4v9 pooled
==============  =========================  =========================
signs           0.68 / 0.98 / 1.00 / 1.00  0.38 / 0.85 / 1.00 / 1.00
cells-krr       0.36 / 0.88 / 0.98 / 1.00  0.26 / 0.61 / 0.93 / 1.00
cells-oue       0.28 / 0.73 / 0.82 / 0.97  0.23 / 0.36 / 0.67 / 0.93
cells-olh       0.25 / 0.73 / 0.84 / 0.98  0.20 / 0.34 / 0.70 / 0.91
pair/pm         0.38 / 0.74 / 0.78 / 0.90  0.26 / 0.37 / 0.44 / 0.71
pair/duchi      0.28 / 0.62 / 0.66 / 0.58  -
table/pm        0.23 / 0.47 / 0.64 / 0.70  0.25 / 0.20 / 0.28 / 0.38
table/duchi     0.27 / 0.44 / 0.44 / 0.47  -
==============  =========================  =========================

Raw MNIST 4v9 pixels (``--datasets mnist4v9``, 784 attributes, chance 0.004, 50 runs): signs
0.00 / 0.02 / 0.06 / 0.18, table/pm 0.00 / 0.00 / 0.00 / 0.02: with 1000 owners each of 785
coordinates is sampled by about 10 owners, so a smaller public feature map is what helps.
``mnist4v9-pool`` is that map: 7x7 mean pooling of the 28x28 pixels to a 4x4 grid of 16
features, fixed in advance and independent of the data, bounds [0, 255] kept (so it costs no
ε); it stands in for the paper's HOG + bag-of-words features. Its best stump is weaker than
the best raw pixel's (error 0.331 against 0.131). 4x4 pooling (49 features, best error 0.385,
gap best-4th 42 rows) gave signs 0.09 / 0.20 / 0.46 / 0.72; 7x7 pooling with ``--n-bins 4``
(48 attributes) 0.08 / 0.38 / 0.57 / 0.91. ``mnist4v9-ink`` (30 "any ink" bits of the digit
box's upper half, :func:`~privfed.deploy.experiments.feature_maps.mnist_top_ink`; best error 0.137, gap
best-4th 139 rows): signs 0.57 / 0.94 / 1.00 / 1.00 (``--datasets mnist4v9-ink --runs 100
--encodings signs``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from privfed.common.datasets import Dataset, load_builtin
from privfed.common.learners.stump import binarize, cross_tables, select_stump, table_errors
from privfed.common.learners.stump_encodings import stump_aggregate, stump_shares
from privfed.common.mechanisms import make_mechanism
from privfed.deploy.experiments.boosting_data import load, seeded_rng
from privfed.server.report import plot_lines

#: ``--encodings`` names: a stump share encoding (``common/learners/stump.py``), for the sampled
#: ones with the frequency oracle after a dash. ``table`` and ``pair`` run once per ``--mechanisms``.
HIT_ENCODINGS = ("signs", "cells-krr", "cells-oue", "cells-olh", "pair", "table")


def _variants(encodings: Iterable[str], mechanisms: Iterable[str]) -> list[tuple[str, str, dict[str, str]]]:
    """``(label, encoding, share keyword builder)`` for every encoding (and mechanism of the row encodings)."""
    out = []
    for name in encodings:
        if name in ("table", "pair"):
            out += [(f"{name}/{m}", name, {"mechanism": m}) for m in mechanisms]
        else:
            encoding, _, oracle = name.partition("-")
            out.append((name, encoding, {"oracle": oracle or "krr"}))
    return out


def _exact_tops(ds: Dataset, n_bins: int) -> dict[str, Any]:
    """The ranking of the binary attributes by their exact error (module docstring, "Hit")."""
    exact = cross_tables(binarize(ds.X, ds.bounds, n_bins), ds.y, np.ones(ds.n), ds.n_classes)
    err = table_errors(exact)
    ranked = np.sort(err)
    correct = ds.n * (1 - ranked)
    return {
        "exact_errors_top5": ranked[:5],
        "top1": sorted(np.flatnonzero(err <= ranked[0]).tolist()),
        "top3": sorted(np.flatnonzero(err <= ranked[2]).tolist()),
        "best": int(np.argmin(err)),
        "gap_rows_1_2": correct[0] - correct[1],
        "gap_rows_1_4": correct[0] - correct[3],
    }


def hit_rates(
    data: Callable[[int], Dataset],
    encodings: Iterable[str],
    mechanisms: Iterable[str],
    epsilons: Sequence[float],
    runs: int,
    n_bins: int,
    seed: int,
) -> dict[str, Any]:
    """Top-1 / top-3 hit rates of the stump selected from perturbed shares (module docstring).

    ``data(r)`` is run r's data set: a fresh draw of the synthetic set every run, or the same
    rows (MNIST: every row is an owner, nothing to split) with fresh noise only. The report keeps
    every run's outcome (``hits1``, ``hits3``: 0 or 1 per run) besides the rates.
    """
    variants = [(label, encoding, extra, ei, eps) for label, encoding, extra in _variants(encodings, mechanisms)
                for ei, eps in enumerate(epsilons)]  # fmt: skip
    hits: dict[tuple[str, float], dict[int, list[float]]] = {(v[0], v[4]): {1: [], 3: []} for v in variants}
    scores: dict[tuple[str, float], list[float]] = {(v[0], v[4]): [] for v in variants}
    sampled: dict[tuple[str, float], int | None] = {}
    first, previous, fresh = data(0), None, False
    for r in range(runs):
        ds = data(r)
        if ds is not previous:
            top = _exact_tops(ds, n_bins)
            fresh = fresh or previous is not None
            previous = ds
        n, K, A = ds.n, ds.n_classes, ds.d * (n_bins - 1)
        for vi, (label, encoding, extra, ei, eps) in enumerate(variants):
            if "mechanism" in extra:
                d = A * 2 * (K if encoding == "table" else 1)
                kw = {"mechanism": make_mechanism(extra["mechanism"], epsilon=eps, d=d)}
            else:
                kw = {"epsilon": eps, "oracle": extra["oracle"]}
            reports = stump_shares(
                ds.X, ds.y, np.ones(n), np.arange(n), n, bounds=ds.bounds, n_bins=n_bins, n_classes=K,
                weight_bound=1.0, rng=seeded_rng(seed, vi // len(epsilons), ei, r), encoding=encoding, **kw,
            )  # fmt: skip
            coords = getattr(reports, "coordinates", None)
            sampled[(label, eps)] = None if coords is None else int(coords.shape[1])
            tables = stump_aggregate(reports, weight_bound=1.0, n_attributes=A, n_classes=K, encoding=encoding)
            stump = select_stump(tables, bounds=ds.bounds, n_bins=n_bins)
            scores[(label, eps)].append(float(tables[top["best"]].max(axis=1).sum()))
            a = stump.attribute * (n_bins - 1) + stump.threshold_index - 1
            for k in (1, 3):
                hits[(label, eps)][k].append(float(a in top[f"top{k}"]))
    top = _exact_tops(first, n_bins)  # the first run's data set, for the printed diagnostics
    out = {k: top[k] for k in ("exact_errors_top5", "top1", "top3", "gap_rows_1_2", "gap_rows_1_4")}
    out["fresh_data"] = fresh
    out["results"] = {}
    for label, _, _, _, eps in variants:
        h, sd_ok = hits[(label, eps)], runs > 1 and not fresh  # the score sd is over noise only
        rates = {k: float(np.mean(h[k])) for k in h}
        out["results"][f"{label}@{eps:g}"] = {
            "encoding": label,
            "epsilon": eps,
            "n_sampled": sampled[(label, eps)],
            "top1": rates[1],
            "top3": rates[3],
            "top1_se": math.sqrt(rates[1] * (1 - rates[1]) / runs),
            "top3_se": math.sqrt(rates[3] * (1 - rates[3]) / runs),
            "hits1": h[1],
            "hits3": h[3],
            "noise_sd_rows": float(np.std(scores[(label, eps)], ddof=1)) if sd_ok else math.nan,
        }
    return out


def run_hit_rate(args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    name = args.datasets[0]  # no split: every row is an owner (--owners of them for the synthetic set)
    if name == "synthetic":  # a fresh data set every run (seed --seed + run)

        def data(r: int) -> Dataset:
            return load_builtin("synthetic", n_samples=args.owners, seed=args.seed + r)
    else:
        fixed = load(name, args)

        def data(r: int) -> Dataset:
            return fixed

    ds = data(0)
    res = hit_rates(data, args.encodings, args.mechanisms, args.epsilons, args.runs, args.n_bins, args.seed)
    print(
        f"{ds.name}: {ds.n} owners, {ds.d * (args.n_bins - 1)} binary attributes, exact errors of the top 5 "
        f"{np.round(res['exact_errors_top5'], 4)}; gap best-2nd {res['gap_rows_1_2']:.0f} rows, best-4th "
        f"{res['gap_rows_1_4']:.0f} rows"
    )
    print(f"{'encoding':<12} {'eps':>4} {'m':>3} {'top-1':>7} {'top-3':>7} {'score sd (rows)':>16}")
    for row in res["results"].values():
        m = "-" if row["n_sampled"] is None else row["n_sampled"]
        sd = "-" if math.isnan(row["noise_sd_rows"]) else f"{row['noise_sd_rows']:.0f}"
        print(f"{row['encoding']:<12} {row['epsilon']:>4g} {m:>3} {row['top1']:>7.2f} {row['top3']:>7.2f} {sd:>16}")
    if res["fresh_data"] or args.runs < 2:
        print("(score sd: over the noise alone, so only for a fixed data set and at least 2 runs)")
    series, errors = {}, {}
    for label, _, _ in _variants(args.encodings, args.mechanisms):
        rows = [res["results"][f"{label}@{e:g}"] for e in args.epsilons]
        for k in (1, 3):
            series[f"{label} top-{k}"] = [r[f"top{k}"] for r in rows]
            errors[f"{label} top-{k}"] = [r[f"top{k}_se"] for r in rows]
    plot_lines(
        run_dir / "stump_hit_rate.png",
        args.epsilons,
        series,
        errors=errors,
        xlabel="epsilon",
        ylabel="hit rate",
        title=f"Stump top-k hit rate, {ds.name}, {ds.n} owners, {args.runs} runs",
    )
    A = ds.d * (args.n_bins - 1)
    return {"dataset": ds.name, "n_owners": ds.n, "n_attributes": A, "chance_top3": 3 / A, **res}
