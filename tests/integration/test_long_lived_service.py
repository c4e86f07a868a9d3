"""A coordinator service that stays up keeps nothing per finished job (bench/soak.py runs hundreds):
the real service in this process, two owner daemons as real processes; one-round jobs and boosting
jobs whose evaluations go through both secure sums, one after another."""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from fedharness import DATASET, owner_cmd
from servicefleet import POLICY, toml

from privfed.common.errors import ConfigError
from privfed.server.jobapi import job_settings
from privfed.server.registration import Expected, status
from privfed.server.service import KEEP_MODELS, CoordinatorService, ServiceConfig

pytestmark = pytest.mark.slow

NODES, PER_NODE = 2, 5
LR = {"task": "lr", "epsilon": 1.0, "owners": NODES * PER_NODE, "solver": "local"}
BDT = {"task": "bdt", "epsilon": 4.0, "owners": NODES * PER_NODE, "rounds": 2, "min_owners": 1}


def _flags(argv: list[str]) -> dict[str, str]:
    return {k.removeprefix("--").replace("-", "_"): v for k, v in zip(argv[::2], argv[1::2])}


def open_files() -> list[str]:
    """What this process's file descriptors point to."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the listing's own descriptor, closed since
            pass
    return out


@contextmanager
def gc_disabled() -> Iterator[None]:
    """No garbage collection inside: a collection may close a finished job's files by chance, and the service must not
    wait for one."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@contextmanager
