"""The coordinator service's parts in-process (issue 26, items 1-3): the job store's queue and
restart recovery, job files, the dispatcher's one-job-after-another hooks, data-user certificates,
the ledger's job column and the status page's markup."""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import threading
import time

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from privfed.common.errors import ConfigError, JobAborted
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Debit, Ledger, read_accounts
from privfed.common.roles import DATA_USER, role_of
from privfed.common.tasks import OwnerInfo, RingMessageTask, Task
from privfed.deploy.certs import make_certs
from privfed.deploy.cli import main as cli_main
from privfed.deploy.signer import Signer
from privfed.deploy.tokens import read_token
from privfed.server.dispatcher import Dispatcher
from privfed.server.jobapi import job_file_errors, job_settings
from privfed.server.jobstore import JobStore
from privfed.server.registration import certificate_nodes
from privfed.server.statuspage import render


def test_the_store_queues_in_submission_order_claims_once_and_requeues_a_running_job(tmp_path):
    store = JobStore(tmp_path)
    ids = [store.submit({"task": "ncc", "epsilon": 1.0, "owners": 2}, "alice").job_id for _ in range(3)]
    assert [r.job_id for r in store.all()] == ids and store.next_queued().job_id == ids[0]
    assert store.transition(ids[0], "queued", state="running") is not None
    assert store.transition(ids[0], "queued", state="running") is None  # claimed once
    assert store.transition(ids[1], "queued", state="cancelled") is not None
    assert store.next_queued().job_id == ids[2]
    restarted = JobStore(tmp_path)  # a new service over the same directory
    assert restarted.recover() == [ids[0]]
    assert restarted.get(ids[0]).state == "queued" and restarted.get(ids[0]).restarts == 1
    assert restarted.get(ids[1]).state == "cancelled"
    with pytest.raises(ConfigError, match="no job"):
        store.get("../etc")


def test_the_store_keeps_each_job_in_a_folder_of_its_own_and_moves_up_the_jobs_of_the_older_layout(tmp_path):
    """``--store jobs`` keeps job ``<id>`` in ``jobs/<id>/`` (it was ``jobs/jobs/<id>/``, a doubled folder a
    walkthrough found); a store of that layout, restarted, finds its jobs moved up, queued ones still queued."""
    store = JobStore(tmp_path / "jobs")
    job_id = store.submit({"task": "ncc", "epsilon": 1.0, "owners": 2}, "alice").job_id
    assert (tmp_path / "jobs" / job_id / "job.json").is_file() and not (tmp_path / "jobs" / "jobs").exists()
    assert store.job_dir(job_id) == tmp_path / "jobs" / job_id

    legacy = tmp_path / "old" / "jobs"
    legacy.mkdir(parents=True)
    (tmp_path / "jobs" / job_id).rename(legacy / job_id)  # where the older layout kept it
    (legacy / job_id / "report.json").write_text("{}")
    failed = store.submit({"task": "bdt", "epsilon": 1.0, "owners": 2}, "bob").job_id
    error = f"nothing to sum (report: STORE/jobs/{failed}/report.json)"  # as the older layout's service wrote it
    store.update(failed, state="failed", error=error)
    (tmp_path / "jobs" / failed / "report.json").write_text(json.dumps({"status": "failed", "error": error}))
    (tmp_path / "jobs" / failed).rename(legacy / failed)
    reopened = JobStore(tmp_path / "old")
    assert not legacy.exists() and (tmp_path / "old" / job_id / "report.json").is_file()
    assert reopened.ids() == [job_id, failed] and reopened.next_queued().job_id == job_id
    # a moved job's error names its new place (walkthrough 9, W9-7)
    moved = f"nothing to sum (report: STORE/{failed}/report.json)"
    assert reopened.get(failed).error == moved
    assert json.loads((tmp_path / "old" / failed / "report.json").read_text())["error"] == moved


