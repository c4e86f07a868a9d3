"""An owner node through whole jobs, in process: the real node code (:class:`OwnerNode`) in a thread against a real
gRPC coordinator (:class:`CoordinatorServer`) running real jobs (``run_job``). Walkthrough 4:

* S2: a daemon answered job after job from the rows it read at start after its data file was replaced and then
  deleted, and its log said nothing per job: it now logs one INFO line per job and a WARNING once per change of the
  file (:class:`~privfed.owner.data.DataFileWatch`);
* m5: the coordinator logged "2 of 2 task(s) answered" when one was a refusal;
* m6: a node of one job exited 0 when every task it was sent was refused (its budget spent) and the job failed;
* walkthrough 5: a daemon read its policy file once, at start: an owner who removed a data user from it went on
  releasing to them; it now reads the file again at a new job when it changed, and declines every job while the
  file cannot be read;
* M4: an owner's ledger did not record whom a release went to: each release now records the job's data user and
  the coordinator the node's channel authenticated.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from privfed.common.datasets import load_builtin
from privfed.common.errors import RoundFailed
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Ledger, read_accounts
from privfed.deploy.certs import make_certs
from privfed.owner.data import DataFileWatch, build_owners
from privfed.owner.node import OwnerNode
from privfed.owner.policy import OwnerPolicy, PolicyFile
from privfed.proto.transport import TlsFiles
from privfed.server.app import CoordinatorServer
from privfed.server.job import run_job
from privfed.server.strategies import make_strategy

NODE = "owner-0"
DATA = load_builtin("synthetic", n_samples=40, seed=1)


class Running:
    """A node serving ``port`` in a thread (its ledger is opened there: SQLite connections stay in their thread)."""

    def __init__(
        self,
        tmp_path: Path,
        port: int,
        *,
        budget: float,
        daemon: bool,
        watch: DataFileWatch | None = None,
        tls: TlsFiles | None = None,
        target_name: str | None = None,
        policy_file: PolicyFile | None = None,
    ):
        self.codes: list[int] = []
        self.nodes: list[OwnerNode] = []
        self.ledger_path = tmp_path / f"{NODE}.sqlite"

        def serve() -> None:
            owners = build_owners(
                DATA, node_id=NODE, n_owners=2, shards=range(2), seed=1, rng_kind="seeded", rng_seed=1
            )
            ledger = Ledger(self.ledger_path, epsilon_budget=budget)
            node = OwnerNode(
                node_id=NODE, target=f"127.0.0.1:{port}", tls=tls, owners=owners, ledger=ledger,
                connect_timeout=20.0, daemon=daemon, owner_policy=OwnerPolicy() if daemon else None,
                target_name_override=target_name, policy_file=policy_file,
                **({} if watch is None else {"data_watch": watch}),
            )  # fmt: skip
            self.nodes.append(node)
            try:
                self.codes.append(node.run())
            finally:
                ledger.close()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.nodes:
            self.nodes[0].stop_event.set()
        self.thread.join(timeout=20)


@pytest.fixture
def server():
    server = CoordinatorServer(tls=None, node_timeout=5.0)
    port = server.start("127.0.0.1:0")
    yield server, port
    server.stop(grace=0)


def _job(server: CoordinatorServer, job_id: str, data_user: str = "alice") -> None:
    server.dispatcher.begin_job(JobInfo(job_id, data_user, "ncc", 1.0, 0.0, ""))
    strategy = make_strategy("ncc", n_classes=DATA.n_classes, bounds=DATA.bounds, epsilon=1.0)
    run_job(server, strategy, expected_owners=2, show_progress=False, register_timeout=20, round_timeout=30)


def _lines(caplog, logger: str, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno >= level]


def test_a_daemon_logs_each_job_and_warns_once_per_change_of_its_data_file(tmp_path, server, caplog):
    caplog.set_level(logging.INFO)
    server, port = server
    data = tmp_path / "f.csv"
    data.write_text("x0,x1,label\n0.1,0.2,0\n")
    watch = DataFileWatch.before_reading(data)  # as privfed owner makes it, before it reads the file
    watch.rows = 1
    node = Running(tmp_path, port, budget=10.0, daemon=True, watch=watch)
    try:
        _job(server, "job-1")
        data.write_text("radius;texture\nnot,a,valid,file\n")  # the user replaces the file
        _job(server, "job-2")
        _job(server, "job-3")  # no change since the warning: no second one
        data.unlink()
        _job(server, "job-4", data_user="")
    finally:
        node.stop()
    assert node.codes == [0]
    owner = _lines(caplog, "privfed.owner")
    jobs = [line for line in owner if line.startswith("job ") and "is asked to take part" in line]
    assert jobs == [
        f"job job-{i}{' of data user alice' if i < 4 else ''}: task ncc, epsilon 1, delta 0 per owner; "
        f"node {NODE} is asked to take part"
        for i in range(1, 5)
    ], jobs
    warnings = [w for w in _lines(caplog, "privfed.owner", logging.WARNING) if "--insecure" not in w]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith(f"data file {data}: it changed (size, modification time or inode) since this node")
    assert warnings[1].startswith(f"data file {data}: it no longer exists since this node read it at start")
    assert all("still answers from the 1 row(s) it read then" in w and "restart it" in w for w in warnings), warnings
    # in order: the warning comes with the job whose tasks the node took after the change
    assert owner.index(warnings[0]) == owner.index(jobs[1]) + 1 and owner.index(warnings[1]) == owner.index(jobs[3]) + 1


def test_the_coordinator_counts_refusals_and_a_node_that_released_exits_0(tmp_path, server, caplog):
    caplog.set_level(logging.INFO)
    server, port = server
    with Ledger(tmp_path / f"{NODE}.sqlite", epsilon_budget=1.0) as ledger:  # owner o00001 spent its budget
        ledger.debit(f"{NODE}.o00001", 1.0, purpose="earlier", release_id="earlier")
    node = Running(tmp_path, port, budget=1.0, daemon=False)
    try:
        _job(server, "job-1")
        rounds = _lines(caplog, "privfed.coordinator.rounds")
        assert any(line.endswith(": 2 of 2 task(s) answered (1 refused)") for line in rounds), rounds
    finally:
        server.dispatcher.shutdown()
        node.thread.join(timeout=20)
    assert node.codes == [0]  # it released (owner o00000): the job is its and it exits 0
    assert node.nodes[0].job_unfinished is None


def test_a_node_of_one_job_whose_owners_refused_every_task_exits_2_saying_so(tmp_path, server, caplog):
    caplog.set_level(logging.INFO)
    server, port = server
    with Ledger(tmp_path / f"{NODE}.sqlite", epsilon_budget=1.0) as ledger:  # both owners spent their budget
        for i in range(2):
            ledger.debit(f"{NODE}.o0000{i}", 1.0, purpose="earlier", release_id="earlier")
    node = Running(tmp_path, port, budget=1.0, daemon=False)
    try:
        with pytest.raises(RoundFailed, match="only 0 of 2 owners"):
            _job(server, "job-1")
    finally:
        server.dispatcher.shutdown()
        node.thread.join(timeout=20)
    assert node.codes == [2]
    why = node.nodes[0].job_unfinished
    assert why == f"node {NODE} released nothing in job job-1: every one of the 2 task(s) it was sent was refused " \
        "(budget_exceeded: 2)", why  # fmt: skip


@pytest.mark.parametrize("secure", [False, True], ids=["insecure", "mtls"])
def test_each_release_records_the_data_user_and_the_coordinator_it_went_to(tmp_path, secure):
    certs = tmp_path / "certs"
    if secure:
        make_certs(certs, owners=1)  # the coordinator's certificate names "coordinator" among its SANs
    server = CoordinatorServer(tls=TlsFiles.in_dir(certs, "coordinator") if secure else None, node_timeout=5.0)
    port = server.start("127.0.0.1:0")
    node = Running(
        tmp_path,
        port,
        budget=10.0,
        daemon=True,
        tls=TlsFiles.in_dir(certs, NODE) if secure else None,
        target_name="coordinator" if secure else None,
    )
    try:
        _job(server, "job-1")  # submitted by data user alice
        _job(server, "job-2", data_user="")  # the coordinator's operator's
    finally:
        node.stop()
        server.stop(grace=0)
    assert node.codes == [0]
    coordinator = f"coordinator (at 127.0.0.1:{port})" if secure else f"127.0.0.1:{port} (insecure: not authenticated)"
    accounts = read_accounts(node.ledger_path)
    assert [a.owner_id for a in accounts] == [f"{NODE}.o00000", f"{NODE}.o00001"]
    for account in accounts:
        received = [(r["job"], r["data_user"], r["coordinator"]) for r in account.releases]
        assert sorted(set(received)) == [("job-1", "alice", coordinator), ("job-2", "", coordinator)], received


def test_a_daemon_reads_its_policy_file_again_when_it_changes_and_declines_while_it_is_broken(tmp_path, server, caplog):
    caplog.set_level(logging.INFO)
    server, port = server
    policy = tmp_path / "policy.toml"
    policy.write_text('data_users = ["alice", "bob"]\n')
    node = Running(tmp_path, port, budget=10.0, daemon=True, policy_file=PolicyFile(policy))
    try:
        _job(server, "job-1", data_user="bob")
        policy.write_text('data_users = ["alice"]\n')  # the owner withdraws bob's consent
        with pytest.raises(RoundFailed, match="policy"):
            _job(server, "job-2", data_user="bob")
        _job(server, "job-3", data_user="alice")
        policy.write_text('data_users = ["alice"\n')  # an edit that breaks the file: no laxer fallback
        with pytest.raises(RoundFailed, match=r"rule unreadable"):  # not rule task: the file allows every task
            _job(server, "job-4", data_user="alice")
    finally:
        node.stop()
    jobs = {r["job"] for account in read_accounts(node.ledger_path) for r in account.releases}
    assert jobs == {"job-1", "job-3"}, jobs
    changed = [line for line in _lines(caplog, "privfed.owner") if line.startswith(f"policy file {policy} changed")]
    assert len(changed) == 1, changed  # job-2's; job-3 found the file as job-2 read it
    (broken,) = _lines(caplog, "privfed.owner", logging.ERROR)
    assert broken.startswith(f"--policy {policy}: not a readable TOML file") and "declines every job" in broken
    # each declined job is one INFO line of the node with its owners' count and rule, not a WARNING per owner
    said = [line for line in _lines(caplog, "privfed.owner") if "this node's policy declines it" in line]
    assert [line.split(":")[0] for line in said] == ["job job-2", "job job-4"], said
    assert said[0].endswith("this node's policy declines it (rule data_user: 2 owner(s)); nothing released"), said
    assert said[1].endswith("this node's policy declines it (rule unreadable: 2 owner(s)); nothing released"), said
    assert not [w for w in _lines(caplog, "privfed.owner", logging.WARNING) if "refusing task" in w]
