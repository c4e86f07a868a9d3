"""FedDPDR-DPML experiments (seed 004, Wang et al. CMC 2024, §5; Figs. 2-5, Table 3).

``privfed experiment feddpdr-k | feddpdr-epsilon | feddpdr-n | feddpdr-uneven | feddpdr-time``

Every method runs in the same run on the same stratified train/test split and the same owner
partition, through the functions the networked federation calls (:mod:`privfed.common.dpsvm`):

* ``Non-Priv``: PCA + Huber SVM on all training rows, no noise (epsilon = inf, same code).
* ``DPML``: the DP SVM on the full dimension (no reduction), all rows, the whole epsilon.
* ``DPDR-DPML``: one owner holding all training rows of the setting (Alg. 2 then Alg. 3).
* ``DPDR-DPML-local``: owner 1's rows alone (the smallest owner in the uneven sets): what a
  small owner gets without the federation. Not in the paper; it is the comparison behind the
  paper's motivation.
* ``FedDPDR-DPML``: N owners (Alg. 1).
* ``diffprivlib-LR`` (optional): diffprivlib's DP logistic regression at the same epsilon on the
  same scaled rows; skipped, with the reason recorded, when diffprivlib cannot be imported.

Budget: epsilon1 = epsilon2 = epsilon/2 (seed §5.2: "eps1 = eps2 = 0.5 eps"), delta = 1e-5 by default
(the seed uses 1e-4; ``--delta``), lambda = 0.01 (seed §5.2). Multi-class by one-vs-rest with
epsilon2/K per class. The seed's n = 10^4 rows per owner and N = 5 do not fit the bundled data
(mnist5k: 4000 training rows), so the sizes are scaled to the data available and recorded.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from privfed.common.datasets import load_builtin, partition, train_test_split
from privfed.common.dppca import NEIGHBOURING_SENSITIVITY, gaussian_sigma, scale_rows_to_unit_ball
from privfed.common.dpsvm import FedDPDRModel, feddpdr_fit, owner_svm_release, ovr_epsilons, privacy_adjustment
from privfed.common.errors import ConfigError
from privfed.server.report import host_info, new_run_dir, plot_lines, write_json

NAMES = ("feddpdr-k", "feddpdr-epsilon", "feddpdr-n", "feddpdr-uneven", "feddpdr-time")
METHODS = ("Non-Priv", "DPML", "DPDR-DPML", "DPDR-DPML-local", "FedDPDR-DPML", "diffprivlib-LR")
K_GRID = (5, 10, 20, 50, 100)
EPSILON_GRID = (0.01, 0.05, 0.1, 0.5, 1.0, 2.0)
PAPER_N_GRID = (100, 500, 1000, 5000, 10000)
PAPER_UNEVEN = ((50, 100, 500, 1000, 2000), (100, 500, 1000, 5000, 10000), (100, 1000, 5000, 8000, 10000))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("runs"), help="runs directory (default runs/)")
    parser.add_argument("--dataset", choices=("mnist5k", "digits"), default=None,
                        help="default mnist5k (digits with --quick)")
    parser.add_argument("--runs", "--seeds", dest="runs", type=int, default=None,
                        help="repetitions with seeds seed..seed+runs-1 (default 5, 2 with --quick)")
    parser.add_argument("--seed", type=int, default=0, help="first seed (split, partition and noise)")
    parser.add_argument("--quick", action="store_true", help="small fast variant: digits, 2 runs, shorter grids")
    parser.add_argument("--epsilon", type=float, default=0.1, help="total epsilon of the fixed settings (seed: 0.1)")
    parser.add_argument("--delta", type=float, default=1e-5, help="delta of DP-PCA (seed: 1e-4)")
    parser.add_argument("--k", type=int, default=20, help="target dimension of the fixed settings (seed: 20)")
    parser.add_argument("--owners", type=int, default=5, help="number of owners N (seed: 5)")
    parser.add_argument("--lam", type=float, default=0.01, help="SVM regularisation lambda (seed: 0.01)")
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument("--grid", type=_floats, default=None,
                        help="override the swept values (comma-separated): k values or epsilons")
    parser.add_argument("--neighbouring", choices=tuple(NEIGHBOURING_SENSITIVITY), default="add-remove",
                        help="neighbouring relation of DP-PCA's sensitivity (the SVM phase is replace-one)")


def _floats(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--grid takes numbers separated by commas, got {text!r}") from None
    if not values or any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"--grid values must be > 0, got {text!r}")
    return values


def _n_grid(cap: int, quick: bool) -> list[int]:
    fractions = sorted({max(2, cap // 4), max(2, cap // 2), cap})
    if quick:
        return fractions
    return sorted(set(fractions) | {v for v in PAPER_N_GRID if v <= cap})


def _uneven_sets(n_train: int) -> list[list[int]]:
    """The seed's three uneven sets, each scaled by min(1, n_train / its total) (ratios kept)."""
    out = []
    for sizes in PAPER_UNEVEN:
        scale = min(1.0, n_train / sum(sizes))
        out.append([max(2, int(math.floor(s * scale))) for s in sizes])
    return out