def test_the_store_deletes_a_finished_job_whole_and_keeps_one_that_may_still_write(tmp_path):
    store = JobStore(tmp_path)
    ids = [
        store.submit({"task": "ncc", "epsilon": 1.0, "owners": 2}, user).job_id for user in ("alice", "alice", "bob")
    ]
    for job_id in ids[:2]:
        store.transition(job_id, "queued", state="running")
    store.update(ids[0], state="done")
    (store.job_dir(ids[0]) / "model.json").write_text("{}")
    with pytest.raises(ConfigError, match="is running: only a finished job can be deleted"):
        store.delete(ids[1])
    with pytest.raises(ConfigError, match="is queued"):
        store.delete(ids[2])
    assert store.delete(ids[0]).state == "done"
    assert not store.job_dir(ids[0]).exists() and sorted(tmp_path.iterdir()) == [store.job_dir(i) for i in ids[1:]]
    assert store.ids() == ids[1:] and store.ids("alice") == [ids[1]] and store.submitted_by(ids[0]) is None
    with pytest.raises(ConfigError, match="no job"):
        store.get(ids[0])
    assert [r.job_id for r in store.records(ids)] == ids[1:]  # a listing that read the ids before the delete
    # a service stopped midway through a removal: the renamed folder is no job, and the next start removes it
    store.update(ids[1], state="failed")
    half = tmp_path / f".deleting-{ids[1]}"
    store.job_dir(ids[1]).rename(half)
    assert store.ids() == [ids[2]]
    assert JobStore(tmp_path).ids() == [ids[2]] and not half.exists()


def test_the_store_takes_the_next_job_by_reading_its_record_alone_however_many_jobs_ran(tmp_path):
    store = JobStore(tmp_path)
    job = {"task": "ncc", "epsilon": 1.0, "owners": 2}
    for _ in range(200):  # a service that stays up
        done = store.submit(job, "alice").job_id
        store.transition(done, "queued", state="running")
        store.update(done, state="done")
    queued = [store.submit(job, "alice").job_id for _ in range(2)]
    reads, read = [], store.get
    store.get = lambda job_id: reads.append(job_id) or read(job_id)  # the real store, its reads counted
    assert store.next_queued().job_id == queued[0] and reads == [queued[0]]
    assert store.transition(queued[0], "queued", state="cancelled") is not None
    assert store.next_queued().job_id == queued[1]
    assert JobStore(tmp_path).next_queued().job_id == queued[1]  # a new service finds the queue on disk
    assert store.transition(queued[1], "queued", state="running") is not None
    assert store.next_queued() is None


def test_the_status_page_reads_only_the_last_jobs_of_a_long_lived_store_and_says_how_many_it_left_out(tmp_path):
    from privfed.server.service import STATUS_JOBS, CoordinatorService, ServiceConfig

    service = CoordinatorService(
        ServiceConfig(store=tmp_path, listen="127.0.0.1:0", status_listen=None, dataset="synthetic"), tls=None
    )
    job = {"task": "ncc", "epsilon": 1.0, "owners": 2}
    ids = [service.store.submit(job, "alice").job_id for _ in range(STATUS_JOBS + 5)]
    reads, read = [], service.store.get
    service.store.get = lambda job_id: reads.append(job_id) or read(job_id)  # the real store, its reads counted
    snapshot = service.snapshot()
    assert [j["job_id"] for j in snapshot["jobs"]] == ids[5:] and snapshot["earlier"] == 5
    assert sorted(reads) == sorted(ids[5:])  # the left-out jobs' records are not read
    page = render(snapshot)
    assert '<p id="earlier">5 earlier jobs not shown' in page and ids[0] not in page and ids[-1] in page
    assert [r.job_id for r in service.store.all()] == ids == service.store.ids()


