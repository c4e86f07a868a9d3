"""``privfed coordinator --task ncc --labels joint`` with real ``privfed owner`` processes (issue 22).

A coordinator process and two owner node processes over gRPC, one row per owner (755 owners of the anes96
survey): every owner sends one joint (label, sign) report per row at the whole ε and no label beside it;
nearest centroid learns well above the majority class at ε = 3 in one round; each owner's ledger holds
exactly one entry, ``ncc-joint`` at ε, and none of it is non-private.
"""

from __future__ import annotations

from pathlib import Path

from fedharness import assert_one_report_each, coordinator_job, ledger_entries

from privfed.common.learners.exported import TrainedClassifier
from privfed.common.learners.ncc import NearestCentroidModel

EPSILON, OWNERS = 3.0, 755
DATA = ["--dataset", "anes96", "--seed", "1", "--test-fraction", "0.2"]


def test_joint_labels_learn_over_the_wire_one_report_per_owner(tmp_path: Path):
    half = OWNERS // 2
    nodes = {"owner-0": (f"0:{half}", EPSILON), "owner-1": (f"{half}:{OWNERS}", EPSILON)}
    flags = ["--task", "ncc", "--labels", "joint", "--epsilon", str(EPSILON)]
    report, path = coordinator_job(tmp_path, flags, nodes, n_owners=OWNERS, dataset=DATA)
    assert report["status"] == "ok" and report["config"]["labels"] == "joint"
    assert report["accuracy"] > report["baselines"]["majority_class"] + 0.15, report["accuracy"]

    assert_one_report_each(report, tmp_path, nodes, OWNERS, EPSILON, "ncc-joint")
    assert not any(e["nonprivate"] for h in ledger_entries(tmp_path, nodes, EPSILON).values() for e in h)

    model = TrainedClassifier.from_file(str(path.parent / "model.json"))
    assert isinstance(model.model_, NearestCentroidModel) and model.model_.centroids.shape == (2, 9)
