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
  comma-separated list (:func:`privfed.deploy.cli.epsilon_list`; 0 is the exact null-space variant),
  default ``0,0.001,0.01,0.1``; rows whose whole desired signal ``S_total = ‖A_dᵀz‖²`` is ≤ ε are
  cleaned completely (``x̃`` = the mean vector) and spend only ``S_total`` (``budget_met``
  reports the fraction of rows that spend exactly ε).

Metrics, per test row, then averaged over rows and given as mean ± std over runs
---------------------------------------------------------------------------------
* ``e_utility = ‖A_dᵀ(z − z̃)‖²``, ``e_privacy = ‖A_cᵀ(z − z̃)‖²`` (SPEC §10).
* Complete privacy, the paper's definition and the **headline** (``cp``): the error of predicting the
  true confidential labels from the cleaned row is *strictly greater* than from the mean feature
  vector, ``‖y_c − ŷ_c(z̃)‖² > ‖y_c − ȳ_c‖²`` beyond a relative tolerance (``TIE_RTOL``). Ties
  (``|difference| ≤ TIE_RTOL``) are reported apart (``tie``; ``cp_with_ties = cp + tie`` is the
  paper's gloss "no more advantageous than with the mean vector"). Without the attack every cleaned
  row is a tie here: with ``F ≥ K1 + K2`` the generalised eigenvalues are all 0 or ∞ and cleaning
  sets the confidential *linear* prediction to exactly ``ȳ_c`` (the rows are centred at the training
  mean, so "fully cleaned" is the mean vector). The paper's 81.8 % on scene is not a tie count;
  its centring is not stated.
* ``mse_ratio``: the adversary's mean squared error over the mean vector's (< 1: it learns something).
* Adversary (``--adversary``, default ``ridge-gcv``): ``A_c``, and every map the attacker refits,
  is a ridge fit with the penalty chosen by generalised cross-validation on the training rows
  (:func:`privfed.common.nullspace.fit_linear_map`). The paper's plain least squares
  (``--adversary lstsq``) over-fits yeast's 103 features: its held-out predictions are worse than the
  mean for N_d = 7 and 13 (``mse_ratio`` 1.00 and 1.06 on raw rows), so raw rows and Laplace-noised
  rows already score high CP, while the attacker who refits on cleaned rows (a few directions) is
  regularised by the cleaning itself. That is why cleaning with the attack did not beat Laplace on
  yeast (issue 13): the comparison credited Laplace with the adversary's over-fitting.
* Attack (paper, Fig. 2): the adversary cleans the training rows with the same cleaner and ε and
  refits its map on them; ``e_privacy`` is then ``‖ŷ_c′(z̃) − ŷ_c(z)‖²`` (its prediction from the
  cleaned row against the one it would make from the raw row) and CP uses ``ŷ_c′``.
* Laplace (paper, Fig. 3): ``z + b·L``, L i.i.d. standard Laplace per feature, with b set so the
  mean e_utility over the test rows equals cleaning's. For fixed draws the mean e_utility is
  exactly ``b²·mean‖A_dᵀL‖²``, so b is solved in closed form. (This is the paper's noise-adding
  baseline, not a DP release: no sensitivity bound.) ``laplace_attack``: the adversary refits on
  training rows noised the same way.
* Projection (``privfed query``'s default, :class:`~privfed.common.nullspace.StageProjection`):
  ``z̃ = (1 − β)·P_d z``, the part of ``z`` the desired map reads, shrunk to spend exactly
  cleaning's ε per row. It uses no confidential map (owner/query.py, "What x̃ reveals");
  ``projection_attack``: training rows projected the same way.
* ``cp_raw``: CP of the raw (uncleaned) rows, the floor any mechanism starts from.
* Method (``--method``, default ``subspace``): the generalised eigensolver's η-regularised ``M``
  leaves ~1e−8 of the removed components in ``z̃``; without the attack that turns every tie into a
  rounding coin flip (strict CP 17-40 % on yeast instead of 0), and the refitting attacker's least
  squares amplifies the residue back into the raw predictor (N_d = 13: CP 67.6 % vs raw 66.7 %).

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
from privfed.common.nullspace import METHODS, NullSpaceCleaner, StageProjection, e_utility, fit_linear_map
from privfed.common.rng import make_rng, spawn
from privfed.deploy.argtypes import epsilon_list
from privfed.server.report import host_info, new_run_dir, plot_lines, write_json

DEFAULT_EPSILONS = (0.0, 0.001, 0.01, 0.1)
TIE_RTOL = 1e-9  # |err(z̃) − err(mean)| ≤ TIE_RTOL·(err(z̃) + err(mean)) counts as a tie
VARIANTS = ("clean", "clean_attack", "laplace", "laplace_attack", "projection", "projection_attack")
METRICS = ("e_utility", "e_privacy", "cp", "tie", "cp_with_ties", "mse_ratio")
ADVERSARIES: dict[str, float | str] = {"ridge-gcv": "gcv", "lstsq": 0.0}
"""``--adversary``: how ``A_c`` and the attacker's refits are estimated (the ``alpha`` of fit_linear_map)."""
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


Columns = tuple[np.ndarray, np.ndarray, np.ndarray]


def _columns(data: np.ndarray, args: argparse.Namespace, path: Path) -> Columns:
    F, K1, K2 = args.n_features, args.desired, args.confidential
    if data.shape[1] < F + K1 + K2:
        raise ConfigError(
            f"{path} has {data.shape[1]} columns but --n-features {F} + --desired {K1} + --confidential {K2} "
            f"needs {F + K1 + K2}; check the flags against the file"
        )
    return data[:, :F], data[:, F : F + K1], data[:, F + K1 : F + K1 + K2]


def _cp(y: np.ndarray, pred: np.ndarray, y_mean: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Per row: (strictly complete privacy, tie), and the adversary's MSE over the mean vector's."""
    err = np.sum((y - pred) ** 2, axis=1)
    err_mean = np.sum((y - y_mean) ** 2, axis=1)
    tol = TIE_RTOL * (err + err_mean) + 1e-300
    return err - err_mean > tol, np.abs(err - err_mean) <= tol, float(err.mean() / max(err_mean.mean(), 1e-300))


def _refit_predict(Z_train: np.ndarray, Yc_train: np.ndarray, Z_query: np.ndarray, alpha: float | str) -> np.ndarray:
    """The adversary's attack: fit on (transformed) training rows, predict the transformed queries."""
    A = fit_linear_map(Z_train, Yc_train, alpha=alpha)
    return Yc_train.mean(axis=0) + (Z_query - Z_train.mean(axis=0)) @ A


def _one_run(tr: Columns, te: Columns, args: argparse.Namespace, rng: np.random.Generator) -> dict[str, Any]:
    """All metrics of one split; returns ``{variant: {metric: (n_eps,) array}}`` and the raw-row figures."""
    (Xtr, Ydtr, Yctr), (Xte, _Ydte, Ycte) = tr, te
    alpha = ADVERSARIES[args.adversary]
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd[sd == 0] = 1.0
    Ztr, Zte = (Xtr - mu) / sd, (Xte - mu) / sd
    A_d, A_c = fit_linear_map(Ztr, Ydtr), fit_linear_map(Ztr, Yctr, alpha=alpha)
    yc_mean = Yctr.mean(axis=0)
    pred_raw = yc_mean + (Zte - Ztr.mean(axis=0)) @ A_c
    cp_raw, _, mse_raw = _cp(Ycte, pred_raw, yc_mean)
    L_te, L_tr = rng.laplace(size=Zte.shape), rng.laplace(size=Ztr.shape)
    unit = float(np.mean(np.sum((L_te @ A_d) ** 2, axis=1)))
    out: dict[str, dict[str, list[float]]] = {v: {m: [] for m in METRICS} for v in VARIANTS}
    out["clean"].update(budget_met=[], theorem1_rel_err=[])
    gam = np.zeros(0)
    for eps in args.epsilon:
        cleaner = NullSpaceCleaner(epsilon=eps, method=args.method).fit(A_d, A_c)
        gam = cleaner.gamma_
        res = cleaner.transform_with_details(Zte)
        eu = e_utility(A_d, Zte, res.x_clean)
        met = eps < res.s_total
        out["clean"]["budget_met"].append(float(met.mean()))
        out["clean"]["theorem1_rel_err"].append(
            float(np.max(np.abs(eu[met] - eps) / eps, initial=0.0)) if eps > 0 else 0.0
        )
        b = math.sqrt(eu.mean() / unit) if unit > 0 else 0.0
        Zl_te, Zl_tr = Zte + b * L_te, Ztr + b * L_tr
        projector = StageProjection(epsilon=eps).fit(A_d)
        Zp_te = projector.transform(Zte)
        cases = {
            "clean": (res.x_clean, yc_mean + res.x_clean @ A_c),
            "clean_attack": (res.x_clean, _refit_predict(cleaner.transform(Ztr), Yctr, res.x_clean, alpha)),
            "laplace": (Zl_te, yc_mean + Zl_te @ A_c),
            "laplace_attack": (Zl_te, _refit_predict(Zl_tr, Yctr, Zl_te, alpha)),
            "projection": (Zp_te, yc_mean + Zp_te @ A_c),
            "projection_attack": (Zp_te, _refit_predict(projector.transform(Ztr), Yctr, Zp_te, alpha)),
        }
        for variant, (Zq, pred) in cases.items():
            cp, tie, mse_ratio = _cp(Ycte, pred, yc_mean)
            o = out[variant]
            o["e_utility"].append(float(e_utility(A_d, Zte, Zq).mean()))
            o["e_privacy"].append(float(np.mean(np.sum((pred - pred_raw) ** 2, axis=1))))
            o["cp"].append(float(cp.mean()))
            o["tie"].append(float(tie.mean()))
            o["cp_with_ties"].append(float((cp | tie).mean()))
            o["mse_ratio"].append(mse_ratio)
    result: dict[str, Any] = {v: {m: np.asarray(x, dtype=float) for m, x in d.items()} for v, d in out.items()}
    result["cp_raw"] = float(cp_raw.mean())
    result["mse_ratio_raw"] = mse_raw
    result["gamma_zero"] = int(np.sum(gam == 0))
    result["gamma_inf"] = int(np.sum(np.isinf(gam)))
    result["n_components"] = int(gam.size)
    return result


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
        runs.append(_one_run(tr, te, args, r_rng))
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