def test_a_taken_status_port_stops_the_service_before_its_grpc_port_listens(tmp_path):
    import socket

    from privfed.server.service import CoordinatorService, ServiceConfig

    with socket.socket() as taken, socket.socket() as probe:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        probe.bind(("127.0.0.1", 0))  # a free port for gRPC, given back before the service starts
        grpc_port = probe.getsockname()[1]
        probe.close()
        config = ServiceConfig(
            store=tmp_path, listen=f"127.0.0.1:{grpc_port}", status_listen=f"127.0.0.1:{taken.getsockname()[1]}"
        )
        service = CoordinatorService(config, tls=None)
        with pytest.raises(ConfigError, match="--status-listen .*cannot listen there"):
            service.start()
        with socket.socket() as again:  # nobody listens on the gRPC port: it was never opened
            assert again.connect_ex(("127.0.0.1", grpc_port)) != 0


def test_privfed_jobs_lists_the_last_n_jobs_reading_only_their_records_and_every_job_when_asked(tmp_path):
    from privfed.server.jobapi import JobApi
    from privfed.server.service import CoordinatorService, ServiceConfig

    service = CoordinatorService(
        ServiceConfig(store=tmp_path, listen="127.0.0.1:0", status_listen=None, dataset="synthetic"), tls=None
    )
    ids = [service.store.submit({"task": "ncc", "epsilon": 1.0, "owners": 2}, "alice").job_id for _ in range(7)]
    reads, read = [], service.store.get
    service.store.get = lambda job_id: reads.append(job_id) or read(job_id)  # the real store, its reads counted
    api = JobApi(service, require_role=False)
    listed = api.list({"last": 3}, "alice")
    assert [j["job_id"] for j in listed["jobs"]] == ids[4:] and listed["earlier"] == 4
    assert sorted(reads) == sorted(ids[4:])  # the left-out jobs' records are not read
    for request in ({}, {"last": None}, {"last": 100}):  # an older client asks with {}: every job
        listed = api.list(request, "alice")
        assert [j["job_id"] for j in listed["jobs"]] == ids and listed["earlier"] == 0
    for bad in (0, -1, 2.5, "3", True):
        with pytest.raises(ConfigError, match="'last' must be a positive whole number"):
            api.list({"last": bad}, "alice")


def test_a_data_user_cannot_cancel_another_data_users_job(tmp_path):
    """Any data user reads every job (the federation's public record); only its submitter cancels it."""
    from privfed.server.jobapi import JobApi
    from privfed.server.service import CoordinatorService, ServiceConfig

    service = CoordinatorService(
        ServiceConfig(store=tmp_path, listen="127.0.0.1:0", status_listen=None, dataset="synthetic"), tls=None
    )
    api = JobApi(service, require_role=False)
    job_id = service.store.submit({"task": "ncc", "epsilon": 1.0, "owners": 2}, "alice").job_id
    with pytest.raises(ConfigError, match="only they may cancel it"):
        api.cancel({"job_id": job_id}, "bob")
    assert service.store.get(job_id).state == "queued"
    assert api.show({"job_id": job_id}, "bob")["job"]["data_user"] == "alice"
    assert api.cancel({"job_id": job_id}, "alice")["state"] == "cancelled"


def test_a_job_file_takes_the_simulate_keys_of_a_job_and_one_epsilon():
    assert job_settings({"task": "bdt", "epsilon": [2.0], "owners": 30, "rounds": 3, "n-bins": 8, "C": 0.5}) == {
        "task": "bdt",
        "epsilon": 2.0,
        "owners": 30,
        "n_rounds": 3,
        "n_bins": 8,
        "C": 0.5,
    }
    assert job_settings({"task": "ncc", "epsilon": "inf", "owners": 3})["epsilon"] == math.inf
    for doc, match in (
        ({"task": "ncc", "epsilon": [1, 2], "owners": 3}, "one epsilon"),
        ({"task": "ncc", "epsilon": 1, "owners": 3, "listen": "0.0.0.0:1"}, "service's own"),
        # the federation's data is the service's: a job's seed or set would score it on the owners' training rows
        *(
            ({"task": "ncc", "epsilon": 1, "owners": 3, k: v}, "service's own")
            for k, v in (("seed", 5), ("dataset", "iris"), ("n-samples", 100), ("test_fraction", 0.5))
        ),
        ({"task": "ncc", "epsilon": 1, "owners": 3, "repeats": 2}, "not a job setting"),
        ({"task": "ncc", "owners": 3}, "needs epsilon"),
        ({"task": "svm"}, r"task must be one of \('ncc', 'lr', 'feddpdr', 'bdt', 'nb'\), got 'svm'"),  # not "needs
        # epsilon, owners": what else a job needs depends on its task (walkthrough 11, W11-10)
    ):
        with pytest.raises(ConfigError, match=match):
            job_settings(doc)


