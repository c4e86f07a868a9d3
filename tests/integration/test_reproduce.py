"""``privfed reproduce``: the verdict rules, the runner over real experiment subprocesses (a failing
one, a missing one, a report without the number read) and, marked slow, the whole ``--quick``
report as CI runs it (every section present with a number or a reason, plots embedded and
existing, summary table present)."""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from privfed.deploy import reproduce
from privfed.deploy.reproduce_table import (
    CLOSE,
    FAILED,
    MET,
    NO_NUMBER,
    NOT_AVAILABLE,
    NOT_MET,
    OK,
    SECTIONS,
    AtLeast,
    AtMost,
    Beats,
    Near,
    Quantity,
    Section,
    check_unique,
)

VERDICTS = {MET, CLOSE, NOT_MET}


# ---------------------------------------------------------------------------- the rules
@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.96, MET), (0.95, MET), (0.9, CLOSE), (0.85, CLOSE), (0.84, NOT_MET), ([0.99, 0.8], NOT_MET)],
)
def test_at_least_uses_the_worst_value(value: float | list[float], expected: str) -> None:
    assert AtLeast("x", met=0.95, close=0.85)({"x": value}) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [(0.2, MET), (0.25, MET), (0.28, CLOSE), (0.31, NOT_MET), ([0.1, 0.26], CLOSE)]
)
def test_at_most_uses_the_worst_value(value: float | list[float], expected: str) -> None:
    assert AtMost("x", met=0.25, close=0.30)({"x": value}) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(0.50, 0.51, MET), (0.50, 0.54, CLOSE), (0.50, 0.60, NOT_MET), ([0.5, 0.5], [0.51, 0.7], NOT_MET), (0.5, [0.51, 0.49], MET)],
)  # fmt: skip
def test_near_uses_the_largest_gap(a: float | list[float], b: float | list[float], expected: str) -> None:
    assert Near("a", "b", met=0.02, close=0.05)({"a": a, "b": b}) == expected


def test_beats_compares_every_element_with_every_other() -> None:
    rule = Beats("pm", ("duchi", "laplace"), close=0.02)
    assert rule({"pm": [0.8, 0.9], "duchi": [0.7, 0.8], "laplace": [0.1, 0.2]}) == MET
    assert rule({"pm": [0.8, 0.9], "duchi": [0.81, 0.8], "laplace": [0.1, 0.2]}) == CLOSE
    assert rule({"pm": [0.8, 0.9], "duchi": [0.7, 0.95], "laplace": [0.1, 0.2]}) == NOT_MET
    assert rule({"pm": 0.8, "duchi": 0.8, "laplace": 0.1}) == CLOSE  # a tie is not "above"
    assert rule({"pm": 0.78, "duchi": 0.8, "laplace": 0.1}) == NOT_MET  # 0.02 on the wrong side
    assert Beats("pm", ("duchi",), close=0.0)({"pm": 0.8, "duchi": 0.8}) == NOT_MET  # no close band
    lower = Beats("pm", ("laplace",), close=0.0, lower=True)
    assert lower({"pm": [0.5, 0.01], "laplace": [27.5, 0.33]}) == MET
    assert lower({"pm": [0.5, 0.5], "laplace": [27.5, 0.33]}) == NOT_MET
    with pytest.raises(ValueError, match="cannot compare"):
        rule({"pm": [0.8, 0.9], "duchi": [0.7, 0.8, 0.9], "laplace": 0.1})


def test_every_rule_names_quantities_its_section_reads() -> None:
    check_unique(SECTIONS)
    for s in SECTIONS:
        labels = {q.label for q in s.quantities}
        assert set(s.rule.names()) <= labels, s.key
        assert s.args(False)[0] == "experiment" and s.args(True)[1] == s.experiment, s.key
        assert s.quote and s.where and s.differences, s.key


def test_read_path_keys_indices_fan_out_and_difference() -> None:
    report = {"a": {"x": [1.0, 2.0, 3.0], "m@1": {"v": 0.5}, "m@9": {"v": "inf"}}, "t": {"v": [0.25]}}
    assert reproduce.read_path(report, ("a", "x", -1)) == 3.0
    assert reproduce.read_path(report, ("a", "x")) == [1.0, 2.0, 3.0]
    assert reproduce.read_path(report, ("a", ("m@1", "m@9"), "v")) == [0.5, math.inf]
    assert reproduce.quantity(report, Quantity("d", ("a", "x", 2), minus=("t", "v", 0))) == 2.75
    with pytest.raises(KeyError):
        reproduce.read_path(report, ("a", "missing"))
    assert Quantity("q", ("results", "mse", ("pm@1", "pm@9"), "mean", -1)).where() == (
        "results.mse['pm@1'|'pm@9'].mean[-1]"
    )


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