def _settings(args, d: int, n_train: int) -> tuple[str, list, list[dict]]:
    """(x label, x values, settings): each setting fixes k, epsilon and the owners' sizes."""
    N, cap = args.owners, n_train // args.owners
    base = dict(k=min(args.k, d), epsilon=args.epsilon, sizes=[cap] * N)
    if args.experiment == "feddpdr-k":
        grid = [int(k) for k in args.grid] if args.grid else (K_GRID[:4] if args.quick else K_GRID)
        ks = sorted({min(k, d) for k in grid})
        return "target dimension k", ks, [dict(base, k=k) for k in ks]
    if args.experiment == "feddpdr-epsilon":
        grid = list(args.grid or EPSILON_GRID)
        return "epsilon", grid, [dict(base, epsilon=e) for e in grid]
    if args.experiment in ("feddpdr-n", "feddpdr-time"):
        ns = _n_grid(cap, args.quick)
        return "rows per owner n", ns, [dict(base, sizes=[n] * N) for n in ns]
    if args.experiment == "feddpdr-uneven":
        if N != 5:
            raise ConfigError(f"feddpdr-uneven uses the seed's five-owner sets; got --owners {N}")
        sets = _uneven_sets(n_train)
        return "uneven set", [1, 2, 3], [dict(base, sizes=s) for s in sets]
    raise ConfigError(f"unknown experiment {args.experiment!r}; choose one of {NAMES}")


def _diffprivlib_lr():
    try:
        from diffprivlib.models import LogisticRegression
    except ImportError as exc:  # diffprivlib 0.6 fails to import against scikit-learn >= 1.6
        return None, f"{type(exc).__name__}: {exc}"
    return LogisticRegression, None


def _fit_methods(train, parts_idx, setting, args, seed: int, dp_lr) -> dict:
    """Fit every method on one setting; returns {method: (model or None, seconds)}."""
    bounds, K = train.bounds, train.n_classes
    eps, k, delta, lam = setting["epsilon"], setting["k"], args.delta, args.lam
    parts = [(train.X[i], train.y[i]) for i in parts_idx]
    union = np.concatenate(parts_idx)
    X_all, y_all = train.X[union], train.y[union]
    seeds = np.random.SeedSequence([seed, 4]).spawn(len(METHODS))
    rngs = {m: np.random.Generator(np.random.PCG64(s)) for m, s in zip(METHODS, seeds)}
    common = dict(n_classes=K, neighbouring=args.neighbouring)
    jobs = {
        "Non-Priv": lambda r: feddpdr_fit([(X_all, y_all)], bounds, k, math.inf, delta, math.inf, lam, r, **common),
        "DPML": lambda r: _dpml(X_all, y_all, bounds, K, eps, lam, r),
        "DPDR-DPML": lambda r: feddpdr_fit([(X_all, y_all)], bounds, k, eps / 2, delta, eps / 2, lam, r, **common),
        "DPDR-DPML-local": lambda r: feddpdr_fit(parts[:1], bounds, k, eps / 2, delta, eps / 2, lam, r, **common),
        "FedDPDR-DPML": lambda r: feddpdr_fit(parts, bounds, k, eps / 2, delta, eps / 2, lam, r, **common),
    }
    if dp_lr is not None:
        jobs["diffprivlib-LR"] = lambda r: _DiffprivlibModel(dp_lr, X_all, y_all, bounds, eps, r)
    out = {}
    for name, job in jobs.items():
        start = time.perf_counter()
        model = job(rngs[name])
        out[name] = (model, time.perf_counter() - start)
    return out


def _dpml(X, y, bounds, n_classes, epsilon, lam, rng) -> FedDPDRModel:
    W, n, eps_each = owner_svm_release(X, y, bounds, None, n_classes, epsilon, lam, rng)
    return FedDPDRModel(bounds, None, W, np.zeros(0), (n,), eps_each)


class _DiffprivlibModel:
    """diffprivlib LogisticRegression on the same unit-ball rows (data_norm = 1, so no leak warning)."""

    def __init__(self, cls, X, y, bounds, epsilon, rng):
        self.bounds = bounds
        self.model = cls(epsilon=epsilon, data_norm=1.0, random_state=int(rng.integers(2**31)))
        self.model.fit(scale_rows_to_unit_ball(X, bounds), y)

    def score(self, X, y) -> float:
        return float(np.mean(self.model.predict(scale_rows_to_unit_ball(X, self.bounds)) == y))


def _mechanism_notes(setting: dict, args, n_classes: int) -> dict:
    """Noise scales behind the numbers: DP-PCA sigma, and (eps', Delta) of one OvR problem."""
    eps, sizes = setting["epsilon"], setting["sizes"]
    sens = NEIGHBOURING_SENSITIVITY[args.neighbouring]
    eps_class = float(ovr_epsilons(eps / 2, n_classes)[0])
    owner = privacy_adjustment(eps_class, int(sizes[0]), args.lam)
    central = privacy_adjustment(eps_class, int(sum(sizes)), args.lam)
    return {"pca_sigma": gaussian_sigma(eps / 2, args.delta, sens), "svm_eps_per_class": eps_class,
            "svm_owner1_eps_prime_Delta": owner, "svm_all_rows_eps_prime_Delta": central}


