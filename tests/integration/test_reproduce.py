"""``privfed reproduce``: the verdict rules, the runner over real experiment subprocesses (a failing
one, a missing one, a report without the number read) and, marked slow, the whole ``--quick``
report as CI runs it (every section present with a number or a reason, plots embedded and
existing, summary table present)."""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from privfed.deploy import reproduce, reproduce_pins
from privfed.deploy.reproduce_rules import (
    EVERY,
    OURS,
    PAPER,
    AtLeast,
    Claim,
    Command,
    Quantity,
    Section,
    check_section,
)
from privfed.deploy.reproduce_stats import VERDICTS
from privfed.deploy.reproduce_table import FAILED, NO_NUMBER, NOT_AVAILABLE, OK, SECTIONS, check_unique

sys.path.insert(0, str(Path(__file__).parents[1]))
from thread_signals import signal_a_worker_thread  # noqa: E402

PINS = Path(__file__).with_name("reproduce_quick_pins.json")


# ---------------------------------------------------------------------------- the sections
def test_every_section_is_consistent_and_runs_the_papers_pipeline() -> None:
    check_unique(SECTIONS)
    for s in SECTIONS:
        assert not check_section(s), s.key
        pipelines = {c.pipeline for c in s.claims}
        if s.paper.startswith("seed"):  # the paper's own pipeline is in every section of a paper
            assert PAPER in pipelines, s.key
        for c in s.claims:
            if c.pipeline == OURS:
                assert c.deviations, (s.key, c.text)  # ours always says how it differs
        for cmd in s.commands:
            assert cmd.args(False)[0] == "experiment" and cmd.args(True)[1] == cmd.args(False)[1], s.key
        assert all(q.unit for q in s.quantities), s.key


def test_comparisons_pair_numbers_of_one_unit() -> None:
    for s in SECTIONS:
        units = {q.label: q.unit for q in s.quantities}
        for c in s.claims:
            for a, b in getattr(c.rule, "pairs", ()):
                assert units[a] == units[b], (s.key, a, b)


# ---------------------------------------------------------------------------- the runner, real subprocesses
@pytest.fixture
def tiny_csv(tmp_path: Path) -> Path:
    """60 rows: 3 features, 1 desired and 1 confidential label, both linear in the features plus noise."""
    rng = np.random.Generator(np.random.PCG64(7))
    X = rng.normal(size=(60, 3))
    y = np.column_stack([X @ [1.0, 0.5, 0.0], X @ [0.0, 0.5, 1.0]]) + 0.1 * rng.normal(size=(60, 2))
    path = tmp_path / "tiny.csv"
    np.savetxt(path, np.column_stack([X, y]), delimiter=",")
    return path


def _tiny_section(key: str, command: str, quantities: tuple[Quantity, ...], paper: str | None = None) -> Section:
    commands = (Command(command, command),) + ((Command(paper, paper, key="paper"),) if paper else ())
    return Section(
        key=key,
        title=key,
        paper="test",
        where="Fig. 0",
        quote="a number",
        commands=commands,
        quantities=quantities,
        claims=(Claim(PAPER, "above 0.5", AtLeast(quantities[0].label, 0.5), ("a tiny CSV",)),),
    )


def test_runner_reports_every_outcome_and_exits_1_on_failure(tmp_path: Path, tiny_csv: Path) -> None:
    ns = f"experiment nullspace --data {tiny_csv} --n-features 3 --desired 1 --confidential 1 --epsilon 0.01 --runs 3"
    cp = Quantity("CP", ("per_run", EVERY, "clean_attack", "cp", 0), "CP")
    lstsq = Quantity("CP lstsq", ("per_run", EVERY, "clean_attack", "cp", 0), "CP", run="paper")
    sections = (
        _tiny_section("good", ns, (cp, lstsq), paper=f"{ns} --adversary lstsq"),
        _tiny_section("shares-the-run", ns, (Quantity("ties", ("per_run", EVERY, "clean", "tie", 0), "fraction"),)),
        _tiny_section("no-number", ns, (Quantity("x", ("results", "no_such_variant", "cp"), "CP"),)),
        _tiny_section("missing", "experiment no-such-experiment --runs 1", (cp,)),
        _tiny_section("fails", f"experiment nullspace --data {tmp_path / 'absent.csv'} --n-features 3 --desired 1 "
                      "--confidential 1", (cp,)),
    )  # fmt: skip
    args = argparse.Namespace(quick=True, out=tmp_path / "report", seed=3, only=None, timeout=60.0, jobs=2)
    assert reproduce.run(args, sections) == 1
    out = json.loads((tmp_path / "report" / "reproduce.json").read_text())
    by_key = {s["key"]: s for s in out["sections"]}
    assert list(by_key) == [s.key for s in sections]
    good = by_key["good"]
    assert good["status"] == OK and good["claims"][0]["verdict"] in VERDICTS
    cp_values = good["values"]["CP"]
    assert len(cp_values["values"]) == 3 and cp_values["lo"] <= cp_values["mean"] <= cp_values["hi"]
    assert good["commands"]["ours"].endswith(f"--seed 3 --out {tmp_path / 'report' / 'runs' / 'good'}")
    assert good["commands"]["paper"].endswith(f"--out {tmp_path / 'report' / 'runs' / 'good-paper'}")
    assert good["wall_time_s"] > 0 and good["plots"] and set(good["reports"]) == {"ours", "paper"}
    assert by_key["shares-the-run"]["reports"]["ours"] == good["reports"]["ours"]  # one subprocess for both
    assert by_key["no-number"]["status"] == NO_NUMBER and "no_such_variant" in by_key["no-number"]["reason"]
    assert by_key["missing"]["status"] == NOT_AVAILABLE
    assert "not available in this build" in by_key["missing"]["reason"]
    assert by_key["fails"]["status"] == FAILED and "absent.csv" in by_key["fails"]["reason"]
    page = (tmp_path / "report" / "index.html").read_text()
    for p in good["plots"]:
        assert (tmp_path / "report" / p).is_file() and f'src="{p}"' in page
    assert "(quick)" in page and "a tiny CSV" in page


