"""Idle RSS of real privfed processes against the interpreter floor (issue 27, item 3).

Lines read ``name  baseline  candidate  ratio`` (STYLE rule 14): medians of ``--repeats`` fresh
processes, RSS read from ``/proc/PID/status`` (VmRSS: the pages the process has resident, shared
library pages included), all measured in this run:

* the baseline, ``floor``: a bare interpreter that imported the four packages every node needs
  (``import numpy, grpc, google.protobuf, cryptography.x509``; the first line of ``PARTS``);
* ``coordinator idle``: ``privfed coordinator --schema S --insecure`` waiting for its second owner,
  one node registered (a federation of the owners' own files: no built-in data set is loaded);
* ``owner idle``: that node, ``privfed owner --data F --bounds`` with ``--rng seeded`` (as the
  nodes of ``bench/federation.py``) and with ``--rng secure`` (the default: randomgen's AES-CTR);
* ``+ ...``: the parts of the floor-to-owner gap that no privfed code decides, added to the floor
  one after the other in one process (``PARTS``): a ``numpy.random.Generator`` (numpy loads
  ``numpy.random`` on first use; every owner draws its noise from one), the generated protobuf
  module (``privfed_pb2``: the wire messages), an SQLite database (the ledger), one gRPC call on a
  channel (the client's polling and executor threads), a command line (argparse), numpy arithmetic
  (a comparison and a subtraction: each maps numpy's loops, ~1 MB of ``_multiarray_umath``'s pages on
  this kernel, which every node runs at start when it checks the schema's bounds and its rows), an
  X25519 key and its raw public bytes (an owner registers one per owner it hosts: ``cryptography``'s
  serialization package and its Rust code) and the secure rng (randomgen's AES counter, as
  ``privfed.common.rng`` loads it). The last but one line is the least a seeded node process needs,
  the last line a secure one; an owner's RSS above them is privfed's own code and data;
* ``coordinator floor + ...``: the same for a coordinator (``COORDINATOR_PARTS``; no noise, ledger
  or owner key at rest): the protobuf messages, a gRPC server with the health service that served
  one call, a command line and numpy arithmetic;
* ``... vs its parts``: each node against the last line of its parts (a seeded owner: the last but one).

Goal (issue 27): every process <= 1.1 x the floor.

    python bench/footprint.py [--repeats 5] [--seed 0] [--pythonpath DIR]

Not a test and not run in CI (``make bench``); about 40 s.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the repository root: bench's own modules (bench.*)
from bench.checkout import package_root
from privfed.server.report import host_info

D, BOUND = 10, 4.0  # features and their public bounds -BOUND:BOUND

#: Cumulative RSS (MB), one line per step, of a process that adds the parts an owner node needs to the floor.
PARTS = """
import sqlite3, sys
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")) / 1024.0
import numpy, grpc, google.protobuf, cryptography.x509
print(rss(), flush=True)
numpy.random.Generator(numpy.random.PCG64(0)).normal(size=4)
print(rss(), flush=True)
from privfed.proto import privfed_pb2, privfed_pb2_grpc
privfed_pb2.Task(task_id="t").SerializeToString()
print(rss(), flush=True)
db = sqlite3.connect(sys.argv[2])
db.execute("create table entries (owner text, epsilon real)")
db.commit()
print(rss(), flush=True)
channel = grpc.insecure_channel(sys.argv[1])
try:
    channel.unary_unary("/privfed.v1.Coordinator/Nothing")(b"", timeout=10)
except grpc.RpcError:
    pass
