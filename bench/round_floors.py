"""The floors of a node's round trip in ``bench/federation.py`` (issue 27): what a round cannot do without.

:func:`process_floor`: the owners' computation in one process per owner, woken by a pipe (no wire, no
ledger, no coordinator); :func:`grpc_floor`: one unary gRPC call and one Session message pair of a
registered node; :func:`commit_floor`: one durable SQLite commit as the ledger commits;
:func:`cpu_seconds`: a process's CPU from the scheduler's counters.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.lr_round import D, lr_strategy
from bench.round_threads import Counts, snapshot, total
from privfed.common.learners.logistic import lr_aggregate

#: A bare coordinator for the floor lines: prints its port, serves until a line on stdin.
SERVER = """
import sys
from privfed.server.app import CoordinatorServer
server = CoordinatorServer(tls=None)
print(server.start("127.0.0.1:0"), flush=True)
sys.stdin.readline()
server.stop(0)
"""

#: A process holding one node's owners: computes their reports (``owner_reports``) for each line on
#: stdin and answers a line (the process floor: no wire, no ledger, no coordinator).
WORKER = """
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from bench.lr_round import bench_owners, lr_strategy, owner_reports
lr, owners = lr_strategy(), bench_owners([Path(sys.argv[2])], 1, int(sys.argv[3]), first=int(sys.argv[4]))
print("ready", flush=True)
for _ in sys.stdin:
    owner_reports(lr, owners)
    print("done", flush=True)
"""


def process_floor(files: list[Path], seed: int, repeats: int) -> tuple[float, float, float]:
    """(wall s, CPU s, context switches of a process) per round of the one-owner processes of ``files``,
    each woken by a line on a pipe, computing its owner's fit and share and answering a line, and the
    aggregate here: what one process per owner costs before any gRPC, ledger or coordinator (median
    wall, mean CPU of the rounds after the first, the workers' mean switches over those rounds)."""
    lr = lr_strategy()
    here = str(Path(__file__).resolve().parents[1])  # the repository root: bench.lr_round
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, here, str(f), str(seed), str(i)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i, f in enumerate(files)
    ]
    pipes = [(p.stdin, p.stdout) for p in procs if p.stdin is not None and p.stdout is not None]
    try:
        for _, out in pipes:
            out.readline()
        times, cpu0, before = [], 0.0, Counts()
        placeholder = np.zeros(
            (len(files), D + 1)
        )  # the workers' reports stay with them: only the aggregate's cost counts
        for r in range(repeats + 1):
            if r == 1:
                before = workers(procs)
                cpu0 = before.cpu + time.process_time()
            t0 = time.perf_counter()
            for inp, _ in pipes:
                inp.write("go\n")
                inp.flush()
            for _, out in pipes:
                out.readline()
            lr_aggregate(placeholder, param_bound=lr.param_bound, n_classes=2, bounds=lr.bounds)
            times.append(time.perf_counter() - t0)
        after = workers(procs)
        cpu = (after.cpu + time.process_time() - cpu0) / repeats
        return statistics.median(times[1:]), cpu, (after - before).switches / repeats / len(procs)
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
            p.wait(timeout=15)


def cpu_seconds(pid: int) -> float:
    """CPU seconds of process ``pid``'s live threads so far: the scheduler's nanosecond counters
    (``bench/round_threads.py``), not the 10 ms ticks of /proc/PID/stat, which a few short rounds
    of 21 processes would round away."""
    return total(snapshot(pid)).cpu


def workers(procs: list[subprocess.Popen]) -> Counts:
    """The counts so far of every thread of ``procs`` together."""
    out = Counts()
    for p in procs:
        out += total(snapshot(p.pid))
    return out


def grpc_floor(calls: int = 1000) -> dict[str, tuple[float, float]]:
    """(CPU s of client and coordinator, wall s) per exchange of a registered node with a coordinator
    process: ``call``, an empty unary PushResults; ``session``, the same request and its answer on the
    node's Session stream (:class:`privfed.owner.session.NodeSession`, as a node sends it)."""
    import grpc

    from privfed.owner.session import NodeSession
    from privfed.proto import privfed_pb2 as pb
    from privfed.proto import privfed_pb2_grpc as pb_grpc
    from privfed.proto.transport import channel_options

    server = subprocess.Popen(
        [sys.executable, "-c", SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None  # PIPE
    out = {}
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.stdout.readline().strip()}", options=channel_options()) as ch:
            stub = pb_grpc.CoordinatorStub(ch)
            stub.RegisterNode(pb.RegisterNodeRequest(node_id="n", owners=[pb.OwnerInfo(owner_id="n.o")]), timeout=10)
            request = pb.PushResultsRequest(node_id="n")
            session = NodeSession(stub, 10.0)
            for name, exchange in (
                ("call", lambda: stub.PushResults(request, timeout=10)),
                ("session", lambda: session.exchange(request)),
            ):
                for _ in range(100):  # warm up
                    exchange()
                cpu0, theirs0, t0 = time.process_time(), cpu_seconds(server.pid), time.perf_counter()
                for _ in range(calls):
                    exchange()
                wall = time.perf_counter() - t0
                cpu = time.process_time() - cpu0 + cpu_seconds(server.pid) - theirs0
                out[name] = (cpu / calls, wall / calls)
            session.close()
        server.stdin.write("stop\n")
        server.stdin.flush()
        server.wait(timeout=15)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return out


def commit_floor(directory: Path, commits: int = 300) -> tuple[float, float]:
    """(CPU s, wall s) per durable SQLite commit of one row, as the ledger commits (WAL, synchronous=FULL)."""
    import sqlite3

    conn = sqlite3.connect(str(directory / "floor.sqlite"), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
        cpu0, t0 = time.process_time(), time.perf_counter()
        for i in range(commits):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (v) VALUES (?)", (str(i),))
            conn.execute("COMMIT")
        return (time.process_time() - cpu0) / commits, (time.perf_counter() - t0) / commits
    finally:
        conn.close()
