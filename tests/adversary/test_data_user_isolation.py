"""A data user learns nothing of another's jobs through job logs or made-up ids (wt-redteam3).

``privfed job logs`` gives a job's data user the job's ``job.log``: while the job runs, the service
adds a handler to the ``privfed`` logger for it, and the service serves other callers meanwhile.
Before the fix every record of every thread went there, so alice, whose job was running, read in
her job's log what bob did at that time: ``rejecting call ...: no model 'bob-...'; served models:
[...]`` (the models bob asked for and the ones served to him), ``job ... (lr, epsilon 0.37)
submitted by 'bob'`` (his job's id, task and ε). The job API keeps bob's jobs and models from her
(``_own_job``, ``ServedEntry.serves``); its log must not hand them over.

Ids a data user makes up answer as ids that do not exist. Before the fix a job or model id too long for
a file name made the store's ``OSError`` escape the job API, Predict and GetModel: gRPC answered
``UNKNOWN: Exception calling application: [Errno 36] File name too long: '/srv/.../jobs/...'``, the
service's store path (and a code no missing id gets).

Another data user's model answered as one that does not exist, but the service read it first: given
bob's job id, alice's GetModel or Predict opened bob's ``job.json`` and ``model.json``, parsed the model
and held it among the served ones, and only then refused (wt-redteam4). The read is the job's model's
size in time (a missing id reads nothing), and it evicted alice's own models from the ones held. Now
who submitted a job is asked of the store's memory before any file of the job is opened.

The real service (:class:`~privfed.server.service.CoordinatorService`, as ``privfed serve`` runs it,
logging at INFO) with mTLS and data-user certificates from ``privfed certs``; alice's job waits for
owners that never come, so it is running while bob calls.
"""

from __future__ import annotations

import logging
import os

import grpc
import pytest

from privfed.common.datasets import load_builtin
from privfed.deploy.certs import make_certs
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto import serde
from privfed.proto.jobwire import JOB_SERVICE, decode_json, encode_json
from privfed.proto.transport import TlsFiles, channel_credentials, channel_options

BOBS_MODEL = "bob-model-7f3a"


@pytest.fixture
def service(tmp_path, caplog):
    from tls_service import mtls_service

    caplog.set_level(logging.INFO, logger="privfed")  # as privfed serve logs
    certs = make_certs(tmp_path / "certs", owners=1, data_users=["alice", "bob"])
    with mtls_service(tmp_path, certs) as (svc, port):
        yield svc, port, certs


def _channel(port, certs, name):
    tls = TlsFiles.in_dir(certs, name)
    return grpc.secure_channel(f"127.0.0.1:{port}", channel_credentials(tls), options=channel_options(None))


def _job_api(port, certs, name, method, request):
    with _channel(port, certs, name) as channel:
        call = channel.unary_unary(
            f"/{JOB_SERVICE}/{method}", request_serializer=encode_json, response_deserializer=decode_json
        )
        return call(request, timeout=10)


def test_bobs_calls_during_alices_job_are_not_in_her_job_log(service):
    from hostile import wait_until

    svc, port, certs = service
    alices = _job_api(port, certs, "alice", "Submit", {"job": {"task": "ncc", "epsilon": 1.0, "owners": 3}})["job_id"]
    started = svc.store.job_dir(alices) / "job.log"
    assert wait_until(lambda: started.exists() and "starts" in started.read_text(), timeout=20), "no job started"
    bobs = _job_api(port, certs, "bob", "Submit", {"job": {"task": "lr", "epsilon": 0.37, "owners": 2}})["job_id"]
    with _channel(port, certs, "bob") as channel:
        stub = pb_grpc.CoordinatorStub(channel)
        for call, request in ((stub.GetModel, pb.GetModelRequest(model_id=BOBS_MODEL)),
                              (stub.Predict, pb.PredictRequest(model_id=BOBS_MODEL))):  # fmt: skip
            with pytest.raises(grpc.RpcError):
                call(request, timeout=10)
    with pytest.raises(grpc.RpcError, match="no job"):
        _job_api(port, certs, "bob", "Show", {"job_id": alices})
    assert svc.current == alices  # still running: bob called while it ran
    log = _job_api(port, certs, "alice", "Logs", {"job_id": alices})["log"]
    assert log and alices in log  # her job's own records are there
    for secret in (bobs, BOBS_MODEL, "bob", "0.37"):
        assert secret not in log, f"{secret!r} in alice's job log:\n{log}"


