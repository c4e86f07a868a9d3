"""``privfed reproduce [--quick] [--out DIR]``: every table and figure of the three seed papers that
our data allows, in one report (issue 13, item 3).

Runs each section of :data:`privfed.deploy.reproduce_table.SECTIONS` through the experiments'
public interface, ``privfed experiment NAME [flags] --seed S --out DIR`` (one subprocess per
distinct command; sections that read the same run share it), reads our numbers from the
``report.json`` it writes, applies the section's verdict rule and writes ``DIR/index.html`` (the
whole report, plots embedded from ``DIR/runs/``), ``DIR/summary.md`` (the summary table, for
pasting into a note) and ``DIR/reproduce.json`` (everything, machine-readable).

A section whose experiment this build lacks, or whose data is missing, is listed as "not
available" with the reason. A failed experiment is reported in its section with its last error
line; the run goes on and exits 1 at the end (also when a number cannot be read from a report).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from privfed.deploy.reproduce_table import (
    FAILED,
    NO_NUMBER,
    NOT_AVAILABLE,
    OK,
    SECTIONS,
    Quantity,
    Section,
    Value,
    check_unique,
)

TIMEOUT_S, QUICK_TIMEOUT_S = 900.0, 120.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``privfed reproduce``."""
    parser.add_argument(
        "--quick", action="store_true", help="small n and repeats (under 3 minutes on 2 cores); labelled quick"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="report directory (default: reports/<UTC date>, -quick with --quick)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed passed to every experiment (--seed)")
    parser.add_argument("--only", default=None, help="comma-separated section keys (default: every section)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help=f"seconds one experiment may take before it counts as failed (default {TIMEOUT_S:g}, quick "
        f"{QUICK_TIMEOUT_S:g})",
    )


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
    """One ``privfed`` subprocess: its argv, exit code, wall time, report and log."""

    argv: list[str]
    out: Path
    returncode: int | None = None
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    error: str = ""
    report_path: Path | None = None


@dataclass
class Outcome:
    """What the report says about one section."""

    section: Section
    status: str
    reason: str = ""
    run: Run | None = None
    values: dict[str, Value] = field(default_factory=dict)
    verdict: str = ""
    plots: list[Path] = field(default_factory=list)


def read_path(report: Any, path: tuple[Any, ...]) -> Value:
    """The number (or list of numbers) at ``path`` in a parsed report.json (see :class:`Quantity`)."""
    if not path:
        if isinstance(report, list):
            return [float(v) for v in report]
        return float(report)  # also "inf" / "nan", as write_json stores them
    step, rest = path[0], path[1:]
    if isinstance(step, tuple):
        return [_scalar(read_path(report[s], rest)) for s in step]
    return read_path(report[step], rest)


def _scalar(value: Value) -> float:
    if isinstance(value, list):
        raise TypeError("a tuple step must reach one number per key")
    return value


def quantity(report: Any, q: Quantity) -> Value:
    """``q`` read from ``report``: its value, minus its ``minus`` value when given."""
    value = read_path(report, q.path)
    if q.minus is None:
        return value
    other = read_path(report, q.minus)
    if isinstance(value, list) or isinstance(other, list):
        raise TypeError(f"{q.label}: a difference needs two single numbers")
    return value - other


def _availability(section: Section, data: Path | None) -> str:
    """Why ``section`` cannot run in this build ("" when it can)."""
    from privfed.deploy.experiments import EXPERIMENTS

    args = section.args(False)
    if args[0] == "experiment" and section.experiment not in EXPERIMENTS:
        return f"not available in this build: there is no `privfed experiment {section.experiment}`"
    if any("{data}" in a for a in args):
        if data is None:
            return "not available: the shared data directory was not found (set PRIVFED_DATA)"
        missing = [a for a in _argv(args, data) if a.startswith(str(data)) and not Path(a).exists()]
        if missing:
            return f"not available: missing data file {missing[0]}"
    return ""


def _argv(args: tuple[str, ...], data: Path | None) -> list[str]:
    return [a.replace("{data}", str(data)) for a in args]


def execute(run: Run, timeout: float) -> None:
    """Run ``run.argv`` as ``python -m privfed.deploy.cli ...``, its output in ``run.out/../<name>.log``."""
    run.out.mkdir(parents=True, exist_ok=True)
    log = run.out.with_suffix(".log")
    start, cpu = time.perf_counter(), _children_cpu()
    with log.open("w") as fh:
        try:
            done = subprocess.run(
                [sys.executable, "-m", "privfed.deploy.cli", *run.argv],
                stdout=fh,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                env=os.environ | {"MPLBACKEND": "Agg"},
            )
            run.returncode = done.returncode
        except subprocess.TimeoutExpired:
            run.returncode = -1
            run.error = f"timed out after {timeout:g} s (--timeout)"
    run.seconds, run.cpu_seconds = time.perf_counter() - start, _children_cpu() - cpu
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    if run.returncode != 0 and not run.error:
        run.error = lines[-1] if lines else f"exit code {run.returncode}, no output"
    reports = sorted(run.out.rglob("report.json"), key=lambda p: p.stat().st_mtime)
    run.report_path = reports[-1] if reports else None


def _children_cpu() -> float:
    """User + system CPU seconds of the finished child processes (the machine may be shared: wall
    time alone says little about what an experiment costs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def evaluate(section: Section, run: Run) -> Outcome:
    """Read ``section``'s quantities from ``run``'s report and apply its rule."""
    import json

    outcome = Outcome(section, OK, run=run)
    if run.returncode != 0:
        outcome.status, outcome.reason = FAILED, run.error
    if run.report_path is None:
        if outcome.status == OK:
            outcome.status, outcome.reason = NO_NUMBER, "the experiment wrote no report.json"
        return outcome
    report = json.loads(run.report_path.read_text())
    try:
        outcome.values = {q.label: quantity(report, q) for q in section.quantities}
        outcome.verdict = section.rule(outcome.values)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        if outcome.status == OK:
            outcome.status = NO_NUMBER
            outcome.reason = f"report.json has no number where this section reads it ({type(exc).__name__}: {exc})"
    pngs = sorted(run.report_path.parent.glob("*.png"))
    outcome.plots = [p for p in pngs if not section.plots or p.name in section.plots]
    return outcome


def reproduce(
    sections: tuple[Section, ...], out: Path, *, quick: bool, seed: int, timeout: float
) -> tuple[list[Outcome], float]:
    """Run every available section (each distinct command once) and evaluate it; progress on stdout."""
    check_unique(sections)
    data = data_dir()
    runs: dict[tuple[str, ...], Run] = {}
    outcomes: list[Outcome] = []
    started = time.perf_counter()
    for i, section in enumerate(sections, 1):
        tag = f"[{i:>2}/{len(sections)}]"
        why = _availability(section, data)
        if why:
            print(f"{tag} skip   {section.key}: {why}", flush=True)
            outcomes.append(Outcome(section, NOT_AVAILABLE, reason=why))
            continue
        key = section.args(quick)
        if key not in runs:
            argv = [*_argv(key, data), "--seed", str(seed)]
            run = Run(argv, out / "runs" / section.key)  # named after the first section that reads it
            run.argv += ["--out", str(run.out)]
            print(f"{tag} start  {section.key}: privfed {' '.join(argv)}", flush=True)
            execute(run, timeout)
            runs[key] = run
            state = "done  " if run.returncode == 0 else "FAILED"
            print(
                f"{tag} {state} {section.key} in {run.seconds:.1f} s, CPU {run.cpu_seconds:.1f} s "
                f"(elapsed {_clock(time.perf_counter() - started)})" + (f": {run.error}" if run.error else ""),
                flush=True,
            )
        else:
            print(f"{tag} reuse  {section.key}: same run as an earlier section", flush=True)
        outcomes.append(evaluate(section, runs[key]))
    return outcomes, time.perf_counter() - started


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def run(args: argparse.Namespace, sections: tuple[Section, ...] = SECTIONS) -> int:
    """``privfed reproduce``: run ``sections`` (all of :data:`SECTIONS` by default; ``--only``
    picks some), write the report, return 1 when a section failed."""
    from privfed.common.errors import ConfigError
    from privfed.common.validation import check_positive
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
    out.mkdir(parents=True, exist_ok=True)
    outcomes, seconds = reproduce(sections, out, quick=args.quick, seed=args.seed, timeout=timeout)
    meta = {
        "quick": args.quick,
        "seed": args.seed,
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "wall_time_s": seconds,
        "cpu_s": sum({id(o.run): o.run.cpu_seconds for o in outcomes if o.run is not None}.values()),
        "load_average_1_5_15": os.getloadavg(),
        "command": " ".join(
            ["privfed reproduce", *(["--quick"] if args.quick else []), "--out", str(out), "--seed", str(args.seed)]
            + (["--only", args.only] if args.only else [])
            + (["--timeout", f"{timeout:g}"] if args.timeout is not None else [])
        ),
        "host": host_info() | {"cpus": os.cpu_count()},
        "timeout_s": timeout,
    }
    write_report(out, outcomes, meta)
    failed = [o.section.key for o in outcomes if o.status in (FAILED, NO_NUMBER)]
    print(f"report: {out / 'index.html'} (summary: {out / 'summary.md'}); wall time {_clock(seconds)}")
    if failed:
        print(f"privfed reproduce: {len(failed)} section(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
