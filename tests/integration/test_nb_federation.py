"""``privfed coordinator --task nb`` with real ``privfed owner`` processes (issue 22 item 3).

A coordinator process and two owner node processes over gRPC, one row per owner (755 owners of the
anes96 survey): LDP naive Bayes learns well above the majority class at ε = 3 in one round, every owner
asked once; each owner's ledger holds exactly one report at ε; the model is saved and served as a
naive Bayes model with probabilities.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from fedharness import one_report_job

from privfed.common.learners.exported import TrainedClassifier
from privfed.common.learners.naive_bayes import NaiveBayesModel


def test_naive_bayes_learns_over_the_wire_one_report_per_owner(tmp_path: Path):
    report, path = one_report_job(tmp_path, ["--task", "nb"], "nb-report", epsilon=3.0)
    assert report["config"]["n_bins"] == 3

    model = TrainedClassifier.from_file(str(path.parent / "model.json"))
    assert isinstance(model.model_, NaiveBayesModel) and model.model_.log_tables.shape == (9, 3, 2)
    proba = model.model_.votes(np.zeros((1, 9)))
    assert proba.shape == (1, 2) and np.all(np.isfinite(proba))
