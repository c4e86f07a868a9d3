"""What ``privfed simulate`` tells a user at a glance (issue 11, item 4), over real owner node
processes: baselines beside every accuracy, ε = ∞ among the points, mean ± std over repeats,
the version in the report, and no progress bars when stderr is not a terminal."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_simulate_reports_baselines_repeats_and_infinite_epsilon_without_bars_on_a_pipe(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "privfed.deploy.cli", "simulate", "--owners", "20", "--processes", "1",
         "--epsilon", "2,inf", "--repeats", "2", "--task", "lr", "--insecure", "--n-samples", "300",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "\r" not in done.stderr  # stderr is a pipe: no progress bars
    rounds = [line for line in done.stderr.splitlines() if "privfed.coordinator.rounds" in line]
    assert len(rounds) == 4 and all("round r1: 20 of 20 task(s) answered" in line for line in rounds)
    lines = [line for line in done.stderr.splitlines() if line.lstrip().startswith("eps=")]
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
