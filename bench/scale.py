"""Cross-device scale: per-owner CPU, wire bytes and memory of whole ``privfed simulate`` jobs (issue 27, item 4).

Each run is one real ``privfed simulate`` process (the coordinator, with mTLS) and its ``--processes``
owner node processes, on the synthetic data set at one ε, in a network namespace of its own when
this host allows one (then every byte on its loopback is the job's). While the job runs, every
process of its tree is sampled from ``/proc`` every ``POLL`` s: CPU (utime + stime), resident set
(VmRSS) and peak resident set (VmHWM, the kernel's own high-water mark). Per job::

    task N  wall_s  rounds_s  cpu_s  coord_cpu_s  cpu_ms/owner  bytes/owner  coord_MB  child_MB  job_MB  node_MB  sum_MB  KB/owner  acc  ref  majority

``cpu_s`` is the whole tree's (the launcher's children included: data split, non-private
reference, plot), as the kernel counts the CPU of waited-for children (``RUSAGE_CHILDREN``), so a
process that lived between two samples counts too; ``coord_cpu_s`` the launcher-coordinator's own
CPU at its last sample (its children's not included); ``coord_MB`` the launcher-coordinator's peak (VmHWM; with a checkout that still
fits the reference in the launcher's own process, that fit included), ``child_MB`` the largest
child's peak, ``job_MB`` the coordinator's largest sampled RSS while node processes are alive, ``node_MB`` the
largest node's peak, ``sum_MB`` the peak of the tree's summed RSS (one instant), ``KB/owner`` that
sum over N; ``bytes/owner`` loopback bytes (headers included) over N, ``-`` without a namespace;
``acc`` the model's accuracy on the public test split at that ε beside the job's own non-private
reference (``privfed lr/ncc at ε = ∞``, the same owners) and the majority-class line.

Then, per task, ``name  baseline  candidate  ratio`` lines (STYLE rule 14) for each N against the
smallest N of the same run (the baseline): CPU per owner, bytes per owner, RSS per owner, wall
per owner. A flat ratio is a per-owner cost that does not grow with N.

    python bench/scale.py [--owners 1000,10000,100000] [--million] [--tasks lr,ncc] [--processes 2]
                          [--epsilon 1] [--bdt-owners N] [--seed 0] [--solver local] [--pythonpath DIR]

``lr`` is one-round LR from local fits (``--solver local``), the task issue 27 measures; ``--solver gd``
measures LDP gradient descent, ``--solver ''`` passes none (a checkout from before the flag).

``--pythonpath DIR`` runs the job from another checkout (e.g. main, for before/after numbers), laid out
whole by :func:`bench.checkout.checkout_env`. ``--bdt-owners N`` adds a 10-round BDT (stumps) at N owners.
``--million`` (or ``PRIVFED_SCALE_MILLION=1`` in the environment, as ``PRIVFED_SCALE_MILLION=1 make
bench`` passes it) adds N = 10^6 to the series: about 8 min per task on two cores, so not by default.
Every job line ends with the load average at its end (``uptime``): timings are only comparable on a
quiet machine. Not a test and not run in CI (``make bench``: N = 10^3, 10^4, 10^5, about 3 minutes
on two cores).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the repository root: bench.*
from bench.checkout import checkout_env

POLL = 0.1  # seconds between two samples of the job's processes
#: Polls between two scans of ``/proc`` for the job's process tree (between them only the processes already
#: found are sampled): a scan reads the stat file of every process on the host, ~10 % of a core at 10 Hz on a
#: shared box, taken from the job it measures.
RESCAN = 10
PAGE_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Proc:
    """What was last seen of one process of the job's tree."""

    role: str
    cpu_s: float = 0.0
    peak_mb: float = 0.0


@dataclass
class Job:
    task: str
    owners: int
    wall_s: float
    rounds_s: float
    procs: dict[int, Proc] = field(default_factory=dict)
    #: The tree's CPU as the kernel counted it for the waited-for processes (RUSAGE_CHILDREN): every
    #: process, also one that lived between two samples.
    cpu_total_s: float | None = None
    peak_sum_mb: float = 0.0
    coord_job_mb: float = 0.0
    #: The launcher-coordinator's own CPU (utime + stime) at its last sample.
    coord_cpu_s: float = float("nan")
    wire_bytes: int | None = None
    accuracy: float = float("nan")
    reference: float = float("nan")
    majority: float = float("nan")

    @property
    def cpu_s(self) -> float:
        return self.cpu_total_s if self.cpu_total_s is not None else sum(p.cpu_s for p in self.procs.values())

    def peak(self, role: str) -> float:
        return max((p.peak_mb for p in self.procs.values() if p.role.startswith(role)), default=0.0)


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _descendants(root: int) -> list[int]:
    tree, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += tree.get(pid, [])
    return out


