"""FedDPDR-DPML experiments (seed 004, Wang et al. CMC 2024, §5; Figs. 2-5, Table 3).

``privfed experiment feddpdr-k | feddpdr-epsilon | feddpdr-n | feddpdr-uneven | feddpdr-time``

Every method runs in the same run on the same stratified train/test split and the same owner
partition, through the functions the networked federation calls (:mod:`privfed.common.feddpdr.svm`):

* ``Non-Priv``: PCA + the classifier on all training rows, no noise (epsilon = inf, same code).
* ``DPML``: the paper's baseline: one party (owner 1) alone, the DP classifier on the full dimension.
* ``DPDR-DPML``: the paper's baseline: each party alone (Alg. 2 then Alg. 3 on its own rows at the
  same epsilon); the mean accuracy over the N parties. ``DPDR-DPML-best`` is the best single party.
* ``DPDR-DPML-pooled``: one owner holding all training rows (central DP; not the paper's baseline).
* ``FedDPDR-DPML``: N owners (Alg. 1).
* chance = 1/K is recorded in the report.

Budget: epsilon1 = epsilon2 = epsilon/2 (seed §5.2: "eps1 = eps2 = 0.5 eps"), delta = 1e-5 by default
(the seed uses 1e-4; ``--delta``), lambda = 0.01 (seed §5.2). Classifier (``--model``): ``centroid``
(default; :mod:`privfed.common.feddpdr.centroid`: DP class sums at (epsilon2, delta/2), one Gaussian release
for all K classes, summed by the coordinator; DP-PCA gets delta/2), ``softmax``
(:func:`privfed.common.feddpdr.svm.fit_dp_softmax`: one objective-perturbed multiclass problem at
(epsilon2, delta/2), averaged) or ``ovr-huber`` (the seed's one-vs-rest Huber SVM, epsilon2/K per class,
pure DP; DP-PCA gets all of delta). Rows (``--scaling``): ``normalise`` (default; shift to
[0, 1] by the public bounds, divide each row by its own norm) or ``ball`` (midpoint and worst-case
radius of the bounds). Both are data-independent (:data:`privfed.common.feddpdr.pca.ROW_SCALINGS`).
Noise in both phases scales with 1/(n eps): MNIST-5k's 800 rows per party at eps = 1.25 match the
paper's 10^4 rows at eps = 0.1; ``feddpdr-epsilon`` adds that value (``0.1 * 10^4 / rows per party``) to
its default grid and labels it "paper's n*eps". The seed's n = 10^4 rows per owner and N = 5 do not fit the bundled data
(mnist5k: 4000 training rows), so the sizes are scaled to the data available and recorded.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from privfed.common.datasets import load_builtin, partition, train_test_split
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.centroid import class_sums_sigma
from privfed.common.feddpdr.pca import NEIGHBOURING_SENSITIVITY, ROW_SCALINGS, gaussian_sigma
from privfed.common.feddpdr.svm import (
    DEFAULT_SVM_MODEL,
    SVM_MODELS,
    FedDPDRModel,
    feddpdr_fit,
    ovr_epsilons,
    owner_svm_release,
    privacy_adjustment,
    softmax_noise_sigma,
    softmax_privacy_split,
)
from privfed.server.report import host_info, new_run_dir, plot_lines, write_json

NAMES = ("feddpdr-k", "feddpdr-epsilon", "feddpdr-n", "feddpdr-uneven", "feddpdr-time")
METHODS = ("Non-Priv", "DPML", "DPDR-DPML", "DPDR-DPML-best", "DPDR-DPML-pooled", "FedDPDR-DPML")
K_GRID = (5, 10, 20, 50, 100)
EPSILON_GRID = (0.01, 0.05, 0.1, 0.5, 1.0, 2.0)
PAPER_N_GRID = (100, 500, 1000, 5000, 10000)
PAPER_UNEVEN = ((50, 100, 500, 1000, 2000), (100, 500, 1000, 5000, 10000), (100, 1000, 5000, 8000, 10000))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("runs"), help="runs directory (default runs/)")
    parser.add_argument(
        "--dataset", choices=("mnist5k", "digits"), default=None, help="default mnist5k (digits with --quick)"
    )
    parser.add_argument(
        "--runs",
        "--seeds",
        dest="runs",
        type=int,
        default=None,
        help="repetitions with seeds seed..seed+runs-1 (default 5, 2 with --quick)",
    )
    parser.add_argument("--seed", type=int, default=0, help="first seed (split, partition and noise)")
    parser.add_argument("--quick", action="store_true", help="small fast variant: digits, 2 runs, shorter grids")
    parser.add_argument("--epsilon", type=float, default=0.1, help="total epsilon of the fixed settings (seed: 0.1)")
    parser.add_argument("--delta", type=float, default=1e-5, help="delta of DP-PCA (seed: 1e-4)")
    parser.add_argument("--k", type=int, default=20, help="target dimension of the fixed settings (seed: 20)")
    parser.add_argument("--owners", type=int, default=5, help="number of owners N (seed: 5)")
    parser.add_argument("--lam", type=float, default=0.01, help="SVM regularisation lambda (seed: 0.01)")
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument(
        "--grid", type=_floats, default=None, help="override the swept values (comma-separated): k values or epsilons"
    )
    parser.add_argument(
        "--neighbouring",
        choices=tuple(NEIGHBOURING_SENSITIVITY),
        default="add-remove",
        help="neighbouring relation of DP-PCA's sensitivity (the SVM phase is replace-one)",
    )
    parser.add_argument(
        "--model",
        choices=SVM_MODELS,
        default=DEFAULT_SVM_MODEL,
        help="phase-2 classifier: DP class sums summed by the coordinator (centroid, default), one "
        "multiclass objective (softmax) or the seed's one-vs-rest Huber SVMs at eps/K each (ovr-huber)",
    )
    parser.add_argument(
        "--scaling",
        choices=ROW_SCALINGS,
        default="normalise",
        help="public row scaling into the unit ball (default normalise: each row by its own norm)",
    )


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


PAPER_ROWS_PER_PARTY, PAPER_EPSILON = 10_000, 0.1


def paper_n_epsilon(rows_per_party: int) -> float:
    """The epsilon at which ``rows_per_party`` rows see the noise the paper's 10^4 rows see at 0.1
    (both phases' noise scales with 1/(n eps)): 1.25 for MNIST-5k's 800 rows per party."""
    return PAPER_EPSILON * PAPER_ROWS_PER_PARTY / rows_per_party


def _settings(args, d: int, n_train: int) -> tuple[str, list, list[dict]]:
    """(x label, x values, settings): each setting fixes k, epsilon and the owners' sizes."""
    N, cap = args.owners, n_train // args.owners
    base = dict(k=min(args.k, d), epsilon=args.epsilon, sizes=[cap] * N)
    if args.experiment == "feddpdr-k":
        grid = [int(k) for k in args.grid] if args.grid else (K_GRID[:4] if args.quick else K_GRID)
        ks = sorted({min(k, d) for k in grid})
        return "target dimension k", ks, [dict(base, k=k) for k in ks]
    if args.experiment == "feddpdr-epsilon":
        grid = list(args.grid or sorted({*EPSILON_GRID, paper_n_epsilon(cap)}))
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


def _fit_methods(train, parts_idx, setting, args, seed: int) -> dict:
    """Fit every method on one setting; returns {method: (model or None, seconds)}."""
    bounds, K = train.bounds, train.n_classes
    eps, k, delta, lam = setting["epsilon"], setting["k"], args.delta, args.lam
    parts = [(train.X[i], train.y[i]) for i in parts_idx]
    union = np.concatenate(parts_idx)
    X_all, y_all = train.X[union], train.y[union]
    seeds = np.random.SeedSequence([seed, 4]).spawn(len(METHODS))
    rngs = {m: np.random.Generator(np.random.PCG64(s)) for m, s in zip(METHODS, seeds)}
    svm_model, scaling = getattr(args, "model", DEFAULT_SVM_MODEL), getattr(args, "scaling", "normalise")
    common = dict(n_classes=K, neighbouring=args.neighbouring, model=svm_model, scaling=scaling)
    alone = {}  # each party alone, fitted once for the mean and the best

    def each_party(r, pick):
        if "models" not in alone:
            alone["models"] = [
                feddpdr_fit([p], bounds, k, eps / 2, delta, eps / 2, lam, rr, **common)
                for p, rr in zip(parts, np.random.default_rng(r.integers(2**63)).spawn(len(parts)))
            ]
        return _Parties(alone["models"], pick)

    jobs = {
        "Non-Priv": lambda r: feddpdr_fit([(X_all, y_all)], bounds, k, math.inf, delta, math.inf, lam, r, **common),
        "DPML": lambda r: _dpml(*parts[0], bounds, K, eps, delta, lam, r, svm_model, scaling),
        "DPDR-DPML": lambda r: each_party(r, np.mean),
        "DPDR-DPML-best": lambda r: each_party(r, np.max),
        "DPDR-DPML-pooled": lambda r: feddpdr_fit(
            [(X_all, y_all)], bounds, k, eps / 2, delta, eps / 2, lam, r, **common
        ),
        "FedDPDR-DPML": lambda r: feddpdr_fit(parts, bounds, k, eps / 2, delta, eps / 2, lam, r, **common),
    }
    out = {}
    for name, job in jobs.items():
        start = time.perf_counter()
        model = job(rngs[name])
        out[name] = (model, time.perf_counter() - start)
    return out


def _dpml(X, y, bounds, n_classes, epsilon, delta, lam, rng, model, scaling) -> FedDPDRModel:
    W, n, eps_each = owner_svm_release(
        X, y, bounds, None, n_classes, epsilon, lam, rng, delta=delta, model=model, scaling=scaling
    )
    return FedDPDRModel(bounds, None, W, np.zeros(0), (n,), eps_each, scaling)


class _Parties:
    """Each party alone: ``score`` is ``pick`` (mean or max) of the parties' test accuracies."""

    def __init__(self, models, pick):
        self.models, self.pick = models, pick

    def score(self, X, y) -> float:
        return float(self.pick([m.score(X, y) for m in self.models]))


def _mechanism_notes(setting: dict, args, n_classes: int) -> dict:
    """Noise scales behind the numbers: DP-PCA sigma, and the phase-2 noise of one party and of all rows."""
    eps, sizes = setting["epsilon"], setting["sizes"]
    sens = NEIGHBOURING_SENSITIVITY[args.neighbouring]
    if getattr(args, "model", DEFAULT_SVM_MODEL) == "centroid":
        return {
            "pca_sigma": gaussian_sigma(eps / 2, args.delta / 2, sens),
            "class_sums_sigma": class_sums_sigma(eps / 2, args.delta / 2),
            "class_mean_noise_owner1": class_sums_sigma(eps / 2, args.delta / 2) / (int(sizes[0]) / n_classes),
            "class_mean_noise_federation": math.sqrt(len(sizes))
            * class_sums_sigma(eps / 2, args.delta / 2)
            / (int(sum(sizes)) / n_classes),
        }
    if getattr(args, "model", DEFAULT_SVM_MODEL) == "softmax":
        notes = {"pca_sigma": gaussian_sigma(eps / 2, args.delta / 2, sens)}
        for key, n in (("owner1", int(sizes[0])), ("all_rows", int(sum(sizes)))):
            eps_j, eps_b, Delta = softmax_privacy_split(eps / 2, n, args.lam)
            notes[f"softmax_{key}"] = {
                "eps_jacobian": eps_j,
                "eps_noise": eps_b,
                "Delta": Delta,
                "sigma": softmax_noise_sigma(eps_b, args.delta / 2, n_classes),
                "sigma_over_n": softmax_noise_sigma(eps_b, args.delta / 2, n_classes) / n,
            }
        return notes
    eps_class = float(ovr_epsilons(eps / 2, n_classes)[0])
    owner = privacy_adjustment(eps_class, int(sizes[0]), args.lam)
    central = privacy_adjustment(eps_class, int(sum(sizes)), args.lam)
    return {
        "pca_sigma": gaussian_sigma(eps / 2, args.delta, sens),
        "svm_eps_per_class": eps_class,
        "svm_owner1_eps_prime_Delta": owner,
        "svm_all_rows_eps_prime_Delta": central,
    }


def _table(xlabel: str, xs, stats: dict, methods, fmt: str, labels: dict | None = None) -> str:
    width = max(14, *(len(m) + 2 for m in methods))
    head = max(18, *(len(f"{x:.4g} ({labels[x]})") + 1 for x in (labels or {})))
    lines = [f"{xlabel:>{head}}" + "".join(f"{m:>{width}}" for m in methods)]
    for i, x in enumerate(xs):
        cells = [fmt.format(stats[m]["mean"][i], stats[m]["std"][i]) for m in methods]
        name = f"{x:.4g} ({(labels or {})[x]})" if x in (labels or {}) else str(x)
        lines.append(f"{name:>{head}}" + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)


def _summary(values: dict) -> dict:
    return {
        m: {"mean": [float(np.mean(v)) for v in per], "std": [float(np.std(v)) for v in per], "values": per}
        for m, per in values.items()
    }


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
    methods = list(METHODS)
    acc = {m: [[] for _ in settings] for m in methods}
    secs = {m: [[] for _ in settings] for m in methods}
    seeds = [args.seed + r for r in range(runs)]
    started = time.perf_counter()
    for seed in seeds:
        train, test = train_test_split(ds, test_fraction=args.test_fraction, seed=seed)
        for j, setting in enumerate(settings):
            parts_idx = partition(train.n, args.owners, seed=seed, sizes=setting["sizes"])
            fitted = _fit_methods(train, parts_idx, setting, args, seed * 1000 + j)
            for name, (model, seconds) in fitted.items():
                acc[name][j].append(model.score(test.X, test.y))
                secs[name][j].append(seconds)
    accuracy, timing = _summary(acc), _summary(secs)
    run_dir = new_run_dir(args.out)
    config = {k: v for k, v in vars(args).items() if k not in ("func", "rest")}
    config.update(
        dataset=dataset,
        runs=runs,
        epsilon1_share=0.5,
        epsilon2_share=0.5,
        n_train=n_train,
        n_test=ds.n - n_train,
        d=ds.d,
        n_classes=ds.n_classes,
        sigma_method="analytic",
        chance=1.0 / ds.n_classes,
        paper_n_epsilon=paper_n_epsilon(n_train // args.owners),
    )
    labels = {}
    if args.experiment == "feddpdr-epsilon":
        labels = {x: "paper's n*eps" for x in xs if math.isclose(x, config["paper_n_epsilon"])}
    write_json(
        run_dir / "report.json",
        {
            "experiment": args.experiment,
            "config": config,
            "x_label": xlabel,
            "x": xs,
            "x_labels": {str(x): v for x, v in labels.items()},
            "settings": settings,
            "mechanisms": [_mechanism_notes(s, args, ds.n_classes) for s in settings],
            "seeds": seeds,
            "methods": methods,
            "accuracy": accuracy,
            "fit_seconds": timing,
            "total_seconds": time.perf_counter() - started,
            "host": host_info(),
        },
    )
    title = f"{args.experiment} on {dataset} ({runs} runs)"
    plot_lines(
        run_dir / "accuracy.png",
        xs,
        {m: accuracy[m]["mean"] for m in methods},
        xlabel=xlabel,
        ylabel="test accuracy",
        title=title,
        logx=args.experiment == "feddpdr-epsilon",
        errors={m: accuracy[m]["std"] for m in methods},
    )
    plot_lines(
        run_dir / "fit_seconds.png",
        xs,
        {m: timing[m]["mean"] for m in methods},
        xlabel=xlabel,
        ylabel="fit time (s)",
        title=title,
        logx=args.experiment == "feddpdr-epsilon",
    )
    print(f"{title}: test accuracy mean±std; report {run_dir / 'report.json'}")
    print(_table(xlabel, xs, accuracy, methods, "{:.3f}±{:.3f}", labels))
    print(f"chance = 1/K = {1.0 / ds.n_classes:.3f}; model={config.get('model')}, scaling={config.get('scaling')}")
    if args.experiment == "feddpdr-time":
        print("fit seconds mean±std (owners run one after another in process)")
        print(_table(xlabel, xs, timing, methods, "{:.3f}±{:.3f}"))
    return run_dir


def main(argv: list[str] | None = None) -> Path:
    """``python -m privfed.deploy.experiments.feddpdr NAME [options]``."""
    parser = argparse.ArgumentParser(prog="feddpdr", description=__doc__.splitlines()[0])
    parser.add_argument("experiment", choices=NAMES)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
