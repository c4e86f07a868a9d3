"""``privfed coordinator --task nb`` with real ``privfed owner`` processes (issue 22 item 3).

A coordinator process and two owner node processes over gRPC, one row per owner (755 owners of the
anes96 survey): LDP naive Bayes learns well above the majority class at ε = 3 in one round, every owner
asked once; each owner's ledger holds exactly one report at ε; the model is saved and served as a
naive Bayes model with probabilities.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from fedharness import assert_one_report_each, coordinator_job

from privfed.common.learners.exported import TrainedClassifier
from privfed.common.learners.naive_bayes import NaiveBayesModel

EPSILON, OWNERS = 3.0, 755
DATA = ["--dataset", "anes96", "--seed", "1", "--test-fraction", "0.2"]


def test_naive_bayes_learns_over_the_wire_one_report_per_owner(tmp_path: Path):
    half = OWNERS // 2
    nodes = {"owner-0": (f"0:{half}", EPSILON), "owner-1": (f"{half}:{OWNERS}", EPSILON)}
    flags = ["--task", "nb", "--epsilon", str(EPSILON)]
    report, path = coordinator_job(tmp_path, flags, nodes, n_owners=OWNERS, dataset=DATA)
    assert report["status"] == "ok" and report["config"]["n_bins"] == 3 and report["config"]["quorum"] == 1
    assert report["accuracy"] > report["baselines"]["majority_class"] + 0.15, report["accuracy"]

    assert_one_report_each(report, tmp_path, nodes, OWNERS, EPSILON, "nb-report")

    model = TrainedClassifier.from_file(str(path.parent / "model.json"))
    assert isinstance(model.model_, NaiveBayesModel) and model.model_.log_tables.shape == (9, 3, 2)
    proba = model.model_.votes(np.zeros((1, 9)))
    assert proba.shape == (1, 2) and np.all(np.isfinite(proba))
