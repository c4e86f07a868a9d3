"""The LR / NCC / mechanism-MSE experiments (seed 002 Fig. 3, Table II): the CLI writes report.json
and a PNG into --out, and the numbers behave as the paper says on a small synthetic federation."""

from __future__ import annotations

import json

import pytest

from privfed.deploy.cli import main


def _report(tmp_path, name: str, *extra: str) -> dict:
    out = tmp_path / name
    argv = ["experiment", name, "--dataset", "synthetic", "--owners", "3000", "--runs", "2", "--out", str(out)]
    assert main([*argv, *extra]) == 0
    assert (out / f"{name}.png").is_file()
    return json.loads((out / "report.json").read_text())


def test_mechanism_mse_keeps_table_two_ordering_and_falls_with_epsilon(tmp_path):
    res = _report(tmp_path, "mechanism-mse", "--epsilon", "1,9")["results"]["mse"]
    for eps in ("1", "9"):
        assert res[f"pm@{eps}"]["mean"] < res[f"laplace@{eps}"]["mean"]
    for mech in ("pm", "duchi", "laplace"):
        assert res[f"{mech}@9"]["mean"] < res[f"{mech}@1"]["mean"] / 3  # ~1/eps^2 at small eps


@pytest.mark.parametrize("name", ["lr-epsilon", "ncc-epsilon"])
def test_accuracy_rises_with_epsilon_towards_the_non_private_line(tmp_path, name):
    report = _report(tmp_path, name, "--epsilon", "0.5,inf,8", "--mechanisms", "pm")
    res = report["results"]
    assert report["config"]["epsilon"] == [0.5, 8.0]  # inf is the non-private line, drawn anyway
    low, high = res["accuracy"]["pm@0.5"]["mean"], res["accuracy"]["pm@8"]["mean"]
    non_private = res["non_private"]["mean"]
    assert low < high and high > non_private - 0.1 and non_private > res["chance"] + 0.1
    # one value per run, each run on its own split: the non-private line moves with the split
    assert len(res["accuracy"]["pm@8"]["values"]) == 2 and len(set(res["non_private"]["values"])) == 2


def test_clear_labels_spend_the_whole_budget_on_the_rows(tmp_path):
    """The paper's clear labels (not private) against randomized response at 0.2 of eps: at a
    small eps the label noise of rr costs accuracy that clear labels keep."""
    flags = ("--epsilon", "2", "--mechanisms", "pm")
    rr = _report(tmp_path / "rr", "ncc-epsilon", *flags)["results"]["accuracy"]["pm@2"]["mean"]
    clear = _report(tmp_path / "clear", "ncc-epsilon", *flags, "--labels", "clear")["results"]["accuracy"]["pm@2"]
    assert clear["mean"] > rr + 0.05
