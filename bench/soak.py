"""A long-lived federation over hundreds of jobs: does anything grow per job?

One coordinator service (``privfed serve``) and ``--nodes`` owner daemons (``privfed owner
--policy``), real processes on loopback with mTLS, as README "Running on several machines"
starts them; a data user submits ``--jobs`` short jobs back to back over the job API (one gRPC
channel with a data-user certificate, what ``privfed submit`` sends) and waits for each to finish.
Every ``--bdt-every``-th job, the first included, is a three-round boosting job (``task = "bdt"``)
whose evaluations go through a secure sum, pairwise masks and the ring in turn, so the secure-sum
state of the coordinator and the nodes is exercised; the others are one-round LR jobs
(``solver = "local"``) at ε = 1.

After each job it reads, from ``/proc``, the CPU time, RSS, open file descriptors and threads of
the coordinator and of each node. Lines read ``name baseline candidate ratio`` (STYLE rule 14), all
measured in this run: the baseline is the ``WINDOW`` jobs after ``--warmup``, the candidate the last
``WINDOW`` jobs; wall time and CPU per job are means over the window's LR jobs, sizes and counts are
read after its last job. Anything that grows per job shows as a ratio above 1 that grows with
``--jobs``. A node's ledger grows with its releases by design; its cost per release is
``bench/ledger.py``'s.

    python bench/soak.py [--jobs 500] [--bdt-every 25] [--nodes 3] [--pythonpath DIR] [--tracemalloc]

``--pythonpath DIR`` runs the service and the nodes from another checkout laid out as
``DIR/privfed`` (before/after). ``--tracemalloc`` traces every process's allocations and prints,
per process, the sources whose memory grew most between the end of the warm-up and the last job
(slower; for hunting, not for the ratios). Progress goes to stderr. Not a test and not run in CI
(``make bench``); its 500 jobs take about 40 s on two busy cores.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from privfed.deploy.certs import make_certs
from privfed.proto.jobwire import JOB_SERVICE, decode_json, encode_json
from privfed.proto.transport import TlsFiles, channel_credentials

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the repository root: bench.*
from bench.checkout import checkout_env  # noqa: E402

#: Jobs averaged for the baseline (after the warm-up) and for the candidate (the last ones).
WINDOW = 20
OWNERS_PER_NODE = 10
DATASET = ["--dataset", "synthetic", "--n-samples", "600", "--seed", "3", "--test-fraction", "0.25"]
POLICY = 'tasks = ["lr", "bdt"]\nmax_epsilon_per_job = 4.0\ndata_users = ["alice"]\n'
#: How a bdt job whose noisy rounds all came out no better than chance fails: it ran every secure sum.
NO_BETTER_THAN_CHANCE = "nothing to boost"
#: Runs ``privfed`` under tracemalloc; SIGUSR1 collects garbage and dumps a snapshot to ``$SOAK_TRACE.<n>``.
TRACED = (
    "import gc, itertools, os, signal, sys, tracemalloc\n"
    "tracemalloc.start(8)\n"
    "count = itertools.count()\n"
    "def dump(*_):\n"
    "    gc.collect()  # garbage in cycles waits for a full collection: not growth\n"
    "    tracemalloc.take_snapshot().dump(f\"{os.environ['SOAK_TRACE']}.{next(count)}\")\n"
    "signal.signal(signal.SIGUSR1, dump)\n"
    "from privfed.deploy.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def usage(pid: int) -> dict[str, float]:
    """CPU seconds (user + system), RSS (MB), open file descriptors and threads of ``pid``, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    ticks = os.sysconf("SC_CLK_TCK")
    status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status"))
    return {
        "cpu": (int(fields[11]) + int(fields[12])) / ticks,
        "rss": int(status["VmRSS"].split()[0]) / 1024.0,
        "fds": float(len(os.listdir(f"/proc/{pid}/fd"))),
        "threads": float(status["Threads"].split()[0]),
    }


