"""Walkthrough 12, W12-1: a service started as the README starts it (``privfed serve ... --store jobs``, a path
relative to where it runs) answers ``privfed jobs``.

The data user's view of the store hides the operator's paths (``JobApi._for_data_user``) by replacing the store's
path in the answer's JSON text with ``STORE``. With ``--store jobs`` that path is the word ``jobs``, which is also
the listing's own key: every ``privfed jobs`` of a data user stopped with a traceback (``KeyError: 'jobs'``), and
any text naming ``privfed jobs`` read ``privfed STORE``. Real ``privfed serve`` and data-user processes, over mTLS.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

from fedharness import DATASET

from privfed.deploy.certs import make_certs
from privfed.server.jobapi import JobApi
from privfed.server.service import CoordinatorService, ServiceConfig


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(tmp: Path, port: int, certs: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "privfed.deploy.cli", *args,
         "--coordinator", f"127.0.0.1:{port}", "--certs", str(certs), "--name", "alice"],
        capture_output=True, text=True, timeout=60, cwd=tmp,
    )  # fmt: skip


def test_a_data_user_lists_the_jobs_of_a_service_whose_store_is_named_jobs(tmp_path):
    certs = make_certs(tmp_path / "fed-certs", owners=1, data_users=["alice"])
    port = _free_port()
    log = tmp_path / "serve.log"
    serve = subprocess.Popen(
        [sys.executable, "-m", "privfed.deploy.cli", "serve", "--listen", f"127.0.0.1:{port}",
         "--certs", str(certs), "--store", "jobs", "--status-listen", "none", *DATASET],
        stdout=open(log, "w"), stderr=subprocess.STDOUT, cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while "serving on port" not in log.read_text():
            assert serve.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the service did not start"
            time.sleep(0.1)
        (tmp_path / "ncc.toml").write_text('task = "ncc"\nepsilon = 1.0\nowners = 3\n')
        submitted = _cli(tmp_path, port, certs, "submit", "ncc.toml")
        assert submitted.returncode == 0, submitted.stderr
        job_id = submitted.stdout.split()[2]

        listed = _cli(tmp_path, port, certs, "jobs")
        assert listed.returncode == 0, listed.stderr
        assert "Traceback" not in listed.stderr
        assert job_id in listed.stdout and listed.stdout.startswith("id "), listed.stdout

        as_json = _cli(tmp_path, port, certs, "jobs", "--json")
        assert as_json.returncode == 0, as_json.stderr
        assert [j["job_id"] for j in json.loads(as_json.stdout)] == [job_id]
    finally:
        serve.terminate()
        serve.wait(timeout=20)


def test_a_relative_store_path_is_hidden_where_it_names_a_file_and_nowhere_else(tmp_path, monkeypatch):
    """In process: the same service parts, the store given as ``jobs`` from the directory the service runs in."""
    monkeypatch.chdir(tmp_path)
    config = ServiceConfig(store=Path("jobs"), listen="127.0.0.1:0", status_listen=None, dataset="synthetic")
    service = CoordinatorService(config, tls=None)
    api = JobApi(service, require_role=True)
    record = service.store.submit({"task": "bdt", "release": "shares", "epsilon": 1.0, "owners": 4}, "alice")
    journal = service.store.job_dir(record.job_id) / "journal.sqlite"  # jobs/<id>/journal.sqlite
    error = (
        f"journal {journal}: job r1 ran over other owners; privfed jobs lists the jobs, and {tmp_path}/jobs too; "
        f"not {tmp_path}/jobs2 but {tmp_path}/jobs."
    )
    service.store.transition(record.job_id, "queued", state="running", started="2026-11-29T00:00:00Z")
    service.store.update(record.job_id, state="failed", finished="2026-11-29T00:01:00Z", error=error)

    listed = api.list({}, "alice")
    shown = api.show({"job_id": record.job_id}, "alice")
    assert [j["job_id"] for j in listed["jobs"]] == [record.job_id]
    for said in (listed["jobs"][0]["error"], shown["job"]["error"]):
        assert said == (
            f"journal STORE/{record.job_id}/journal.sqlite: job r1 ran over other owners; privfed jobs lists the jobs, "
            f"and STORE too; not {tmp_path}/jobs2 but STORE."
        ), said


def test_a_listing_without_its_jobs_is_one_line_not_a_traceback(tmp_path):
    """What an unfixed service answers (``{"STORE": [...]}``): ``privfed jobs`` says what to do, exit 2. A real
    gRPC server on a socket speaking the job API's wire (JSON messages), and the ``privfed jobs`` process."""
    from concurrent import futures

    import grpc

    from privfed.proto.jobwire import JOB_SERVICE, decode_json, encode_json

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    listing = grpc.unary_unary_rpc_method_handler(
        lambda request, context: {"STORE": [], "earlier": 0},
        request_deserializer=decode_json,
        response_serializer=encode_json,
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(JOB_SERVICE, {"List": listing}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "privfed.deploy.cli", "jobs", "--coordinator", f"127.0.0.1:{port}", "--insecure"],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )  # fmt: skip
    finally:
        server.stop(None)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "without its job list" in done.stderr and "absolute --store" in done.stderr, done.stderr
