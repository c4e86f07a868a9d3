"""``privfed reproduce [--quick] [--out DIR]``: every table and figure of the three seed papers that
our data allows, in one report (issue 13, item 3).

Runs each section of :data:`privfed.deploy.reproduce_table.SECTIONS` through the experiments'
public interface, ``privfed experiment NAME [flags] --seed S --out DIR`` (one subprocess per
distinct command, ``--jobs`` at a time; sections that read the same run share it), reads the
per-seed numbers from the ``report.json`` each writes, judges each claim by confidence intervals
(:mod:`privfed.deploy.reproduce_stats`) and writes ``DIR/index.html`` (the whole report, plots
embedded from ``DIR/runs/``), ``DIR/summary.md`` (the summary table, for pasting into a note) and
``DIR/reproduce.json`` (everything, machine-readable, with every interval).

A section whose experiment this build lacks, or whose data is missing, is listed as "not
available" with the reason. A failed experiment is reported in its section with its last error
line; the run goes on and exits 1 at the end (also when a number cannot be read from a report).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from privfed.deploy.reproduce_rules import Judgement, Section, Series, judge, series
from privfed.deploy.reproduce_table import FAILED, NO_NUMBER, NOT_AVAILABLE, OK, SECTIONS, check_unique

TIMEOUT_S, QUICK_TIMEOUT_S = 1800.0, 300.0
#: Experiments run at once (each is one process and mostly one core; the target machine has 2).
JOBS = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``privfed reproduce``."""
    parser.add_argument(
        "--quick", action="store_true", help="small n and grids, 5 seeds (a few minutes on 2 cores); labelled quick"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="report directory (default: reports/<UTC date>, -quick with --quick)"
    )
    parser.add_argument("--seed", type=int, default=0, help="first seed passed to every experiment (--seed)")
    parser.add_argument("--only", default=None, help="comma-separated section keys (default: every section)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help=f"seconds one experiment may take before it counts as failed (default {TIMEOUT_S:g}, quick "
        f"{QUICK_TIMEOUT_S:g})",
    )
    parser.add_argument("--jobs", type=int, default=JOBS, help=f"experiments run at once (default {JOBS})")


def data_dir() -> Path | None:
    """The shared data directory (Mulan yeast): ``$PRIVFED_DATA``, else ``shared/data`` beside the checkout."""
    env = os.environ.get("PRIVFED_DATA")
    repo = Path(__file__).resolve().parents[1]
    for candidate in ([Path(env)] if env else []) + [repo.parent / "shared" / "data", repo / "shared" / "data"]:
        if candidate.is_dir():
            return candidate
    return None


@dataclass
class Run:
    """One ``privfed`` subprocess: its argv, exit code, wall and CPU time, report and log."""

    argv: list[str]
    out: Path
    returncode: int | None = None
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    error: str = ""
    report_path: Path | None = None


@dataclass
class Outcome:
    """What the report says about one section: its runs (by command key), every quantity's
    values and each claim's judgement (in the order of ``section.claims``)."""

    section: Section
    status: str
    reason: str = ""
    runs: dict[str, Run] = field(default_factory=dict)
    values: dict[str, Series] = field(default_factory=dict)
    judgements: list[Judgement] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.runs.values())

    @property
    def cpu_seconds(self) -> float:
        return sum(r.cpu_seconds for r in self.runs.values())


def _availability(section: Section, data: Path | None) -> str:
    """Why ``section`` cannot run in this build ("" when it can)."""
    from privfed.deploy.experiments import EXPERIMENTS

    for command in section.commands:
        args = command.args(False)
        if args[0] == "experiment" and args[1] not in EXPERIMENTS:
            return f"not available in this build: there is no `privfed experiment {args[1]}`"
        if any("{data}" in a for a in args):
            if data is None:
                return "not available: the shared data directory was not found (set PRIVFED_DATA)"
            missing = [a for a in _argv(args, data) if a.startswith(str(data)) and not Path(a).exists()]
            if missing:
                return f"not available: missing data file {missing[0]}"
    return ""


def _argv(args: tuple[str, ...], data: Path | None) -> list[str]:
    return [a.replace("{data}", str(data)) for a in args]


