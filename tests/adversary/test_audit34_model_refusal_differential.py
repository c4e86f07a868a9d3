"""Audit 34: the refusal of a model id (stop 60, W11-1: it now lists the caller's models from the store and names the
state of the caller's own unfinished job) tells a data user, or an owner node, nothing of another data user's jobs.

Differential, over the real service (mTLS, data-user and owner certificates from ``privfed certs``), after a restart
on a store of jobs: bob's refusal of each of alice's job ids (finished with a model, failed without one, queued) must
be his refusal of an id no job has, but for the id; so must an owner node's of the failed and the queued one (it may
query any model that exists, by design, and is listed none). Each of those refusals is also asked through ``Predict``. Control (``control`` below, run by hand
as the audit did): a service whose ``_unfinished`` reads any data user's job (the ownership check dropped) tells bob
"job … is queued" (or running) of alice's queued job, and this test fails.
"""

from __future__ import annotations

import re

import grpc
import numpy as np
import pytest
from test_model_refusal_names_own_models import _finished

from privfed.deploy.certs import make_certs
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto import serde
from privfed.proto.transport import TlsFiles, channel_credentials, channel_options
from privfed.server.jobstore import JobStore


def _refusals(port: int, certs, name: str, model_id: str) -> tuple[str, str]:
    """(GetModel's, Predict's) refusal details for ``model_id`` asked as ``name``."""
    tls = TlsFiles.in_dir(certs, name)
    told = []
    with grpc.secure_channel(f"127.0.0.1:{port}", channel_credentials(tls), options=channel_options(None)) as ch:
        stub = pb_grpc.CoordinatorStub(ch)
        for call, request in (
            (stub.GetModel, pb.GetModelRequest(model_id=model_id)),
            (stub.Predict, pb.PredictRequest(model_id=model_id, rows=serde.reports_to_proto(np.zeros((1, 20))))),
        ):
            with pytest.raises(grpc.RpcError) as err:
                call(request, timeout=10)
            told.append(f"{err.value.code().name}: {err.value.details()}")
    return told[0], told[1]


def test_refusals_of_another_data_users_jobs_are_those_of_an_id_no_job_has(tmp_path):
    from tls_service import mtls_service

    certs = make_certs(tmp_path / "certs", owners=1, data_users=["alice", "bob"])
    store = JobStore(tmp_path / "store")
    finished = _finished(store, "alice")
    failed = _finished(store, "alice", model=False, state="failed")
    queued = _finished(store, "alice", model=False, state="queued")
    _finished(store, "bob")  # bob has a model of his own: listed to him alone
    nobody = finished[:-4] + "ffff" if not finished.endswith("ffff") else finished[:-4] + "eeee"
    del store
    with mtls_service(tmp_path, certs) as (_svc, port):
        for caller in ("bob", "owner-0"):
            base = _refusals(port, certs, caller, nobody)
            assert all(nobody in told for told in base), base
            # an owner node may query any model that exists (README: it cleans its own rows for any served model)
            for job_id in (finished, failed, queued) if caller == "bob" else (failed, queued):
                told = _refusals(port, certs, caller, job_id)
                assert told == tuple(t.replace(repr(nobody), repr(job_id)) for t in base), (caller, job_id, told)
            assert all(finished not in told and queued not in told for told in base), base
        # alice is told her own queued job's state (so the comparison above can tell it apart)
        assert re.search(rf"job {queued} is (queued|running)", _refusals(port, certs, "alice", queued)[0])
