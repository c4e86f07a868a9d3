"""Walkthrough 9: certificates could not be revoked or re-keyed (W9-2), and nobody said when they expire (W9-3).

W9-2: an owner node's key was taken to have leaked. ``privfed certs --add`` after deleting the node's directory
issued a new pair, but the old key still registered as the node and called Predict on the coordinator;
``--revoked-data-users`` covers data users by name only, and a name cannot tell a party's old key from its new one.
Now ``privfed certs --reissue NAME`` re-keys a party under the same CA and lists the old certificate's fingerprint
in ``revoked-certificates.txt``, and ``privfed serve --revoked-certificates`` (by default that file in ``--certs``)
refuses every call that presents it, read again when the file changes. These run the real service in process over
mTLS with certificates from ``make_certs``, as ``test_audit27_revocation.py`` does.

W9-3: the CA and every leaf lasted one year, a leaf added later outlived its CA, and nothing warned before the end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import queue
import shutil
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.signed_keys import sign_public_key
from privfed.deploy.certs import REVOKED_FILE, make_certs, reissue
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto.jobwire import JOB_SERVICE, decode_json, encode_json
from privfed.proto.transport import TlsFiles, channel_credentials, channel_options

NODE, USER = "hospital-b", "alice"


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


@pytest.fixture
def service(tmp_path):
    """The real service over mTLS, refusing what ``certs/coordinator/revoked-certificates.txt`` lists (nothing yet),
    and a copy of the node's and the data user's first keys (what a thief holds)."""
    from tls_service import mtls_service

    certs = make_certs(tmp_path / "certs", owners=1, owner_names=[NODE], data_users=[USER])
    revoked = certs / "coordinator" / REVOKED_FILE
    revoked.write_text("")
    old = tmp_path / "old"
    for name in (NODE, USER):
        shutil.copytree(certs / name, old / name)
    with mtls_service(tmp_path, certs / "coordinator", node_timeout=1.0, revoked_certificates=revoked) as (_, port):
        yield port, certs, old


def test_a_node_refused_as_revoked_leaves_at_once_and_a_stale_copy_cannot_take_the_new_keys_node_away(tmp_path):
    """Walkthrough 14, W14-3: a node whose certificate was revoked mid-job held its round for the node timeout (15 s),
    and the log blamed the ring leader's node. Refused on the connection it registered from, it leaves at once; a
    refused call of the same revoked certificate on another connection (a stale copy) leaves the node registered
    with its new key counted."""
    from tls_service import mtls_service

    certs = make_certs(tmp_path / "certs", owners=1, owner_names=[NODE], data_users=[USER])
    revoked = certs / "coordinator" / REVOKED_FILE
    revoked.write_text("")
    old = tmp_path / "old"
    shutil.copytree(certs / NODE, old / NODE)
    with mtls_service(tmp_path, certs / "coordinator", node_timeout=600.0, revoked_certificates=revoked) as (svc, port):
        states = svc.server.dispatcher.node_states
        with _channel(port, old, NODE) as channel:
            stub = pb_grpc.CoordinatorStub(channel)
            _register(stub, old)
            assert states() == {NODE: "online"}
            reissue(certs, [NODE])
            assert (
                _code(stub.PullTasks, pb.PullTasksRequest(node_id=NODE, wait_ms=10))
                == grpc.StatusCode.PERMISSION_DENIED
            )
            assert states() == {NODE: "left"}  # at once, not after the 600 s node timeout
        with _channel(port, certs, NODE) as channel:  # the new key registers at once: the old node has left
            stub = pb_grpc.CoordinatorStub(channel)
            _register(stub, certs)
            assert states() == {NODE: "online"}
            with _channel(port, old, NODE) as stale:  # a copy of the old key, on another connection
                assert _code(
                    pb_grpc.CoordinatorStub(stale).PullTasks, pb.PullTasksRequest(node_id=NODE, wait_ms=10)
                ) == (grpc.StatusCode.PERMISSION_DENIED)
            assert states() == {NODE: "online"}


def _channel(port: int, d: Path, name: str) -> grpc.Channel:
    tls = TlsFiles.in_dir(d / name, name)
    return grpc.secure_channel(f"127.0.0.1:{port}", channel_credentials(tls), options=channel_options(None))


def _register(stub: pb_grpc.CoordinatorStub, d: Path) -> None:
    key = load_pem_private_key((d / NODE / f"{NODE}-key.pem").read_bytes(), password=None)
    pub, owner = public_bytes(generate_private_key()), f"{NODE}.o00000"
    info = pb.OwnerInfo(owner_id=owner, x25519_public_key=pub, key_signature=sign_public_key(key, pub, owner))
    cert = (d / NODE / f"{NODE}.pem").read_bytes()
    stub.RegisterNode(pb.RegisterNodeRequest(node_id=NODE, owners=[info], node_certificate=cert), timeout=10)


def _code(call, request) -> grpc.StatusCode:
    try:
        call(request, timeout=10)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def test_a_reissued_nodes_old_key_is_refused_everywhere_and_its_new_key_works(service):
    port, certs, old = service
    predict = pb.PredictRequest(model_id="none-such")
    with _channel(port, old, NODE) as channel:  # before: the node registers and polls with its first key
        stub = pb_grpc.CoordinatorStub(channel)
        _register(stub, old)
        assert _code(stub.PullTasks, pb.PullTasksRequest(node_id=NODE, wait_ms=10)) == grpc.StatusCode.OK
        assert _code(stub.Predict, predict) != grpc.StatusCode.PERMISSION_DENIED
        reissue(certs, [NODE])  # the key leaked: re-keyed, and the service reads the changed file at the next call
        calls = {
            "PullTasks": (stub.PullTasks, pb.PullTasksRequest(node_id=NODE, wait_ms=10)),
            "Relay": (stub.Relay, pb.RelayRequest(node_id=NODE)),
            "Predict": (stub.Predict, predict),
            "GetModel": (stub.GetModel, pb.GetModelRequest(model_id="none-such")),
        }
        codes = {name: _code(call, request) for name, (call, request) in calls.items()}
        with pytest.raises(grpc.RpcError) as err:
            _register(stub, old)  # a thief registering as the node while it is down
    assert set(codes.values()) == {grpc.StatusCode.PERMISSION_DENIED}, codes
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "revoked" in err.value.details() and NODE in err.value.details()
    with _channel(port, certs, NODE) as channel:  # the new key: past the revocation, and registers once the old one's
        stub = pb_grpc.CoordinatorStub(channel)  # registration timed out (node_timeout 1 s)
        assert _code(stub.Predict, predict) != grpc.StatusCode.PERMISSION_DENIED
        deadline = time.monotonic() + 15
        while True:
            try:
                _register(stub, certs)
                break
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.ALREADY_EXISTS and time.monotonic() < deadline, exc
                time.sleep(0.3)
        assert _code(stub.PullTasks, pb.PullTasksRequest(node_id=NODE, wait_ms=10)) == grpc.StatusCode.OK


def test_a_registered_nodes_session_stream_is_refused_at_its_next_message(service):
    port, certs, old = service
    requests: queue.Queue = queue.Queue()
    with _channel(port, old, NODE) as channel:
        stub = pb_grpc.CoordinatorStub(channel)
        _register(stub, old)
        answers = stub.Session(iter(requests.get, None), timeout=20)
        requests.put(pb.PushResultsRequest(node_id=NODE, pull=True, wait_ms=10))
        next(answers)  # the stream serves the node
        reissue(certs, [NODE])
        requests.put(pb.PushResultsRequest(node_id=NODE, pull=True, wait_ms=10))
        with pytest.raises(grpc.RpcError) as err:
            next(answers)
        requests.put(None)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED


def _job_api(port: int, d: Path, method: str, request: dict) -> grpc.StatusCode:
    with _channel(port, d, USER) as channel:
        call = channel.unary_unary(
            f"/{JOB_SERVICE}/{method}", request_serializer=encode_json, response_deserializer=decode_json
        )
        return _code(call, request)


def test_a_reissued_data_users_old_key_is_refused_and_the_new_one_works(service):
    port, certs, old = service
    assert _job_api(port, old, "List", {}) == grpc.StatusCode.OK
    reissue(certs, [USER])
    assert _job_api(port, old, "List", {}) == grpc.StatusCode.PERMISSION_DENIED
    with _channel(port, old, USER) as channel:
        predict = pb_grpc.CoordinatorStub(channel).Predict
        assert _code(predict, pb.PredictRequest(model_id="none-such")) == grpc.StatusCode.PERMISSION_DENIED
    assert _job_api(port, certs, "List", {}) == grpc.StatusCode.OK


def test_the_file_is_read_again_when_it_changes(service):
    """Written by hand (``openssl x509 -fingerprint -sha256``'s form), then emptied: the key is refused, then back."""
    port, certs, old = service
    revoked = certs / "coordinator" / REVOKED_FILE
    sha = _cert(old / USER / f"{USER}.pem").fingerprint(hashes.SHA256())
    revoked.write_text(f"# alice's laptop was stolen\n{':'.join(f'{b:02X}' for b in sha)}\n")
    assert _job_api(port, old, "List", {}) == grpc.StatusCode.PERMISSION_DENIED
    revoked.write_text("")
    assert _job_api(port, old, "List", {}) == grpc.StatusCode.OK


def test_reissue_keeps_each_partys_role_and_names_and_records_the_old_fingerprint(tmp_path):
    certs = make_certs(tmp_path / "c", owners=1, owner_names=[NODE], data_users=[USER], sans=["coord.example"])
    before = {n: _cert(certs / n / f"{n}.pem") for n in (NODE, USER, "coordinator")}
    done = reissue(certs, [NODE, USER, "coordinator"])
    assert [n for n, _, _ in done] == [NODE, USER, "coordinator"]
    listed = (certs / REVOKED_FILE).read_text()
    assert listed == (certs / "coordinator" / REVOKED_FILE).read_text()
    for name, cert in before.items():
        new = _cert(certs / name / f"{name}.pem")
        assert new.fingerprint(new.signature_hash_algorithm) != cert.fingerprint(cert.signature_hash_algorithm)
        assert f"{cert.fingerprint(cert.signature_hash_algorithm).hex()}  # {name}, serial {cert.serial_number:X}" in (
            listed
        )
        assert new.subject == cert.subject and new.issuer == cert.issuer
        for ext in (x509.SubjectAlternativeName, x509.ExtendedKeyUsage):
            assert new.extensions.get_extension_for_class(ext) == cert.extensions.get_extension_for_class(ext)
    assert (certs / f"{NODE}.pem").resolve() == (certs / NODE / f"{NODE}.pem").resolve()  # the flat view follows


def test_a_leaf_never_outlives_its_ca_and_the_ca_outlives_the_leaves(tmp_path):
    certs = make_certs(tmp_path / "c", owners=1)
    ca, leaf = _cert(certs / "ca" / "ca.pem"), _cert(certs / "owner-0" / "owner-0.pem")
    assert ca.not_valid_after_utc - leaf.not_valid_after_utc > dt.timedelta(days=365 * 5)
    short = make_certs(tmp_path / "s", owners=1, ca_validity=dt.timedelta(days=10))
    ca = _cert(short / "ca" / "ca.pem")
    reissue(short, ["owner-0"])  # a renewal too is capped
    for name in ("coordinator", "owner-0"):
        assert _cert(short / name / f"{name}.pem").not_valid_after_utc == ca.not_valid_after_utc


def test_a_certificate_expiring_within_30_days_is_warned_about_with_its_date_and_command(tmp_path, caplog):
    from privfed.deploy.tlsflags import warn_expiry

    certs = make_certs(tmp_path / "c", owners=1, validity=dt.timedelta(days=12))
    with caplog.at_level(logging.WARNING):
        warn_expiry(TlsFiles.in_dir(certs / "owner-0", "owner-0"), "owner-0", logging.getLogger("privfed.owner"))
    (line,) = caplog.messages  # the CA lasts ten years: no warning about it
    end = _cert(certs / "owner-0" / "owner-0.pem").not_valid_after_utc
    assert f"expires in 11 day(s), on {end:%Y-%m-%d}" in line and "--reissue owner-0" in line
    caplog.clear()
    warn_expiry(
        TlsFiles.in_dir(make_certs(tmp_path / "y", owners=1) / "owner-0", "owner-0"), "owner-0", logging.getLogger()
    )
    assert caplog.messages == []  # a year away: nothing


def _warned(command: list[str], name: str, end: dt.datetime) -> str:
    """The line of the real command's log that warns about ``name``'s certificate (it is then stopped)."""
    proc = subprocess.Popen([sys.executable, "-m", "privfed.deploy.cli", *command], stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if f"--reissue {name}" in line:
                assert "WARNING" in line and f"{end:%Y-%m-%d}" in line, line
                return line
        raise AssertionError(f"no warning: {seen}")
    finally:
        proc.terminate()
        proc.wait(30)


def test_serve_and_owner_warn_at_start_when_their_certificate_expires_soon(tmp_path):
    certs = make_certs(tmp_path / "c", owners=1, validity=dt.timedelta(days=12))
    end = _cert(certs / "owner-0" / "owner-0.pem").not_valid_after_utc
    _warned(
        ["serve", "--certs", str(certs / "coordinator"), "--store", str(tmp_path / "store"),
         "--listen", "127.0.0.1:0", "--status-listen", "none"],
        "coordinator",
        end,
    )  # fmt: skip
    _warned(  # an owner node warns before it dials (nobody listens on port 9 here)
        ["owner", "--coordinator", "127.0.0.1:9", "--name", "owner-0", "--certs", str(certs / "owner-0"),
         "--ledger", str(tmp_path / "ledger.sqlite"), "--epsilon-budget", "1"],
        "owner-0",
        end,
    )  # fmt: skip


def test_serve_reads_the_revocation_file_in_its_certs_by_default(tmp_path):
    from privfed.deploy.tlsflags import revoked_certificates

    certs = make_certs(tmp_path / "c", owners=1)
    args = argparse.Namespace(certs=certs / "coordinator", revoked_certificates=None)
    assert revoked_certificates(args) == certs / "coordinator" / REVOKED_FILE  # not there yet: read once made (A30-3)
    reissue(certs, ["owner-0"])
    assert revoked_certificates(args) == certs / "coordinator" / REVOKED_FILE


def test_a_node_whose_certificate_is_revoked_mid_job_says_it_was_refused_not_that_it_lost_the_coordinator(
    service, tmp_path, caplog
):
    """Walkthrough 11, W11-10: after `privfed certs --reissue`, the running node's old key logged "lost the coordinator
    while sending answers and asking for tasks: PERMISSION_DENIED" before its clear exit line: a refusal read as a
    lost connection. The real node, over mTLS, with the key the service now refuses."""
    from privfed.common.datasets import load_builtin
    from privfed.common.ledger import Ledger
    from privfed.owner.data import build_owners
    from privfed.owner.node import OwnerNode
    from privfed.owner.retry import ConnectError

    port, certs, old = service
    owners = build_owners(load_builtin("synthetic", n_samples=10, seed=1), node_id=NODE, n_owners=1, shards=range(1),
                          seed=1, rng_kind="seeded", rng_seed=1)  # fmt: skip
    node = OwnerNode(node_id=NODE, target=f"127.0.0.1:{port}", tls=TlsFiles.in_dir(old / NODE, NODE), owners=owners,
                     ledger=Ledger(tmp_path / "n.sqlite", epsilon_budget=1.0), connect_timeout=5.0, session=False)  # fmt: skip
    caplog.set_level(logging.INFO, logger="privfed.owner")
    with node._channel() as channel:
        stub = pb_grpc.CoordinatorStub(channel)
        node._register(stub)
        reissue(certs, [NODE])
        assert node._push_and_pull(stub, []) is None  # the node's next call stops it (register refused: revoked)
        with pytest.raises(ConnectError, match="revoked"):
            node._register(stub)
    said = [r.getMessage() for r in caplog.records if "request for tasks" in r.getMessage() or "lost" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("the coordinator refused this node's answers"), said
    assert "PERMISSION_DENIED" in said[0] and "revoked" in said[0], said