def _children_cpu() -> float:
    """User and system CPU seconds of this process's waited-for children and their descendants."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: pid -> role, once its command line named one: a process's role is read from ``/proc`` once, not at every
#: sample (a third of the sampler's reads). A forked child shows its parent's command line until it execs,
#: so the default role (the coordinator's) is not kept.
_roles: dict[int, str] = {}


def _role(pid: int) -> str | None:
    """The role of a process from its command line (None once it is gone)."""
    if pid in _roles:
        return _roles[pid]
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    words = [w.decode(errors="replace") for w in cmd]
    role = next((f"node {words[i + 1]}" for i, w in enumerate(words[:-1]) if w == "--name"), "coordinator")
    if "privfed.deploy.child" in words:  # the launcher's data split, reference fit or plot
        role = "child"
    if "python" not in words[0] and not any("privfed" in w for w in words):
        role = "other " + Path(words[0]).name
    if role != "coordinator":
        _roles[pid] = role
    return role


def _sample(pid: int) -> tuple[str, float, float, float] | None:
    """``(role, cpu s, rss MB, peak rss MB)`` of a live process, None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    role = _role(pid)
    kb = {line.split(":")[0]: int(line.split()[1]) for line in status.splitlines() if line.startswith("Vm")}
    if role is None or "VmRSS" not in kb:  # gone, or a zombie
        return None
    cpu = (int(stat[11]) + int(stat[12])) / PAGE_TICKS
    return role, cpu, kb["VmRSS"] / 1024, kb.get("VmHWM", kb["VmRSS"]) / 1024