def test_a_job_file_names_all_its_faults_at_once_in_its_own_keys():
    """Walkthrough 14, W14-11: a job file's faults came one at a time, "needs owners" first, then each wrong key
    after the one before was fixed."""
    doc = {"task": "ncc", "epsilon": 1.0, "rounds": 3, "solver": "newton", "mechanism": "gauss", "colour": "red"}
    with pytest.raises(ConfigError) as raised, job_file_errors():
        job_settings(doc)
    message = str(raised.value)
    expected = [
        "job file key 'colour' is not a job setting; known: ",
        "rounds is a parameter of task bdt, not of task ncc: drop it (or use task bdt)",
        "solver is a parameter of task lr, not of task ncc: drop it (or use task lr)",
        "mechanism must be one of ('pm', 'hm', 'duchi', 'laplace'), got 'gauss'",
        "the job file needs owners",
    ]
    at = [message.find(fault) for fault in expected]
    assert -1 not in at and at == sorted(at), message
    # a file with one fault says that one alone, and a good file passes
    with pytest.raises(ConfigError, match=r"^the job file needs owners$"):
        job_settings({"task": "ncc", "epsilon": 1.0})
    assert job_settings({"task": "ncc", "epsilon": 1.0, "owners": 3, "mechanism": "pm"})["mechanism"] == "pm"


def test_a_job_api_call_to_a_port_where_no_service_listens_says_so_in_words(capsys):
    assert cli_main(["jobs", "--coordinator", "127.0.0.1:9", "--insecure"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("privfed jobs: error: no privfed service answers at 127.0.0.1:9 (") and "UNAVAILABLE" not in err
    )
    assert err.endswith("is `privfed serve` running there, on that port?")


def test_a_job_api_call_to_a_port_that_speaks_no_tls_says_so_not_that_a_certificate_failed(tmp_path, capsys):
    """Walkthrough 6, W6-11: a data user who dialled the status page's port was told "Invalid certificate
    verification context", and went to look at their certificates."""
    from http.server import HTTPServer, SimpleHTTPRequestHandler

    from privfed.deploy.certs import make_certs

    certs = make_certs(tmp_path / "certs", owners=0, data_users=["alice"])

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):  # not on the stderr the test reads
            pass

    page = HTTPServer(("127.0.0.1", 0), Quiet)  # what a status page is: plain HTTP
    threading.Thread(target=page.serve_forever, daemon=True).start()
    try:
        argv = [
            "jobs",
            "--coordinator",
            f"127.0.0.1:{page.server_port}",
            "--certs",
            f"{certs}/alice",
            "--name",
            "alice",
        ]
        assert cli_main(argv) == 2
    finally:
        page.shutdown()
    err = capsys.readouterr().err.strip()
    assert err.startswith("privfed jobs: error: what answers at that address does not speak TLS: it is not a privfed")
    assert "certificate" not in err, err


def test_privfed_submit_refuses_a_parameter_of_another_task_before_it_calls_the_service(tmp_path, capsys):
    job = tmp_path / "job.toml"
    job.write_text('task = "lr"\nepsilon = 1\nowners = 3\nrounds = 3\n')
    argv = ["submit", str(job), "--coordinator", "127.0.0.1:9", "--insecure"]  # nothing listens: never reached
    assert cli_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (  # in the job file's keys, which the data user wrote
        "privfed submit: error: rounds is a parameter of task bdt, not of task lr: drop it (or use task bdt)"
    )


