"""Audit 27: what a data user the operator revoked (``privfed serve --revoked-data-users FILE``) still gets.

``server/revocation.py`` reads the file again when it changes, and the job API refuses a revoked name. Two holes:

- The file was re-read without a lock, and the new state was recorded before the names were read. While one
  gRPC thread read the changed file, another thread's call found the state unchanged and was judged by the names
  from before the change, so a name just revoked was let through. Two quick changes could also leave the older
  names in place until the file changed again. Made deterministic here: the read is held open while a second
  caller asks.
- Predict and GetModel (``server/servicer.py``, not the job API) did not ask about revocation. A revoked data
  user kept using the models of their jobs: the model's linear stage, bounds, classes and schema, and
  predictions. Owners lose no privacy by it (a model is a release they paid for, and a prediction is its
  post-processing), but the revocation did not do what the operator asked. Both are refused now.
"""

from __future__ import annotations

import threading

import grpc
import pytest

from privfed.server import revocation
from privfed.server.revocation import RevokedDataUsers


def test_a_call_during_the_re_read_waits_for_the_new_names(tmp_path, monkeypatch):
    path = tmp_path / "revoked.txt"
    path.write_text("# nobody yet\n")
    revoked = RevokedDataUsers(path)
    assert not revoked.revoked("mallory")
    path.write_text("mallory\n")  # the operator revokes mallory
    reading, finish = threading.Event(), threading.Event()
    real = revocation.read_names

    def slow_read(p):
        reading.set()
        assert finish.wait(10)
        return real(p)

    monkeypatch.setattr(revocation, "read_names", slow_read)
    first = threading.Thread(target=revoked.revoked, args=("alice",))  # a call that sees the change first
    first.start()
    assert reading.wait(10)
    answer: list[bool] = []
    second = threading.Thread(target=lambda: answer.append(revoked.revoked("mallory")))  # mallory's call, meanwhile
    second.start()
    second.join(0.5)  # the old code answered at once, by the names from before the change
    finish.set()
    first.join(10)
    second.join(10)
    assert answer == [True]


def test_two_quick_changes_end_with_the_last_names(tmp_path, monkeypatch):
    """The newer names are not overwritten by an older read that finishes last."""
    path = tmp_path / "revoked.txt"
    path.write_text("")
    revoked = RevokedDataUsers(path)
    path.write_text("mallory\n")
    reading, finish = threading.Event(), threading.Event()
    real = revocation.read_names
    calls = []

    def read(p):
        calls.append(None)
        if len(calls) == 1:  # the first read gets the first change's names, then is held
            names = real(p)
            reading.set()
            assert finish.wait(10)
            return names
        return real(p)

    monkeypatch.setattr(revocation, "read_names", read)
    first = threading.Thread(target=revoked.revoked, args=("alice",))
    first.start()
    assert reading.wait(10)
    path.write_text("mallory\ntrudy\n")  # the operator adds trudy
    second = threading.Thread(target=revoked.revoked, args=("alice",))
    second.start()
    second.join(0.5)
    finish.set()
    first.join(10)
    second.join(10)
    assert revoked.revoked("trudy")


@pytest.fixture
def service(tmp_path):
    from tls_service import mtls_service

    from privfed.deploy.certs import make_certs

    certs = make_certs(tmp_path / "certs", owners=1, data_users=["alice", "bob"])
    revoked = tmp_path / "revoked.txt"
    revoked.write_text("")
    with mtls_service(tmp_path, certs, revoked_data_users=revoked) as (svc, port):
        yield svc, port, certs, revoked


def test_a_revoked_data_user_gets_no_model_and_no_prediction(service):
    from test_data_user_isolation import _channel, _job_api

    from privfed.common.datasets import load_builtin
    from privfed.deploy.reference import even_parts, reference_model
    from privfed.proto import privfed_pb2 as pb
    from privfed.proto import privfed_pb2_grpc as pb_grpc
    from privfed.proto import serde
    from privfed.server.config import JobConfig
    from privfed.server.models import save_model

    svc, port, certs, revoked = service
    bobs = _job_api(port, certs, "bob", "Submit", {"job": {"task": "lr", "epsilon": 0.37, "owners": 2}})["job_id"]
    ds = load_builtin("synthetic", n_samples=200)
    lr = reference_model(JobConfig(task="lr", epsilon=1.0, owners=1), ds, even_parts(ds.n, 1, 0))
    save_model(svc.store.job_dir(bobs) / "model.json", lr, model_id=bobs, task="lr", schema=svc.schema)
    rows = serde.reports_to_proto(ds.X[:3])
    with _channel(port, certs, "bob") as channel:  # before the revocation: bob's model is his
        assert pb_grpc.CoordinatorStub(channel).GetModel(pb.GetModelRequest(model_id=bobs), timeout=10).kind == "lr"
    revoked.write_text("bob\n")
    with pytest.raises(grpc.RpcError) as err:
        _job_api(port, certs, "bob", "Model", {"job_id": bobs})
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED  # the job API refuses him
    answers = {}
    with _channel(port, certs, "bob") as channel:
        stub = pb_grpc.CoordinatorStub(channel)
        for name, call, request in (("GetModel", stub.GetModel, pb.GetModelRequest(model_id=bobs)),
                                    ("Predict", stub.Predict, pb.PredictRequest(model_id=bobs, rows=rows))):  # fmt: skip
            try:
                call(request, timeout=10)
                answers[name] = "answered"
            except grpc.RpcError as exc:
                answers[name] = exc.code()
    assert answers == {"GetModel": grpc.StatusCode.PERMISSION_DENIED, "Predict": grpc.StatusCode.PERMISSION_DENIED}
