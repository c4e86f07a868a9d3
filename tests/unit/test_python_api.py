"""The Python API: ``import privfed`` exports the typed configs, ``simulate`` and the estimators
(lazily), the README's example runs, a TOML file gives the same config as the flags."""

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import privfed
from privfed.common.errors import ConfigError
from privfed.common.learners import estimators
from privfed.deploy.cli import build_parser, job_config, simulation_config
from privfed.deploy.simulate import SimulationConfig
from privfed.server.config import JobConfig
from privfed.server.parameters import LrParams

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_top_level_package_exports_the_api_lazily():
    assert privfed.LdpNearestCentroid is estimators.LdpNearestCentroid
    assert privfed.JobConfig is JobConfig and privfed.SimulationConfig is SimulationConfig
    assert sorted(privfed.__all__) == sorted(privfed._EXPORTS) and set(privfed.__all__) <= set(dir(privfed))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        privfed.nope  # noqa: B018
    code = "import sys, privfed; import privfed.owner.main; print(sorted(m for m in ('sklearn', 'privfed.deploy.simulate') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"  # an owner node imports neither the estimators nor the launcher


def test_every_name_the_learners_package_exports_resolves():
    import privfed.common.learners as learners

    assert sorted(learners.__all__) == sorted([*learners._EXPORTS, "resolve_bounds", "resolve_rng"])
    for name in learners.__all__:  # each lazy entry names the submodule that defines it
        assert getattr(learners, name).__name__ == name


def test_the_estimators_predict_proba_agrees_with_predict():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    X = np.clip(np.array([[2.0, 8.0], [8.0, 2.0], [8.0, 8.0]])[y] + rng.normal(0, 1, (600, 2)), 0, 10)
    for model in (
        privfed.LdpNearestCentroid(epsilon=math.inf, bounds=(0.0, 10.0), random_state=0),
        privfed.LdpLogisticRegression(epsilon=math.inf, bounds=(0.0, 10.0), random_state=0),  # one row per owner
        privfed.LdpLogisticRegression(epsilon=math.inf, n_owners=5, solver="local", bounds=(0.0, 10.0), random_state=0),
    ):
        proba = model.fit(X, y).predict_proba(X)
        assert proba.shape == (600, 3) and np.allclose(proba.sum(axis=1), 1.0) and (proba >= 0).all()
        assert np.array_equal(model.classes_[proba.argmax(axis=1)], model.predict(X))
        assert proba[np.arange(600), y].mean() > 0.5  # the true class is the likely one (chance 1/3; ncc measures
        # distances in the bounds' unit space, where unit-variance Gaussians give flatter probabilities)
    binary = privfed.LdpLogisticRegression(epsilon=math.inf, bounds=(0.0, 10.0), random_state=0)
    proba = binary.fit(X, y == 0).predict_proba(X)
    assert proba.shape == (600, 2) and np.array_equal(binary.classes_[proba.argmax(axis=1)], binary.predict(X))


def test_param_bound_has_one_default_for_the_cli_the_job_and_the_estimator():
    args = build_parser().parse_args(["coordinator", "--owners", "1", "--epsilon", "1", "--insecure", "--task", "lr"])
    cli = job_config(args).task_options()["param_bound"]
    assert cli == LrParams().param_bound == privfed.LdpLogisticRegression().param_bound == 4.0