def test_made_up_ids_answer_as_ids_that_do_not_exist(service):
    svc, port, certs = service
    missing = "20261126T000000000000Z-0000"
    made_up = ["x" * 300, "a\x00b", missing]
    answers = {}
    for job_id in made_up:
        for method in ("Show", "Logs", "Cancel", "Model", "Delete"):
            with pytest.raises(grpc.RpcError) as err:
                _job_api(port, certs, "bob", method, {"job_id": job_id})
            answers[method, job_id] = (err.value.code(), err.value.details().replace(repr(job_id), "ID"))
    with _channel(port, certs, "bob") as channel:
        stub = pb_grpc.CoordinatorStub(channel)
        for model_id in made_up:
            for name, call, request in (("GetModel", stub.GetModel, pb.GetModelRequest(model_id=model_id)),
                                        ("Predict", stub.Predict, pb.PredictRequest(model_id=model_id))):  # fmt: skip
                with pytest.raises(grpc.RpcError) as err:
                    call(request, timeout=10)
                answers[name, model_id] = (err.value.code(), err.value.details().replace(repr(model_id), "ID"))
    store = str(svc.store.root)
    assert not [a for a in answers.values() if store in a[1]], answers
    for method in (
        "Show",
        "Logs",
        "Cancel",
        "Model",
        "Delete",
        "GetModel",
    ):  # Predict checks its rows first (a public shape)
        kinds = {answers[method, i] for i in made_up}
        assert len(kinds) == 1, (method, kinds)


@pytest.fixture
def opened():
    """The paths files are opened at while the list is armed (``opened.append(None)``): an audit hook sees
    every thread's ``open``, the service's gRPC threads included; the job runner's own (``privfed-jobs``,
    writing the running job's record and log) are left out."""
    import sys
    import threading

    seen: list = []

    def hook(event, args):
        if seen and event == "open" and isinstance(args[0], str | bytes | os.PathLike):
            if threading.current_thread().name != "privfed-jobs":
                seen.append(os.fsdecode(args[0]))

    sys.addaudithook(hook)  # hooks cannot be removed: an empty list disarms it
    yield seen
    seen.clear()


def test_another_data_users_model_is_not_read_before_it_is_refused(service, opened):
    from privfed.deploy.reference import even_parts, reference_model
    from privfed.server.config import JobConfig
    from privfed.server.models import save_model

    svc, port, certs = service
    bobs = _job_api(port, certs, "bob", "Submit", {"job": {"task": "lr", "epsilon": 0.37, "owners": 2}})["job_id"]
    ds = load_builtin("synthetic", n_samples=200)
    lr = reference_model(JobConfig(task="lr", epsilon=1.0, owners=1), ds, even_parts(ds.n, 1, 0))
    save_model(svc.store.job_dir(bobs) / "model.json", lr, model_id=bobs, task="lr", schema=svc.schema)
    rows = serde.reports_to_proto(ds.X[:3])
    missing = "20261126T000000000000Z-0000"
    answers = {}
    with _channel(port, certs, "alice") as channel:
        stub = pb_grpc.CoordinatorStub(channel)
        opened.append(None)  # armed
        for model_id in (bobs, missing):
            for name, call, request in (("GetModel", stub.GetModel, pb.GetModelRequest(model_id=model_id)),
                                        ("Predict", stub.Predict, pb.PredictRequest(model_id=model_id, rows=rows))):  # fmt: skip
                with pytest.raises(grpc.RpcError) as err:
                    call(request, timeout=10)
                answers[name, model_id] = (err.value.code(), err.value.details().replace(repr(model_id), "ID"))
        read = [path for path in opened[1:] if bobs in path]
        opened.clear()
    assert not read, f"alice's calls read bob's job files: {read}"
    for name in ("GetModel", "Predict"):
        assert answers[name, bobs] == answers[name, missing], answers
    with _channel(port, certs, "bob") as channel:  # the control: bob's own model is read and served
        stub = pb_grpc.CoordinatorStub(channel)
        opened.append(None)
        assert stub.GetModel(pb.GetModelRequest(model_id=bobs), timeout=10).kind == "lr"
        assert len(stub.Predict(pb.PredictRequest(model_id=bobs, rows=rows), timeout=10).labels) == 3
        read = [path for path in opened[1:] if bobs in path]
        opened.clear()
    assert any(path.endswith("model.json") for path in read), read


def test_another_data_users_job_is_not_read_before_it_is_refused(service, opened):
    """Show, Logs, Cancel, Model and Delete of bob's job id by alice read bob's ``job.json`` and then answered "no job"
    (a missing id reads nothing): now whose job it is is asked of the store's memory first."""
    svc, port, certs = service
    bobs = _job_api(port, certs, "bob", "Submit", {"job": {"task": "lr", "epsilon": 0.37, "owners": 2}})["job_id"]
    missing = "20261126T000000000000Z-0000"
    answers = {}
    opened.append(None)  # armed
    for job_id in (bobs, missing):
        for method in ("Show", "Logs", "Cancel", "Model", "Delete"):
            with pytest.raises(grpc.RpcError) as err:
                _job_api(port, certs, "alice", method, {"job_id": job_id})
            answers[method, job_id] = (err.value.code(), err.value.details().replace(repr(job_id), "ID"))
    read = [path for path in opened[1:] if bobs in path]
    opened.clear()
    assert not read, f"alice's calls read bob's job files: {read}"
    for method in ("Show", "Logs", "Cancel", "Model", "Delete"):
        assert answers[method, bobs] == answers[method, missing], answers
    opened.append(None)  # the control: bob's own Show reads his job's record
    assert _job_api(port, certs, "bob", "Show", {"job_id": bobs})["job"]["job_id"] == bobs
    read = [path for path in opened[1:] if bobs in path]
    opened.clear()
    assert any(path.endswith("job.json") for path in read), read