def execute(run: Run, timeout: float, threads: int | None = None, stop: threading.Event | None = None) -> None:
    """Run ``run.argv`` as ``python -m privfed.deploy.cli ...``, its output in ``run.out/../<name>.log``;
    wall and CPU time are this child's own (``os.wait4``), whatever else runs beside it. The child
    is killed after ``timeout`` seconds, or as soon as ``stop`` is set (the report was interrupted)."""
    run.out.mkdir(parents=True, exist_ok=True)
    log = run.out.with_suffix(".log")
    env = os.environ | {"MPLBACKEND": "Agg"}
    if threads is not None:  # several experiments at once: one BLAS thread each
        from privfed.deploy.threads import thread_env

        env |= thread_env(threads)
    start = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "privfed.deploy.cli", *run.argv], stdout=fh, stderr=subprocess.STDOUT, env=env
        )
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            stopped = stop is not None and stop.is_set()
            if stopped or time.perf_counter() - start > timeout:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                run.error = "interrupted" if stopped else f"timed out after {timeout:g} s (--timeout)"
                break
            time.sleep(0.1)
        proc.returncode = run.returncode = -1 if run.error else os.waitstatus_to_exitcode(status)
    run.seconds, run.cpu_seconds = time.perf_counter() - start, usage.ru_utime + usage.ru_stime
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    if run.returncode != 0 and not run.error:
        run.error = lines[-1] if lines else f"exit code {run.returncode}, no output"
    reports = sorted(run.out.rglob("report.json"), key=lambda p: p.stat().st_mtime)
    run.report_path = reports[-1] if reports else None


def evaluate(section: Section, runs: dict[str, Run]) -> Outcome:
    """Read ``section``'s quantities from its runs' reports and judge each claim."""
    import json

    outcome = Outcome(section, OK, runs=runs)
    failed = [r for r in runs.values() if r.returncode != 0]
    if failed:
        outcome.status, outcome.reason = FAILED, failed[0].error
    reports = {k: json.loads(r.report_path.read_text()) for k, r in runs.items() if r.report_path is not None}
    try:
        outcome.values = {q.label: series(reports, q) for q in section.quantities}
        outcome.judgements = [judge(c.rule, outcome.values) for c in section.claims]
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        outcome.judgements = []
        if outcome.status == OK:
            outcome.status = NO_NUMBER
            outcome.reason = f"a report has no number where this section reads it ({type(exc).__name__}: {exc})"
    for r in runs.values():
        if r.report_path is not None:
            pngs = sorted(r.report_path.parent.glob("*.png"))
            outcome.plots += [p for p in pngs if not section.plots or p.name in section.plots]
    return outcome


def _schedule(
    sections: tuple[Section, ...], out: Path, quick: bool, seed: int, data: Path | None
) -> tuple[dict[tuple[str, ...], Run], dict[str, dict[str, tuple[str, ...]]], dict[str, str]]:
    """Every distinct command once (named after the first section and key that need it)."""
    runs: dict[tuple[str, ...], Run] = {}
    needs: dict[str, dict[str, tuple[str, ...]]] = {}
    skipped: dict[str, str] = {}
    for section in sections:
        why = _availability(section, data)
        if why:
            skipped[section.key] = why
            continue
        needs[section.key] = {}
        for command in section.commands:
            key = command.args(quick)
            if key not in runs:
                name = section.key if command.key == "ours" else f"{section.key}-{command.key}"
                argv = [*_argv(key, data), "--seed", str(seed)]
                run = Run(argv, out / "runs" / name)
                run.argv += ["--out", str(run.out)]
                runs[key] = run
            needs[section.key][command.key] = key
    return runs, needs, skipped


#: The experiments that take longest, started first in this order (the rest keep the sections' order), so
#: that no job runs alone at the end while the others idle: ``tabular`` (about 60 s of CPU in ``--quick``,
#: a quarter of the report) was started last and ran alone for its whole length.
LONG_FIRST = ("tabular", "feddpdr")


def _started_at(run: Run) -> int:
    """Where a run stands in the start order: its experiment's place in :data:`LONG_FIRST`, else after them."""
    return next((i for i, name in enumerate(LONG_FIRST) if name in run.argv[1]), len(LONG_FIRST))


