"""What ``privfed simulate`` tells a user at a glance (issue 11, item 4), over real owner node
processes: baselines beside every accuracy, ε = ∞ among the points, mean ± std over repeats,
the version in the report, no progress bars when stderr is not a terminal, and a launcher process
that imports none of the libraries its splits, references and plot need."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from privfed.common.datasets import SPLIT_CACHE_ENV

#: ``privfed ARGS``, saying at exit which heavy libraries its own process imported: a simulation's
#: coordinator computes splits, references and the plot in child processes (issue 27, item 2).
LEAN = (
    "import atexit, sys\n"
    "heavy = ('sklearn', 'scipy', 'matplotlib', 'pandas', 'statsmodels')\n"
    "atexit.register(lambda: print('heavy=' + ','.join(m for m in heavy if m in sys.modules), file=sys.stderr))\n"
    "from privfed.deploy.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


@pytest.mark.slow
def test_simulate_reports_baselines_repeats_and_infinite_epsilon_without_bars_on_a_pipe(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", LEAN, "simulate", "--owners", "20", "--processes", "1",
         "--epsilon", "2,inf", "--repeats", "2", "--task", "lr", "--solver", "local", "--insecure", "--n-samples", "300",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if k != SPLIT_CACHE_ENV},  # no split the session cached (conftest)
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "\r" not in done.stderr  # stderr is a pipe: no progress bars
    assert done.stderr.splitlines()[-1] == "heavy=", "the launcher's own process stays as lean as a coordinator"
    rounds = [line for line in done.stderr.splitlines() if "privfed.coordinator.rounds" in line]
    accepts = [line for line in rounds if "round accept: 20 of 20 task(s) answered" in line]  # each job's first
    releases = [line for line in rounds if "round r1: 20 of 20 task(s) answered" in line]
    assert len(accepts) == len(releases) == 4 and len(rounds) == 8, rounds
    lines = [line for line in done.stdout.splitlines() if line.lstrip().startswith("eps=")]  # results on stdout
    assert not any(line.lstrip().startswith("eps=") for line in done.stderr.splitlines())
    assert done.stdout.splitlines()[-1].startswith("report: ") and done.stdout.strip().endswith("report.json")
    assert len(lines) == 2 and all("±" in line and "majority class" in line and "chance" in line for line in lines)
    (report_path,) = tmp_path.glob("*/report.json")
    report = json.loads(report_path.read_text())
    assert report["status"] == "ok" and report["version"]["privfed"] and report["learner"] == "lr (pm)"
    assert report["baselines"]["chance"] == 0.5 and 0.5 <= report["baselines"]["majority_class"] <= 0.55
    assert [p["epsilon"] for p in report["points"]] == [2.0, "inf"]
    for point in report["points"]:
        accuracies = [run["accuracy"] for run in point["runs"]]
        assert [run["seed"] for run in point["runs"]] == [0, 1]
        assert point["accuracy"] == pytest.approx(sum(accuracies) / 2)
        assert point["accuracy_std"] == pytest.approx(abs(accuracies[0] - accuracies[1]) / 2**0.5)
    assert (report_path.parent / "accuracy_vs_epsilon.png").stat().st_size > 1000


#: ``bdt --release shares`` at ε = 0.5 on 20 owners of 200 rows: with the seeded noise, the federation of
#: seed 0 finds nothing to boost and that of seed 1 finishes; so do seeds 6 and 7 both fail (W14-16).
NOTHING_TO_BOOST_SOMETIMES = ["simulate", "--owners", "20", "--processes", "1", "--epsilon", "0.5", "--task", "bdt",
                              "--release", "shares", "--rounds", "2", "--insecure", "--n-samples", "200",
                              "--rng", "seeded", "--repeats", "2"]  # fmt: skip


@pytest.mark.slow
def test_simulate_keeps_the_finished_repeats_when_one_fails_and_fails_when_all_do(tmp_path):
    def simulate(seed: int, out: str) -> subprocess.CompletedProcess:
        args = [sys.executable, "-m", "privfed.deploy.cli", *NOTHING_TO_BOOST_SOMETIMES, "--seed", str(seed)]
        env = {k: v for k, v in os.environ.items() if k != SPLIT_CACHE_ENV}
        return subprocess.run(
            args + ["--out", str(tmp_path / out)], capture_output=True, text=True, timeout=300, env=env
        )

    one_failed = simulate(0, "one")
    assert one_failed.returncode == 0, one_failed.stderr[-3000:]
    (report_path,) = (tmp_path / "one").glob("*/report.json")
    report = json.loads(report_path.read_text())
    assert report["status"] == "ok"
    (point,) = report["points"]
    ((failed_run,),) = [point["failed_runs"]]
    assert failed_run["seed"] == 0 and failed_run["error"].startswith("nothing to boost")
    assert json.loads((report_path.parent / failed_run["report"]).read_text())["status"] == "failed"
    assert [run["seed"] for run in point["runs"]] == [1] and point["accuracy"] == point["runs"][0]["accuracy"]
    assert point["repeats_warning"] in report["warnings"] and "1 of 2 repeats failed" in point["repeats_warning"]
    assert "1 of 2 repeats failed" in one_failed.stdout and "seed 0: failed: nothing to boost" in one_failed.stderr

    all_failed = simulate(6, "all")
    assert all_failed.returncode != 0 and "nothing to boost" in all_failed.stderr.splitlines()[-1]
    (report_path,) = (tmp_path / "all").glob("*/report.json")
    assert json.loads(report_path.read_text())["status"] == "failed"


def _own_files(tmp_path, bad_line: int | None = None, rows: tuple[int, int] = (60, 60)):
    """Two owners' CSV files (labels {3, 7} and {-1, 3, 7}; ``rows`` each), a public test file and their schema."""
    import numpy as np

    rng = np.random.default_rng(5)
    centres = {-1: (2.0, 2.0), 3: (8.0, 2.0), 7: (5.0, 8.0)}
    for name, labels, n in (("a.csv", [3, 7], rows[0]), ("b.csv", [-1, 3, 7], rows[1]), ("test.csv", [-1, 3, 7], 90)):
        y = rng.choice(labels, size=n)
        X = np.clip(np.array([centres[int(v)] for v in y]) + rng.normal(0, 1.0, (n, 2)), 0, 10)
        if name == "b.csv":  # this owner exports its columns in another order: matched by the header's names
            lines = ["b,a,y"] + [f"{b:.3f},{a:.3f},{int(v)}" for (a, b), v in zip(X, y)]
        else:
            lines = ["a,b,y"] + [f"{a:.3f},{b:.3f},{int(v)}" for (a, b), v in zip(X, y)]
        if name == "b.csv" and bad_line is not None:
            lines[bad_line - 1] = "1,1,5"  # file line bad_line
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    (tmp_path / "schema.toml").write_text(
        'features = ["a", "b"]\nclasses = [-1, 3, 7]\ntest = "test.csv"\n[bounds]\nlo = 0\nhi = 10\n'
    )
    return ["--schema", str(tmp_path / "schema.toml"), "--data", str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]