def test_a_toml_config_gives_the_same_simulation_as_the_flags(tmp_path):
    flags = ["simulate", "--task", "lr", "--owners", "30", "--processes", "3", "--epsilon", "1,inf"]
    flags += ["--dataset", "breast_cancer", "--param-bound", "2", "--repeats", "2", "--out", str(tmp_path)]
    from_flags = simulation_config(build_parser().parse_args(flags))
    text = f"""
[tool.privfed]
task = "lr"
owners = 30
processes = 3
epsilon = [1, inf]
dataset = "breast_cancer"
param_bound = 2.0
repeats = 2
out = "{tmp_path}"
"""
    (tmp_path / "run.toml").write_text(text)
    assert SimulationConfig.from_toml(text) == from_flags
    from_file = simulation_config(build_parser().parse_args(["simulate", "--config", str(tmp_path / "run.toml")]))
    assert from_file == from_flags
    assert (from_file.epsilons, from_file.job.task_options()["param_bound"], from_file.processes) == (
        (1.0, math.inf),
        2.0,
        3,
    )
    # a flag given on the command line overrides the file; the file's other settings stay
    override = ["simulate", "--config", str(tmp_path / "run.toml"), "--owners", "40"]
    assert simulation_config(build_parser().parse_args(override)) == from_flags.__class__(
        job=from_flags.job.replace(owners=40), epsilons=from_flags.epsilons, processes=3, repeats=2
    )


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('task = "ncc"\ncolour = 1\n', "unknown key(s) ['colour']"),
        ('task = "ncc"\nowners = 2\nprocesses = 3\n', "--processes must be an int in [1, 2]"),
        ('task = "ncc"\nepsilon = [1, -1]\n', "--epsilon must be > 0"),
        ('task = "ncc"\nepsilon = []\n', "epsilon must be a number or a non-empty list"),
        ('task = "nope"\n', "--task must be one of"),
        ('task = "ncc"\nrng = "lucky"\n', "--rng must be one of"),
        ("task = [", "invalid TOML"),
        ("owners = 3\n", "task is required (one of ncc, lr, feddpdr, bdt, nb)"),
        (
            'task = "ncc"\ndata = ["a.csv", "b.csv"]\n',
            "--data FILE ... (owners' own files, one node each) and --schema",
        ),
        ('task = "ncc"\nschema = "s.toml"\n', "--data FILE ... (owners' own files, one node each) and --schema"),
        (
            'task = "ncc"\nschema = "s.toml"\ndata = ["a.csv", "b.csv"]\nprocesses = 3\n',
            "--processes is the number of --data files (2)",
        ),
    ],
)
def test_a_bad_config_file_is_one_config_error(text, fragment):
    with pytest.raises(ConfigError) as info:
        SimulationConfig.from_toml(text, source="run.toml")
    assert fragment in str(info.value), str(info.value)


def test_a_bad_config_file_is_one_line_and_exit_2(tmp_path, capsys):
    from privfed.deploy.cli import main

    (tmp_path / "run.toml").write_text('task = "ncc"\nowners = 2\nprocesses = 3\n')
    assert main(["simulate", "--config", str(tmp_path / "run.toml")]) == 2
    assert capsys.readouterr().err.strip() == (
        "privfed simulate: error: --processes must be an int in [1, 2], got 3; need --processes <= --owners"
    )


def test_the_readme_python_example_runs(tmp_path):
    """The README's "From Python" snippet, run as written (in a fresh process, cwd tmp_path)."""
    text = README.read_text()
    snippet = re.search(r"<!-- python-api-example -->\n```python\n(.*?)```", text, re.S)
    assert snippet is not None, "README lost its Python example"
    out = subprocess.run(
        [sys.executable, "-c", snippet.group(1)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    status, accuracies = lines[0].split(" ", 1)
    assert status == "ok" and len(eval(accuracies)) == 2  # noqa: S307 - our own printed list
    assert lines[1].startswith("joint ") and lines[1].endswith("(3, 10)") and lines[2].endswith(" 4.0")
    assert list(tmp_path.glob("runs/*/report.json"))


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ([], None),
        (
            ["--rows-per-owner", "1"],
            "--rows-per-owner bounds an owner at 1 row(s), but the largest simulated owner holds 10",
        ),
        (
            ["--max-owner-rows", "9"],
            "--max-owner-rows bounds an owner at 9 row(s), but the largest simulated owner holds 10",
        ),
        (["--max-owner-rows", "10"], None),
    ],
)
def test_a_rows_bound_below_the_simulated_owners_rows_is_warned_about(tmp_path, capsys, extra, expected):
    """`privfed simulate --rows-per-owner R` with R below the rows its own split gives each owner clips every
    release to R rows: a biased model (at ε = ∞ bdt learns nothing) that must come with a line saying why.
    breast_cancer's 456 training rows over 46 owners: 9 or 10 rows each."""
    from privfed.deploy.simulation_data import prepare

    flags = ["simulate", "--task", "ncc", "--owners", "46", "--dataset", "breast_cancer", "--out", str(tmp_path)]
    config = simulation_config(build_parser().parse_args(flags + extra))
    prepared = prepare(config, config.job, [config.job.seed], None)
    assert prepared.train_rows == 456
    if expected is None:
        assert prepared.warning is None and "warning" not in capsys.readouterr().err
    else:
        assert expected in prepared.warning and prepared.warning in capsys.readouterr().err