@pytest.mark.parametrize(
    ("data", "err"),
    [
        (b"# caf\xe9\ntask = 'ncc'\n", "not UTF-8 text; save it as UTF-8"),  # Latin-1: was a traceback
        ("task = 'ncc'\n".encode("utf-16"), "not UTF-8 text; save it as UTF-8"),  # Windows' "Unicode"
        (
            b"\xef\xbb\xbftask = 'lr'\nepsilon = 1\nowners = 3\nrounds = 3\n",
            "rounds is a parameter of task bdt",
        ),  # BOM read past
    ],
    ids=["latin-1", "utf-16", "utf-8-bom"],
)
def test_a_job_or_config_file_that_is_not_utf8_is_one_line_and_exit_2(tmp_path, capsys, data, err):
    job = tmp_path / "job.toml"
    job.write_bytes(data)
    for argv in (
        ["submit", str(job), "--coordinator", "127.0.0.1:9", "--insecure"],
        ["simulate", "--config", str(job)],
    ):
        assert cli_main(argv) == 2
        out = capsys.readouterr().err.strip()
        assert len(out.splitlines()) == 1 and (err in out or "--rounds is a parameter of --task bdt" in out), out


def _registered(dispatcher: Dispatcher) -> None:
    dispatcher.register("owner-0", [OwnerInfo("owner-0.o00000"), OwnerInfo("owner-0.o00001")])


def test_the_dispatcher_announces_each_job_with_its_tasks_and_a_cancel_ends_only_the_job():
    d = Dispatcher()
    _registered(d)
    first = JobInfo(job_id="a", data_user="alice", task="ncc", epsilon=1.0, delta=0.0, schema_sha256="s")
    d.begin_job(first)
    spec = RingMessageTask(b"x")
    raised: list[BaseException] = []

    def run() -> None:
        try:
            d.run([Task("t1", "owner-0.o00000", "r1", spec)], timeout=5)
        except JobAborted as exc:
            raised.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    (tasks, shutdown), job = d.with_job(lambda: d.pull("owner-0", wait=2))
    assert [t.task_id for t in tasks] == ["t1"] and not shutdown and job == first
    d.cancel_job()
    runner.join()
    assert len(raised) == 1  # the waiting round ended at once
    with pytest.raises(JobAborted):
        d.run([Task("t2", "owner-0.o00000", "r1", spec)], timeout=5)
    second = JobInfo(job_id="b", data_user="bob", task="bdt", epsilon=2.0, delta=0.0, schema_sha256="s")
    d.begin_job(second)  # the owners stay registered, nothing of the old job is queued
    assert d.aborted  # a cancel stays until the service lifts it for its next job
    d.clear_cancel()
    assert not d.aborted and sorted(d.owners()) == ["owner-0.o00000", "owner-0.o00001"]
    assert d.pull("owner-0", wait=0) == ([], False)
    d.abort()  # a coordinator that stops tells the nodes
    assert d.pull("owner-0", wait=0) == ([], True)


def test_a_data_user_certificate_carries_its_role_and_is_no_node(tmp_path):
    certs = make_certs(tmp_path / "certs", owners=2, data_users=["alice"])
    assert role_of((certs / "alice" / "alice.pem").read_bytes()) == DATA_USER
    assert role_of((certs / "owner-0" / "owner-0.pem").read_bytes()) == "node"
    assert role_of((certs / "coordinator" / "coordinator.pem").read_bytes()) == "node"
    assert certificate_nodes(certs) == ("owner-0", "owner-1")
    with pytest.raises(ConfigError, match="distinct"):
        make_certs(tmp_path / "other", owners=1, data_users=["owner-0"])
    make_certs(certs, owners=0, data_users=["bob"], add=True)  # a data user added later, under the same CA
    assert role_of((certs / "bob" / "bob.pem").read_bytes()) == DATA_USER


