"""The one-job ``privfed coordinator`` refuses revoked certificates as ``privfed serve`` does.

Walkthrough 9 (W9-2) made ``privfed certs --reissue`` list a replaced certificate in ``revoked-certificates.txt`` and
``privfed serve`` refuse every call presenting it, but the one-job coordinator did not read the file: a data user's
leaked old key still called Predict on a model it served (``--load-model``, or ``--serve`` after training). It now
reads the same file the same way (by default the one in ``--certs``, watched before it exists), with the same flag.
A real ``privfed coordinator`` process over mTLS, with certificates from ``make_certs``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest

from privfed.common.dataset_files import read_table
from privfed.common.schema import FederationSchema
from privfed.deploy.certs import make_certs, reissue
from privfed.deploy.reference import even_parts, reference_model
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto import serde
from privfed.proto.transport import TlsFiles, channel_credentials, channel_options
from privfed.server.config import JobConfig
from privfed.server.models import save_model

sys.path.insert(0, str(Path(__file__).parents[1]))
from served_model import served_model  # noqa: E402

USER = "alice"
SCHEMA = """features = ["a", "b"]
classes = ["no", "yes"]
label = "y"
[bounds]
lo = [0, 0]
hi = [1, 1]
"""


def _model(tmp_path: Path) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(3)
    rows = rng.uniform(0, 1, size=(60, 2))
    lines = ["y,a,b", *(f"{'yes' if a + b > 1 else 'no'},{a:.3f},{b:.3f}" for a, b in rows)]
    (tmp_path / "rows.csv").write_text("\n".join(lines) + "\n")
    schema = FederationSchema.parse(SCHEMA)
    ds = schema.dataset(read_table(tmp_path / "rows.csv"))
    model = reference_model(JobConfig(task="ncc", epsilon=1.0, owners=1), ds, even_parts(ds.n, 1, 0))
    (tmp_path / "run").mkdir()
    return save_model(tmp_path / "run" / "model.json", model, model_id="m", task="ncc", schema=schema), ds.X[:3]


def _predict(port: int, party_dir: Path, rows: np.ndarray) -> grpc.StatusCode:
    tls = TlsFiles.in_dir(party_dir, USER)
    target = f"127.0.0.1:{port}"
    with grpc.secure_channel(target, channel_credentials(tls), options=channel_options(None)) as channel:
        try:
            pb_grpc.CoordinatorStub(channel).Predict(
                pb.PredictRequest(model_id="m", rows=serde.reports_to_proto(rows)), timeout=10
            )
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


@pytest.fixture
def served(tmp_path):
    """``privfed coordinator --load-model`` over mTLS with its --certs' default revocation file (not made yet)."""
    certs = make_certs(tmp_path / "certs", owners=1, data_users=[USER])
    shutil.copytree(certs / USER, tmp_path / "old" / USER)  # what a thief holds
    path, rows = _model(tmp_path)
    with served_model(path, "m", ["--certs", str(certs / "coordinator")]) as port:
        yield port, certs, tmp_path / "old", rows


def test_a_reissued_data_users_old_key_is_refused_by_the_one_job_coordinator(served):
    port, certs, old, rows = served
    assert _predict(port, old / USER, rows) == grpc.StatusCode.OK
    reissue(certs, [USER])  # makes certs/coordinator/revoked-certificates.txt while the coordinator runs
    assert _predict(port, old / USER, rows) == grpc.StatusCode.PERMISSION_DENIED
    assert _predict(port, certs / USER, rows) == grpc.StatusCode.OK


def test_a_named_revocation_file_that_is_missing_stops_the_coordinator_before_it_serves(tmp_path, capsys):
    from privfed.deploy.cli import main

    certs = make_certs(tmp_path / "certs", owners=1)
    path, _ = _model(tmp_path)
    missing = tmp_path / "nope.txt"
    for train in (["--load-model", str(path)], ["--owners", "2", "--epsilon", "1", "--task", "ncc"]):
        argv = ["coordinator", *train, "--certs", str(certs / "coordinator"), "--revoked-certificates", str(missing)]
        assert main([*argv, "--listen", "127.0.0.1:0"]) != 0
        assert f"--revoked-certificates {missing}: cannot read it" in capsys.readouterr().err
