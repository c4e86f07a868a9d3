"""Audit 34 (stop 60, W11-8): ``privfed query --out FILE`` never writes over an existing file without ``--force`` ...
but its temporary file, ``FILE.partial``, was opened for writing (truncated) before the coordinator was contacted and
removed at the end, so a file of that name that the user kept there was emptied and deleted without ``--force``. Not a
privacy finding: the promise stop 60 made (README: "an existing file unless --force") was broken for that one name.

A real ``privfed query`` process against the hostile coordinator: ``labels.csv.partial`` holds the user's text; without
``--force`` the run must leave it as it was (and send nothing); control: the run without such a file writes its labels.
"""

from __future__ import annotations

import numpy as np
from hostile import matrix, pb
from test_query_model_attack import _csv, _query

F = 4


def test_a_file_named_like_the_labels_temporary_file_is_kept_without_force(coordinator, certs, tmp_path):
    coordinator.model = pb.GetModelResponse(
        model_id="m",
        kind="lr",
        bounds=matrix(np.stack([np.zeros(F), np.ones(F)])),
        linear_stage=matrix(np.array([[1.0], [0.0], [0.0], [0.0]])),
    )
    queries = _csv(tmp_path / "q.csv", np.full((3, F), 0.5))
    kept = tmp_path / "labels.csv.partial"
    kept.write_text("the user's own notes\n")
    since = len(coordinator.predicts)
    proc = _query(coordinator, certs, tmp_path, queries, queries, "--out", str(tmp_path / "labels.csv"))
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert kept.is_file() and kept.read_text() == "the user's own notes\n", "the file was emptied or removed"
    assert proc.returncode != 0 and "nothing sent" in proc.stderr and len(coordinator.predicts) == since
    # control: without it, the labels are written
    kept.unlink()
    proc = _query(coordinator, certs, tmp_path, queries, queries, "--out", str(tmp_path / "labels.csv"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "labels.csv").read_text().count("\n") == 4 and not kept.exists()  # header and 3 labels
