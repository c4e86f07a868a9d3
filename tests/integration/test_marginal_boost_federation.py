"""``privfed coordinator --task bdt --release marginals`` with real ``privfed owner`` processes (issue 22).

A coordinator process and two owner node processes over gRPC, one row per owner (755 owners of the anes96
survey): every owner is asked once for nb's (feature, bin, class) report and its ledger holds exactly that one
report at ε; the coordinator boosts BDT's stumps on the marginals, and the saved model is BDT's boosted-stump
model, learning well above the majority class at ε = 3.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from fedharness import assert_one_report_each, coordinator_job

from privfed.common.learners.exported import TrainedClassifier
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
    assert (report["config"]["n_rounds"], report["config"]["n_bins"], report["config"]["smoothing"]) == (20, 3, 4.0)
    assert report["accuracy"] > report["baselines"]["majority_class"] + 0.15, report["accuracy"]

    assert_one_report_each(report, tmp_path, nodes, OWNERS, EPSILON, "nb-report")

    model = TrainedClassifier.from_file(str(path.parent / "model.json")).model_
    assert isinstance(model, BoostedModel) and 1 <= len(model.learners) <= 20
    assert all(isinstance(s, Stump) and s.threshold_index in (1, 2) for s in model.learners)
    assert model.votes(np.zeros((1, 9))).shape == (1, 2)