def _table(xlabel: str, xs, stats: dict, methods, fmt: str) -> str:
    width = max(14, *(len(m) + 2 for m in methods))
    lines = [f"{xlabel:>18}" + "".join(f"{m:>{width}}" for m in methods)]
    for i, x in enumerate(xs):
        cells = [fmt.format(stats[m]["mean"][i], stats[m]["std"][i]) for m in methods]
        lines.append(f"{str(x):>18}" + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)


def _summary(values: dict) -> dict:
    return {m: {"mean": [float(np.mean(v)) for v in per], "std": [float(np.std(v)) for v in per],
                "values": per} for m, per in values.items()}


def run(args) -> Path:
    """Run ``args.experiment``; write report.json and PNG plots; print the tables; return the run dir."""
    if args.experiment not in NAMES:
        raise ConfigError(f"unknown experiment {args.experiment!r}; choose one of {NAMES}")
    dataset = args.dataset or ("digits" if args.quick else "mnist5k")
    runs = args.runs if args.runs is not None else (2 if args.quick else 5)
    if runs < 1 or args.owners < 1:
        raise ConfigError(f"--runs and --owners must be >= 1, got {runs} and {args.owners}")
    ds = load_builtin(dataset)
    n_train = train_test_split(ds, test_fraction=args.test_fraction, seed=args.seed)[0].n  # same for every seed
    xlabel, xs, settings = _settings(args, ds.d, n_train)
    dp_lr, dp_lr_skip = _diffprivlib_lr()
    methods = [m for m in METHODS if m != "diffprivlib-LR" or dp_lr is not None]
    acc = {m: [[] for _ in settings] for m in methods}
    secs = {m: [[] for _ in settings] for m in methods}
    seeds = [args.seed + r for r in range(runs)]
    started = time.perf_counter()
    for seed in seeds:
        train, test = train_test_split(ds, test_fraction=args.test_fraction, seed=seed)
        for j, setting in enumerate(settings):
            parts_idx = partition(train.n, args.owners, seed=seed, sizes=setting["sizes"])
            fitted = _fit_methods(train, parts_idx, setting, args, seed * 1000 + j, dp_lr)
            for name, (model, seconds) in fitted.items():
                acc[name][j].append(model.score(test.X, test.y))
                secs[name][j].append(seconds)
    accuracy, timing = _summary(acc), _summary(secs)
    run_dir = new_run_dir(args.out)
    config = {k: v for k, v in vars(args).items() if k not in ("func", "rest")}
    config.update(dataset=dataset, runs=runs, epsilon1_share=0.5, epsilon2_share=0.5, n_train=n_train,
                  n_test=ds.n - n_train, d=ds.d, n_classes=ds.n_classes, sigma_method="analytic")
    write_json(run_dir / "report.json", {
        "experiment": args.experiment, "config": config, "x_label": xlabel, "x": xs, "settings": settings,
        "mechanisms": [_mechanism_notes(s, args, ds.n_classes) for s in settings], "seeds": seeds,
        "methods": methods, "accuracy": accuracy, "fit_seconds": timing,
        "skipped": {"diffprivlib-LR": dp_lr_skip} if dp_lr_skip else {},
        "total_seconds": time.perf_counter() - started, "host": host_info(),
    })
    title = f"{args.experiment} on {dataset} ({runs} runs)"
    plot_lines(run_dir / "accuracy.png", xs, {m: accuracy[m]["mean"] for m in methods}, xlabel=xlabel,
               ylabel="test accuracy", title=title, logx=args.experiment == "feddpdr-epsilon",
               errors={m: accuracy[m]["std"] for m in methods})
    plot_lines(run_dir / "fit_seconds.png", xs, {m: timing[m]["mean"] for m in methods}, xlabel=xlabel,
               ylabel="fit time (s)", title=title, logx=args.experiment == "feddpdr-epsilon")
    print(f"{title}: test accuracy mean±std; report {run_dir / 'report.json'}")
    print(_table(xlabel, xs, accuracy, methods, "{:.3f}±{:.3f}"))
    if args.experiment == "feddpdr-time":
        print("fit seconds mean±std (owners run one after another in process)")
        print(_table(xlabel, xs, timing, methods, "{:.3f}±{:.3f}"))
    if dp_lr_skip:
        print(f"diffprivlib-LR skipped: {dp_lr_skip.splitlines()[0][:120]}")
    return run_dir


def main(argv: list[str] | None = None) -> Path:
    """``python -m privfed.server.experiments.feddpdr NAME [options]``."""
    parser = argparse.ArgumentParser(prog="feddpdr", description=__doc__.splitlines()[0])
    parser.add_argument("experiment", choices=NAMES)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
