"""``privfed experiment feddpdr-*`` (deploy/experiments/feddpdr.py) on digits: the report carries the
numbers, the paper's pipeline beside privfed's, the deviations and the wall time; epsilon comes as one
comma-separated list; at epsilon = inf the federation's summed class sums are the pooled ones."""

import argparse
import json

import pytest

from privfed.common.errors import ConfigError
from privfed.deploy.experiments import feddpdr as exp


def _args(tmp_path, *argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("experiment")
    exp.add_arguments(parser)
    return parser.parse_args([*argv, "--out", str(tmp_path)])


def test_epsilon_sweep_writes_the_report_with_both_pipelines(tmp_path, capsys):
    args = _args(tmp_path, "feddpdr-epsilon", "--quick", "--runs", "1", "--epsilon", "2,inf")
    out = exp.run(args)
    report = json.loads((out / "report.json").read_text())
    assert {p.name for p in out.glob("*.png")} == {"accuracy.png", "fit_seconds.png"}
    assert report["x"] == [2.0, "inf"] and report["chance"] == 0.1
    assert set(report["methods"]) >= {"FedDPDR-DPML", "FedDPDR-DPML-paper", "DPML", "DPDR-DPML", "Non-Priv"}
    assert {"data", "basis", "model", "scaling", "delta"} <= set(report["deviations"])
    assert report["total_seconds"] > 0 and report["paper_result"].startswith("Fig. 3")
    notes = report["mechanisms"][0]
    assert notes["FedDPDR-DPML"]["epsilon1"] == 0.0 and notes["FedDPDR-DPML"]["epsilon2"] == 2.0
    assert notes["FedDPDR-DPML-paper"]["epsilon1"] == 1.0 and notes["FedDPDR-DPML-paper"]["svm_eps_per_class"] == 0.1
    acc = {m: v["mean"] for m, v in report["accuracy"].items()}
    # without noise, the sum of the owners' class sums is the pooled class sums: the same model
    assert acc["FedDPDR-DPML"][1] == pytest.approx(acc["Non-Priv"][1])
    assert acc["FedDPDR-DPML"][0] > acc["DPDR-DPML"][0]  # the federation beats a party alone
    assert "FedDPDR-DPML-paper" in capsys.readouterr().out


def test_epsilon_and_k_lists_go_where_they_belong(tmp_path):
    with pytest.raises(SystemExit):
        _args(tmp_path, "feddpdr-epsilon", "--epsilon", "0,1")  # epsilon_list: every value > 0
    with pytest.raises(ConfigError, match="one epsilon"):
        exp.run(_args(tmp_path, "feddpdr-k", "--quick", "--epsilon", "1,2"))
    with pytest.raises(ConfigError, match="--grid sets the k values"):
        exp.run(_args(tmp_path, "feddpdr-epsilon", "--quick", "--grid", "5,10"))
    with pytest.raises(ConfigError, match="identity"):
        exp.run(_args(tmp_path, "feddpdr-k", "--quick", "--basis", "identity"))
    assert exp.paper_n_epsilon(800) == pytest.approx(1.25)


def test_validation_scores_on_training_rows_only(tmp_path):
    """--validation: defaults are chosen on a split of the training rows, never the reported test split."""
    args = _args(
        tmp_path, "feddpdr-n", "--quick", "--runs", "1", "--validation", "--epsilon", "4", "--model", "mc-huber"
    )
    report = json.loads((exp.run(args) / "report.json").read_text())
    full = json.loads(
        (exp.run(_args(tmp_path, "feddpdr-n", "--quick", "--runs", "1", "--epsilon", "4")) / "report.json").read_text()
    )
    assert "validation split" in report["config"]["split"] and "validation" not in full["config"]["split"]
    assert (
        report["config"]["n_train"] + report["config"]["n_test"] < full["config"]["n_train"] + full["config"]["n_test"]
    )
    assert report["config"]["n_train"] < full["config"]["n_train"]


def test_the_scaling_experiment_pairs_box_and_ball_and_box_reads_anes96_where_ball_could_not(tmp_path):
    """Walkthrough 13, W13-3: under one radius for the whole row, anes96's population in thousands left its 1-7 scales
    under the noise, and FedDPDR's own noise-free reference (0.48-0.51) was below the majority class (0.58); each
    feature scaled by its own range (box) reads them. The experiment the default was chosen by, on a validation split."""
    import json

    from privfed.deploy.cli import main

    argv = ["experiment", "feddpdr-scaling", "--datasets", "anes96", "--epsilon", "inf", "--splits", "1", "--validate"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    (cell,) = json.loads((tmp_path / "report.json").read_text())["results"]["cells"]
    assert cell["ball"][0] < cell["majority"] < cell["box"][0] - 0.2, cell