def _tiny_section(key: str, command: str, quantities: tuple[Quantity, ...]) -> Section:
    return Section(
        key=key,
        title=key,
        paper="test",
        where="Fig. 0",
        quote="a number",
        command=command,
        quick=command,
        quantities=quantities,
        rule=AtLeast(quantities[0].label, met=0.5, close=0.4),
        differences=("a tiny CSV",),
    )


def test_runner_reports_every_outcome_and_exits_1_on_failure(tmp_path: Path, tiny_csv: Path) -> None:
    ns = f"experiment nullspace --data {tiny_csv} --n-features 3 --desired 1 --confidential 1 --epsilon 0.01 --runs 1"
    cp = Quantity("CP", ("results", "clean", "cp", "mean", 0))
    sections = (
        _tiny_section("good", ns, (cp,)),
        _tiny_section("shares-the-run", ns, (Quantity("ties", ("results", "clean", "tie", "mean", 0)),)),
        _tiny_section("no-number", ns, (Quantity("x", ("results", "no_such_variant", "cp")),)),
        _tiny_section("missing", "experiment no-such-experiment --runs 1", (cp,)),
        _tiny_section("fails", f"experiment nullspace --data {tmp_path / 'absent.csv'} --n-features 3 --desired 1 "
                      "--confidential 1", (cp,)),
    )  # fmt: skip
    args = argparse.Namespace(quick=True, out=tmp_path / "report", seed=3, only=None, timeout=60.0)
    assert reproduce.run(args, sections) == 1
    out = json.loads((tmp_path / "report" / "reproduce.json").read_text())
    by_key = {s["key"]: s for s in out["sections"]}
    assert list(by_key) == [s.key for s in sections]
    good = by_key["good"]
    assert good["status"] == OK and good["verdict"] in VERDICTS and 0.0 <= good["values"]["CP"] <= 1.0
    assert good["command"].endswith(f"--seed 3 --out {tmp_path / 'report' / 'runs' / 'good'}")
    assert good["wall_time_s"] > 0 and good["plots"] and good["report"].endswith("report.json")
    assert by_key["shares-the-run"]["report"] == good["report"]  # one subprocess for both
    assert by_key["no-number"]["status"] == NO_NUMBER and "no_such_variant" in by_key["no-number"]["reason"]
    assert by_key["missing"]["status"] == NOT_AVAILABLE
    assert "not available in this build" in by_key["missing"]["reason"]
    assert by_key["fails"]["status"] == FAILED and "absent.csv" in by_key["fails"]["reason"]
    page = (tmp_path / "report" / "index.html").read_text()
    for p in good["plots"]:
        assert (tmp_path / "report" / p).is_file() and f'src="{p}"' in page
    assert "(quick)" in page and "seed" in page


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


# ---------------------------------------------------------------------------- the whole quick report (CI)
@pytest.mark.slow
def test_quick_report_is_complete(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    done = subprocess.run(
        [sys.executable, "-m", "privfed.deploy.cli", "reproduce", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads((out / "reproduce.json").read_text())
    sections = {s["key"]: s for s in report["sections"]}
    assert list(sections) == [s.key for s in SECTIONS]
    failed = [k for k, s in sections.items() if s["status"] in (FAILED, NO_NUMBER)]
    assert done.returncode == (1 if failed else 0), done.stderr[-2000:]
    # one progress line per experiment started and finished, with elapsed time
    assert len(re.findall(r"^\[\s*\d+/\d+\] (done|FAILED) .* in [\d.]+ s", done.stdout, re.M)) == len(
        {s["command"] for s in sections.values() if s["command"]}
    )
    page = (out / "index.html").read_text()
    summary = (out / "summary.md").read_text()
    assert "(quick)" in page and "--quick" in summary.splitlines()[0]
    assert report["host"]["git_commit"] and report["host"]["host"] and report["seed"] == 0
    assert summary.count("\n| ") == len(SECTIONS) + 1  # header and one row per section
    for key, s in sections.items():
        assert f'id="{key}"' in page
        if s["status"] == NOT_AVAILABLE:
            assert s["reason"].startswith("not available"), key
            continue
        assert s["values"] or s["reason"], key  # a number, or the failure's last error line
        if s["status"] == OK:
            assert s["verdict"] in VERDICTS and s["values"], key
            assert s["plots"], key
        for p in s["plots"]:
            assert (out / p).is_file() and f'src="{p}"' in page, (key, p)
