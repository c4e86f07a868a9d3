"""A data user's GetModel or Predict of an id with no model names their own served models, read from the store,
and says when the id is their own job that is not done yet (walkthrough 11, W11-1).

After a restart of ``privfed serve``, alice's query of a mistyped id was told ``served models: []`` although every
model of her finished jobs was served (read back from the store when asked): the list was the models held in
memory, the 16 last used, none after a restart. And her query of her own running job read "A job that failed, was
cancelled or was deleted has no model". The real service (:class:`~privfed.server.service.CoordinatorService`)
over mTLS with data-user certificates from ``privfed certs``; the store holds jobs written as a finished service
leaves them, and the service is started on it as after a restart.
"""

from __future__ import annotations

import re

import grpc
import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.learners.logistic import LinearModel
from privfed.deploy.certs import make_certs
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto.transport import TlsFiles, channel_credentials, channel_options
from privfed.server.jobstore import JobStore
from privfed.server.models import save_model

D = 20  # the synthetic data set's features, the service's federation here


def _finished(store: JobStore, data_user: str, *, model: bool = True, state: str = "done") -> str:
    record = store.submit({"task": "lr", "epsilon": 1.0, "owners": 2}, data_user)
    store.update(record.job_id, state=state)
    if model:
        linear = LinearModel(np.ones((1, D)) / D, np.zeros(1), Bounds(np.zeros(D), np.ones(D)))
        save_model(store.job_dir(record.job_id) / "model.json", linear, model_id=record.job_id, task="lr", schema=None)
    return record.job_id


def _refusal(port: int, certs, name: str, model_id: str) -> str:
    tls = TlsFiles.in_dir(certs, name)
    with grpc.secure_channel(f"127.0.0.1:{port}", channel_credentials(tls), options=channel_options(None)) as ch:
        with pytest.raises(grpc.RpcError) as err:
            pb_grpc.CoordinatorStub(ch).GetModel(pb.GetModelRequest(model_id=model_id), timeout=10)
    return err.value.details()


def test_a_missing_model_after_a_restart_names_the_callers_finished_jobs_models_and_their_running_job(tmp_path):
    from tls_service import mtls_service

    certs = make_certs(tmp_path / "certs", owners=1, data_users=["alice", "bob"])
    store = JobStore(tmp_path / "store")  # what a service that ran these jobs left
    alices = [_finished(store, "alice") for _ in range(3)]
    _finished(store, "alice", model=False, state="failed")  # no model: not named
    bobs = _finished(store, "bob")
    running = _finished(store, "alice", model=False, state="queued")  # it waits for owners that never come
    del store
    with mtls_service(tmp_path, certs) as (_svc, port):
        typo = alices[0][:-1]
        told = _refusal(port, certs, "alice", typo)
        assert told.startswith(f"no model {typo!r}"), told
        assert f"served models: {alices!r}" in told, told  # not []: nothing was used since the restart
        assert bobs not in _refusal(port, certs, "alice", typo)
        assert f"served models: {[bobs]!r}" in _refusal(port, certs, "bob", typo)
        pending = _refusal(port, certs, "alice", running)
        assert "failed, was cancelled or was deleted" not in pending, pending
        assert re.search(rf"job {running} is (queued|running)", pending), pending
        assert "served once it is done" in pending, pending
        # bob is told of alice's job what he is told of an id that does not exist
        other = _refusal(port, certs, "bob", running)
        assert other == _refusal(port, certs, "bob", typo).replace(repr(typo), repr(running)), other
