"""The refused-by column of ``privfed jobs`` and the status page: every refusal code, by node, from the counts a
job's listing carries (walkthrough 5b: owners out of budget refused a job and the column, which listed only the
policy's declines, showed nobody)."""

from __future__ import annotations

from privfed.server.statuspage import refusals_by_node, refused_line


def test_every_refusal_code_is_counted_by_node():
    refused = {
        **{f"hospital-a.o{i:05d}": "policy: the owner's policy declines the job (rule data_user)" for i in range(10)},
        **{f"hospital-d.o{i:05d}": "budget_exceeded: spent 1.85 of 1" for i in range(7)},
        "hospital-d.o00009": "policy: the owner's policy declines the job (rule epsilon_total)",
    }
    counts = refusals_by_node(refused)
    assert counts == {"hospital-a": {"policy": 10}, "hospital-d": {"budget_exceeded": 7, "policy": 1}}
    assert refused_line(counts) == "hospital-a (10 policy), hospital-d (7 budget_exceeded), hospital-d (1 policy)"
    assert refused_line(refusals_by_node({})) == ""