def test_a_data_user_enrols_by_token_and_gets_the_data_user_role(tmp_path):
    """``privfed certs --tokens N --data-user NAME``: the data user's token is minted beside the
    nodes', and the CA signer gives its request the data-user role (the role is the book's, not the
    request's: the CSR asks for no OU)."""
    assert cli_main(["certs", "--out", str(tmp_path / "pki"), "--tokens", "1", "--data-user", "alice"]) == 0
    tokens = tmp_path / "pki" / "tokens"
    assert [f.name for f in (tokens / DATA_USER).iterdir()] == ["alice"]
    signer = Signer(tmp_path / "pki", tmp_path / "state", coordinator_names=[])
    roles = {}
    for role, name in ((DATA_USER, "alice"), ("owner", "owner-0")):
        key = ec.generate_private_key(ec.SECP256R1())
        csr = (
            x509.CertificateSigningRequestBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .sign(key, hashes.SHA256())
        )
        token = read_token(tokens / role / name)
        body = json.dumps({"name": name, "token": token, "csr": csr.public_bytes(serialization.Encoding.PEM).decode()})
        roles[name] = role_of(signer.sign(body.encode())[2])
    assert roles == {"alice": DATA_USER, "owner-0": "node"}


def test_a_version_3_ledger_gets_the_job_column_and_keeps_its_releases(tmp_path):
    path = tmp_path / "v3.sqlite"
    with Ledger(path, epsilon_budget=2.0) as led:
        led.debit("o", 0.75, purpose="p", release_id="r1")
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE old AS SELECT seq, owner_id, release_id, purpose, epsilon, delta, ts, nonprivate FROM releases;"
        "DROP TABLE releases; ALTER TABLE old RENAME TO releases; PRAGMA user_version = 3;"
    )
    conn.close()
    assert [r["job"] for a in read_accounts(path) for r in a.releases] == [""]  # read-only, before migration
    with Ledger(path, epsilon_budget=2.0) as led:
        assert led.spent("o").epsilon == 0.75 and led.history("o")[0]["job"] == ""
        led.debit_many([Debit("o", 0.5, 0.0, "p", "r2", job="j")])
        assert led.spent_on("o", job="j").epsilon == 0.5 and led.spent_on("o", other_than="j").epsilon == 0.75


def test_the_status_page_escapes_what_it_shows_and_plots_finished_jobs():
    job = {
        "job_id": "j1",
        "state": "done",
        "task": "ncc",
        "epsilon": 2.0,
        "data_user": "<script>x</script>",
        "rounds": None,
        "done": 1,
        "planned": 1,
        "progress": 1.0,
        "accuracy": 0.75,
        "majority": 0.5,
        "declined_owners": [],
        "error": None,
    }
    page = render({"jobs": [job], "nodes": {"owner-0": {"owners": 10, "online": True}}})
    assert "<script>x" not in page and "&lt;script&gt;" in page
    assert page.count('class="bar"') == 1 and 'id="online">1<' in page


