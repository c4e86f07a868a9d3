"""What a report says at a glance (issue 11, items 2 and 4): why owners refused, the baselines
an accuracy must beat, ε = ∞ on the plot, the learner named by what it used."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.tasks import REFUSAL_TEXTS
from privfed.server.config import JobConfig
from privfed.server.report import baselines, learner_label, log_axis, plot_lines, refusal_summary


def _refusal(code: str, detail: str = "") -> str:
    return f"{code}: {REFUSAL_TEXTS[code]}" + (f" ({detail})" if detail else "")


def test_one_reason_for_every_owner_reads_as_one_phrase():
    refused = {f"n.o{i}": _refusal("budget_exceeded") for i in range(5)}
    assert refusal_summary(refused, 5) == f"5/5 owners refused: budget_exceeded ({REFUSAL_TEXTS['budget_exceeded']})"


def test_several_reasons_are_counted_most_frequent_first_with_each_detail_counted():
    refused = {
        "n.o0": _refusal("invalid_task", "task has 20 features, owner has 5"),
        "n.o1": _refusal("invalid_task", "task has 20 features, owner has 5"),
        "n.o2": _refusal("invalid_task", "task has 3 classes"),
        "n.o3": _refusal("budget_exceeded"),
    }
    summary = refusal_summary(refused, 10)
    assert summary.startswith("4/10 owners refused: 3 invalid_task (2: ")
    invalid = REFUSAL_TEXTS["invalid_task"]
    assert f"(2: {invalid} (task has 20 features, owner has 5); 1: {invalid} (task has 3 classes)); " in summary
    assert summary.endswith(f"; 1 budget_exceeded ({REFUSAL_TEXTS['budget_exceeded']})")


def test_a_policys_rules_each_show_with_their_counts_not_the_most_frequent_alone():
    refused = {f"a.o{i}": _refusal("policy", "rule data_user") for i in range(10)}
    refused |= {f"c.o{i}": _refusal("policy", "rule task") for i in range(4)}
    summary = refusal_summary(refused, 40)
    assert summary.startswith("14/40 owners refused: policy (10: ") and "; 4: " in summary
    assert "rule data_user" in summary and "rule task" in summary
    many = {f"n.o{i}": _refusal("policy", f"rule r{i}") for i in range(5)}
    assert refusal_summary(many, 5).endswith("; 2 other text(s))")


def test_nobody_refused_is_an_empty_summary():
    assert refusal_summary({}, 3) == ""


def test_baselines_are_chance_and_the_best_constant_predictor():
    y = np.array([0, 0, 0, 1, 2, 2, 0, 1])
    b = baselines(y, 3)
    assert b["chance"] == pytest.approx(1 / 3)
    assert b["majority_class"] == pytest.approx(4 / 8)
    best_constant = max(np.mean(y == k) for k in range(3))
    assert b["majority_class"] == best_constant


def test_infinite_epsilon_gets_a_place_and_a_label_on_the_log_axis():
    positions, labels = log_axis([0.5, 1, 8, math.inf])
    assert positions[:3] == [0.5, 1.0, 8.0] and positions[3] > 8 and math.isfinite(positions[3])
    assert labels[positions[3]] == "∞" and labels[8.0] == "8"
    assert log_axis([1, 2]) == ([1.0, 2.0], {1.0: "1", 2.0: "2"})
    assert log_axis([math.inf]) == ([1.0], {1.0: "∞"})


def test_a_plot_with_infinite_epsilon_and_baselines_is_written(tmp_path):
    path = plot_lines(
        tmp_path / "a.png",
        [1, 4, math.inf],
        {"lr (pm)": [0.6, 0.7, 0.8]},
        errors={"lr (pm)": [0.01, 0.02, 0.0]},
        hlines={"majority class": 0.5, "chance": 0.5},
        xlabel="epsilon",
        ylabel="accuracy",
        title="t",
        logx=True,
    )
    assert path.stat().st_size > 1000


def test_the_legend_names_only_what_the_learner_used():
    assert "pm" not in learner_label(JobConfig(task="feddpdr", epsilon=1.0))
    assert learner_label(JobConfig.from_flat(task="lr", epsilon=1.0, mechanism="duchi")) == "lr (duchi)"
    assert learner_label(JobConfig.from_flat(task="ncc", epsilon=1.0, labels="clear")) == "ncc (pm, labels clear)"
    assert "T=3" in learner_label(JobConfig.from_flat(task="bdt", epsilon=1.0, n_rounds=3))


def test_a_model_below_the_majority_class_beyond_its_noise_gets_a_one_line_warning():
    """Issue 22, no silent failure: the demo's 0.406 at eps = 0.5 on a balanced binary test split of 2000 rows."""
    from privfed.server.report import accuracy_warning

    text = accuracy_warning(0.5, 0.406, 0.5, 2000)
    assert text is not None and "\n" not in text and "below always answering the most common class" in text
    within = accuracy_warning(0.5, 0.49, 0.5, 2000)  # within 2 binomial standard errors (0.022): no sign of learning
    assert within is not None and "within the noise" in within and "eps=0.5" in within
    assert "within the noise" in accuracy_warning(0.5, 0.46, 0.5, 2000, spread=0.03)  # repeats widen the noise
    assert accuracy_warning(8.0, 0.9, 0.5, 2000) is None and accuracy_warning(2.0, 0.53, 0.5, 2000) is None
    # without noise there is no privacy level to blame (walkthrough 14, W14-8: "a larger epsilon would help" at inf)
    exact = accuracy_warning(math.inf, 0.705, 0.677, 400)
    assert exact is not None and "eps=inf" in exact and "without any privacy noise" in exact, exact
    assert "epsilon" not in exact.split("(±")[1] and "privacy level" not in exact, exact


