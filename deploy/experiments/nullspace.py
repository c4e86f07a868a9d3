"""``privfed experiment nullspace``: evaluate null-space cleaning (Xu et al. AAAI 2017; SPEC §10).

Reproduces the protocol of seed 003 (Figs. 1-3) on any Mulan-style CSV: F feature columns, then
label columns; the first K1 labels are *desired*, the next K2 *confidential*.

Protocol, per run (10 runs by default, as in the paper)
-------------------------------------------------------
* Split: a random 90/10 train/test split of ``--data`` (pooled with ``--test-data`` when given,
  as the paper pools Mulan's train/test files; ``--split fixed`` keeps the given pair instead).
  ``report.json["split"]`` says which, with the row counts.
* Features are standardised with the *training* means and standard deviations (a constant
  column keeps scale 1), so every query is centred at the training mean. Least-squares maps
  for both label groups come from :func:`privfed.common.nullspace.fit_linear_map` (centred, so
  ``ŷ = ȳ + Aᵀz`` and the mean feature vector ``z = 0`` predicts ``ȳ``). Standardising changes
  neither the least-squares predictions nor the cleaning (it is equivariant under invertible
  feature scaling, up to the generalized method's η); it sets the scale of the Laplace noise.
* ε is in squared units of the desired predictions (labels are 0/1, so ε = 0.01 lets the
  desired prediction move by 0.1), which is the paper's e_utility scale. ``--epsilon`` is one
  comma-separated list (:func:`privfed.deploy.argtypes.epsilon_list`; 0 is the exact null-space variant),
  default ``0,0.001,0.01,0.1``; rows whose whole desired signal ``S_total = ‖A_dᵀz‖²`` is ≤ ε are
  cleaned completely (``x̃`` = the mean vector) and spend only ``S_total`` (``budget_met``
  reports the fraction of rows that spend exactly ε).

Metrics
-------
Per test row, then averaged over rows and given as mean ± std over runs, for each variant (cleaning,
Laplace, projection, each with and without the attack): :mod:`privfed.deploy.experiments.nullspace_evaluation`.

Centring convention
-------------------
This experiment keeps the paper's: every row is centred at the *training* mean, i.e. cleaned
around ``z = 0``. That is sound here because nothing leaves: the experimenter holds the whole data
set and only measures. ``privfed query`` centres at the midpoint of the model's public bounds
instead (issue 9: a sent row must not carry the owner's training mean); the Mulan files have no
public bounds. Cleaning results depend on the centre only through which ``z`` is cleaned, and
Theorem 1 holds for any centre (``z − z̃`` is what the metrics see).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.nullspace import METHODS
from privfed.common.rng import make_rng, spawn
from privfed.deploy.argtypes import epsilon_list
from privfed.deploy.experiments.nullspace_evaluation import ADVERSARIES, TIE_RTOL, VARIANTS, Columns, evaluate_split
from privfed.server.report import host_info, new_run_dir, plot_lines, write_json

DEFAULT_EPSILONS = (0.0, 0.001, 0.01, 0.1)
PAPER_SCENE = {  # seed 003, scene, N_d = 1, N_c = 5, ε = 0.01 (Figs. 1-3); CP in %
    "Fig. 1 clean (no attack)": {"e_privacy": 0.796, "cp": 81.8},
    "Fig. 2 clean_attack": {"e_privacy": 0.289, "cp": 51.0},
    "Fig. 3 laplace": {"e_privacy": 0.009, "cp": 31.5},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``privfed experiment nullspace``."""
    parser.add_argument("--data", type=Path, required=True, help="CSV (optionally .gz): F features, then labels")
    parser.add_argument("--test-data", type=Path, help="second CSV of the same columns (e.g. Mulan's test file)")
    parser.add_argument(
        "--split",
        choices=("pool", "fixed"),
        default="pool",
        help="pool: pool --data and --test-data, random split per run (paper); fixed: keep them",
    )
    parser.add_argument("--n-features", type=int, required=True, help="F, the number of leading feature columns")
    parser.add_argument("--desired", type=int, required=True, help="K1: the next K1 columns are desired labels")
    parser.add_argument("--confidential", type=int, required=True, help="K2: the next K2 are confidential")
    parser.add_argument(
        "--epsilon",
        type=functools.partial(epsilon_list, allow_zero=True),
        default=list(DEFAULT_EPSILONS),
        help="e_utility budgets, comma-separated, squared desired-label units; 0 is exact null-space "
        "cleaning (default 0,0.001,0.01,0.1)",
    )
    parser.add_argument("--runs", type=int, default=10, help="random splits (default 10, as the paper)")
    parser.add_argument("--test-fraction", type=float, default=0.1, help="test share per split (default 0.1)")
    parser.add_argument(
        "--method",
        choices=METHODS,
        default="subspace",
        help="cleaner eigen-solver (default subspace: exact when F > K2, no η)",
    )
    parser.add_argument(
        "--adversary",
        choices=tuple(ADVERSARIES),
        default="ridge-gcv",
        help="how A_c and the attacker's refits are fitted: ridge chosen by generalised cross-validation "
        "(default) or the paper's plain least squares (lstsq)",
    )
    parser.add_argument("--seed", type=int, default=0, help="PCG64 seed for splits and Laplace noise")
    parser.add_argument("--out", type=Path, default=Path("runs"), help="runs directory (default runs/)")


