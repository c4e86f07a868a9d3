"""``privfed coordinator --task ncc --labels joint`` with real ``privfed owner`` processes (issue 22).

A coordinator process and two owner node processes over gRPC, one row per owner (755 owners of the anes96
survey): every owner sends one joint (label, sign) report per row at the whole ε and no label beside it;
nearest centroid learns well above the majority class at ε = 3 in one round; each owner's ledger holds
exactly one entry, ``ncc-joint`` at ε, and none of it is non-private.
"""

from __future__ import annotations

from pathlib import Path

from fedharness import one_report_job

from privfed.common.learners.exported import TrainedClassifier
from privfed.common.learners.ncc_model import NearestCentroidModel


def test_joint_labels_learn_over_the_wire_one_report_per_owner(tmp_path: Path):
    report, path = one_report_job(tmp_path, ["--task", "ncc", "--labels", "joint"], "ncc-joint", epsilon=3.0)
    assert report["config"]["labels"] == "joint"

    model = TrainedClassifier.from_file(str(path.parent / "model.json"))
    assert isinstance(model.model_, NearestCentroidModel) and model.model_.centroids.shape == (2, 9)


def test_auto_labels_at_eps_3_are_joint_over_the_wire(tmp_path: Path):
    """The default scheme at ε = 3 is joint (chosen on validation splits): the same one release at ε, whose
    purpose in the report's privacy split and in every ledger is ncc-joint."""
    report, _ = one_report_job(tmp_path, ["--task", "ncc"], "ncc-joint", epsilon=3.0)
    assert report["config"]["labels"] == "auto"
