"""Pins on the headline numbers of ``privfed reproduce --quick`` (issue 21, item 6).

A pin says how far a headline may move in the direction that loses utility (accuracy, hit rate or
CP down; misclassification or MSE up) before CI fails. Each is derived, not guessed, from quick
reports of several first seeds (``--seed 0``, ``1000``, ...):

* ``reference``: the mean of the reports' means;
* ``tolerance``: :data:`K` times the larger of (a) the standard error of one report's mean, from
  its per-seed spread (a rate's from the binomial variance, with the Agresti-Coull adjustment so
  that 20 hits of 20 still has a spread), and (b) the standard deviation of the reports' means.
  A change that only redraws the noise moves a mean by about sqrt(2) standard errors, so K = 4 is
  a false alarm about once in 2,000 pins; losing a quarter of the gap to chance is caught.

The verdicts every derivation report agrees on are pinned too (a change that turns a met claim
inconclusive fails). Derive: ``python -m privfed.deploy.reproduce_pins OUT.json REPORT_DIR...``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

K = 4.0
HIGHER, LOWER = "higher", "lower"
#: (section key, quantity label, the direction that is better).
HEADLINES: tuple[tuple[str, str, str], ...] = (
    ("mechanism-mse", "PM eps=5", LOWER),
    ("lr-epsilon", "PM eps=9", HIGHER),
    ("lr-epsilon", "non-private", HIGHER),
    ("ncc-epsilon", "PM (clear labels) eps=5", HIGHER),
    ("stump-synthetic", "signs eps=3", HIGHER),
    ("stump-synthetic", "table/pm eps=3", HIGHER),
    ("stump-mnist", "signs eps=5", HIGHER),
    ("bdt-synthetic", "ours eps=5, round 10", LOWER),
    ("bdt-mnist", "ours eps=5, round 10", LOWER),
    ("bdt-mnist", "non-private, round 10", LOWER),
    ("boosted-ncc", "joint eps=5, round 10", LOWER),
    ("boosted-ncc", "clear eps=5, round 10", LOWER),
    ("feddpdr-epsilon", "FedDPDR-DPML (ours)", HIGHER),
    ("feddpdr-epsilon", "FedDPDR-DPML (paper's)", HIGHER),
    ("feddpdr-epsilon", "paper's Non-Priv (PCA-20 + linear SVM)", HIGHER),
    ("nullspace-attack", "CP clean+attack (ours)", HIGHER),
)


def _standard_error(value: dict[str, Any]) -> float:
    x = np.asarray(value["values"], dtype=np.float64)
    if value["kind"] == "rate":
        p = (x.sum() + 2) / (x.size + 4)
        return math.sqrt(p * (1 - p) / x.size)
    return float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.inf


def _sections(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["key"]: s for s in report["sections"]}


def derive(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pins from parsed ``reproduce.json`` files of quick runs with different first seeds."""
    if len(reports) < 2:
        raise ValueError("derive pins from two or more reports (different --seed)")
    pins: dict[str, Any] = {"k": K, "seeds": [r["seed"] for r in reports], "numbers": [], "verdicts": []}
    sections = [_sections(r) for r in reports]
    for key, label, better in HEADLINES:
        vals = [s[key]["values"][label] for s in sections]
        means = [float(v["mean"]) for v in vals]
        spread = max(max(_standard_error(v) for v in vals), float(np.std(means, ddof=1)))
        pins["numbers"].append({
            "section": key, "quantity": label, "better": better, "unit": vals[0]["unit"],
            "reference": float(np.mean(means)), "tolerance": K * spread, "means": means,
        })  # fmt: skip
    for key, first in sections[0].items():
        for i, claim in enumerate(first["claims"]):
            seen = {s[key]["claims"][i]["verdict"] for s in sections}
            if len(seen) == 1:
                pins["verdicts"].append({"section": key, "claim": claim["claim"], "verdict": seen.pop()})
    return pins


def check(report: dict[str, Any], pins: dict[str, Any]) -> list[str]:
    """Every pin ``report`` breaks, one line each (empty when none)."""
    failures = []
    sections = _sections(report)
    for pin in pins["numbers"]:
        got = float(sections[pin["section"]]["values"][pin["quantity"]]["mean"])
        limit = pin["reference"] + (-1 if pin["better"] == HIGHER else 1) * pin["tolerance"]
        if (got < limit) if pin["better"] == HIGHER else (got > limit):
            failures.append(
                f"{pin['section']}: {pin['quantity']} = {got:.4g} {pin['unit']}, worse than the pinned {limit:.4g} "
                f"(reference {pin['reference']:.4g}, tolerance {pin['tolerance']:.3g})"
            )
    for pin in pins["verdicts"]:
        claims = {c["claim"]: c["verdict"] for c in sections[pin["section"]]["claims"]}
        if claims.get(pin["claim"]) != pin["verdict"]:
            failures.append(
                f"{pin['section']}: '{pin['claim']}' is {claims.get(pin['claim'])}, pinned {pin['verdict']}"
            )
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m privfed.deploy.reproduce_pins", description=__doc__)
    parser.add_argument("out", type=Path, help="the pins file to write (JSON)")
    parser.add_argument("reports", type=Path, nargs="+", help="directories of privfed reproduce --quick runs")
    args = parser.parse_args(argv)
    reports = [json.loads((d / "reproduce.json").read_text()) for d in args.reports]
    if not all(r["quick"] for r in reports):
        print("every report must come from privfed reproduce --quick", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(derive(reports), indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