def test_a_job_waiting_for_more_owners_than_registered_says_so_and_a_bdt_job_warns_once_in_job_file_terms(tmp_path):
    """A walkthrough's job asking for 200 owners with 100 registered showed ``running 0%`` and an empty note for its
    whole register timeout, and only its log said why; a bdt job logged its weight-bound warning twice with flag
    names, and its first run's report said ``"resume": true``. The real service, on a schema file, no node."""
    from privfed.common.bounds import Bounds
    from privfed.common.schema import FederationSchema
    from privfed.server.jobapi import JobApi
    from privfed.server.service import CoordinatorService, ServiceConfig

    (tmp_path / "schema.toml").write_text(json.dumps(FederationSchema.shorthand(Bounds.of(0.0, 10.0, 2), 2).to_dict()))
    config = ServiceConfig(
        store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, schema=tmp_path / "schema.toml"
    )
    service = CoordinatorService(config, tls=None)
    api = JobApi(service, require_role=False)
    service.start()
    try:
        bdt = {"task": "bdt", "release": "shares", "epsilon": 1.0, "owners": 4, "rounds": 2, "register-timeout": 30}
        answer = api.submit({"job": bdt}, "alice")
        assert "the job asks for 4 owners and 0 of 4 owners registered" in answer["warning"], answer
        deadline = time.monotonic() + 20
        while (shown := api.list({}, "alice")["jobs"][0])["state"] != "running" or not shown["note"]:
            assert time.monotonic() < deadline, shown
            time.sleep(0.05)
        assert shown["note"].startswith("waiting for owners: 0 of 4 owners registered"), shown
        assert shown["note"] in render(service.snapshot())
        api.cancel({"job_id": answer["job_id"]}, "alice")
        deadline = time.monotonic() + 20
        while service.store.get(answer["job_id"]).state != "cancelled" or service.current is not None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        service.stop()
    log = (service.store.job_dir(answer["job_id"]) / "job.log").read_text()
    assert log.count("neither weight_bound nor rows_per_owner given") == 1 and "--weight-bound" not in log, log
    assert service.report_of(answer["job_id"])["config"]["resume"] is False


def test_the_store_is_readable_by_its_owner_only_and_an_older_one_is_tightened(tmp_path, caplog):
    """Walkthrough 5: the store was 0755 and every data user's report and model 0644: any account on the
    coordinator's host read them (ledgers and journals are 0600). Walkthrough 6, W6-15: a new store is made 0700,
    not made 0755 and then announced as tightened, which read as if the operator's store had been open."""
    import os
    import stat

    caplog.set_level(logging.INFO, logger="privfed.coordinator")
    fresh, older = tmp_path / "fresh" / "store", tmp_path / "older"
    older.mkdir(mode=0o755)
    os.chmod(older, 0o755)  # whatever the umask
    for root in (fresh, older):
        JobStore(root).submit({"task": "ncc", "epsilon": 1.0, "owners": 2}, "alice")
        assert stat.S_IMODE(root.stat().st_mode) == 0o700, oct(root.stat().st_mode)
    tightened = [r.getMessage() for r in caplog.records if "made readable by its owner only" in r.getMessage()]
    assert tightened == [f"--store {older}: made readable by its owner only (mode 700, was 755)"], tightened


def test_a_job_without_a_journal_left_running_fails_at_the_start_keeping_its_progress(tmp_path, caplog):
    """Walkthrough 6, W6-7: a feddpdr job the service's stop interrupted after its first of two steps was logged
    "queued again", then failed when it started, and its report (written anew) showed 0 %. It fails at the start,
    in one line, its report keeping the steps it reached; a boosting job by shares is queued again."""
    from privfed.server.service import CoordinatorService, ServiceConfig

    caplog.set_level(logging.INFO, logger="privfed.coordinator")
    store = JobStore(tmp_path / "store")
    interrupted = store.submit({"task": "feddpdr", "epsilon": 2.0, "owners": 4}, "alice").job_id
    resumable = store.submit({"task": "bdt", "release": "shares", "epsilon": 2.0, "owners": 4}, "alice").job_id
    waited = store.submit({"task": "ncc", "epsilon": 1.0, "owners": 4}, "bob").job_id  # killed while it waited
    legacy = store.submit({"task": "nb", "epsilon": 1.0, "owners": 4}, "bob").job_id  # a record of older code
    for job_id, asked in ((interrupted, True), (resumable, True), (waited, False), (legacy, None)):
        store.transition(job_id, "queued", state="running", started="2026-11-29T00:00:00Z", asked=asked)
    stopped = {"status": "failed", "error": "stopped by service stop", "progress": {"done": 1, "planned": 2}}
    (store.job_dir(interrupted) / "report.json").write_text(json.dumps(stopped))
    service = CoordinatorService(
        ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, dataset="synthetic"), tls=None
    )
    service.store.next_queued = lambda: None  # the queue takes no job: what the start did is what is seen
    service.start()
    try:
        record, shown = service.store.get(interrupted), service.summary(service.store.get(interrupted))
        assert record.state == "failed" and "keeps no journal" in record.error, record
        assert (shown["done"], shown["planned"], shown["progress"]) == (1, 2, 0.5), shown
        report = service.report_of(interrupted)
        assert report["status"] == "failed" and report["error"] == record.error and report["progress"]["done"] == 1
        # walkthrough 7, W7-6: one that had asked its owners nothing (SIGKILL while it waited for them) runs again
        assert service.store.get(resumable).state == service.store.get(waited).state == "queued"
        assert service.store.get(legacy).state == "failed"  # not known to have asked nothing: as if it had
    finally:
        service.stop()
    said = [r.getMessage() for r in caplog.records if "was running when the service stopped" in r.getMessage()]
    assert said == [
        f"job {interrupted} was running when the service stopped: failed, {record.error}",
        f"job {resumable} was running when the service stopped: queued again",
        f"job {waited} was running when the service stopped: queued again",
        f"job {legacy} was running when the service stopped: failed, {service.store.get(legacy).error}",
    ], said


