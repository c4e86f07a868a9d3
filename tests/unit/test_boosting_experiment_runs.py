"""What ``privfed reproduce`` reads from the boosting experiments (issue 21 item 4): one outcome per
run, fresh synthetic data every run for the hit rate, and the reference lines (chance, majority)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from privfed.deploy.cli import main


def _report(out: Path, *argv: str) -> dict:
    assert main(["experiment", *argv, "--out", str(out)]) == 0
    return json.loads((out / "report.json").read_text())["results"]


def test_hit_rate_keeps_every_runs_outcome_on_fresh_data(tmp_path: Path) -> None:
    argv = ["stump-hit-rate", "--owners", "1000", "--runs", "4", "--epsilon", "0.5,50", "--encodings", "signs"]
    res = _report(tmp_path / "h", *argv)
    assert res["fresh_data"] is True and res["chance_top3"] == 3 / res["n_attributes"]
    for key in ("signs@0.5", "signs@50"):
        hits = res["results"][key]["hits3"]
        assert len(hits) == 4 and set(hits) <= {0.0, 1.0} and np.mean(hits) == res["results"][key]["top3"]
    assert res["results"]["signs@50"]["top3"] >= res["results"]["signs@0.5"]["top3"]
    fixed = _report(tmp_path / "f", "stump-hit-rate", "--datasets", "mnist4v9-pool", "--runs", "3", "--epsilon", "5",
                    "--encodings", "signs")  # fmt: skip
    assert fixed["fresh_data"] is False  # every MNIST row is an owner: the runs differ in the noise only


def test_curves_report_per_run_errors_and_the_majority_line(tmp_path: Path) -> None:
    res = _report(tmp_path / "b", "bdt-error", "--datasets", "synthetic", "--owners", "2000", "--runs", "3",
                  "--epsilon", "5", "--rounds", "3")["synthetic"]  # fmt: skip
    per_run = np.asarray(res["curves"]["eps=5"]["per_run"])
    assert per_run.shape == (3, 3) and np.allclose(per_run.mean(axis=0), res["curves"]["eps=5"]["mean"])
    assert res["chance_error"] == 0.5 and len(res["majority_error"]) == 3
    assert all(0.4 < m <= 0.5 for m in res["majority_error"])  # a balanced test set: about a half wrong