def load_csv(path: Path) -> np.ndarray:
    """All-numeric CSV (``.gz`` read transparently) as a float array; one header line is skipped."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"data file {path} does not exist; pass an existing CSV with --data/--test-data")
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as fh:
            first = fh.readline()
    else:
        with open(path) as fh:
            first = fh.readline()
    try:
        [float(v) for v in first.split(",")]
        skip = 0
    except ValueError:
        skip = 1
    try:
        data = np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2)
    except ValueError as exc:
        raise ConfigError(f"{path} is not an all-numeric CSV with one row length: {exc}") from exc
    if data.size == 0:
        raise ConfigError(f"{path} holds no data rows")
    if not np.all(np.isfinite(data)):
        raise ConfigError(f"{path} has non-finite values (NaN/inf); clean the file first")
    return data


def _validate(args: argparse.Namespace) -> None:
    for name in ("n_features", "desired", "confidential", "runs"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be ≥ 1, got {getattr(args, name)}")
    if not 0.0 < args.test_fraction < 1.0:
        raise ConfigError(f"--test-fraction must be in (0, 1), got {args.test_fraction}")
    if any(math.isinf(e) for e in args.epsilon):
        raise ConfigError(
            f"--epsilon {args.epsilon}: cleaning's ε is a utility loss, not a privacy budget; inf (remove everything) "
            "is the mean vector, give a finite value"
        )
    if args.split == "fixed" and args.test_data is None:
        raise ConfigError("--split fixed needs --test-data; drop it to split --data randomly")


def _columns(data: np.ndarray, args: argparse.Namespace, path: Path) -> Columns:
    F, K1, K2 = args.n_features, args.desired, args.confidential
    if data.shape[1] < F + K1 + K2:
        raise ConfigError(
            f"{path} has {data.shape[1]} columns but --n-features {F} + --desired {K1} + --confidential {K2} "
            f"needs {F + K1 + K2}; check the flags against the file"
        )
    return data[:, :F], data[:, F : F + K1], data[:, F + K1 : F + K1 + K2]


def _split_note(args: argparse.Namespace, n_rows: int, n_test: int, fixed_test: int | None) -> str:
    if fixed_test is not None:
        return f"fixed: train = {args.data.name} ({n_rows} rows), test = {args.test_data.name} ({fixed_test} rows)"
    pooled = f"{args.data.name} + {args.test_data.name} pooled" if args.test_data is not None else args.data.name
    return (
        f"pool: {pooled} ({n_rows} rows), a random {n_rows - n_test}/{n_test} train/test split per run "
        f"(test fraction {args.test_fraction}, {args.runs} runs from seed {args.seed}), as the paper"
    )


def run(args: argparse.Namespace) -> Path:
    """Run the experiment; returns the run directory holding ``report.json`` and PNGs."""
    _validate(args)
    started = time.perf_counter()
    data = load_csv(args.data)
    test = load_csv(args.test_data) if args.test_data is not None else None
    if test is not None and test.shape[1] != data.shape[1]:
        raise ConfigError(f"--data has {data.shape[1]} columns but --test-data has {test.shape[1]}; pass the pair")
    if test is not None and args.split == "pool":
        data, test = np.vstack([data, test]), None
    cols = _columns(data, args, args.data)
    test_cols = _columns(test, args, args.test_data) if test is not None else None
    n = data.shape[0]
    n_test = max(1, int(round(args.test_fraction * n)))
    if test_cols is None and n - n_test < 2:
        raise ConfigError(
            f"{n} rows leave {n - n_test} training rows; need ≥ 2 (more data or a smaller --test-fraction)"
        )
    runs = []
    for r_rng in spawn(make_rng("seeded", args.seed), args.runs):
        if test_cols is None:
            perm = r_rng.permutation(n)
            te_idx, tr_idx = perm[:n_test], perm[n_test:]
            tr, te = (
                (cols[0][tr_idx], cols[1][tr_idx], cols[2][tr_idx]),
                (cols[0][te_idx], cols[1][te_idx], cols[2][te_idx]),
            )
        else:
            tr, te = cols, test_cols
        runs.append(evaluate_split(tr, te, args, r_rng))
    summary = _summarise(runs, args)
    out_dir = new_run_dir(args.out)
    split = _split_note(args, n, n_test, None if test is None else int(test.shape[0]))
    report = {
        "experiment": "nullspace",
        "paper": "Xu et al., Enhancing the Privacy of Predictors, AAAI 2017 (seed 003)",
        "spec": "SPEC §10",
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if not callable(v)},
        "seed": args.seed,
        "host": host_info(),
        "rows": int(n + (0 if test is None else test.shape[0])),
        "split": split,
        "definitions": {
            "cp": "headline, the paper's: err(ŷ_c(x̃)) > err(ȳ_c) strictly (beyond tie_rtol), per test row",
            "tie": "|err(ŷ_c(x̃)) − err(ȳ_c)| ≤ tie_rtol·(sum): reported apart; cp_with_ties = cp + tie",
            "mse_ratio": "adversary's mean squared error over the mean vector's (< 1: the adversary learns)",
            "tie_rtol": TIE_RTOL,
            "epsilon_units": "squared desired-prediction units",
            "laplace_scale": "closed form: mean e_utility equals cleaning's exactly",
            "adversary": f"{args.adversary}: A_c and every attacker refit (alpha={ADVERSARIES[args.adversary]!r})",
        },
        "deviations": {
            "data": "yeast (Mulan) instead of scene and wq, which are not available here",
            "adversary": "ridge with generalised cross-validation instead of plain least squares, which predicts "
            "yeast's held-out confidential labels worse than their mean (see mse_ratio_raw with --adversary lstsq)"
            if args.adversary == "ridge-gcv"
            else "none: the paper's least squares",
            "method": f"{args.method}: the eigensolver (subspace: no η residue that the attack could amplify)",
            "centring": "rows centred at the training mean (cleaning around the mean vector); the paper does not say",
        },
        "results": summary,
        "paper_reference_scene_Nd1_Nc5_eps0.01": PAPER_SCENE,
        "total_seconds": time.perf_counter() - started,
        "per_run": runs,
    }
    write_json(out_dir / "report.json", report)
    _plots(out_dir, args.epsilon, summary)
    print(format_table(summary, args))
    print(f"split: {split}")
    print(f"report: {out_dir / 'report.json'}")
    return out_dir


def _summarise(runs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"epsilon": list(args.epsilon)}
    for variant in VARIANTS:
        out[variant] = {
            m: {
                "mean": np.mean([r[variant][m] for r in runs], axis=0),
                "std": np.std([r[variant][m] for r in runs], axis=0),
            }
            for m in runs[0][variant]
        }
    for key in ("cp_raw", "mse_ratio_raw", "gamma_zero", "gamma_inf", "n_components"):
        vals = [r[key] for r in runs]
        out[key] = {"mean": float(np.mean(vals)), "std": float(np.std(vals))}
    return out


def format_table(summary: dict[str, Any], args: argparse.Namespace) -> str:
    """Text table: one line per ε and variant, mean ± std over runs."""
    head = (
        f"null-space cleaning: {args.data.name}, F={args.n_features}, K1={args.desired}, "
        f"K2={args.confidential}, {args.runs} runs, method={args.method}, adversary={args.adversary}, seed={args.seed}"
    )
    lines = [
        head,
        f"{'eps':>7} {'variant':<17} {'e_utility':>19} {'e_privacy':>19} {'CP % (strict)':>14} {'ties %':>7} "
        f"{'MSE/mean':>9}",
    ]
    for i, eps in enumerate(summary["epsilon"]):
        for v in VARIANTS:
            s = summary[v]
            eu, ep = (f"{s[m]['mean'][i]:.4f} ± {s[m]['std'][i]:.4f}" for m in ("e_utility", "e_privacy"))
            cp = f"{s['cp']['mean'][i] * 100:5.1f} ± {s['cp']['std'][i] * 100:4.1f}"
            lines.append(
                f"{eps:>7g} {v:<17} {eu:>19} {ep:>19} {cp:>14} {s['tie']['mean'][i] * 100:7.1f} "
                f"{s['mse_ratio']['mean'][i]:9.3f}"
            )
        c = summary["clean"]
        lines.append(
            f"{'':>7} budget met {c['budget_met']['mean'][i] * 100:.1f}% of rows; "
            f"Theorem 1 max rel. error {c['theorem1_rel_err']['mean'][i]:.1e}"
        )
    lines.append(
        f"raw rows CP {summary['cp_raw']['mean'] * 100:.1f}% ± {summary['cp_raw']['std'] * 100:.1f}, "
        f"MSE/mean {summary['mse_ratio_raw']['mean']:.3f}; "
        f"γ = 0: {summary['gamma_zero']['mean']:.0f}, γ = ∞: {summary['gamma_inf']['mean']:.0f} "
        f"of {summary['n_components']['mean']:.0f} components"
    )
    return "\n".join(lines)


def _plots(out_dir: Path, epsilons: list[float], summary: dict[str, Any]) -> None:
    eps = np.asarray(epsilons, dtype=float)
    keep = eps > 0 if np.count_nonzero(eps > 0) >= 2 else np.ones(eps.size, bool)
    raw = {"raw rows (no cleaning)": summary["cp_raw"]["mean"] * 100.0, "coin flip (50 %)": 50.0}
    for metric, label, scale, hlines in (
        ("cp", "complete privacy, strict (%)", 100.0, raw),
        ("e_privacy", "e_privacy", 1.0, None),
        ("mse_ratio", "adversary MSE / mean-vector MSE", 1.0, {"raw rows": summary["mse_ratio_raw"]["mean"]}),
    ):
        series = {v: summary[v][metric]["mean"][keep] * scale for v in VARIANTS}
        errors = {v: summary[v][metric]["std"][keep] * scale for v in VARIANTS}
        plot_lines(
            out_dir / f"{metric}.png",
            eps[keep],
            series,
            xlabel="ε (requested e_utility)",
            ylabel=label,
            title=f"null-space cleaning vs Laplace vs projection: {label}",
            logx=bool(np.all(eps[keep] > 0)),
            errors=errors,
            hlines=hlines,
        )


def main(argv: list[str] | None = None) -> Path:
    """``python -m privfed.deploy.experiments.nullspace ...`` (same flags as the CLI)."""
    parser = argparse.ArgumentParser(prog="privfed experiment nullspace", description=(__doc__ or "").splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.experiment = "nullspace"
    return run(args)


if __name__ == "__main__":
    main()
