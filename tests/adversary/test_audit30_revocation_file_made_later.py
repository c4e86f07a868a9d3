"""Audit 30, A30-3: ``privfed serve`` started before the first ``privfed certs --reissue`` never refuses the old key.

``privfed serve`` reads ``revoked-certificates.txt`` in its ``--certs`` directory by default, but only if the file
is there when it starts; ``privfed certs`` does not make it, so in a new federation it is not there, and the first
``--reissue`` (a key that leaked) writes it into the coordinator's directory while the service runs. ``--reissue``
then says "the coordinator service refuses the old certificates as soon as it reads" that file, "again whenever
it changes"; the running service never reads it, and the thief's calls with the old key go on until a restart."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time

import grpc

from privfed.deploy.certs import make_certs, reissue
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto.transport import TlsFiles, channel_credentials, channel_options


def test_the_first_reissue_is_refused_by_a_service_started_before_it(tmp_path):
    certs = make_certs(tmp_path / "c", owners=1)
    shutil.copytree(certs / "owner-0", tmp_path / "old" / "owner-0")  # what a thief holds
    proc = subprocess.Popen(
        [sys.executable, "-m", "privfed.deploy.cli", "serve", "--certs", str(certs / "coordinator"),
         "--store", str(tmp_path / "store"), "--listen", "127.0.0.1:0", "--status-listen", "none"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        port = int(re.search(r"serving on port (\d+)", proc.stdout.readline()).group(1))
        reissue(certs, ["owner-0"])  # the key leaked: re-keyed; the service should refuse the old one from now on
        tls = TlsFiles.in_dir(tmp_path / "old" / "owner-0", "owner-0")
        with grpc.secure_channel(f"127.0.0.1:{port}", channel_credentials(tls), options=channel_options(None)) as ch:
            stub = pb_grpc.CoordinatorStub(ch)
            deadline = time.monotonic() + 5
            while True:
                try:
                    stub.Predict(pb.PredictRequest(model_id="none-such"), timeout=10)
                    code = grpc.StatusCode.OK
                except grpc.RpcError as exc:
                    code = exc.code()
                if code == grpc.StatusCode.PERMISSION_DENIED or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(30)
    assert code == grpc.StatusCode.PERMISSION_DENIED, code


def test_the_default_file_once_made_and_then_removed_refuses_every_certificate(tmp_path):
    from privfed.server.revocation import RevokedCertificates

    certs = make_certs(tmp_path / "c", owners=1)
    listed = certs / "coordinator" / "revoked-certificates.txt"
    pem = (certs / "owner-0" / "owner-0.pem").read_bytes()
    watched = RevokedCertificates(listed, optional=True)
    assert not watched.revoked(pem)  # not there yet: nothing listed
    listed.write_text("# nothing yet\n")
    assert not watched.revoked(pem)
    listed.unlink()  # gone once it was there: as unreadable, every certificate is refused (README)
    assert watched.revoked(pem)
