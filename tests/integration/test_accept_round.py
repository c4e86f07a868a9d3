"""Walkthrough 5, F1: a job learns which owners decline it before anyone releases anything (the accept round,
``privfed.server.job.accept_round``), and plans over the owners that take part.

One coordinator service and three owner daemons as real processes (mTLS). owner-1's and owner-2's policies
serve bob only, so of alice's jobs only owner-0's ten owners take part. Under the old code a boosting job by
shares planned its groups and evaluation rings over all 30 owners: with the service's seed, round 3's ring held
one owner that takes part, and the job failed there ("fewer than 2 parties left"), after owner-0's owners had
paid for rounds 1-3's shares and rounds 1-2's evaluations. A job too few owners take part in fails before any
release, saying so, and no ledger holds anything for it.
"""

from __future__ import annotations

import pytest
from servicefleet import NODES, OWNERS_PER_NODE, ServiceFleet

pytestmark = pytest.mark.slow

TAKING_PART = {f"owner-0.o{i:05d}" for i in range(OWNERS_PER_NODE)}
DECLINING = {f"owner-{n}.o{i:05d}" for n in (1, 2) for i in range(n * OWNERS_PER_NODE, (n + 1) * OWNERS_PER_NODE)}
OWNERS = len(NODES) * OWNERS_PER_NODE


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    bob_only = {"data_users": ["bob"]}
    with ServiceFleet.running(
        tmp_path_factory.mktemp("accept"), limits={"owner-1": bob_only, "owner-2": bob_only}
    ) as f:
        yield f


def test_a_boosting_job_by_shares_runs_on_the_owners_that_take_part(fleet):
    job_id = fleet.submit(task="bdt", epsilon=2.0, owners=OWNERS, base="ncc", rounds=3, min_owners=1)
    job = fleet.wait(job_id, timeout=90)
    report = fleet.report(job_id)
    assert job["state"] == "done", (job, fleet.service_log()[-3000:])
    assert set(report["declined_owners"]) == DECLINING, report["declined_owners"]
    assert all("rule data_user" in report["refused"][o] for o in DECLINING), report["refused"]
    assert report["owners"] == OWNERS and report["rejected_owners"] == {}
    # every round's share group and evaluation ring was drawn from the ten owners that take part: each evaluates
    # once, and no ring met a refusal
    rounds = report["rounds"]
    assert len(rounds) == 3 and sum(r["evaluators"] for r in rounds) == OWNERS_PER_NODE, rounds
    assert all(r["asked"] <= OWNERS_PER_NODE // 3 for r in rounds), rounds
    assert all(not r["secure_sum"]["refused"] and not r["secure_sum"]["dropped"] for r in rounds), rounds
    for node in ("owner-1", "owner-2"):  # asked whether they take part, and nothing more: nothing debited
        assert fleet.releases(node, job_id) == []
    spent = fleet.releases("owner-0", job_id)
    assert spent and sum(r["epsilon"] for r in spent) <= OWNERS_PER_NODE * 2.0 + 1e-9
    assert set(fleet.jobs()[job_id]["declined_owners"]) == DECLINING  # `privfed jobs`' declined column


def test_a_job_too_few_owners_take_part_in_fails_before_any_release(fleet):
    # FedDPDR: a quorum of 15 with 10 taking part (a walkthrough's owners paid for DP-PCA before the check)
    quorum = fleet.submit(task="feddpdr", epsilon=1.0, owners=OWNERS, k=2, min_owners=15)
    # boosting: 8 rounds of fresh groups and evaluation rings fit 30 owners, not 10
    rounds = fleet.submit(task="bdt", epsilon=2.0, owners=OWNERS, base="ncc", rounds=8, min_owners=1)
    for job_id, why in (
        (
            quorum,
            "only 10 of 30 owners take part in the job, fewer than the quorum (min_owners 15): it stops in its "
            "accept round, before any release",
        ),
        (rounds, "only 10 of 30 owners take part in the job (the accept round, before any release"),
    ):
        job = fleet.wait(job_id, timeout=60)
        assert job["state"] == "failed" and why in job["error"], job
        assert "20/30 owners refused: policy" in job["error"], job["error"]  # and why they did not take part
        assert set(fleet.report(job_id)["declined_owners"]) == DECLINING
        for node in NODES:
            assert fleet.releases(node, job_id) == [], node
