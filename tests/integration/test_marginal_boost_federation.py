"""``privfed coordinator --task bdt --release marginals`` with real ``privfed owner`` processes (issue 22).

A coordinator process and two owner node processes over gRPC, one row per owner (755 owners of the anes96
survey): every owner is asked once for nb's (feature, bin, class) report and its ledger holds exactly that one
report at ε; the coordinator boosts BDT's stumps on the marginals, and the saved model is BDT's boosted-stump
model, learning well above the majority class at ε = 3. And ``privfed simulate --task bdt`` with one row per owner
runs this release without ``--release``: the default for a public bound of one row on an owner's rows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from fedharness import assert_one_report_each, coordinator_job

from privfed.common.learners.exported import TrainedClassifier
from privfed.common.learners.marginal_boost import MARGINAL_SMOOTHING
from privfed.common.learners.samme import BoostedModel
from privfed.common.learners.stump import Stump

EPSILON, OWNERS = 3.0, 755
DATA = ["--dataset", "anes96", "--seed", "1", "--test-fraction", "0.2"]


def test_boosted_stumps_from_one_marginal_report_per_owner_over_the_wire(tmp_path: Path):
    half = OWNERS // 2
    nodes = {"owner-0": (f"0:{half}", EPSILON), "owner-1": (f"{half}:{OWNERS}", EPSILON)}
    flags = ["--task", "bdt", "--release", "marginals", "--rounds", "20", "--epsilon", str(EPSILON)]
    report, path = coordinator_job(tmp_path, flags, nodes, n_owners=OWNERS, dataset=DATA)
    assert report["status"] == "ok" and report["config"]["release"] == "marginals"
    assert (report["config"]["n_rounds"], report["config"]["n_bins"], report["config"]["smoothing"]) == (
        20,
        3,
        MARGINAL_SMOOTHING,
    )
    assert report["accuracy"] > report["baselines"]["majority_class"] + 0.15, report["accuracy"]

    assert_one_report_each(report, tmp_path, nodes, OWNERS, EPSILON, "nb-report")

    model = TrainedClassifier.from_file(str(path.parent / "model.json")).model_
    assert isinstance(model, BoostedModel) and 1 <= len(model.learners) <= 20
    assert all(isinstance(s, Stump) and s.threshold_index in (1, 2) for s in model.learners)
    assert model.votes(np.zeros((1, 9))).shape == (1, 2)


def test_privfed_simulate_runs_the_marginal_release_by_default_with_one_row_per_owner(tmp_path: Path):
    """iris: 120 training rows among 120 owners on two node processes (mTLS), no ``--release``: the report says
    marginals by default, every owner's ledger holds nb's one report at ε, and the model learns."""
    flags = ["--task", "bdt", "--dataset", "iris", "--owners", "120", "--processes", "2", "--epsilon", "3"]
    run = subprocess.run(
        [sys.executable, "-m", "privfed.deploy.cli", "simulate", *flags, "--no-progress", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    (path,) = tmp_path.glob("*/report.json")
    report = json.loads(path.read_text())
    config = report["config"]
    assert (config["owner_rows_bound"], config["release"], config["release_source"]) == (1, "marginals", "default")
    assert config["n_rounds"] == 50 and report["learner"].startswith("bdt (stumps from marginal reports")
    (point,) = report["points"]
    assert point["accuracy"] > report["baselines"]["majority_class"] + 0.3, point["accuracy"]
    point_dir = path.parent / "eps-3"
    job = json.loads((point_dir / "report.json").read_text())
    assert (job["config"]["release"], job["config"]["release_source"]) == ("marginals", "default")
    assert_one_report_each(job, point_dir, ("ledger-node0", "ledger-node1"), 120, 3.0, "nb-report")