print(rss(), flush=True)
import argparse
argparse.ArgumentParser(prog="p").parse_args([])
print(rss(), flush=True)
a, b = numpy.array([1.0, 2.0]), numpy.array([3.0, 4.0])
assert numpy.any(a <= b) and numpy.all(numpy.isfinite(2.0 * (b - a)))
print(rss(), flush=True)
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
X25519PrivateKey.generate().public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
print(rss(), flush=True)
from privfed.common.rng import make_rng
make_rng("secure").normal(size=4)
print(rss(), flush=True)
"""
PART_NAMES = (
    "floor",
    "+ numpy.random",
    "+ protobuf messages",
    "+ sqlite3 ledger",
    "+ a gRPC call",
    "+ a command line",
    "+ numpy arithmetic",
    "+ an X25519 key",
    "+ AES-CTR rng",
)
#: The same for a coordinator: no noise, no ledger, no owner keys at rest; a gRPC server (with the
#: health service, as ``privfed.server.app``) that served one call, which the bench makes once the
#: process prints its port.
COORDINATOR_PARTS = """
import sys
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")) / 1024.0
import numpy, grpc, google.protobuf, cryptography.x509
print(rss(), flush=True)
from privfed.proto import privfed_pb2, privfed_pb2_grpc
privfed_pb2.Task(task_id="t").SerializeToString()
print(rss(), flush=True)
from concurrent import futures
from grpc_health.v1 import health, health_pb2_grpc
server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
print(server.add_insecure_port("127.0.0.1:0"), flush=True)
server.start()
sys.stdin.readline()  # the bench has made its call
print(rss(), flush=True)
import argparse
argparse.ArgumentParser(prog="p").parse_args([])
print(rss(), flush=True)
a, b = numpy.array([1.0, 2.0]), numpy.array([3.0, 4.0])
assert numpy.any(a <= b) and numpy.all(numpy.isfinite(2.0 * (b - a)))
print(rss(), flush=True)
"""
COORDINATOR_PART_NAMES = ("floor", "+ protobuf messages", "+ a gRPC server", "+ a command line", "+ numpy arithmetic")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _wait_for(proc: subprocess.Popen, pattern: str, timeout: float = 60.0) -> re.Match[str]:
    """The first line of ``proc``'s stderr matching ``pattern`` (the process logs to stderr)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = proc.stderr.readline()
        if not text:
            raise RuntimeError(f"a process exited before logging {pattern!r}")
        found = re.search(pattern, text)
        if found:
            return found
    raise RuntimeError(f"no {pattern!r} within {timeout:g} s")


def write_rows(path: Path, n: int, rng: np.random.Generator) -> None:
    """``n`` rows of two Gaussian classes in ``D`` features, clipped to the bounds, label last, with a header."""
    y = rng.integers(0, 2, n)
    X = np.clip(rng.normal(size=(n, D)) + np.where(y[:, None] == 1, 0.8, -0.8), -BOUND, BOUND)
    header = ",".join([*(f"x{i}" for i in range(D)), "y"])
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", fmt=["%.6f"] * D + ["%d"], header=header, comments="")


