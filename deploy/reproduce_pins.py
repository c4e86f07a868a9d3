"""Pins on the headline numbers of ``privfed reproduce --quick`` (issue 21, item 6).

A pin says how far a headline may move in the direction that loses utility (accuracy, hit rate or
CP down; misclassification or MSE up) before CI fails. CI runs ``privfed reproduce --quick`` with
``--seed 0``; each pin is derived, not guessed, from quick reports of several first seeds
(``--seed 0``, ``1000``, ...):

* ``reference``: the headline's mean in the ``--seed 0`` report (the run CI repeats);
* ``tolerance``: :data:`K` standard errors of that mean, the standard error taken from the per-seed
  spread inside each report (a rate's from the binomial variance with the Agresti-Coull adjustment,
  so that 50 hits of 50 still has a spread), the largest over the reports. A change that only
  redraws the noise moves the mean by about sqrt(2) standard errors, so with K = 4.5 it breaks a
  pin with probability under 0.1 %, about 1 % for all of them; a change that loses a quarter of
  a headline's distance to chance breaks its pin.

Verdicts are pinned as floors (not met < inconclusive < met): the worst verdict a claim got in
the derivation reports; a claim whose floor is "not met" pins nothing, and so does the fit-time
section (wall seconds on a shared machine). An improvement never breaks a pin.
Derive: ``python -m privfed.deploy.reproduce_pins OUT.json REPORT_DIR...``.
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

K = 4.5
#: Verdicts from worst to best; a pinned verdict is a floor.
ORDER = ("not met", "inconclusive", "met")
#: Sections whose verdicts are not pinned: wall-clock seconds on a possibly shared machine.
UNPINNED = ("feddpdr-time",)
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
    """Pins from parsed ``reproduce.json`` files of quick runs with different first seeds, one of them 0."""
    ci = [r for r in reports if r["seed"] == 0]
    if len(reports) < 2 or len(ci) != 1:
        raise ValueError("derive pins from two or more reports with different --seed, one of them --seed 0")
    pins: dict[str, Any] = {"k": K, "seeds": [r["seed"] for r in reports], "numbers": [], "verdicts": []}
    sections, mine = [_sections(r) for r in reports], _sections(ci[0])
    for key, label, better in HEADLINES:
        vals = [s[key]["values"][label] for s in sections]
        pins["numbers"].append({
            "section": key, "quantity": label, "better": better, "unit": vals[0]["unit"],
            "reference": float(mine[key]["values"][label]["mean"]),
            "tolerance": K * max(_standard_error(v) for v in vals),
            "means": [float(v["mean"]) for v in vals],
        })  # fmt: skip
    for key, first in mine.items():
        if key in UNPINNED:
            continue
        for i, claim in enumerate(first["claims"]):
            floor = min((s[key]["claims"][i]["verdict"] for s in sections), key=ORDER.index)
            if floor != ORDER[0]:
                pins["verdicts"].append({"section": key, "pipeline": claim["pipeline"], "claim": claim["claim"],
                                         "at_least": floor})  # fmt: skip
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
        claims = {(c["pipeline"], c["claim"]): c["verdict"] for c in sections[pin["section"]]["claims"]}
        got = claims.get((pin["pipeline"], pin["claim"]), ORDER[0])
        if ORDER.index(got) < ORDER.index(pin["at_least"]):
            failures.append(
                f"{pin['section']} ({pin['pipeline']}): '{pin['claim']}' is {got}, pinned at least {pin['at_least']}"
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
