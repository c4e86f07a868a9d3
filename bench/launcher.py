"""Peak RSS of ``privfed simulate``'s coordinator process against a bare ``privfed coordinator``.

Issue 27, item 2, "a lean launcher": the launcher of a simulation is itself the coordinator, so its
process should hold what a bare coordinator holds. Both run the same job (task, data set, owners,
ε, seed) with the same owner node processes (two, over loopback, no TLS); each coordinator process
records its own peak resident set (``getrusage(RUSAGE_SELF).ru_maxrss``: that process alone, not
its owner nodes nor the child processes a simulation starts for its splits, references and plot)
as it exits. Lines read ``name  baseline  candidate  ratio`` (STYLE rule 14), baseline the bare
coordinator, candidate the simulation's, medians of ``--repeats`` runs in this run; the floor line
is a bare interpreter with the four imports every node needs. A bare coordinator of a built-in data
set reads its public split itself (scikit-learn's generators and loaders); a simulation's coordinator
reads the split its child process cached, with numpy alone; on owners' own files neither reads one.

    python bench/launcher.py [--repeats 1] [--pythonpath DIR]

``--pythonpath`` runs both programs from another checkout laid out as ``DIR/privfed`` (the code
before a change, for before/after numbers). Goal: ratio <= 1.1 (issue 27). Not a test and not run
in CI (``make bench``); about half a minute per repeat on two busy cores.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the repository root: bench.*
from bench.checkout import checkout_env

#: The jobs: (label, task flags, data set flags, owners). The bdt job is ``make demo``'s at one ε;
#: ``FILES`` stands for owners' own files (:func:`own_files`), whose coordinator reads no built-in data set.
FILES = ["--schema"]
JOBS = [
    ("bdt anes96", ["--task", "bdt"], ["--dataset", "anes96"], 755),
    ("lr synthetic", ["--task", "lr"], ["--dataset", "synthetic", "--n-samples", "2000"], 200),
    ("lr own files", ["--task", "lr"], FILES, 200),
]
EPSILON, SEED, NODES = "4", "0", 2
FLOOR = "import numpy, grpc, google.protobuf, cryptography.x509"
#: Runs ``privfed`` with the given arguments and writes the process's own peak RSS (KiB) to argv[1] at exit.
PEAK = (
    "import atexit, resource, sys\n"
    "atexit.register(lambda: open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))\n"
    "from privfed.deploy.cli import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)


def own_files(tmp: Path, owners: int) -> tuple[Path, list[Path]]:
    """A federation schema with a public test file, and one CSV file per node holding its owners' rows
    (ten rows per owner, two classes, ten features in [-4, 4])."""
    rng = random.Random(0)  # the rows only need to exist: any generator will do
    features = [f"x{j}" for j in range(10)]

    def write(path: Path, n: int) -> Path:
        rows = []
        for _ in range(n):
            y = rng.randrange(2)
            rows.append(",".join(f"{min(4.0, max(-4.0, rng.gauss(y - 0.5, 1.0))):.3f}" for _ in features) + f",{y}")
        path.write_text(",".join([*features, "y"]) + "\n" + "\n".join(rows) + "\n")
        return path

    write(tmp / "test.csv", 400)
    schema = tmp / "schema.toml"
    schema.write_text(f'features = {features}\nclasses = [0, 1]\ntest = "test.csv"\n[bounds]\nlo = -4\nhi = 4\n')
    return schema, [write(tmp / f"node{i}.csv", 10 * owners // NODES) for i in range(NODES)]


def _data(data: list[str], owners: int, tmp: Path) -> tuple[list[str], list[list[str]]]:
    """The coordinator's data flags and each node's."""
    if data is not FILES:
        edges = [owners * i // NODES for i in range(NODES + 1)]
        return data, [
            [*data, "--n-owners", str(owners), "--shards", f"{edges[i]}:{edges[i + 1]}"] for i in range(NODES)
        ]
    schema, files = own_files(tmp, owners)
    return ["--schema", str(schema)], [["--data", str(f), "--shards", str(owners // NODES)] for f in files]


def _env(pythonpath: Path | None, into: Path) -> dict[str, str]:
    return checkout_env(pythonpath, into, os.environ | {"PYTHONWARNINGS": "ignore"})


def _peak(args: list[str], tmp: Path, env: dict[str, str], others: Sequence[subprocess.Popen] = ()) -> float:
    """MB of the peak RSS of ``privfed args`` (run to its end, with the ``others`` processes it serves)."""
    out = tmp / "peak"
    done = subprocess.run(
        [sys.executable, "-c", PEAK, str(out), *args],
        env=env,
        cwd=tmp,  # not this checkout: "-c" puts the working directory first on sys.path
        stdout=subprocess.DEVNULL,
        stderr=open(tmp / "coordinator.log", "a"),
        check=False,
    )
    for p in others:
        p.wait(timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"privfed {args[0]} failed (exit {done.returncode}); see {tmp / 'coordinator.log'}")
    return int(out.read_text()) / 1024


def simulate_peak(task: list[str], data: list[str], owners: int, tmp: Path, env: dict[str, str]) -> float:
    flags, nodes = _data(data, owners, tmp)
    if data is FILES:
        flags += ["--data", *(n[1] for n in nodes)]
    else:
        flags += ["--processes", str(NODES)]
    args = ["simulate", *task, *flags, "--owners", str(owners), "--epsilon", EPSILON]
    return _peak([*args, "--seed", SEED, "--insecure", "--no-progress", "--out", str(tmp / "runs")], tmp, env)


def coordinator_peak(task: list[str], data: list[str], owners: int, tmp: Path, env: dict[str, str]) -> float:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    flags, node_flags = _data(data, owners, tmp)
    nodes = []
    for i, node in enumerate(node_flags):
        cmd = [sys.executable, "-m", "privfed.deploy.cli", "owner", "--coordinator", f"127.0.0.1:{port}"]
        cmd += ["--name", f"owner-{i}", *node]
        cmd += ["--seed", SEED, "--ledger", str(tmp / f"owner-{i}.sqlite"), "--epsilon-budget", EPSILON, "--insecure"]
        nodes.append(subprocess.Popen(cmd, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    args = ["coordinator", *task, *flags, "--owners", str(owners), "--epsilon", EPSILON, "--seed", SEED]
    try:
        return _peak(
            [*args, "--insecure", "--listen", f"127.0.0.1:{port}", "--out", str(tmp / "runs")], tmp, env, nodes
        )
    finally:
        for p in nodes:
            if p.poll() is None:
                p.kill()
                p.wait()


def floor_peak(env: dict[str, str]) -> float:
    code = f"{FLOOR}\nimport resource\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True
    )
    return int(done.stdout) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--pythonpath", type=Path, default=None, help="run privfed from DIR/privfed")
    args = parser.parse_args()
    laid_out = Path(tempfile.mkdtemp(prefix="privfed-launcher-"))  # the --pythonpath checkout, whole
    env = _env(args.pythonpath, laid_out)
    print(f"{'peak RSS MB':<34}{'bare':>10}{'simulate':>10}{'ratio':>8}")
    for label, task, data, owners in JOBS:
        bare, sim = [], []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as d:
                bare.append(coordinator_peak(task, data, owners, Path(d), env))
            with tempfile.TemporaryDirectory() as d:
                sim.append(simulate_peak(task, data, owners, Path(d), env))
        b, s = statistics.median(bare), statistics.median(sim)
        print(f"{'coordinator, ' + label + f' N={owners}':<34}{b:>10.1f}{s:>10.1f}{s / b:>8.2f}", flush=True)
    floor = floor_peak(env)
    print(f"{'interpreter floor (' + str(len(FLOOR.split(','))) + ' imports)':<34}{floor:>10.1f}")


if __name__ == "__main__":
    main()
