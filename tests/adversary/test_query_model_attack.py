"""Issue 9, item 5: ``privfed query`` does not trust the model the coordinator describes.

* A GetModel answer with ``A_d = I`` (a "linear stage" that reads every coordinate) would make even
  perfect cleaning send each row whole. The real ``privfed query`` process must exit non-zero with
  a one-line error and send nothing: the hostile server records no Predict.
* With an honest rank-1 ``A_d``, the rows sent must not depend on the owner's training mean (the
  centre was the exact training mean before the fix, exposed along ``A_d`` over 60 queries). Two
  runs whose training sets differ by a translation (so every centred statistic, ``A_c`` included,
  is the same, and only the mean differs) must send the same rows — with the default method and
  with a null-space method.
"""

import subprocess
import sys

import numpy as np
import pytest
from hostile import GRID_BITS, matrix, pb, tls_dir

F, N_QUERIES, N_TRAIN = 4, 60, 40


def _model(stage: np.ndarray) -> pb.GetModelResponse:
    return pb.GetModelResponse(
        model_id="m", kind="lr", bounds=matrix(np.stack([np.zeros(F), np.ones(F)])), linear_stage=matrix(stage)
    )


def _csv(path, table):
    path.write_text("\n".join(",".join(repr(float(v)) for v in row) for row in np.atleast_2d(table)) + "\n")
    return path


def _query(coordinator, certs, tmp, queries, train, *extra):
    """``privfed query`` against the fake coordinator; ``train`` (with ``--confidential-labels 0``) goes to a
    null-space method only: projection refuses training flags, which would do nothing."""
    mapped = {"subspace", "generalized"} & set(extra)
    training = ["--train-data", str(train), "--confidential-labels", "0"] if mapped else []
    cmd = [
        sys.executable,
        "-m",
        "privfed.deploy.cli",
        "query",
        "--coordinator",
        f"127.0.0.1:{coordinator.port}",
        "--name",
        "owner-0",
        "--certs",
        str(tls_dir(certs, "owner-0")),
        "--model-id",
        "m",
        "--queries",
        str(queries),
        *training,
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _sent_rows(coordinator, since: int) -> np.ndarray:
    rows = []
    for req in coordinator.predicts[since:]:
        shape = tuple(req.rows.shape)
        rows.append(np.frombuffer(req.rows.data, dtype="<i8").reshape(shape) * 2.0**-GRID_BITS)
    return np.concatenate(rows) if rows else np.zeros((0, F))


@pytest.fixture
def data(tmp_path):
    rng = np.random.Generator(np.random.PCG64(9))
    queries = rng.uniform(0.1, 0.9, size=(N_QUERIES, F))
    X = rng.uniform(0.0, 0.5, size=(N_TRAIN, F))
    labels = np.column_stack(
        [X @ np.array([1.0, -2.0, 0.5, 0.0]) + rng.normal(0, 0.01, N_TRAIN), rng.integers(0, 2, N_TRAIN)]
    )
    shift = np.array([0.4, 0.1, 0.3, 0.2])  # second owner: same rows moved, so only the mean differs
    return {
        "queries": _csv(tmp_path / "q.csv", queries),
        "train1": _csv(tmp_path / "t1.csv", np.column_stack([X, labels])),
        "train2": _csv(tmp_path / "t2.csv", np.column_stack([X + shift, labels])),
    }


HOSTILE_STAGES = {
    "identity": np.eye(F),  # reads every coordinate
    "rank-2": np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0]]),  # two directions, default allows 1
    "wide-rank-1": np.tile(np.array([[1.0], [0.5], [0.0], [0.0]]), (1, F + 2)),  # many copies of one column
    "non-finite": np.array([[np.nan], [1.0], [0.0], [0.0]]),
    "wrong-rows": np.ones((F + 1, 1)),  # does not fit the model's features
}


@pytest.mark.parametrize("stage", list(HOSTILE_STAGES))
def test_hostile_stage_is_refused_before_anything_is_sent(coordinator, certs, tmp_path, data, stage):
    coordinator.model = _model(HOSTILE_STAGES[stage])
    proc = _query(coordinator, certs, tmp_path, data["queries"], data["train1"])
    assert proc.returncode != 0, f"query accepted stage {stage}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert coordinator.get_models, "the tool never asked for the model (the test would prove nothing)"
    assert coordinator.predicts == [], f"rows were sent to a model with stage {stage}"


@pytest.mark.parametrize(
    "method", [(), ("--method", "subspace", "--allow-confidential-map-leak")], ids=["default", "subspace"]
)
def test_rows_sent_do_not_depend_on_the_training_mean(coordinator, certs, tmp_path, data, method):
    a_d = np.array([[1.0], [0.5], [-0.25], [0.0]])
    coordinator.model = _model(a_d)
    sent = []
    for train in ("train1", "train2"):
        since = len(coordinator.predicts)
        proc = _query(coordinator, certs, tmp_path, data["queries"], data[train], *method)
        assert proc.returncode == 0, proc.stderr[-3000:]
        rows = _sent_rows(coordinator, since)
        assert rows.shape == (N_QUERIES, F)
        sent.append(rows)
    np.testing.assert_allclose(
        sent[0], sent[1], atol=2.0**-GRID_BITS, err_msg="the rows sent moved with the owner's training mean"
    )
    # and the raw rows did not go whole
    raw = np.loadtxt(data["queries"], delimiter=",")
    assert not np.allclose(sent[0], raw, atol=1e-3)