def job_file(index: int, bdt_every: int, owners: int) -> dict[str, Any]:
    """The ``index``-th job's settings (a job file's keys): LR, or every ``bdt_every``-th a secure-sum bdt."""
    if bdt_every and index % bdt_every == 0:
        secure_sum = ("secagg", "ring")[(index // bdt_every) % 2]
        return {"task": "bdt", "epsilon": 4.0, "owners": owners, "rounds": 3, "min_owners": 1, "secure_sum": secure_sum}
    return {"task": "lr", "epsilon": 1.0, "owners": owners, "solver": "local"}


class Soak:
    """The service, its nodes and a data user's channel, in ``tmp``."""

    def __init__(self, tmp: Path, nodes: int, pythonpath: str | None, traced: bool) -> None:
        self.tmp, self.n_nodes = tmp, nodes
        self.certs = make_certs(tmp / "certs", owners=nodes, data_users=["alice"])
        self.port = free_port()
        self.store = tmp / "store"
        self.env = checkout_env(pythonpath, tmp, dict(os.environ, PYTHONWARNINGS="ignore"))
        self.traced = traced
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        (tmp / "policy.toml").write_text(POLICY)
        self._start(
            "coordinator",
            ["serve", "--listen", f"127.0.0.1:{self.port}", "--certs", str(self.certs),
             "--store", str(self.store), "--status-listen", "none", *DATASET],
        )  # fmt: skip
        n = nodes * OWNERS_PER_NODE
        for i in range(nodes):
            self._start(
                f"owner-{i}",
                ["owner", "--coordinator", f"127.0.0.1:{self.port}", "--name", f"owner-{i}", "--certs", str(self.certs),
                 *DATASET, "--n-owners", str(n), "--shards", f"{i * OWNERS_PER_NODE}:{(i + 1) * OWNERS_PER_NODE}",
                 "--ledger", str(tmp / f"owner-{i}.sqlite"), "--epsilon-budget", "1e6", "--delta-budget", "1",
                 "--policy", str(tmp / "policy.toml")],
            )  # fmt: skip
        tls = channel_credentials(TlsFiles.in_dir(self.certs, "alice"))
        self.channel = grpc.secure_channel(f"127.0.0.1:{self.port}", tls)
        self.submit = self.channel.unary_unary(
            f"/{JOB_SERVICE}/Submit", request_serializer=encode_json, response_deserializer=decode_json
        )
        deadline = time.monotonic() + 300  # slow under --tracemalloc
        while "serving on port" not in self.log_tail("coordinator"):
            if time.monotonic() > deadline or self.procs["coordinator"].poll() is not None:
                raise SystemExit(f"the service did not start:\n{self.log_tail('coordinator')}")
            time.sleep(0.2)

    def _start(self, name: str, argv: list[str]) -> None:
        env = self.env | {"SOAK_TRACE": str(self.tmp / f"{name}.trace")}
        program = ["-c", TRACED] if self.traced else ["-m", "privfed.deploy.cli"]
        log = open(self.tmp / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(
            [sys.executable, *program, *argv], env=env, cwd=self.tmp, stdout=log, stderr=subprocess.STDOUT
        )

    def log_tail(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")[-3000:]

    def run(self, settings: dict[str, Any], timeout: float = 120.0) -> float:
        """Submit one job, wait until it is done; its wall time in seconds (raises if it did not succeed)."""
        t0 = time.perf_counter()
        try:
            job_id = self.submit({"job": settings}, timeout=30)["job_id"]
        except grpc.RpcError as exc:
            raise SystemExit(f"submit failed: {exc.details()}\n{self.log_tail('coordinator')}") from None
        record = self.store / job_id / "job.json"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                job = json.loads(record.read_text())
            except FileNotFoundError:
                job = {"state": "queued"}
            if job["state"] == "done" or NO_BETTER_THAN_CHANCE in (job.get("error") or ""):
                return time.perf_counter() - t0
            if job["state"] in ("failed", "cancelled"):
                raise SystemExit(f"job {job_id} ({settings}) {job['state']}:\n{self.log_tail('coordinator')}")
            time.sleep(0.01)
        raise SystemExit(f"job {job_id} not done after {timeout} s:\n{self.log_tail('coordinator')}")

    def sample(self) -> dict[str, dict[str, float]]:
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise SystemExit(f"{name} exited ({p.returncode}):\n{self.log_tail(name)}")
        return {name: usage(p.pid) for name, p in self.procs.items()}

    def snapshot(self, index: int, timeout: float = 120.0) -> None:
        """Every process dumps its tracemalloc snapshot ``index`` (``--tracemalloc``); returns once
        every dump is written (a process takes the signal when its main thread next runs Python)."""
        for p in self.procs.values():
            p.send_signal(signal.SIGUSR1)
        dumps = [self.tmp / f"{name}.trace.{index}" for name in self.procs]
        deadline, sizes = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            now = [d.stat().st_size if d.exists() else -1 for d in dumps]
            if now == sizes and min(now) > 0:
                return
            sizes = now
            time.sleep(0.5)
        raise SystemExit(f"no tracemalloc snapshot {index} after {timeout} s: {[d.name for d in dumps]}")

    def close(self) -> None:
        self.channel.close()
        for p in self.procs.values():
            p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def table(
    walls: Sequence[float], tasks: Sequence[str], samples: Sequence[dict[str, dict[str, float]]], warmup: int
) -> list[tuple[str, float, float]]:
    """The ``name baseline candidate ratio`` rows (module docstring): wall and CPU per job over the window's
    lr jobs (sample ``i`` is taken after job ``i``), sizes and counts after the window's last job."""
    base = range(warmup, warmup + WINDOW)
    last = range(len(walls) - WINDOW, len(walls))

    def per_lr_job(values: Sequence[float], window: range) -> float:
        lr = [i for i in window if tasks[i] == "lr"]
        return 1000 * sum(values[i] for i in lr) / len(lr)

    def cpu(name: str) -> list[float]:
        return [0.0] + [samples[i][name]["cpu"] - samples[i - 1][name]["cpu"] for i in range(1, len(samples))]

    rows = [("wall per lr job (ms)", per_lr_job(walls, base), per_lr_job(walls, last))]
    for name in samples[0]:
        rows.append((f"{name} CPU per lr job (ms)", per_lr_job(cpu(name), base), per_lr_job(cpu(name), last)))
        for key, unit in (("rss", " RSS (MB)"), ("fds", " open fds"), ("threads", " threads")):
            rows.append((f"{name}{unit}", samples[base[-1]][name][key], samples[last[-1]][name][key]))
    return rows


def grown(tmp: Path, name: str, top: int = 8) -> list[str]:
    """The sources whose traced memory grew most between the two snapshots of process ``name``."""
    import tracemalloc

    first = tracemalloc.Snapshot.load(str(tmp / f"{name}.trace.0"))
    second = tracemalloc.Snapshot.load(str(tmp / f"{name}.trace.1"))
    stats = second.compare_to(first, "traceback")
    return [
        f"    {s.size_diff / 1024:+9.1f} KiB {s.count_diff:+7d} blocks  "
        + " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in list(s.traceback)[::-1][:6])
        for s in stats[:top]
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument(
        "--warmup", type=int, default=30, help="jobs before the baseline window (a bdt job of each secure sum)"
    )
    parser.add_argument("--bdt-every", type=int, default=25, help="every N-th job a secure-sum bdt (0: none)")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--pythonpath", default=None, help="run the service and nodes from DIR/privfed")
    parser.add_argument("--tracemalloc", action="store_true", help="print what grew in each process")
    args = parser.parse_args()
    if args.jobs < args.warmup + 2 * WINDOW:
        parser.error(f"--jobs must be at least --warmup + {2 * WINDOW}")
    owners = args.nodes * OWNERS_PER_NODE
    with tempfile.TemporaryDirectory(prefix="privfed-soak-") as d:
        tmp = Path(d)
        soak = Soak(tmp, args.nodes, args.pythonpath, args.tracemalloc)
        try:
            walls, tasks, samples = [], [], []
            t0 = time.perf_counter()
            for i in range(args.jobs):
                settings = job_file(i, args.bdt_every, owners)
                walls.append(soak.run(settings))
                tasks.append(settings["task"])
                samples.append(soak.sample())
                if args.tracemalloc and i in (args.warmup - 1, args.jobs - 1):
                    soak.snapshot(0 if i == args.warmup - 1 else 1)
                if (i + 1) % 10 == 0 or i + 1 == args.jobs:
                    c = samples[-1]["coordinator"]
                    print(
                        f"  job {i + 1}/{args.jobs}  {time.perf_counter() - t0:.0f} s  coordinator "
                        f"{c['rss']:.0f} MB, {c['fds']:.0f} fds, {c['threads']:.0f} threads",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            soak.close()
        print(
            f"soak: {args.jobs} jobs ({tasks.count('bdt')} bdt with secure sums, the rest one-round lr), {args.nodes} nodes x "
            f"{OWNERS_PER_NODE} owners, mTLS; baseline jobs {args.warmup + 1}-{args.warmup + WINDOW}, candidate the "
            f"last {WINDOW}; load {os.getloadavg()[0]:.1f}"
        )
        print(f"{'name':<34}{'baseline':>10}{'candidate':>11}{'ratio':>8}")
        for name, b, c in table(walls, tasks, samples, args.warmup):
            print(f"{name:<34}{b:>10.1f}{c:>11.1f}{(c / b if b else float('nan')):>8.2f}")
        if args.tracemalloc:
            for name in soak.procs:
                print(f"{name}: grew most between job {args.warmup} and job {args.jobs}")
                print("\n".join(grown(tmp, name)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
