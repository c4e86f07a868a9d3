"""Where a ``privfed simulate`` job leaves cores idle: each process's CPU over time, beside the job log's phases (issue 27).

Runs one job (``bench/scale.py``'s BDT or LR command) and samples every process of its tree every ``--poll``
s from ``/proc/PID/task/*/schedstat``: the time its threads ran on a core, and the time they were
runnable but waited for one. Their sum (``want``) is what the job asked of the machine, which other
work on a shared box does not lower: a stretch where the job wants fewer than ``--cores`` is one its
own structure leaves idle (a barrier, a serial step, start-up), whatever the load. Prints one line per
``--bin`` s (cpu / want of the coordinator, each node and the launcher's children, and the log lines
that fell in it), then per phase -- start-up until the last node registered, each batch of tasks until
the coordinator's log line that ends it, tear-down -- the wall, the cores wanted and the idle
core-seconds (``cores - want`` summed over the phase).

    python bench/timeline.py [--owners 10000] [--task bdt] [--poll 0.5] [--bin 1] [--pythonpath DIR]

Not a test; run from outside the checkout (as ``bench/scale.py``). The sampler's own CPU is not the job's.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the repository root: bench.*
from bench.checkout import checkout_env

ROLES = ("coord", "node0", "node1", "child")
#: One sample: seconds since the start, and pid -> (role, seconds on a core, seconds runnable and waiting).
Sample = tuple[float, dict[int, tuple[str, float, float]]]
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\S+) \S+ (.*)")


@dataclass
class Mark:
    """A log line: seconds since the job's start, whose log (``C`` the coordinator, ``nodeK``), the text."""

    t: float
    who: str
    text: str


