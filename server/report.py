"""Run reports: a timestamped directory holding ``report.json`` and PNG plots."""

from __future__ import annotations

import json
import math
import platform
import socket
from datetime import UTC, datetime
from pathlib import Path

import numpy as np


def new_run_dir(out: str | Path) -> Path:
    """Create and return ``out/<UTC timestamp>/`` (suffixed if it already exists)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = Path(out) / stamp
    path, k = base, 1
    while path.exists():
        path, k = Path(f"{base}-{k}"), k + 1
    path.mkdir(parents=True)
    return path


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    if isinstance(value, Path):
        return str(value)
    return value


def nonprivate_releases(task: str, labels: str | None, base: str | None, answered: int) -> list[dict]:
    """What a run received WITHOUT a DP guarantee, for the report (issue 9, contract 6).

    Clear labels are the one such release: NCC with ``labels="clear"``, or boosting with the ncc
    base learner and clear labels. Owners only answer them when started with
    ``--allow-clear-labels``, and each records a non-private ``clear-labels`` entry in its ledger;
    the report names the release and how many owners made it. Empty for a fully private run.
    """
    clear = labels == "clear" and (task == "ncc" or (task == "bdt" and base == "ncc"))
    if not clear or answered <= 0:
        return []
    return [
        {
            "what": "clear-labels",
            "owners": int(answered),
            "detail": "true class labels of every released row, without randomized response; owners opted in "
            "with --allow-clear-labels and each recorded a non-private ledger entry",
        }
    ]


def host_info() -> dict:
    return {"host": socket.gethostname(), "python": platform.python_version(), "machine": platform.machine()}


def write_json(path: str | Path, obj) -> Path:
    """Write ``obj`` as indented JSON; numpy values and infinities are converted."""
    path = Path(path)
    path.write_text(json.dumps(_jsonable(obj), indent=2) + "\n")
    return path


def plot_lines(
    path: str | Path,
    x,
    series: dict,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool = False,
    errors: dict | None = None,
) -> Path:
    """Save a line plot of ``series`` (name -> y values over ``x``) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, ys in series.items():
        err = (errors or {}).get(name)
        ax.errorbar(x, ys, yerr=err, marker="o", capsize=3 if err is not None else 0, label=name)
    if logx:
        ax.set_xscale("log")
        finite = [v for v in x if math.isfinite(v)]
        ax.set_xticks(finite, [f"{v:g}" for v in finite])
        ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
