"""Real tabular data sets with documented bounds, and the benchmark on them (issue 22 item 1)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from privfed.common.datasets import BUILTINS, load_builtin
from privfed.common.tabular import SPECS, TABULAR
from privfed.deploy.cli import main


@pytest.mark.parametrize("name", TABULAR)
def test_each_set_loads_offline_with_its_documented_bounds_and_classes(name):
    ds = load_builtin(name)
    spec = SPECS[name]
    assert name in BUILTINS and ds.n_classes == len(spec.class_names) and ds.d == ds.bounds.d
    assert set(np.unique(ds.y)) == set(range(ds.n_classes))
    if spec.features:  # bounds are the constants written down from the documentation
        np.testing.assert_array_equal(ds.bounds.lo, [f[1] for f in spec.features])
        np.testing.assert_array_equal(ds.bounds.hi, [f[2] for f in spec.features])
    assert ds.bounds.clip(ds.X)[1] == 0  # the documentation's ranges hold every value
    assert spec.bounds_source and spec.source


def test_the_quick_benchmark_reports_every_cell_its_baselines_goals_and_warnings(tmp_path, capsys):
    assert main(["experiment", "tabular", "--quick", "--splits", "2", "--epsilon", "1,5", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())["results"]
    assert set(report["datasets"]) == set(TABULAR) and (tmp_path / "tabular.png").exists()
    assert all(r["rows"] <= 600 for r in report["datasets"].values())  # --quick: every set, at most 600 rows
    iris = report["datasets"]["iris"]
    assert set(iris["baselines"]) == {
        "majority", "logistic_regression", "adaboost10_stumps", "gradient_boosting", "nearest_centroid"
    }  # fmt: skip
    for learner in ("ncc", "lr", "bdt", "mbdt", "nb"):
        cell = iris["private"][learner]["5"]
        assert len(cell["values"]) == 2 and cell["ci"] >= 0.0 and 0.0 <= cell["mean"] <= 1.0
    assert set(report["goals"]["fair"]) == {"ncc@5", "lr@5"}  # no eps = 3 asked: no bdt goal
    ncc = report["goals"]["iris"]["ncc@5"]  # the paired per-split differences: their mean and interval
    short = np.subtract(iris["targets"]["ncc"], iris["private"]["ncc"]["5"]["values"])
    assert np.isclose(ncc["short_by"], short.mean()) and ncc["ci"] > 0 and ncc["met"] == (ncc["verdict"] == "met")
    assert ncc["verdict"] == (
        "met" if short.mean() + ncc["ci"] < 0 else "not met" if short.mean() - ncc["ci"] > 0 else "inconclusive"
    )
    captured = capsys.readouterr()
    out = captured.out
    assert "tabular: iris: 1/2 splits done (" in captured.err and "tabular: star98: 2/2 splits done (" in captured.err
    assert all(w in out for w in report["warnings"]) and f"ncc@5 short of target by {ncc['short_by']:+.3f}" in out


def test_rows_scaled_into_the_unit_ball_feature_by_feature():
    """The shared scale-aware map (FedDPDR's input can call it): each feature by its own documented range."""
    ds = load_builtin("wine")
    z = ds.bounds.to_unit_ball(ds.X)
    assert np.all(np.linalg.norm(z, axis=1) <= 1.0 + 1e-12)
    np.testing.assert_allclose(z * np.sqrt(ds.d), ds.bounds.to_unit(ds.X))
    assert np.all(z.std(axis=0) > 0.02)  # proline (up to 1680) does not drown hue (up to 1.71)


def test_the_decomposition_names_every_factor_and_drops_noise_only_where_it_says(tmp_path):
    from privfed.deploy.experiments import tabular_decompose as dec

    args = ["experiment", "tabular", "--decompose", "--datasets", "iris", "--splits", "2", "--epsilon", "3"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    table = (tmp_path / "decomposition.md").read_text()
    assert all(f"| {name} |" in table for name in (*dec.VARIANTS, *dec.NB_VARIANTS, *dec.MARGINAL_VARIANTS))
    # "both" exact is the eps = inf run: same groups from the same seed, so the same model
    fit = load_builtin("iris", seed=0)
    a = dec.fit_variant(fit, 3.0, np.random.default_rng(5), {}, "both")
    b = dec.fit_variant(fit, math.inf, np.random.default_rng(5), {}, "")
    assert [r.to_dict() for r in a.learners] == [r.to_dict() for r in b.learners]


def test_validation_of_one_grid_fits_its_settings_on_the_same_reports(tmp_path):
    """``--validate --learners mbdt-post``: one grid alone; its settings post-process the same reports, so SAMME run
    to convergence and naive Bayes on the same smoothed marginals score alike (the exponential loss's minimiser
    is the log posterior); a grid that does not exist is refused."""
    args = ["experiment", "tabular", "--validate", "--learners", "mbdt-post", "--datasets", "iris,star98"]
    assert main([*args, "--splits", "2", "--epsilon", "3", "--out", str(tmp_path)]) == 0
    rows = {r["setting"]: r for r in json.loads((tmp_path / "report.json").read_text())["results"]["mbdt-post"]}
    assert rows["nb,smoothing=4"]["accuracy"] == rows["n_rounds=1000,smoothing=4,shrink_to=uniform"]["accuracy"]
    assert set(rows["defaults"]["gap_to_counterpart"]) == {"iris@3", "star98@3"}
    assert rows["defaults"]["seeds"] == [1000, 1001]
    # paired on the same splits, against the first setting of the same learner: the mean difference is the
    # difference of the means
    paired = json.loads((tmp_path / "report.json").read_text())["results"]["paired"]["mbdt-post"]
    assert paired["nb,smoothing=4"]["against"] == "nb,smoothing=1" and "defaults" not in paired
    for name, d in paired.items():
        assert d["overall"]["n"] == 2 and len(d["by_dataset"]) == 2 and len(d["by_cell"][0]) == 1
        expected = rows[name]["gap_closed"] - rows[d["against"]]["gap_closed"]
        assert d["overall"]["mean"] == pytest.approx(expected, abs=1e-12)
    assert main([*args[:4], "nope", "--out", str(tmp_path)]) == 2


def test_validation_seed_shift_and_the_count_scalings_on_the_same_reports(tmp_path):
    """``--seed`` shifts the validation splits; the grid mbdt-scale pairs each realised scaling with the d-scaling of
    the same learner."""
    args = ["experiment", "tabular", "--validate", "--learners", "mbdt-scale", "--datasets", "iris", "--seed", "7"]
    assert main([*args, "--splits", "2", "--epsilon", "inf", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "report.json").read_text())["results"]
    rows = {r["setting"]: r for r in results["mbdt-scale"]}
    assert set(rows) == {"scaling=d", "scaling=realised", "nb,scaling=d", "nb,scaling=realised"}
    assert all(r["seeds"] == [1007, 1008] for r in rows.values())
    assert {k: d["against"] for k, d in results["paired"]["mbdt-scale"].items()} == {
        "scaling=realised": "scaling=d",
        "nb,scaling=realised": "nb,scaling=d",
    }


def test_validation_of_the_allocation_grid_pairs_every_two_phase_setting_with_the_uniform_draw(tmp_path):
    """``--learners mbdt-alloc`` (README, "Tried and not kept"): every two-phase setting is fitted on the same
    splits and generator seeds as the uniform draw and paired against it."""
    from privfed.deploy.experiments.tabular_validate import GRIDS

    args = ["experiment", "tabular", "--validate", "--learners", "mbdt-alloc", "--datasets", "iris", "--splits", "2"]
    assert main([*args, "--epsilon", "3", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "report.json").read_text())["results"]
    assert {r["setting"] for r in results["mbdt-alloc"]} == set(GRIDS["mbdt-alloc"])
    against = {d["against"] for d in results["paired"]["mbdt-alloc"].values()}
    assert against == {"uniform"} and len(results["paired"]["mbdt-alloc"]) == len(GRIDS["mbdt-alloc"]) - 1


def test_noise_draws_average_independent_draws_per_split_and_one_draw_is_the_default_run(tmp_path):
    """``--noise-draws R``: a cell's value on a split is its mean accuracy over R noise draws of the real fit, draw 0
    seeded as the single-draw run (so the default's reported numbers do not move); R < 1 is refused."""
    import argparse

    from privfed.common.datasets import train_test_split
    from privfed.common.errors import ConfigError
    from privfed.deploy.experiments import tabular_fits as bench

    ds = load_builtin("iris", seed=0)
    args = argparse.Namespace(seed=0, splits=2, learners=["nb"], epsilon=[1.0], legacy=False, noise_draws=1)
    one = bench.run_dataset(ds, args, 0)["private"]["nb"]["1"]["values"]
    del args.noise_draws  # callers without the option get one draw
    assert bench.run_dataset(ds, args, 0)["private"]["nb"]["1"]["values"] == one
    args.noise_draws = 3
    three = bench.run_dataset(ds, args, 0)["private"]["nb"]["1"]["values"]
    for s in range(2):
        train, test = train_test_split(ds, test_fraction=0.2, seed=s)
        draws = [bench._score(bench.fit_nb(train, 1.0, bench.noise_rng(0, 0, s, 0, 0, r)), test) for r in range(3)]
        assert draws[0] == one[s] and np.isclose(three[s], np.mean(draws))
    assert three != one  # at eps = 1 the draws differ: the mean is not draw 0's value alone
    args.noise_draws = 0
    with pytest.raises(ConfigError):
        bench.run_dataset(ds, args, 0)