class Footprint:
    """A small federation of owners' own files: ``schema.toml``, its public test file and one node's rows."""

    def __init__(self, tmp: Path, rng: np.random.Generator, pythonpath: str | None = None) -> None:
        self.tmp = tmp
        # a checkout in the repository's layout is laid out whole as ``privfed`` (``package_root``): on
        # PYTHONPATH alone it would lend only ``privfed/__init__.py`` and run this checkout's subpackages
        root = package_root(Path(pythonpath).resolve(), tmp / "baseline") if pythonpath else None
        self.env = dict(os.environ, PYTHONUNBUFFERED="1") | ({"PYTHONPATH": str(root)} if root else {})
        self.rows = tmp / "rows.csv"
        write_rows(self.rows, 20, rng)
        write_rows(tmp / "test.csv", 50, rng)
        features = ", ".join(f'"x{i}"' for i in range(D))
        self.schema = tmp / "schema.toml"
        self.schema.write_text(
            f'features = [{features}]\nclasses = [0, 1]\ntest = "test.csv"\n[bounds]\nlo = {-BOUND}\nhi = {BOUND}\n'
        )

    def idle(self, tag: str, rng: str) -> tuple[float, float, list[float]]:
        """(coordinator RSS, owner RSS, the PARTS process's cumulative RSS) with one node registered
        and idle: the coordinator waits for a second owner that never comes."""
        cli = [sys.executable, "-m", "privfed.deploy.cli"]
        env = self.env
        coord = subprocess.Popen(
            [*cli, "coordinator", "--insecure", "--listen", "127.0.0.1:0", "--owners", "2", "--epsilon", "1"]
            + ["--task", "lr", "--schema", str(self.schema), "--out", str(self.tmp / f"{tag}-runs")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=self.tmp,
        )
        procs = [coord]
        try:
            port = int(_wait_for(coord, r"listening on port (\d+)")[1])
            seed = ["--seed", "0"] if rng == "seeded" else []
            owner = subprocess.Popen(
                [*cli, "owner", "--insecure", "--coordinator", f"127.0.0.1:{port}", "--name", "owner-0"]
                + ["--data", str(self.rows), "--schema", str(self.schema), "--rng", rng, *seed]
                + ["--ledger", str(self.tmp / f"{tag}.sqlite"), "--epsilon-budget", "10"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=self.tmp,
            )
            procs.append(owner)
            _wait_for(owner, r"fit the federation schema")
            time.sleep(0.3)  # idle
            coord_mb, owner_mb = rss_mb(coord.pid), rss_mb(owner.pid)
            out = subprocess.run(
                [sys.executable, "-c", PARTS, f"127.0.0.1:{port}", str(self.tmp / f"{tag}-parts.sqlite")],
                capture_output=True,
                text=True,
                check=True,
                env=env,
                cwd=self.tmp,
            )
            return coord_mb, owner_mb, [float(v) for v in out.stdout.split()]
        finally:
            for p in reversed(procs):
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def coordinator_parts(self) -> list[float]:
        """The cumulative RSS of ``COORDINATOR_PARTS``: its server serves one health check from this process."""
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        proc = subprocess.Popen(
            [sys.executable, "-c", COORDINATOR_PARTS],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=self.env,
            cwd=self.tmp,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            values = [float(proc.stdout.readline()) for _ in range(2)]
            port = int(proc.stdout.readline())
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
            proc.stdin.write("\n")
            proc.stdin.flush()
            values += [float(v) for v in proc.stdout.read().split()]
        finally:
            proc.kill()
            proc.wait()
        return values


def line(name: str, base: float, cand: float) -> None:
    print(f"{name:<44}{base:>12.1f}{cand:>12.1f}{cand / base:>8.2f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pythonpath", default=None, help="run the processes from DIR/privfed (e.g. another commit)")
    args = parser.parse_args(argv)
    print(
        f"# idle RSS (MB) of privfed processes vs the interpreter floor; host {host_info()}; median of {args.repeats}; "
        f"privfed from {args.pythonpath or 'this checkout'}"
    )
    print(f"{'name':<44}{'baseline':>12}{'candidate':>12}{'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        fp = Footprint(Path(tmp), np.random.Generator(np.random.PCG64(args.seed)), args.pythonpath)
        runs, coordinator_parts = [], []
        for r in range(args.repeats):
            runs += [fp.idle(f"{rng}{r}", rng) for rng in ("seeded", "secure")]
            coordinator_parts.append(fp.coordinator_parts())
    seeded, secure = runs[0::2], runs[1::2]
    parts = [statistics.median(p[i] for _, _, p in runs) for i in range(len(PART_NAMES))]
    coordinator = [statistics.median(p[i] for p in coordinator_parts) for i in range(len(COORDINATOR_PART_NAMES))]
    floor = parts[0]
    idle = {
        "coordinator idle (--schema)": statistics.median(c for c, _, _ in runs),
        "owner idle (--rng seeded)": statistics.median(o for _, o, _ in seeded),
        "owner idle (--rng secure)": statistics.median(o for _, o, _ in secure),
    }
    for name, mb in idle.items():
        line(name, floor, mb)
    for name, mb in zip(PART_NAMES[1:], parts[1:]):
        line(f"  floor {name}", floor, mb)
    for name, mb in zip(COORDINATOR_PART_NAMES[1:], coordinator[1:]):
        line(f"  coordinator floor {name}", coordinator[0], mb)
    # each node against the floor plus the parts it needs (the last line of its parts; a seeded owner's
    # is the last but one: it loads no AES-CTR): what is left above is privfed's own code and data
    line("coordinator idle vs its parts", coordinator[-1], idle["coordinator idle (--schema)"])
    line("owner seeded idle vs its parts", parts[-2], idle["owner idle (--rng seeded)"])
    line("owner secure idle vs its parts", parts[-1], idle["owner idle (--rng secure)"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