def test_certs_takes_several_data_users_after_one_flag_or_the_flag_repeated(tmp_path):
    """Walkthrough 6, W6-1: the README's synopsis (``--data-user USER ...``, as ``--names NAME ...``) failed with
    "unrecognized arguments: bob"."""
    argv = ["certs", "--out", str(tmp_path / "pki"), "--owners", "1", "--data-user", "alice", "bob"]
    assert cli_main([*argv, "--data-user", "carol"]) == 0
    assert all((tmp_path / "pki" / user / f"{user}.pem").is_file() for user in ("alice", "bob", "carol"))


def test_a_revoked_data_users_queued_job_fails_before_any_owner_is_asked(tmp_path):
    """Walkthrough 7, W7-9: a job queued before its data user was revoked fails when its turn comes; a name added
    while the service runs counts from the next job (the file is read again when it changes)."""
    from privfed.server.revocation import RevokedDataUsers
    from privfed.server.service import CoordinatorService, ServiceConfig

    revoked = tmp_path / "revoked.txt"
    revoked.write_text("carol\n# a comment\n")
    config = ServiceConfig(
        store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, revoked_data_users=revoked
    )
    service = CoordinatorService(config, tls=None)
    job = service.store.submit({"task": "ncc", "epsilon": 1.0, "owners": 2}, "bob").job_id
    revoked.write_text("carol\nbob\n")
    service.start()
    try:
        deadline = time.monotonic() + 20
        while (record := service.store.get(job)).state != "failed":
            assert time.monotonic() < deadline, record
            time.sleep(0.05)
        assert (
            record.error == "data user 'bob' is revoked by this service's operator (privfed serve --revoked-data-users)"
        )
        assert not service.server.dispatcher.asked
    finally:
        service.stop()
    unreadable = RevokedDataUsers(revoked)
    revoked.write_bytes(b"\xff\xfe")  # an edit that breaks the file: no one is let back in meanwhile
    assert unreadable.revoked("alice") and unreadable.revoked("bob")


def test_the_owners_column_says_released_of_asked_and_reads_more_than_asked_as_more():
    """Walkthrough 8, W8-15: a job with owners = 8 that ran over the 18 registered read '18/8', like a counting
    bug; owners is the least a job starts with."""
    from privfed.deploy.service_cli import _owners_cell

    assert _owners_cell({"owners": 30, "answered": 20}) == "20/30"
    assert _owners_cell({"owners": 8, "answered": 18}) == "18 (8+ asked)"
    assert _owners_cell({"owners": 8, "answered": None}) == "8"
