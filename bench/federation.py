"""Owner node footprint and the one-round LR job over gRPC vs the bare in-process computation.

Issue 10, "a lean owner node". Every owner node is a real ``python -m privfed.deploy.cli owner
--data FILE`` process (its own CSV rows, ``--bounds``, ``--rng seeded``, an infinite ε budget so
that the ε = ∞ job is affordable; loopback, no TLS: the numbers are about processes and imports,
not handshakes). The coordinator is a :class:`~privfed.server.app.CoordinatorServer` in a
process of its own (``COORDINATOR`` below), always from this checkout. Lines read ``name  baseline  candidate  ratio`` (STYLE rule 14), medians of
``--repeats`` runs in this run:

* ``owner exec->registered s``: one node hosting one owner; the baseline is the floor of any owner
  node, a bare ``python -c "import numpy, grpc, google.protobuf, cryptography.x509"`` (its
  exec-to-exit time). The idle RSS of real owner and coordinator processes against that floor's
  RSS is ``bench/footprint.py``'s (``make bench`` runs both).
* ``coord+N nodes RSS MB`` (N = 5, 20): the coordinator's RSS plus every node's, once all are
  registered and idle; baseline (N + 1) x the floor.
* ``LR round N=.. s``: per-round time of the one-round LR job at ε = ∞ (median of ``--repeats``
  rounds after the first, new round id each; ``first round`` is the first alone, in which each
  node imports ``scipy.optimize`` for its first fit) vs the same owners' fits, shares and the aggregate computed in this
  process (:func:`fit_local_logistic`, :func:`lr_share`, :func:`lr_aggregate`) on the same rows,
  split among the same owners as the nodes split them (:func:`privfed.owner.data.build_owners`).
  N = 5, 20 and 50 with one owner per node process (owners on machines of their own, here sharing the
  host's cores), N = 20 and 50 in 2 node processes (``privfed simulate``'s default layout on one host:
  each node fits its owners in one batch), N = 1000 in 4 node processes (issue 27's goal: a round
  <= 2x the bare computation at N >= 20; ``--rounds-only`` prints only these lines).
* ``  round CPU N=.. s``: the CPU of the coordinator and node processes together per round
  (rounds after the first; /proc counters) against the bare computation's CPU: the work, which the
  load of other processes on the box changes less than the wall time.
* ``  overhead/node N=.. ms``: what the federation adds per node per round, ``(round - bare) / N``,
  against the bare computation per owner (``bare / N``); with N nodes on C cores a round costs at
  least N x (that overhead's CPU) / C on top of the computation. A round faster than the bare
  computation (N = 1000: a node fits its 250 owners in one batch) adds none: 0, with a note of by
  how much it was faster.
* ``  CPU/node N=.. ms``: the round's CPU (coordinator and nodes) per node process against the bare
  computation's CPU for a node's owners: what a node costs a round, less sensitive to the load of
  the box than the wall time (the ratio is the ``round CPU`` line's).
* ``floor: ..`` (issue 27): what the round trip of a node cannot do without, measured alone in this
  run, against the bare computation per owner at N = 20: the CPU (client + coordinator process) and
  the wall time of one unary gRPC call (an empty ``PushResults`` from a registered node, loopback, no
  TLS), of one message pair on a node's Session stream (the same request and its answer, as nodes
  exchange them each round), and of one durable SQLite commit (one row, WAL, ``synchronous=FULL`` as
  the ledger commits; the wall time is the disk's fsync and varies with its load).
* ``  floor: N=.. processes`` (N = 20, 50): the same owners' computation in N processes, one owner
  each, woken by a line on a pipe each round (fit and share, then a line back; the aggregate here),
  against the bare computation: the cost of one process per owner (waking N processes on C cores,
  each running its fit with cold caches) before any gRPC, ledger or coordinator. A round cannot
  beat it.
* ``  node main CPU``, ``  node threads CPU``, ``  coord CPU/node`` (N = 20, 50; issue 27): where the
  ``round CPU`` goes (``bench/round_threads.py``), in ms per round against the bare computation per
  owner: a node's main thread (serving loop, owner core, fit), its other threads (gRPC's stream
  hand-offs, its C core's socket I/O, the session's watchdog), and the coordinator's CPU per node.
  ``  node switches`` and ``  coord switches/node``: context switches per round of a node, and of
  the coordinator per node, against those of a process of the process floor (a wake-up each is what
  the scheduler of a 2-core box pays for N + 1 processes).
* ``round N=.. d=64 pinned s`` (issue 27, item 1): the same round on digits-shaped rows (64
  features, 10 classes, 290 rows per owner), N one-owner nodes on this host; the baseline is every
  node unpinned (``--threads`` = this host's CPUs, OpenBLAS's own default of a thread per CPU), the
  candidate every node pinned to one BLAS thread (``--threads 1``: what ``privfed simulate`` gives
  nodes sharing the host's CPUs). Left out with ``--owner-pythonpath``.

Goals (issue 10): owner <= 60 MB idle and <= 0.3 s exec->registered on an idle core; coordinator
+ 5 nodes <= 0.3 GB, + 20 nodes <= 1 GB; LR round ratio <= 2 at N = 5, 20, 1000.

    python bench/federation.py [--repeats 5] [--seed 0] [--owner-pythonpath DIR] [--skip-1000] [--rounds-only]

``--owner-pythonpath`` runs the owner nodes from another checkout laid out as ``DIR/privfed``
(e.g. the code before a change, for before/after numbers); the coordinator stays this one.
Not a test and not run in CI (``make bench``); about 1-2 minutes on two busy cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the repository root: bench's own modules (bench.*)
from bench.checkout import package_root
from bench.lr_round import BOUND, ROWS_PER_OWNER, D, in_process_round, write_rows
from bench.round_floors import commit_floor, grpc_floor, process_floor
from bench.round_threads import RoundCost, mean, per_round, snapshot, total
from privfed.deploy.commands import owner_argv
from privfed.server.report import host_info

FLOOR = "import numpy, grpc, google.protobuf, cryptography.x509"

#: The coordinator, in its own process so that its RSS is its own: prints its port, then
#: "registered" once every owner is, waits for a line on stdin (the bench reads RSS meanwhile),
#: runs the LR round ``repeats`` times (after the first, prints "first" and waits for a line: the
#: bench reads CPU counters), prints the per-round seconds as JSON and waits for a line before it
#: stops (the bench reads the CPU counters of its threads while they are alive).
COORDINATOR = """
import json, sys
sys.path.insert(0, sys.argv[1])
from bench.lr_round import RoundTimer, lr_strategy
from privfed.server.app import CoordinatorServer
from privfed.server.job import run_job