def _tree(root: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def _role(pid: int, root: int) -> str:
    if pid == root:
        return "coord"
    words = [w.decode(errors="replace") for w in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
    if "privfed.deploy.child" in words:
        return "child"
    name = next((words[i + 1] for i, w in enumerate(words[:-1]) if w == "--name"), None)
    return f"node{name.rpartition('-')[2]}" if name else "other"


def _schedstat(pid: int) -> tuple[float, float]:
    """(seconds on a core, seconds runnable and waiting) summed over the process's live threads."""
    run = wait = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            r, w, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
        except (OSError, ValueError):
            continue
        run, wait = run + int(r), wait + int(w)
    return run / 1e9, wait / 1e9


def sample_job(cmd: list[str], env: dict[str, str], cwd: Path, log: Path, poll: float) -> tuple[float, list[Sample]]:
    """Run ``cmd``; returns its start (epoch s) and samples ``(t, {pid: (role, run s, wait s)})``."""
    with log.open("w") as out:
        t0 = time.time()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        samples: list[Sample] = []
        roles: dict[int, str] = {}
        pids: list[int] = []
        polls = 0
        while proc.poll() is None:
            if polls % 4 == 0:
                pids = _tree(proc.pid)
            polls += 1
            row: dict[int, tuple[str, float, float]] = {}
            for pid in pids:
                try:
                    role = roles.get(pid) or _role(pid, proc.pid)
                    if role != "coord" or pid == proc.pid:  # a child before its exec shows the launcher's line
                        roles[pid] = role
                    row[pid] = (role, *_schedstat(pid))
                except OSError:
                    continue
            samples.append((time.time() - t0, row))
            time.sleep(poll)
    if proc.returncode:
        raise SystemExit(f"the job failed (exit {proc.returncode}); see {log}")
    return t0, samples


def marks(t0: float, logs: dict[str, Path]) -> list[Mark]:
    out = []
    for who, path in logs.items():
        for line in path.read_text(errors="replace").splitlines():
            m = _STAMP.match(line)
            if m:
                t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() - t0
                out.append(Mark(t, who, m.group(3)))
    return sorted(out, key=lambda m: m.t)


def rates(samples: list[Sample]) -> list[tuple[float, float, dict[str, tuple[float, float]]]]:
    """Per interval between two samples: (start, seconds, role -> (cpu cores, wanted cores))."""
    out = []
    for (ta, a), (tb, b) in zip(samples, samples[1:]):
        dt, per = tb - ta, dict[str, tuple[float, float]]()
        for pid, (role, run, wait) in b.items():
            run0, wait0 = a[pid][1:] if pid in a else (0.0, 0.0)
            key = "child" if role.startswith("child") else role
            c, w = per.get(key, (0.0, 0.0))
            per[key] = (c + max(0.0, run - run0) / dt, w + max(0.0, run + wait - run0 - wait0) / dt)
        out.append((ta, dt, per))
    return out


def phases(ms: list[Mark], end: float) -> list[tuple[str, float, float]]:
    """(name, start, end): start-up until the last node registered, each batch until its log line, tear-down."""
    registered = [m.t for m in ms if m.who.startswith("node") and " registered " in m.text]
    start = max(registered, default=0.0)
    out = [("start-up (spawn, split, node start, registration)", 0.0, start)]
    for m in ms:
        if m.who == "C" and "round " in m.text and m.t > start:
            out.append((m.text.partition("round ")[2].partition(":")[0], start, m.t))
            start = m.t
    return out + [("tear-down (evaluation, reference, plot, exit)", start, end)]


def report(intervals: list, ms: list[Mark], end: float, cores: int, width: float) -> None:
    print(f"# per {width:g} s: cores on a CPU / cores wanted (on a CPU or runnable), and the log lines in it")
    print("   t     sum  want  " + "  ".join(f"{r:>10}" for r in ROLES))
    bins: dict[int, list] = {}
    for ta, dt, per in intervals:
        bins.setdefault(int(ta // width), []).append((dt, per))
    k = 0
    for b in sorted(bins):
        tot = {r: [0.0, 0.0] for r in ROLES}
        span = sum(dt for dt, _ in bins[b])
        for dt, per in bins[b]:
            for r, (c, w) in per.items():
                if r in tot:
                    tot[r][0] += c * dt / span
                    tot[r][1] += w * dt / span
        lines = []
        while k < len(ms) and ms[k].t < (b + 1) * width:
            lines.append(f"{ms[k].who}: {ms[k].text[:70]}")
            k += 1
        cpu, want = sum(v[0] for v in tot.values()), sum(v[1] for v in tot.values())
        cols = "  ".join(f"{c:4.2f}/{w:4.2f}" for c, w in tot.values())
        print(f"{b * width:5.0f}  {cpu:5.2f} {want:5.2f}  {cols}  {' | '.join(lines)}")
    print(f"\n# phases: wall, cores wanted on average (and by whom), idle core-seconds ({cores} - want, summed)")
    idle_total = 0.0
    for name, a, z in phases(ms, end):
        inside = [(dt, per) for ta, dt, per in intervals if a <= ta < z]
        span = sum(dt for dt, _ in inside) or 1e-9
        by = {r: sum(per.get(r, (0, 0))[1] * dt for dt, per in inside) / span for r in ROLES}
        idle = sum(max(0.0, cores - sum(w for _, w in per.values())) * dt for dt, per in inside)
        idle_total += idle
        who = " ".join(f"{r} {v:4.2f}" for r, v in by.items() if v >= 0.01)
        print(f"{z - a:7.1f} s  want {sum(by.values()):4.2f}  idle {idle:6.1f} core-s  {name[:48]:48}  {who}")
    print(f"{end:7.1f} s  in all; idle {idle_total:.1f} core-s ({idle_total / (cores * end):.0%} of {cores} cores)")
    spent = {r: sum(per.get(r, (0.0, 0.0))[0] * dt for _, dt, per in intervals) for r in ROLES}
    print(
        "CPU s on a core: " + "  ".join(f"{r} {v:.1f}" for r, v in spent.items()) + f"  (all {sum(spent.values()):.1f})"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--owners", type=int, default=10000)
    p.add_argument("--task", default="bdt", choices=["bdt", "lr"])
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--poll", type=float, default=0.5)
    p.add_argument("--bin", type=float, default=1.0, help="seconds per printed line")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    p.add_argument("--pythonpath", default=None)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="privfed-timeline-") as d:
        tmp = Path(d)
        cmd = [
            sys.executable,
            "-m",
            "privfed.deploy.cli",
            "simulate",
            "--task",
            args.task,
            "--owners",
            str(args.owners),
        ]
        cmd += ["--processes", str(args.processes), "--epsilon", "1", "--seed", "0", "--no-progress", "--out", str(tmp)]
        cmd += (
            ["--release", "shares", "--rounds", "10", "--base", "stump"]
            if args.task == "bdt"
            else ["--solver", "local"]
        )
        t0, samples = sample_job(cmd, checkout_env(args.pythonpath, tmp), tmp, tmp / "job.log", args.poll)
        end = samples[-1][0] if samples else 0.0
        logs = {"C": tmp / "job.log"} | {f.stem: f for f in tmp.glob("*/eps-1/node*.log")}
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        print(
            f"# bench/timeline.py  {args.task} N={args.owners}, {args.processes} nodes, wall {end:.1f} s, load {load}"
        )
        report(rates(samples), marks(t0, logs), end, args.cores, args.bin)


if __name__ == "__main__":
    main()