@pytest.mark.parametrize(
    ("flags", "message"),
    [(["--only", "stump-synthetic,nope"], "unknown section(s) ['nope']"), (["--timeout", "0"], "--timeout must be")],
)
def test_bad_flags_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    from privfed.deploy.cli import main

    assert main(["reproduce", "--out", str(tmp_path / "r"), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "runs").exists()  # nothing ran


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text in (proc / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


@pytest.mark.parametrize("taker", ["any thread", "a worker thread"])
def test_sigterm_stops_the_running_experiments(tmp_path: Path, taker: str) -> None:
    """SIGTERM stops the report and its experiments, whichever of its threads the kernel hands the signal
    to: a worker thread's (sent there on purpose) once went unanswered while the main thread waited."""
    out = tmp_path / "r"
    parent = subprocess.Popen(
        [sys.executable, "-m", "privfed.deploy.cli", "reproduce", "--quick", "--only", "feddpdr-k", "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # An experiment's process, not its log: the runner opens the log before it starts the process, and a
    # loaded box can be seen between the two.
    deadline = time.monotonic() + 60
    while not [c for c in _processes_mentioning(str(out / "runs")) if c != parent.pid]:
        assert parent.poll() is None and time.monotonic() < deadline, "no experiment started"
        time.sleep(0.1)
    if taker == "any thread":
        parent.send_signal(signal.SIGTERM)
    else:
        signal_a_worker_thread(parent.pid, signal.SIGTERM)
    try:
        parent.wait(timeout=30)
    finally:
        if parent.poll() is None:  # it ignored the signal: leave nothing running behind the failure
            for pid in [parent.pid, *_processes_mentioning(str(out / "runs"))]:
                os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    assert _processes_mentioning(str(out / "runs")) == []  # no experiment outlives the report


# ---------------------------------------------------------------------------- the whole quick report (CI)
@pytest.mark.slow
@pytest.mark.alone
def test_quick_report_is_complete_and_keeps_its_pinned_numbers(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    done = subprocess.run(
        [sys.executable, "-m", "privfed.deploy.cli", "reproduce", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = json.loads((out / "reproduce.json").read_text())
    sections = {s["key"]: s for s in report["sections"]}
    assert list(sections) == [s.key for s in SECTIONS]
    assert done.returncode == 0, done.stderr[-2000:]
    # one progress line per distinct experiment finished, with its time
    commands = {c for s in sections.values() for c in s["commands"].values()}
    assert len(re.findall(r"^\[\s*\d+/\d+\] done .* in [\d.]+ s", done.stdout, re.M)) == len(commands)
    page = (out / "index.html").read_text()
    summary = (out / "summary.md").read_text()
    assert "(quick)" in page and "--quick" in summary.splitlines()[0]
    assert report["host"]["git_commit"] and report["host"]["host"] and report["seed"] == 0
    assert summary.count("\n| ") == sum(len(s.claims) for s in SECTIONS) + 1  # header and one row per claim
    for key, s in sections.items():
        assert f'id="{key}"' in page
        assert s["status"] == OK, (key, s["reason"])
        assert s["plots"], key
        for p in s["plots"]:
            assert (out / p).is_file() and f'src="{p}"' in page, (key, p)
        for claim in s["claims"]:
            assert claim["verdict"] in VERDICTS and claim["evidence"], (key, claim["claim"])
            for line in claim["deviations"]:
                assert html.escape(line) in page, (key, line)  # written next to its number
        for label, v in s["values"].items():
            assert v["unit"], (key, label)
            if v["kind"] != "constant":
                assert len(v["values"]) >= 5, (key, label)  # at least 5 seeds (or runs) behind every number
    failures = reproduce_pins.check(report, json.loads(PINS.read_text()))
    assert not failures, "\n".join(failures)
