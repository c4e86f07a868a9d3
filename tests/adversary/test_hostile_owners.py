"""Hostile owners against a real ``privfed coordinator`` (issue 23, items 1 and 6).

One job per task, each a real coordinator process, one honest ``privfed owner`` node process
(seeded noise) and one :class:`hostile_owner.HostileOwner` node per attack, each speaking the real
protocol under its own owner certificate: oversized values, 20 000 extra rows, three extra
columns, a label outside the classes and a stalling owner (nearest centroid); NaN and a row count
of 10^12 (FedDPDR-DPML). Each job must complete with every hostile owner excluded and named under
``rejected_owners`` with its reason code, a report written, and the accuracy of the model the
honest owners' releases alone give: the same shares, aggregated in this process (the hostile
owners move it by nothing; a float summation order is the only difference).

Nothing here races the wall clock on a loaded machine: the hostile nodes start once the coordinator
answers (its process may take a minute to start), registration waits as long as the nodes take to
start (``--register-timeout``, ``--connect-timeout``: limits against a hang only), and only the
nearest-centroid job, whose stalling owner is named once its round's time is up, has a round
timeout; it is many times what the honest node takes to answer its 24 owners' one task each.
FedDPDR-DPML's hostile owners all answer, so its rounds end with the last answer, however late.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np
import pytest
from hostile_owner import ATTACKS, HostileOwner

from privfed.common.ledger import Ledger
from privfed.common.tasks import Refusal, Result, Task
from privfed.deploy.certs import make_certs
from privfed.owner.core import handle_batch
from privfed.owner.data import build_owners, federation_split
from privfed.proto.transport import TlsFiles, channel_credentials, channel_options
from privfed.server.config import JobConfig
from privfed.server.main import coordinator_strategy, public_rows_per_owner
from privfed.server.strategies.base import Transport

pytestmark = pytest.mark.slow

SEED = 5
DATA = ["--dataset", "synthetic", "--n-samples", "1000", "--seed", str(SEED)]
HONEST = 24
EXPECTED_CODES = {
    "huge": "out_of_range",
    "rows": "too_many_rows",
    "label": "label_out_of_range",
    "width": "shape",
    "stall": "no_answer",
    "nan": "undecodable",  # a NaN matrix does not even decode
    "count": "out_of_range",
}
#: Seconds the stalling owner's round waits for it (nearest centroid): the staller is named once they are
#: up, so the honest node must answer within them; it takes well under a second on a quiet box.
STALL_ROUND_TIMEOUT = "10"
#: Limits against a hang only: the registrations end the coordinator's wait as soon as all are in.
START_TIMEOUT = "600"
JOBS = {
    "ncc": (
        ["--epsilon", "4", "--labels", "rr", "--round-timeout", STALL_ROUND_TIMEOUT],
        ["huge", "rows", "label", "width", "stall"],
    ),  # row replies
    "feddpdr": (["--epsilon", "4", "--delta", "1e-4", "--k", "4"], ["nan", "count"]),  # no staller: no round timeout
}


def _privfed(*args: str) -> list[str]:
    return [sys.executable, "-m", "privfed.deploy.cli", *args]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _LocalTransport(Transport):
    """The honest owners answered in this process (the same handlers, the same seeded generators);
    the protocol's own fold_tasks hands the strategy each batch run_tasks answers."""

    def __init__(self, owners, ledger):
        self.owners, self.ledger = {o.owner_id: o for o in owners}, ledger

    def run_tasks(self, tasks: list[Task], timeout: float | None = None) -> list[Result]:
        tasks = [t for t in tasks if t.owner_id in self.owners]
        return [r for r in handle_batch(tasks, self.owners, self.ledger) if not isinstance(r.payload, Refusal)]

    def silent_owners(self) -> set[str]:
        return set()


def _honest_accuracy(task: str, flags: list[str], n_owners: int, tmp: Path) -> float:
    """The accuracy of the model the honest owners' releases alone give (module docstring)."""
    values = dict(zip(flags[::2], flags[1::2]))
    values.pop("--round-timeout", None)
    own = {"delta": float(values["--delta"]), "k": int(values["--k"])} if task == "feddpdr" else {}
    own |= {"labels": values["--labels"]} if "--labels" in values else {}
    config = JobConfig.from_flat(
        task=task,
        epsilon=float(values["--epsilon"]),
        **own,
        owners=n_owners,
        dataset="synthetic",
        n_samples=1000,
        seed=SEED,
    )
    # the coordinator's public bound on an owner's rows (an rr NCC share's length, its ⊥ dummies follow it)
    strategy, _, test = coordinator_strategy(public_rows_per_owner(config))
    train, _ = federation_split("synthetic", seed=SEED, test_fraction=0.2, n_samples=1000)
    owners = build_owners(
        train, node_id="owner-0", n_owners=n_owners, shards=range(HONEST), seed=SEED, rng_kind="seeded", rng_seed=SEED
    )
    ledger = Ledger(tmp / "reference.sqlite", epsilon_budget=math.inf, delta_budget=0.5)
    model = strategy.run([o.owner_id for o in owners], _LocalTransport(owners, ledger)).model
    return float(np.mean(model.predict(test.X) == test.y))