def test_paired_splits_below_the_majority_class_warn_only_when_the_interval_excludes_it():
    from privfed.server.report import below_majority, mean_ci

    majority = [0.68, 0.68, 0.67, 0.68, 0.68]
    assert below_majority("fair ncc at eps=5", [0.65, 0.64, 0.66, 0.65, 0.66], majority)
    assert below_majority("fair ncc at eps=5", [0.70, 0.64, 0.72, 0.65, 0.66], majority) is None
    stats = mean_ci([1.0, 2.0, 3.0])
    assert stats["mean"] == 2.0 and stats["ci"] == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)


def test_the_warnings_advice_says_more_owners_where_each_owner_sends_one_report():
    """nb, bdt by marginals and lr by gradient descent take one report per owner whatever its rows (walkthrough 4:
    200 000 rows over 4 nb owners were told "more rows per owner" would help)."""
    from privfed.server.config import JobConfig
    from privfed.server.report import accuracy_warning

    one = [
        JobConfig(task="nb", epsilon=1.0, owners=4),
        JobConfig.from_flat(task="bdt", epsilon=1.0, owners=4, release="marginals"),
        JobConfig.from_flat(task="lr", epsilon=1.0, owners=4, solver="gd"),
    ]
    many = [
        JobConfig(task="ncc", epsilon=1.0, owners=4),
        JobConfig.from_flat(task="bdt", epsilon=1.0, owners=4, release="shares"),
        JobConfig.from_flat(task="lr", epsilon=1.0, owners=4, solver="local"),
        JobConfig(task="feddpdr", epsilon=1.0, owners=4),
    ]
    assert [c.one_report_per_owner for c in one + many] == [True] * 3 + [False] * 4
    advice = accuracy_warning(1.0, 0.34, 0.5, 200, rows_help=False)
    assert "more owners (each sends one report, whatever its rows)" in advice and "rows per owner" not in advice
    assert "more owners (or rows per owner)" in accuracy_warning(1.0, 0.34, 0.5, 200)


def test_a_job_of_few_one_report_owners_says_its_accuracy_is_one_draw():
    """Walkthrough 8, W8-9: nb over 10 one-report owners at eps 0.5 reported 0.840 with no word; 10 runs of the same
    setting gave 0.567 ± 0.184."""
    from privfed.server.report import FEW_REPORTS, few_reports_warning

    said = few_reports_warning("nb", 0.5, 10, one_report=True)
    assert said is not None and said.startswith("warning: 10 owner(s) sent one report each")
    assert "privfed simulate --owners 10 --task nb --epsilon 0.5 --repeats 10" in said
    assert few_reports_warning("nb", 0.5, FEW_REPORTS, one_report=True) is None  # enough owners
    assert few_reports_warning("ncc", 0.5, 10, one_report=False) is None  # rows perturbed one by one: rows count too
    assert few_reports_warning("nb", float("inf"), 10, one_report=True) is None  # no noise: no draw