def test_owners_own_files_of_different_sizes_are_bounded_at_the_largest_owner_not_the_mean(tmp_path, capsys):
    """`privfed simulate --data` with files of 200 and 50 rows over two owners: the simulation plays every owner,
    so its public rows per owner is the larger owner's 200, not their mean 125, which clipped the larger owner's
    releases and warned about a --rows-per-owner the user never passed (walkthrough 4)."""
    from privfed.deploy.simulation_data import prepare

    for name, n in (("a.csv", 200), ("b.csv", 50), ("test.csv", 40)):
        rows = [f"{(i % 10) / 10:.1f},{i % 2}" for i in range(n)]
        (tmp_path / name).write_text("x,y\n" + "\n".join(rows) + "\n")
    (tmp_path / "schema.toml").write_text(
        'features = ["x"]\nclasses = [0, 1]\ntest = "test.csv"\n[bounds]\nlo = 0\nhi = 1\n'
    )
    flags = ["simulate", "--task", "ncc", "--owners", "2", "--schema", str(tmp_path / "schema.toml")]
    flags += ["--data", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--out", str(tmp_path / "runs")]
    config = simulation_config(build_parser().parse_args(flags))
    prepared = prepare(config, config.job, [config.job.seed], None)
    assert prepared.train_rows == 250 and prepared.rows_per_owner == 200
    assert prepared.warning is None and "warning" not in capsys.readouterr().err
    # a bound the user gives is kept, and warned about below the largest owner
    config = simulation_config(build_parser().parse_args([*flags, "--rows-per-owner", "125"]))
    prepared = prepare(config, config.job, [config.job.seed], None)
    assert prepared.rows_per_owner == 125 and "the largest simulated owner holds 200" in prepared.warning


def test_one_file_named_twice_as_owners_data_is_refused(tmp_path):
    """`privfed simulate --data a.csv ./a.csv` would host the same rows on two nodes: two owners with a budget
    each (walkthrough 4: accepted)."""
    from privfed.common.errors import ConfigError

    (tmp_path / "a.csv").write_text("x,y\n0.5,1\n")
    (tmp_path / "schema.toml").write_text('features = ["x"]\nclasses = [0, 1]\n[bounds]\nlo = 0\nhi = 1\n')
    flags = ["simulate", "--owners", "2", "--schema", str(tmp_path / "schema.toml"), "--out", str(tmp_path)]
    (tmp_path / "sub").mkdir()
    twice = [str(tmp_path / "a.csv"), str(tmp_path / "sub" / ".." / "a.csv")]
    with pytest.raises(
        ConfigError, match=r"--data names .*sub/\.\./a\.csv twice \(as .*a\.csv too\): each file is one"
    ):
        simulation_config(build_parser().parse_args([*flags, "--data", *twice]))
    with pytest.raises(ConfigError, match=r"--data names .*a\.csv twice: each file is one owner node's rows"):
        simulation_config(build_parser().parse_args([*flags, "--data", twice[0], twice[0]]))