def _wait_until_serving(coordinator: subprocess.Popen, port: int, tls: TlsFiles) -> None:
    """Until the coordinator process answers a TLS connection on ``port``: as long as it takes to start
    while it runs (an in-process hostile node gives up after a minute without a coordinator)."""
    while coordinator.poll() is None:
        with grpc.secure_channel(f"127.0.0.1:{port}", channel_credentials(tls), options=channel_options()) as ch:
            try:
                grpc.channel_ready_future(ch).result(timeout=5.0)
                return
            except grpc.FutureTimeoutError:
                continue
    raise AssertionError(f"the coordinator exited ({coordinator.returncode}) before it served")


def _launch(task: str, tmp: Path) -> dict:
    """Start one real job: the coordinator and the honest node (:func:`_start_hostile` adds the rest)."""
    flags, attacks = JOBS[task]
    certs = Path(make_certs(tmp / "certs", owners=1 + len(attacks)))
    n_owners, port = HONEST + len(attacks), _free_port()
    coordinator = subprocess.Popen(
        _privfed(
            "coordinator", "--task", task, "--owners", str(n_owners), "--certs", str(certs),
            "--listen", f"127.0.0.1:{port}", "--out", str(tmp / "runs"),
            "--register-timeout", START_TIMEOUT, *flags, *DATA,
        ),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    with open(tmp / "owner-0.log", "w") as log:
        honest = subprocess.Popen(
            _privfed(
                "owner", "--coordinator", f"127.0.0.1:{port}", "--name", "owner-0", "--certs", str(certs),
                "--ledger", str(tmp / "owner-0.sqlite"), "--epsilon-budget", "10", "--delta-budget", "1e-3",
                "--n-owners", str(n_owners), "--shards", f"0:{HONEST}", "--rng", "seeded",
                "--connect-timeout", START_TIMEOUT, *DATA,
            ),
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return {
        "task": task,
        "tmp": tmp,
        "n_owners": n_owners,
        "procs": (coordinator, honest),
        "port": port,
        "certs": certs,
    }


def _start_hostile(run: dict) -> dict:
    """One hostile node per attack of ``run``'s job, started once its coordinator serves."""
    port, certs = run["port"], run["certs"]
    _wait_until_serving(run["procs"][0], port, TlsFiles.in_dir(certs, "owner-1"))
    hostile = {
        attack: HostileOwner(
            f"127.0.0.1:{port}", TlsFiles.in_dir(certs, f"owner-{j}"), f"owner-{j}", [HONEST + j - 1], ATTACKS[attack]
        ).start()
        for j, attack in enumerate(JOBS[run["task"]][1], start=1)
    }
    return run | {"hostile": hostile}


def _collect(run: dict) -> dict:
    coordinator, honest = run["procs"]
    try:
        out, err = coordinator.communicate(timeout=900)  # its own limits end it: a guard against a hang
        honest_code = honest.wait(timeout=30)
    finally:
        for h in run["hostile"].values():
            h.stop()
        for p in (coordinator, honest):
            if p.poll() is None:
                p.kill()
    reports = list((run["tmp"] / "runs").glob("*/report.json"))
    return run | {
        "code": coordinator.returncode,
        "out": out,
        "err": err,
        "honest_code": honest_code,
        "report": json.loads(reports[0].read_text()) if reports else None,
    }


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> dict[str, dict]:
    """Both jobs at once (they share the machine, not a port); the honest references computed meanwhile."""
    runs = {task: _launch(task, tmp_path_factory.mktemp(f"hostile-{task}")) for task in sorted(JOBS)}
    with ThreadPoolExecutor(len(runs)) as pool:
        started = {task: pool.submit(_start_hostile, run) for task, run in runs.items()}
        references = {
            task: _honest_accuracy(task, JOBS[task][0], run["n_owners"], run["tmp"]) for task, run in runs.items()
        }
        try:
            runs = {task: future.result() for task, future in started.items()}
        except BaseException:
            for p in (p for run in runs.values() for p in run["procs"]):
                p.kill()
            raise
    return {task: _collect(run) | {"reference": references[task]} for task, run in runs.items()}


@pytest.fixture(params=sorted(JOBS))
def job(request, jobs) -> dict:
    return jobs[request.param]


def test_hostile_owners_neither_abort_the_job_nor_move_its_accuracy(job):
    assert job["code"] == 0, job["err"][-3000:]
    report = job["report"]
    assert report is not None and report["status"] == "ok", report
    assert job["honest_code"] == 0  # told the job is over
    rejected = report["rejected_owners"]
    expected = {h.owner_ids[0]: EXPECTED_CODES[attack] for attack, h in job["hostile"].items()}
    assert {o: line.partition(":")[0] for o, line in rejected.items()} == expected
    assert report["answered"] == HONEST
    assert report["accuracy"] == pytest.approx(job["reference"], abs=0.006), (report["accuracy"], job["reference"])
    assert report["accuracy"] > report["baselines"]["majority_class"] + 0.05  # it learned something
    assert "owners rejected for replies that broke their task's contract" in job["out"]


def test_a_rejected_owner_is_asked_for_nothing_more(job):
    if job["task"] != "feddpdr":
        pytest.skip("nearest centroid has one round")
    for attack, h in job["hostile"].items():
        kinds = [type(t.spec).__name__ for t in h.tasks]
        assert kinds == ["JoinTask", "PcaShareTask"], (attack, kinds)  # DP-PCA reply rejected: no SVM task
