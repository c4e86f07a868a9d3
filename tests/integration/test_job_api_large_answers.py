"""Walkthrough 13, W13-2: a data user's `privfed jobs` and `privfed job show` read answers of any size the channel
carries. The job API's 64 KiB bound is for requests (a job file is a few hundred bytes); the client applied it to
the service's answers too, so once a job of a federation of a few hundred one-row owners was declined by their
policies (its report lists each owner's refusal, its summary each declined owner), both commands ended in a gRPC
traceback and "Exception deserializing response!" (breast cancer's 455 owners, after their day limit: `job show`
of the declined job, and `privfed jobs --last 10`).

A coordinator service and one owner daemon hosting 4000 owners, as real processes (mTLS); the owners' policy
declines the job (epsilon 2 over its per-job limit of 1), so nothing is released."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from fedharness import owner_cmd
from servicefleet import free_port, toml

from privfed.deploy.certs import make_certs

pytestmark = pytest.mark.slow

DATA = ["--dataset", "synthetic", "--n-samples", "5600", "--seed", "3", "--test-fraction", "0.25"]
OWNERS = 4000


def test_jobs_and_job_show_read_a_declined_job_of_thousands_of_owners(tmp_path):
    certs = make_certs(tmp_path / "certs", owners=1, data_users=["alice"])
    port, store = free_port(), tmp_path / "store"
    serve_log = tmp_path / "serve.log"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "privfed.deploy.cli",
                "serve",
                "--listen",
                f"127.0.0.1:{port}",
                "--certs",
                str(certs),
                "--store",
                str(store),
                "--status-listen",
                "none",
                *DATA,
            ],
            stdout=open(serve_log, "w"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    ]
    try:
        deadline = time.monotonic() + 30
        while "serving on port" not in serve_log.read_text():
            assert procs[0].poll() is None and time.monotonic() < deadline, serve_log.read_text()
            time.sleep(0.1)
        policy = tmp_path / "policy.toml"
        policy.write_text(toml({"tasks": ["ncc"], "max_epsilon_per_job": 1.0, "data_users": ["alice"]}))
        cmd = owner_cmd(
            port, "owner-0", n_owners=OWNERS, shards=f"0:{OWNERS}", ledger=tmp_path / "owner-0.sqlite", budget=10.0,
            certs=certs, extra=["--policy", str(policy)], dataset=DATA,
        )  # fmt: skip
        procs.append(subprocess.Popen(cmd, stdout=open(tmp_path / "owner-0.log", "w"), stderr=subprocess.STDOUT))

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "privfed.deploy.cli", *args, "--coordinator", f"127.0.0.1:{port}",
                 "--certs", str(certs), "--name", "alice"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip

        (tmp_path / "ncc.toml").write_text(toml({"task": "ncc", "epsilon": 2.0, "owners": OWNERS}))
        done = cli("submit", str(tmp_path / "ncc.toml"))
        assert done.returncode == 0, done.stderr
        job_id = done.stdout.split()[2]
        deadline = time.monotonic() + 120
        while json.loads((store / job_id / "job.json").read_text())["state"] != "failed":
            assert time.monotonic() < deadline, serve_log.read_text()[-3000:]
            time.sleep(0.3)
        report = json.loads((store / job_id / "report.json").read_text())
        assert len(report["declined_owners"]) == OWNERS
        assert len(json.dumps(report)) > 64 * 1024  # an answer past the requests' bound

        listing = cli("jobs")
        assert listing.returncode == 0, listing.stderr
        assert "Traceback" not in listing.stderr and f"{job_id}  failed" in listing.stdout, listing
        assert f"{OWNERS}/{OWNERS} owners refused: policy" in listing.stdout
        as_json = cli("jobs", "--json")
        assert as_json.returncode == 0, as_json.stderr
        assert len(json.loads(as_json.stdout)[0]["declined_owners"]) == OWNERS
        show = cli("job", "show", job_id)
        assert show.returncode == 0 and "Traceback" not in show.stderr, show.stderr
        assert "owner-0.o03999" in show.stdout
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
