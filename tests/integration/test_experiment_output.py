"""Walkthrough 12: ``privfed experiment NAME`` prints its own results, not a line per owner batch.

The experiments run the owners' real handlers in process, and an owner logs one INFO line per batch of releases
(how many it answered from the data-independent fallback, written for every batch so that its time tells nothing).
``privfed simulate`` keeps privfed's INFO lines for ``-v``; ``privfed experiment`` printed all of them: the README's
``privfed experiment tabular --out runs/tabular`` wrote thousands of ``0 of 142 release(s) answered from the
data-independent fallback`` lines and nothing of its own until its table. A real ``privfed`` process.
"""

from __future__ import annotations

import subprocess
import sys


def _experiment(tmp_path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "privfed.deploy.cli", *flags, "experiment", "feddpdr-k", "--quick", "--runs", "1",
         "--grid", "5", "--out", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=300, env={"MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_an_experiment_prints_its_results_without_the_owners_batch_lines(tmp_path):
    done = _experiment(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "results: " in done.stdout and "target dimension k" in done.stdout, done.stdout
    assert "privfed.owner" not in done.stderr, done.stderr[-3000:]
    assert "data-independent fallback" not in done.stdout + done.stderr