@pytest.mark.slow
@pytest.mark.parametrize("solver", ["local", "gd"])
def test_simulate_on_owners_own_files_meets_the_reference_without_noise(tmp_path, solver):
    """The reference is privfed's own model at ε = ∞ with owners holding the rows as the nodes hold
    them (issue 24): the federation at ε = ∞ gives exactly its accuracy, for averaged local LR models
    too (which depend on who holds which rows), and for gradient descent (its public groups)."""
    args = [sys.executable, "-m", "privfed.deploy.cli", "simulate", *_own_files(tmp_path), "--owners", "12"]
    args += ["--epsilon", "inf", "--task", "lr", "--solver", solver, "--insecure", "--out", str(tmp_path / "runs")]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (report_path,) = (tmp_path / "runs").glob("*/report.json")
    report = json.loads(report_path.read_text())
    assert report["config"]["processes"] == 2 and report["train_rows"] == 120 and report["test_rows"] == 90
    assert report["reference_accuracy"] > 0.6 and report["points"][0]["accuracy"] == report["reference_accuracy"]
    assert report["reference_learner"] == "privfed lr at epsilon=inf, 12 owner(s) holding the training rows"
    assert report["points"][0]["answered"] == 12


@pytest.mark.slow
def test_simulate_gives_every_owner_one_row_of_uneven_files(tmp_path):
    """Sites of different sizes with one row per owner, as they run (walkthrough 13, W13-5): ``--owners`` is split
    over the files in proportion to their rows, so 90 owners over files of 70 and 20 rows hold a row each (an even
    split gave the 20-row file 45 owners, and its node exited)."""
    args = [sys.executable, "-m", "privfed.deploy.cli", "simulate", *_own_files(tmp_path, rows=(70, 20))]
    args += ["--owners", "90", "--epsilon", "inf", "--task", "nb", "--insecure", "--out", str(tmp_path / "runs")]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (report_path,) = (tmp_path / "runs").glob("*/report.json")
    report = json.loads(report_path.read_text())
    assert report["train_rows"] == 90 and report["config"]["rows_per_owner"] == 1.0
    assert report["points"][0]["answered"] == 90
    logs = sorted(report_path.parent.glob("**/node*.log"))
    assert len(logs) == 2
    too_many = [sys.executable, "-m", "privfed.deploy.cli", "simulate", *_own_files(tmp_path, rows=(70, 20))]
    too_many += ["--owners", "91", "--epsilon", "inf", "--insecure", "--out", str(tmp_path / "runs2")]
    refused = subprocess.run(too_many, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2
    assert "--owners 91: the --data files hold 90 rows (70, 20)" in refused.stderr


@pytest.mark.slow
def test_simulate_stops_at_an_owner_file_with_an_unknown_label(tmp_path):
    args = [sys.executable, "-m", "privfed.deploy.cli", "simulate", *_own_files(tmp_path, bad_line=4)]
    args += ["--owners", "12", "--epsilon", "1", "--insecure", "--out", str(tmp_path / "runs")]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "b.csv: line 4: label 5 is not a class of the federation schema" in done.stderr.strip().splitlines()[-1]