class Netns:
    """A network namespace with only ``lo`` up; its loopback counters are the job's bytes."""

    def __init__(self) -> None:
        self.name = f"pfscale{os.getpid()}"
        ok = (
            os.geteuid() == 0 and subprocess.run(["ip", "netns", "add", self.name], capture_output=True).returncode == 0
        )
        self.ok = ok and self._ip("link", "set", "lo", "up").returncode == 0

    def _ip(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "-n", self.name, *args], capture_output=True, text=True)

    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name] if self.ok else []

    def tx_bytes(self) -> int | None:
        if not self.ok:
            return None
        out = subprocess.run(
            ["ip", "netns", "exec", self.name, "cat", "/sys/class/net/lo/statistics/tx_bytes"],
            capture_output=True,
            text=True,
        )
        return int(out.stdout) if out.returncode == 0 else None

    def close(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


def run_job(task: str, owners: int, args: argparse.Namespace, tmp: Path) -> Job:
    out = tmp / f"{task}-{owners}"
    cmd = [sys.executable, "-m", "privfed.deploy.cli", "simulate", "--task", task, "--owners", str(owners)]
    cmd += ["--processes", str(args.processes), "--epsilon", str(args.epsilon), "--seed", str(args.seed)]
    cmd += ["--no-progress", "--out", str(out)]
    if task == "bdt":
        # the share pipeline by name: with one row per owner --task bdt would run --release marginals
        cmd += ["--release", "shares", "--rounds", "10", "--base", "stump"]
    if task == "lr" and args.solver:
        cmd += ["--solver", args.solver]
    env = checkout_env(args.pythonpath, tmp)
    _roles.clear()  # a pid of an earlier job may be reused
    netns = Netns()
    before = netns.tx_bytes()
    log = (tmp / f"{task}-{owners}.log").open("w")
    used = _children_cpu()
    start = time.monotonic()
    proc = subprocess.Popen(netns.prefix() + cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp)
    seen: dict[int, Proc] = {}
    peak_sum = coord_job = 0.0
    tree: list[int] = []
    try:
        polls = 0
        while proc.poll() is None:
            if polls % RESCAN == 0:
                tree = _descendants(proc.pid)
            polls += 1
            total, coord, nodes = 0.0, 0.0, False
            for pid in tree:
                s = _sample(pid)
                if s is None or s[0].startswith("other"):
                    continue
                role, cpu, rss, hwm = s
                p = seen.setdefault(pid, Proc(role))
                p.cpu_s, p.peak_mb = cpu, max(p.peak_mb, hwm)
                total += rss
                nodes |= role.startswith("node")
                coord = rss if pid == proc.pid else coord
            peak_sum = max(peak_sum, total)
            coord_job = max(coord_job, coord) if nodes else coord_job
            time.sleep(POLL)
        wall = time.monotonic() - start
        used = _children_cpu() - used  # the job's tree, reaped by proc.poll() (each level waits for its own)
        after = netns.tx_bytes()
    finally:
        netns.close()
        log.close()
    if proc.returncode != 0:
        tail = Path(log.name).read_text(errors="replace").splitlines()[-15:]
        raise SystemExit(f"{task} N={owners} failed (exit {proc.returncode}); the end of its log:\n" + "\n".join(tail))
    report = json.loads(next(out.glob("*/report.json")).read_text())
    point = report["points"][0]
    return Job(
        task,
        owners,
        wall,
        float(point.get("rounds_s", float("nan"))),
        procs=seen,
        cpu_total_s=used,
        peak_sum_mb=peak_sum,
        coord_job_mb=coord_job,
        coord_cpu_s=seen[proc.pid].cpu_s if proc.pid in seen else float("nan"),
        wire_bytes=None if before is None or after is None else after - before,
        accuracy=float(point["accuracy"]),
        reference=float(report.get("reference_accuracy", float("nan"))),
        majority=float(report["baselines"]["majority_class"]),
    )


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` prints them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def print_job(j: Job) -> None:
    n = j.owners
    per_byte = "-" if j.wire_bytes is None else f"{j.wire_bytes / n:.0f}"
    print(
        f"{j.task:4} {n:>8}  {j.wall_s:7.1f}  {j.rounds_s:8.2f}  {j.cpu_s:6.1f}  {j.coord_cpu_s:11.1f}  {1000 * j.cpu_s / n:12.3f}  "
        f"{per_byte:>11}  {j.peak('coordinator'):8.0f}  {j.peak('child'):8.0f}  {j.coord_job_mb:7.0f}  {j.peak('node'):7.0f}  {j.peak_sum_mb:6.0f}  "
        f"{1024 * j.peak_sum_mb / n:8.2f}  {j.accuracy:.4f}  {j.reference:.4f}  {j.majority:.4f}  load {load_average()}",
        flush=True,
    )


def print_ratios(jobs: list[Job]) -> None:
    base = jobs[0]
    metrics = {
        "cpu ms/owner": lambda j: 1000 * j.cpu_s / j.owners,
        "wall ms/owner": lambda j: 1000 * j.wall_s / j.owners,
        "RSS KB/owner": lambda j: 1024 * j.peak_sum_mb / j.owners,
        "coord RSS KB/owner": lambda j: 1024 * j.peak("coordinator") / j.owners,
        "coord job KB/owner": lambda j: 1024 * j.coord_job_mb / j.owners,
        "bytes/owner": lambda j: float("nan") if j.wire_bytes is None else j.wire_bytes / j.owners,
    }
    for j in jobs[1:]:
        for name, f in metrics.items():
            b, c = f(base), f(j)
            print(
                f"{j.task} N={j.owners} vs N={base.owners} {name:18}  {b:10.3f}  {c:10.3f}  {c / b if b else float('nan'):6.2f}"
            )
        # what one more owner costs, the interpreter and the libraries of the smallest job left out
        extra = 1024 / (j.owners - base.owners)
        print(
            f"{j.task} N={j.owners} vs N={base.owners} KB per added owner: coordinator during the job "
            f"{extra * (j.coord_job_mb - base.coord_job_mb):.3f}, summed peak {extra * (j.peak_sum_mb - base.peak_sum_mb):.3f}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--owners", default="1000,10000,100000", help="comma-separated N; the first is the ratios' baseline")
    p.add_argument(
        "--million",
        action="store_true",
        default=os.environ.get("PRIVFED_SCALE_MILLION", "") not in ("", "0"),
        help="add N = 10^6 (about 8 min per task; also PRIVFED_SCALE_MILLION=1)",
    )
    p.add_argument("--tasks", default="lr,ncc")
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--bdt-owners", type=int, default=0, help="also a 10-round BDT at this N (0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--solver", default="local", help="lr's: local (one round, the default here) or gd; '' for checkouts before it"
    )
    p.add_argument("--pythonpath", default=None)
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the namespace is deleted on the way out
    sizes = [int(n) for n in args.owners.split(",")] + ([1_000_000] if args.million else [])
    print(
        f"# bench/scale.py  {args.processes} node processes, epsilon {args.epsilon:g}, seed {args.seed}, "
        f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}, load {load_average()}"
    )
    print(
        "task        N   wall_s  rounds_s   cpu_s  coord_cpu_s  cpu_ms/owner  bytes/owner  coord_MB  child_MB  job_MB  node_MB  sum_MB  "
        "KB/owner  acc     ref     majority  load (1, 5, 15 min)"
    )
    with tempfile.TemporaryDirectory(prefix="privfed-scale-") as d:
        tmp = Path(d)
        series: list[list[Job]] = []
        for task in [t for t in args.tasks.split(",") if t]:
            jobs = []
            for n in sizes:
                jobs.append(run_job(task, n, args, tmp))
                print_job(jobs[-1])
            series.append(jobs)
        if args.bdt_owners:
            print_job(run_job("bdt", args.bdt_owners, args, tmp))
    for jobs in series:
        print_ratios(jobs)


if __name__ == "__main__":
    main()