def reproduce(
    sections: tuple[Section, ...], out: Path, *, quick: bool, seed: int, timeout: float, jobs: int = 1
) -> tuple[list[Outcome], float]:
    """Run every command of the available sections (each distinct one once, ``jobs`` at a time)
    and evaluate each section; progress on stdout."""
    from concurrent.futures import ThreadPoolExecutor

    from privfed.deploy.signals import results

    check_unique(sections)
    runs, needs, skipped = _schedule(sections, out, quick, seed, data_dir())
    for key, why in skipped.items():
        print(f"skip   {key}: {why}", flush=True)
    started, total = time.perf_counter(), len(runs)
    order = sorted(runs.values(), key=_started_at)

    stop = threading.Event()
    printing = threading.Lock()

    def say(line: str) -> None:  # print() writes the text and its newline apart: threads would interleave them
        with printing:
            print(line, flush=True)

    def one(item: tuple[int, Run]) -> None:
        i, run = item
        if stop.is_set():
            return
        tag = f"[{i:>2}/{total}]"
        say(f"{tag} start  {run.out.name}: privfed {' '.join(run.argv)}")
        execute(run, timeout, threads=1 if jobs > 1 else None, stop=stop)
        state = "done  " if run.returncode == 0 else "FAILED"
        say(
            f"{tag} {state} {run.out.name} in {run.seconds:.1f} s, CPU {run.cpu_seconds:.1f} s "
            f"(elapsed {_clock(time.perf_counter() - started)})" + (f": {run.error}" if run.error else "")
        )

    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:  # a timed wait: a SIGTERM a worker thread takes still reaches the handler (privfed.deploy.signals)
        results([pool.submit(one, item) for item in enumerate(order, 1)])
    finally:  # also on SIGTERM (SystemExit) or Ctrl-C: no new experiment starts, running ones are killed
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
    outcomes = []
    for section in sections:
        if section.key in skipped:
            outcomes.append(Outcome(section, NOT_AVAILABLE, reason=skipped[section.key]))
        else:
            outcomes.append(evaluate(section, {k: runs[a] for k, a in needs[section.key].items()}))
    return outcomes, time.perf_counter() - started


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def run(args: argparse.Namespace, sections: tuple[Section, ...] = SECTIONS) -> int:
    """``privfed reproduce``: run ``sections`` (all of :data:`SECTIONS` by default; ``--only``
    picks some), write the report, return 1 when a section failed."""
    from privfed.common.errors import ConfigError
    from privfed.common.validation import check_int, check_positive
    from privfed.deploy.reproduce_report import write_report
    from privfed.server.report import host_info

    date = datetime.now(UTC).strftime("%Y-%m-%d")
    out = args.out or Path("reports") / (f"{date}-quick" if args.quick else date)
    if args.only:
        wanted = [k.strip() for k in args.only.split(",") if k.strip()]
        unknown = sorted(set(wanted) - {s.key for s in sections})
        if unknown:
            raise ConfigError(f"--only: unknown section(s) {unknown}; choose from {[s.key for s in sections]}")
        sections = tuple(s for s in sections if s.key in wanted)
    default = QUICK_TIMEOUT_S if args.quick else TIMEOUT_S
    timeout = default if args.timeout is None else check_positive(args.timeout, name="--timeout")
    jobs = check_int(getattr(args, "jobs", JOBS), name="--jobs", minimum=1)
    out.mkdir(parents=True, exist_ok=True)
    host = host_info() | {"cpus": os.cpu_count()}  # the code the experiments start from (walkthrough 15, W15-4)
    outcomes, seconds = reproduce(sections, out, quick=args.quick, seed=args.seed, timeout=timeout, jobs=jobs)
    at_end = host_info()["git_commit"]
    if at_end != host["git_commit"]:  # a commit, pull or checkout during the run: its numbers are the start's
        host["git_commit_at_end"] = at_end
        print(
            f"warning: the checkout moved during the run, from commit {host['git_commit']} to {at_end}; the report "
            "names the first, which the experiments started from",
            file=sys.stderr,
        )
    distinct = {id(r): r for o in outcomes for r in o.runs.values()}.values()
    meta = {
        "quick": args.quick,
        "seed": args.seed,
        "jobs": jobs,
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "wall_time_s": seconds,
        "cpu_s": sum(r.cpu_seconds for r in distinct),
        "load_average_1_5_15": os.getloadavg(),
        "command": " ".join(
            ["privfed reproduce", *(["--quick"] if args.quick else []), "--out", str(out), "--seed", str(args.seed)]
            + (["--only", args.only] if args.only else [])
            + (["--timeout", f"{timeout:g}"] if args.timeout is not None else [])
            + (["--jobs", str(jobs)] if jobs != JOBS else [])
        ),
        "host": host,
        "timeout_s": timeout,
    }
    write_report(out, outcomes, meta)
    failed = [o.section.key for o in outcomes if o.status in (FAILED, NO_NUMBER)]
    print(f"report: {out / 'index.html'} (summary: {out / 'summary.md'}); wall time {_clock(seconds)}")
    if failed:
        print(f"privfed reproduce: {len(failed)} section(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