n, repeats, d, k = (int(a) for a in sys.argv[2:6])
server = CoordinatorServer(tls=None, node_timeout=15.0)
print(server.start("127.0.0.1:0"), flush=True)
got = server.dispatcher.wait_for_owners(n, 120.0)
print("registered" if got == n else f"only {got}", flush=True)
sys.stdin.readline()
def after_first():  # the bench reads every process's CPU between the first round and the others
    print("first", flush=True)
    sys.stdin.readline()
timer = RoundTimer(lr_strategy(d, k), repeats, after_first)
if repeats:
    run_job(server, timer, expected_owners=n, show_progress=False)
print(json.dumps(timer.times), flush=True)
sys.stdin.readline()  # the bench reads every process's CPU before this one's threads end
server.dispatcher.shutdown()
server.stop(0)
"""


def rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS for pid {pid}")


class Bench:
    def __init__(self, tmp: Path, seed: int, owner_pythonpath: str | None):
        self.tmp, self.seed = tmp, seed
        self.env = dict(os.environ)
        if owner_pythonpath:
            self.env["PYTHONPATH"] = str(package_root(Path(owner_pythonpath), tmp / "owner-checkout"))
        self.rng = np.random.Generator(np.random.PCG64(seed))

    def node_file(self, tag: str, owners: int, rows: int = ROWS_PER_OWNER, d: int = D, k: int = 2) -> Path:
        path = self.tmp / f"{tag}.csv"
        if not path.exists():
            write_rows(path, owners * rows, self.rng, d, k)
        return path

    def spawn(
        self, port: int, name: str, data: Path, owners: int, tag: str, extra: tuple[str, ...] = ()
    ) -> subprocess.Popen:
        cmd = [
            *owner_argv(f"127.0.0.1:{port}", name),
            "--insecure",
            "--data",
            str(data),
            f"--bounds=-{BOUND:g}:{BOUND:g}",
            "--shards",
            str(owners),
            "--seed",
            str(self.seed),
            "--rng",
            "seeded",
            "--ledger",
            str(self.tmp / f"{tag}-{name}.sqlite"),
            "--epsilon-budget",
            "inf",
            "--connect-timeout",
            "60",
            *extra,
        ]
        # cwd: ``-m`` puts the working directory first on sys.path, ahead of --owner-pythonpath
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env, cwd=self.tmp)

    def federation(
        self,
        nodes: int,
        owners_per_node: int,
        tag: str,
        repeats: int,
        files: list[Path] | None = None,
        shape: tuple[int, int] = (D, 2),
        extra: tuple[str, ...] = (),
    ) -> tuple[float, tuple[float, float], list, RoundCost | None]:
        """A coordinator process and ``nodes`` node processes (``files``: their rows, default
        :meth:`node_file`'s; ``shape``: their (features, classes); ``extra``: more owner flags).
        Returns (seconds from the first node's exec to every owner registered, (coordinator RSS
        MB, summed RSS MB of the nodes) once registered and idle, per-round seconds of ``repeats``
        LR rounds, the CPU and context switches per round of the coordinator and of a node, by
        thread, over the rounds after the first (:class:`RoundCost`; None with fewer than two))."""
        files = files or [self.node_file(f"{tag}-n{i}", owners_per_node) for i in range(nodes)]
        coord = subprocess.Popen(
            [
                sys.executable,
                "-c",
                COORDINATOR,
                str(Path(__file__).resolve().parents[1]),  # the repository root: bench.lr_round
                str(nodes * owners_per_node),
                str(repeats),
                *map(str, shape),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        procs: list[subprocess.Popen] = []
        assert coord.stdin is not None and coord.stdout is not None  # PIPE
        try:
            port = int(coord.stdout.readline())
            t0 = time.perf_counter()
            procs = [self.spawn(port, f"owner-{i}", files[i], owners_per_node, tag, extra) for i in range(nodes)]
            status = coord.stdout.readline().strip()
            registered = time.perf_counter() - t0
            if status != "registered":
                raise RuntimeError(f"{tag}: {status} of {nodes * owners_per_node} owners registered")
            time.sleep(0.3)  # idle
            rss = (rss_mb(coord.pid), sum(rss_mb(p.pid) for p in procs))
            coord.stdin.write("go\n")
            coord.stdin.flush()
            answer, cost = coord.stdout.readline(), None
            if answer.strip() == "first":
                pids = [coord.pid, *(p.pid for p in procs)]
                before = [snapshot(pid) for pid in pids]
                coord.stdin.write("go\n")
                coord.stdin.flush()
                answer = coord.stdout.readline()
                if repeats > 1:
                    rounds = [per_round(b, snapshot(pid), repeats - 1) for b, pid in zip(before, pids)]
                    cost = RoundCost(rounds[0], mean(rounds[1:]), nodes)
            coord.stdin.write("stop\n")
            coord.stdin.flush()
            return registered, rss, json.loads(answer), cost
        finally:
            for p in [coord, *procs]:
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def floor(self) -> tuple[float, float]:
        """(exec-to-exit s, RSS MB) of a bare interpreter importing what every owner node needs."""
        code = f"{FLOOR}\nprint(open('/proc/self/status').read())"
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        elapsed = time.perf_counter() - t0
        rss = next(int(l.split()[1]) for l in out.stdout.splitlines() if l.startswith("VmRSS:")) / 1024.0
        return elapsed, rss


#: The thread lines' workload, shaped like digits (64 features, 10 classes, its 1437 training rows
#: split five ways): large enough for OpenBLAS to use its threads in an owner's Newton steps.
THREAD_SHAPE, THREAD_ROWS = (64, 10), 290


def thread_lines(bench: Bench, repeats: int) -> None:
    """Issue 27, item 1: the LR round at N = 5 and 20 one-owner nodes on this host, every node unpinned
    (a BLAS thread per CPU, OpenBLAS's own default) as the baseline, and every node pinned to one
    (``privfed owner --threads 1``: what ``privfed simulate`` gives nodes sharing the CPUs) as the candidate."""
    cpus = len(os.sched_getaffinity(0))
    d, k = THREAD_SHAPE
    for nodes in (5, 20):
        files = [bench.node_file(f"thr{nodes}-n{i}", 1, THREAD_ROWS, d, k) for i in range(nodes)]
        seconds = {}
        for threads in (cpus, 1):
            flags = ("--classes", str(k), "--threads", str(threads))
            _, _, times, _ = bench.federation(nodes, 1, f"thr{nodes}x{threads}", repeats, files, THREAD_SHAPE, flags)
            seconds[threads] = statistics.median(times[1:] or times)
        line(f"round N={nodes} d={d} pinned s", seconds[cpus], seconds[1])


def floor_lines(bench: Bench, per_owner: float) -> None:
    """The floor of a node's round trip (module docstring), in ms, against the bare computation per owner."""
    exchanges = grpc_floor()
    commit_cpu, commit_wall = commit_floor(bench.tmp)
    ms = 1e3
    for name, what in (("call", "gRPC call"), ("session", "session msg pair")):
        line(f"floor: {what} CPU ms", per_owner * ms, exchanges[name][0] * ms)
        line(f"floor: {what} wall ms", per_owner * ms, exchanges[name][1] * ms)
    line("floor: durable commit CPU ms", per_owner * ms, commit_cpu * ms)
    line("floor: durable commit wall ms", per_owner * ms, commit_wall * ms)


def attribution_lines(cost: RoundCost, bare_per_owner: float, floor_switches: float) -> None:
    """Where the round's CPU and wake-ups go (``bench/round_threads.py``): a node's main thread and
    its other threads, and the coordinator per node, in ms of CPU against the bare computation per
    owner; context switches per round of a node, and of the coordinator per node, against those of a
    process of the process floor (woken by a pipe, no gRPC)."""
    n, node, coordinator = cost.nodes, cost.node, cost.coordinator
    line(f"  node main CPU N={n} ms", bare_per_owner * 1e3, node["main"].cpu * 1e3)
    line(f"  node threads CPU N={n} ms", bare_per_owner * 1e3, (node["python"] + node["grpc core"]).cpu * 1e3)
    line(f"  coord CPU/node N={n} ms", bare_per_owner * 1e3, total(coordinator).cpu / n * 1e3)
    line(f"  node switches N={n}", floor_switches, total(node).switches)
    line(f"  coord switches/node N={n}", floor_switches, total(coordinator).switches / n)


def line(name: str, base: float, cand: float, unit: str = "", note: str = "") -> None:
    print(f"{name:<28}{base:>12.3f}{unit}{cand:>12.3f}{unit}{cand / base:>8.2f}{note}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--owner-pythonpath", default=None, help="run owner nodes from DIR/privfed")
    parser.add_argument("--skip-1000", action="store_true", help="leave out the N = 1000 round")
    parser.add_argument(
        "--rounds-only", action="store_true", help="only the LR round lines (no floor, RSS or threads lines)"
    )
    parser.add_argument("--threads-only", action="store_true", help="only the pinned-threads lines (issue 27)")
    args = parser.parse_args(argv)
    print(
        f"# owner nodes and the one-round LR job (eps = inf); seed {args.seed}; host {host_info()}; "
        f"median of {args.repeats}; owners from {args.owner_pythonpath or 'this checkout'}"
    )
    print(f"{'name':<28}{'baseline':>12}{'candidate':>12}{'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp), args.seed, args.owner_pythonpath)
        if args.threads_only:
            thread_lines(bench, args.repeats)
            return 0
        floors = [bench.floor() for _ in range(1 if args.rounds_only else args.repeats)]
        floor_s = statistics.median(f[0] for f in floors)
        floor_mb = statistics.median(f[1] for f in floors)
        if not args.rounds_only:
            ones = [bench.federation(1, 1, f"one{r}", 0) for r in range(args.repeats)]
            line("owner exec->registered s", floor_s, statistics.median(o[0] for o in ones))
        for nodes, per_node, name in (
            (5, 1, "N=5 (5 procs)"),
            (20, 1, "N=20 (20 procs)"),
            (50, 1, "N=50 (50 procs)"),
            (2, 10, "N=20 (2 procs)"),
            (2, 25, "N=50 (2 procs)"),
            (4, 250, "N=1000 (4 procs)"),
        ):
            if nodes * per_node == 1000 and args.skip_1000:
                continue
            registered, rss, times, cost = bench.federation(nodes, per_node, f"n{nodes}x{per_node}", args.repeats)
            cpu = cost.cpu if cost is not None else float("nan")
            if per_node == 1 and not args.rounds_only:
                line(f"coord+{nodes} nodes RSS MB", (nodes + 1) * floor_mb, sum(rss))
                line(f"coord+{nodes} exec->registered s", floor_s, registered)
            files = [bench.node_file(f"n{nodes}x{per_node}-n{i}", per_node) for i in range(nodes)]
            bare, bare_cpu = in_process_round(files, per_node, args.seed, args.repeats)
            median = statistics.median(times[1:] or times)
            line(f"LR round {name} s", bare, median)
            line(f"  first round {name} s", bare, times[0])  # nodes import scipy.optimize on their first fit
            line(f"  round CPU N={nodes * per_node} s", bare_cpu, cpu)
            n = nodes * per_node
            overhead = (median - bare) / nodes * 1e3
            note = "" if overhead >= 0 else f"  (none: the round beat the bare computation by {-overhead:.3f} ms/node)"
            line(f"  overhead/node N={n} ms", bare / n * 1e3, max(overhead, 0.0), note=note)
            line(f"  CPU/node N={n} ms", bare_cpu / nodes * 1e3, cpu / nodes * 1e3)
            if per_node == 1 and nodes >= 20:
                floor_wall, floor_cpu, floor_switches = process_floor(files, args.seed, args.repeats)
                line(f"  floor: N={n} processes s", bare, floor_wall)
                line(f"  floor: N={n} processes CPU s", bare_cpu, floor_cpu)
                if cost is not None:
                    attribution_lines(cost, bare_cpu / n, floor_switches)
            if nodes == 20:
                floor_lines(bench, bare / n)
        if not args.owner_pythonpath and not args.rounds_only:  # --threads is this checkout's
            thread_lines(bench, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