def service_and_nodes(
    tmp_path, with_policy: list[bool], node_timeout: float = 15.0
) -> Iterator[tuple[CoordinatorService, list[subprocess.Popen]]]:
    """The real service in this process, started, on :data:`DATASET`, and an owner node per ``with_policy`` entry as
    a real process (a daemon with the fleet's policy where True); stopped, and the nodes still running ended, on
    leaving."""
    data = _flags(DATASET)
    config = ServiceConfig(
        store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, dataset=data["dataset"],
        n_samples=int(data["n_samples"]), seed=int(data["seed"]), test_fraction=float(data["test_fraction"]),
        node_timeout=node_timeout,
    )  # fmt: skip
    service = CoordinatorService(config, tls=None)
    port = service.start()
    (tmp_path / "policy.toml").write_text(toml(POLICY))
    nodes = [
        subprocess.Popen(
            owner_cmd(
                port,
                f"owner-{i}",
                n_owners=NODES * PER_NODE,
                shards=f"{i * PER_NODE}:{(i + 1) * PER_NODE}",
                ledger=tmp_path / f"owner-{i}.sqlite",
                budget=1e6,
                certs=None,
                extra=["--delta-budget", "1"] + (["--policy", str(tmp_path / "policy.toml")] if policy else []),
            ),
            stdout=open(tmp_path / f"owner-{i}.log", "w"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        for i, policy in enumerate(with_policy)
    ]
    try:
        yield service, nodes
    finally:
        service.stop()
        for p in nodes:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=20)


def test_a_service_keeps_nothing_per_finished_job(tmp_path):
    with service_and_nodes(tmp_path, with_policy=[True] * NODES) as (service, nodes), gc_disabled():
        jobs = [LR] * 12 + [BDT | {"secure_sum": "secagg"}, BDT | {"secure_sum": "ring"}] + [LR] * 4
        for settings in jobs:
            job_id = service.submit(job_settings(settings), "alice").job_id  # what the job API calls
            deadline = time.monotonic() + 60
            while (record := service.store.get(job_id)).state not in ("done", "failed"):
                assert time.monotonic() < deadline, (settings, (tmp_path / "owner-0.log").read_text()[-2000:])
                time.sleep(0.02)
            # a bdt job may fail only for its noise (no round better than chance): its secure sums ran
            assert record.state == "done" or "nothing to boost" in (record.error or ""), record
        deadline = time.monotonic() + 5
        while service.current is not None and time.monotonic() < deadline:  # the queue's last bookkeeping
            time.sleep(0.02)
        d = service.server.dispatcher
        per_job = {
            "progress": service._progress,
            "queued": service.store._queued,
            "pending": d._pending,
            "waiting": d._waiting,
            "arrived": d._arrived,
            "rings": d._relay._rings,
            "hop senders": d._relay._hop_senders,
            "relayed": d._relay._waiting,
        }
        assert {name: len(held) for name, held in per_job.items() if held} == {}
        held = [f for f in open_files() if str(service.store.root) in f and os.path.basename(f) != "service.lock"]
        assert not held  # no finished job's journal or log (the store's lock is the service's, held while it runs)
        assert len(service.store.all()) == len(jobs) and all(p.poll() is None for p in nodes)
        # each job's model is served under its id, a bounded number held, the first read back from its file
        models = service.server.models
        assert len(models._models) <= KEEP_MODELS < len(jobs)
        first, last = service.store.all()[0], service.store.all()[-1]
        assert first.job_id not in models._models and service.report_of(first.job_id)["model_id"] == first.job_id
        assert models.entry(first.job_id).model is not models.entry(last.job_id).model  # same task and ε, both served
        with pytest.raises(ConfigError, match="no model"):
            models.entry("../store")  # not a job id: nothing read outside the store


def test_a_node_without_a_policy_takes_part_in_one_job_and_exits_at_the_next(tmp_path):
    """README: without ``--policy`` an owner node takes part in one job. A service queues job after job for every
    registered node; a node started without a policy refuses the second job's releases (``policy``, the reason in
    words) and exits, so its owners spend nothing on a job its operator never agreed to (a walkthrough found such a
    node answering every job of every data user)."""
    from privfed.common.ledger import read_accounts

    with service_and_nodes(tmp_path, with_policy=[True, False]) as (service, nodes):
        ids = []
        for _ in range(2):
            ids.append(service.submit(job_settings(LR), "alice").job_id)
            deadline = time.monotonic() + 60
            while (record := service.store.get(ids[-1])).state not in ("done", "failed"):
                assert time.monotonic() < deadline, (tmp_path / "owner-1.log").read_text()[-2000:]
                time.sleep(0.05)
            assert record.state == "done", record
        assert nodes[1].wait(timeout=30) == 0 and nodes[0].poll() is None  # the daemon serves on
        log = (tmp_path / "owner-1.log").read_text()
        assert "without --policy a node takes part in one); node owner-1 exits" in log, log[-2000:]
        first, second = (service.report_of(i) for i in ids)
        assert first["answered"] == NODES * PER_NODE and second["answered"] == PER_NODE
        refused = [t for o, t in second["refused"].items() if o.startswith("owner-1.")]
        assert len(refused) == PER_NODE and all(t.startswith("policy") and "one job" in t for t in refused), second
        jobs = {r["job"] for a in read_accounts(tmp_path / "owner-1.sqlite") for r in a.releases}
        assert jobs == {ids[0]}  # nothing spent on the second job


def wait_until(done, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_job_does_not_count_the_owners_of_a_node_that_has_exited(tmp_path):
    """A node killed (it could not say it leaves: as one cut off) stays registered (it takes its place back when it
    calls again) and counted until it is silent for the node timeout; then a job waiting for owners no longer counts
    its owners, and the waiting line names it silent: a walkthrough's service counted a node gone for minutes as
    available and started the job on it."""
    with service_and_nodes(tmp_path, with_policy=[True] * NODES, node_timeout=3.0) as (service, nodes):
        d = service.server.dispatcher
        wait_until(lambda: len(d.owners()) == NODES * PER_NODE, "the nodes did not register")
        nodes[1].send_signal(signal.SIGKILL)
        nodes[1].wait(timeout=20)
        assert len(d.live_owners()) == NODES * PER_NODE  # counted still: it may only have lost its connection
        wait_until(lambda: service.owners_online()["owner-1"]["state"] == "silent", "the exited node is not silent", 10)
        assert len(d.owners()) == NODES * PER_NODE  # still registered: it takes its place back when it calls
        job_id = service.submit(job_settings(LR | {"register_timeout": 3}), "alice").job_id
        wait_until(lambda: service.store.get(job_id).state in ("done", "failed"), "the job did not end")
        record = service.store.get(job_id)
        assert record.state == "failed", record
        assert f"only {PER_NODE} of {NODES * PER_NODE} owners registered" in record.error, record.error
        assert "owner-1 silent" in record.error, record.error


def test_a_node_stopped_with_sigterm_says_it_leaves_and_the_next_job_runs_on_the_others_at_once(tmp_path, caplog):
    """A daemon stopped cleanly tells the service it leaves: the service logs it and counts its owners no more, so a
    job submitted right after (well within the node timeout, 15 s) runs on the other node's owners only, asks nobody
    gone, and loses no node (its owners stayed counted for the node timeout: a job starting then counted them, asked
    them and waited for them)."""
    caplog.set_level(logging.INFO, logger="privfed.coordinator")
    with service_and_nodes(tmp_path, with_policy=[True] * NODES) as (service, nodes):
        d = service.server.dispatcher
        wait_until(lambda: len(d.live_owners()) == NODES * PER_NODE, "the nodes did not register")
        nodes[1].terminate()
        assert nodes[1].wait(timeout=20) == 0
        assert f"node owner-1 left: its {PER_NODE} owner(s) are no longer counted" in caplog.text
        assert len(d.owners()) == NODES * PER_NODE  # registered still: it is counted again when it registers again
        # the status page and the waiting line say it left (they called it silent, as one killed or cut off)
        assert [service.owners_online()[n]["state"] for n in ("owner-0", "owner-1")] == ["online", "left"]
        assert "owner-1 left" in status(d, Expected(NODES * PER_NODE)), status(d, Expected(NODES * PER_NODE))
        job_id = service.submit(job_settings(LR | {"owners": PER_NODE}), "alice").job_id
        wait_until(lambda: service.store.get(job_id).state in ("done", "failed"), "the job did not end")
        assert service.store.get(job_id).state == "done", service.store.get(job_id)
        report = service.report_of(job_id)
        assert (report["owners"], report["answered"], report["lost_nodes"]) == (PER_NODE, PER_NODE, [])
        assert all(o.startswith("owner-0.") for o in report["epsilon_by_owner"]), report["epsilon_by_owner"]
        assert "told the coordinator it leaves" in (tmp_path / "owner-1.log").read_text()


def test_a_quorum_lost_says_how_many_owners_the_job_asked_for_and_how_many_it_ran_on(tmp_path):
    """A job runs on every owner registered when it starts, which may be more than its ``owners``: a walkthrough's
    job asked for 28 owners and failed with "only 0 of 30", numbers the data user could not place. The message
    says both, and which is which."""
    with service_and_nodes(tmp_path, with_policy=[True] * NODES) as (service, nodes):
        wait_until(lambda: len(service.server.dispatcher.owners()) == NODES * PER_NODE, "the nodes did not register")
        asked = NODES * PER_NODE - 2
        over = POLICY["max_epsilon_per_job"] + 1  # every owner's policy declines it
        job_id = service.submit(job_settings({"task": "ncc", "epsilon": over, "owners": asked}), "alice").job_id
        wait_until(lambda: service.store.get(job_id).state in ("done", "failed"), "the job did not end", 60)
        record = service.store.get(job_id)
        assert record.state == "failed", record
        n = NODES * PER_NODE
        said = (  # in its accept round: nobody spent anything (walkthrough 8, W8-3: "before anyone spends more")
            f"only 0 of {n} owners (the job asked for {asked}; it runs on all {n} registered) take part in the job, "
            "fewer than the quorum"
        )
        assert said in record.error, record.error
        # in a job file's terms, in the record and the job's report alike (both named the flag --min-owners)
        (report,) = (tmp_path / "store").glob(f"**/{job_id}/report.json")
        for error in (record.error, json.loads(report.read_text())["error"]):
            assert "(min_owners " in error and "--" not in error and "nothing was released or debited" in error, error
        assert "(report: " not in record.error and str(tmp_path) not in record.error  # no path of the service's disk


def test_a_restarted_node_is_logged_registered_once(tmp_path, caplog):
    """A node restarted under the same certificate takes its place over from its dead process: the service logs
    that registration in one line, which says the previous process is fenced (it logged two lines, each saying the
    node registered, and a walkthrough read one restart as two). Its retries while the previous process is still
    counted alive are refused with one warning, not one per retry."""
    caplog.set_level(logging.INFO, logger="privfed.coordinator")
    with service_and_nodes(tmp_path, with_policy=[True] * NODES) as (service, nodes):
        d = service.server.dispatcher
        wait_until(lambda: len(d.owners()) == NODES * PER_NODE, "the nodes did not register")
        nodes[1].send_signal(signal.SIGKILL)
        nodes[1].wait(timeout=20)
        nodes[1] = subprocess.Popen(nodes[1].args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # again

        def lines() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.getMessage().startswith("node owner-1 registered")]

        wait_until(lambda: any("fenced" in line for line in lines()), "the restarted node did not register")
        time.sleep(1.5)  # nothing more comes of the one registration
        assert len(lines()) == 2, lines()  # the first registration and the restart's
        first, again = lines()
        assert first.startswith(f"node owner-1 registered {PER_NODE} owner(s)") and "fenced" not in first
        assert again.startswith(f"node owner-1 registered {PER_NODE} owner(s) from "), again
        assert "its previous process (connection " in again and "is fenced" in again, again
        refused = [r for r in caplog.records if "'owner-1' is already registered by another live" in r.getMessage()]
        assert [r.levelno for r in refused].count(logging.WARNING) == 1, [r.getMessage() for r in refused]


def test_a_schema_federation_reports_the_owners_files_not_a_built_in_data_set(tmp_path):
    """A service over a federation schema, its owner node serving its own file: the job's report says the data are
    the owners' files under that schema (a walkthrough's said ``"dataset": "synthetic"``, the flag's default)."""
    from privfed.deploy.commands import owner_argv

    rng = np.random.default_rng(3)
    for name, n in (("rows.csv", 40), ("test.csv", 60)):
        y = rng.integers(0, 2, n)
        X = np.clip(rng.normal(size=(n, 2)) + 2 * y[:, None], -3.0, 5.0)
        (tmp_path / name).write_text("a,b,y\n" + "".join(f"{a:.3f},{b:.3f},{v}\n" for (a, b), v in zip(X, y)))
    (tmp_path / "clinic.toml").write_text(
        'features = ["a", "b"]\nclasses = [0, 1]\ntest = "test.csv"\n[bounds]\nlo = -3\nhi = 5\n'
    )
    config = ServiceConfig(
        store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, schema=tmp_path / "clinic.toml"
    )
    service = CoordinatorService(config, tls=None)
    port = service.start()
    (tmp_path / "policy.toml").write_text(toml(POLICY))
    node = subprocess.Popen(
        [*owner_argv(f"127.0.0.1:{port}", "owner-0"), "--data", str(tmp_path / "rows.csv"), "--shards", "4",
         "--ledger", str(tmp_path / "owner-0.sqlite"), "--epsilon-budget", "100", "--delta-budget", "1",
         "--policy", str(tmp_path / "policy.toml"), "--insecure"],
        stdout=open(tmp_path / "owner-0.log", "w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        job_id = service.submit(job_settings({"task": "ncc", "epsilon": 2.0, "owners": 4}), "alice").job_id
        wait_until(lambda: service.store.get(job_id).state in ("done", "failed"), "the job did not end", 60)
        report = service.report_of(job_id)
        assert service.store.get(job_id).state == "done", (report, (tmp_path / "owner-0.log").read_text()[-2000:])
        assert report["config"]["dataset"] == "owners' files (clinic.toml)", report["config"]
    finally:
        service.stop()
        node.terminate()
        node.wait(timeout=20)
