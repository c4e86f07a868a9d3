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


def test_the_page_answers_head_and_shows_no_rounds_for_a_job_without_them():
    """Walkthrough 7, W7-7: HEAD (what uptime checkers send) got 501, and an lr job's row said rounds 1 beside its
    4 of 4 gradient steps."""
    import urllib.request

    from privfed.server.statuspage import StatusPage, render

    lr = {"job_id": "j1", "state": "done", "task": "lr", "epsilon": 4.0, "data_user": "alice", "rounds": None,
          "done": 4, "planned": 4, "progress": 1.0, "accuracy": 0.87}  # fmt: skip
    snapshot = {"jobs": [lr], "nodes": {}}
    assert "<td>alice</td><td></td>" in render(snapshot)
    page = StatusPage(lambda: snapshot)
    port = page.start("127.0.0.1:0")
    try:
        for method in ("HEAD", "GET"):
            request = urllib.request.Request(f"http://127.0.0.1:{port}/jobs.json", method=method)
            with urllib.request.urlopen(request, timeout=10) as answer:
                body = answer.read()
                assert answer.status == 200 and int(answer.headers["Content-Length"]) > 0
                assert body == b"" if method == "HEAD" else b'"j1"' in body
    finally:
        page.stop()


def test_the_page_shows_a_jobs_delta_beside_its_epsilon_when_it_has_one():
    """Walkthrough 7, W7-7: a FedDPDR job's δ was on no page."""
    from privfed.server.statuspage import render

    row = {"state": "done", "data_user": "alice", "done": 2, "planned": 2, "progress": 1.0}
    jobs = [
        {**row, "job_id": "j1", "task": "feddpdr", "epsilon": 2.0, "delta": 1e-5},
        {**row, "job_id": "j2", "task": "ncc", "epsilon": 2.0, "delta": 0.0},
    ]
    page = render({"jobs": jobs, "nodes": {}})
    assert "<td class='epsilon'>2.0, δ 1e-05</td>" in page and "<td class='epsilon'>2.0</td>" in page
