"""Issue 25, item 3, over real processes: ``privfed coordinator``'s ``report.json`` carries the
strategy's typed result (``StrategyResult``): one record per round with its secure sum and SAMME
decision, the job's ε split as the owners' ledgers debit it, and the owners dropped from the sums.

A coordinator process and two owner node processes: the second node's budget covers one release of
its owners, less than the job announces, so each of them declines the job at the accept round and the job
runs over the first node's owners. The report must name them as refused, drop no one from a secure sum, and its
ε split must be what the ledgers debit. (An evaluation refused mid-job drops its owner from that round's secure
sum: ``tests/protocol/test_secagg_boosting.py``.)
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

from fedharness import coordinator_job

from privfed.common.ledger import Ledger

N_OWNERS, ROUNDS, EPSILON = 40, 4, 4.0
ONE_RELEASE = 0.6 * EPSILON  # budget_split "epsilon": a share costs 0.6 ε, an evaluation 0.4 ε
DATA = ["--dataset", "synthetic", "--n-samples", "800", "--seed", "3", "--test-fraction", "0.25"]


def test_the_coordinators_report_has_rounds_the_epsilon_split_and_the_owners_that_cannot_pay(tmp_path: Path):
    flags = ["--task", "bdt", "--epsilon", str(EPSILON), "--rounds", str(ROUNDS), "--n-bins", "4"]
    flags += ["--weight-bound", "4", "--max-owner-rows", "20"]
    budgets = {"owner-0": EPSILON, "owner-1": ONE_RELEASE}
    nodes = {name: (f"{20 * i}:{20 * (i + 1)}", budget) for i, (name, budget) in enumerate(budgets.items())}
    report, _ = coordinator_job(tmp_path, flags, nodes, n_owners=N_OWNERS, dataset=DATA, node_codes={"owner-1": 2})
    assert report["status"] == "ok"

    # The ε split: share and evaluation parts that add up to ε, each as the owners' ledgers debit it.
    privacy = report["privacy"]
    parts = {p["purpose"]: p for p in privacy["releases"]}
    assert set(parts) == {"boost-share", "boost-eval"} and privacy["epsilon"] == EPSILON
    assert math.isclose(sum(p["epsilon"] * p["releases"] for p in parts.values()), EPSILON)
    debited: dict[str, float] = {}
    for name, budget in budgets.items():
        path = tmp_path / f"{name}.sqlite"
        with sqlite3.connect(path) as db:
            owner_ids = [r[0] for r in db.execute("SELECT DISTINCT owner_id FROM releases")]
        with Ledger(path, epsilon_budget=budget) as ledger:
            for oid in owner_ids:
                for h in ledger.history(oid):
                    purpose = h["purpose"].split(":")[0]
                    assert math.isclose(h["epsilon"], parts[purpose]["epsilon"]), (purpose, h)
                    debited[purpose] = debited.get(purpose, 0.0) + h["epsilon"]
    assert debited.keys() == parts.keys()

    # One record per round: who was asked and released, the secure sum, and SAMME's decision.
    rounds = report["rounds"]
    assert [r["round"] for r in rounds] == list(range(1, len(rounds) + 1)) and 1 <= len(rounds) <= ROUNDS
    for r in rounds:
        assert r["phase"] == "share" and 1 <= r["released"] <= r["asked"]
        assert r["secure_sum"]["protocol"] in ("ring", "secagg") and r["secure_sum"]["attempts"] >= 1
        assert r["secure_sum"]["summed"] + len(r["secure_sum"]["dropped"]) == r["evaluators"]
        assert r["step"] in ("keep", "keep_and_stop", "skip", "discard_and_stop") and r["weight_total"] > 0

    # Owner-1's owners cannot pay the job's 4 (their budget is one release's): each declines it at the accept round
    # (walkthrough 6, W6-12), so none is planned in, asked to release, or dropped from a sum, and none debits;
    # its node says it released nothing.
    assert report["dropped"] == [] and all(not r["secure_sum"]["dropped"] for r in rounds)
    refused = report["refused"]
    assert sorted(refused) == [f"owner-1.o{i:05d}" for i in range(20, 40)]
    assert all(why.startswith("budget_exceeded: ") for why in refused.values()), refused
    with sqlite3.connect(tmp_path / "owner-1.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM releases").fetchone() == (0,)
    assert "released nothing" in (tmp_path / "owner-1.log").read_text()


def test_a_few_owners_averaged_local_models_are_reported_as_one_draw_with_the_command_that_measures_the_spread(
    tmp_path: Path,
):
    """Walkthrough 12, W12-2: the README's own-data walkthrough, lr by 20 owners' averaged local models at eps 4,
    printed 0.4615 once, and 0.655 +- 0.147 over 10 runs, at the majority class: with no word, where the same few
    owners' nb or gradient descent is reported as one draw of a wide spread. So is this, with the simulate command
    that measures the spread for the same solver."""
    nodes = {"owner-0": ("0:5", EPSILON), "owner-1": ("5:10", EPSILON)}
    flags = ["--task", "lr", "--solver", "local", "--epsilon", str(EPSILON)]
    report, _ = coordinator_job(tmp_path, flags, nodes, n_owners=10, dataset=DATA)
    (few,) = [w for w in report["warnings"] if "sent one report each" in w]
    assert "`privfed simulate --owners 10 --task lr --solver local --epsilon 4 --repeats 10`" in few, few


def test_a_one_round_job_too_few_owners_take_part_in_stops_before_anyone_pays(tmp_path: Path):
    """Walkthrough 13, W13-4: a one-round job's quorum was 1, so a service's ncc job ran on the 5 of its 455 owners
    whose policies still took it; they paid, and it was listed done 0.8333. Half the owners by default now, checked
    when the accept round is over: 10 of 40 can pay here, so the job stops there, and nobody is debited."""
    nodes = {"owner-0": ("0:10", EPSILON), "owner-1": ("10:40", 0.1)}  # owner-1's 30 cannot pay 4: they decline
    flags = ["--task", "ncc", "--epsilon", str(EPSILON)]
    report, _ = coordinator_job(tmp_path, flags, nodes, n_owners=40, dataset=DATA, code=2, node_codes={"owner-1": 2})
    assert report["status"] == "failed" and "only 10 of 40 owners take part" in report["error"], report["error"]
    assert "before any release (nothing was released or debited)" in report["error"], report["error"]
    for name in nodes:
        with sqlite3.connect(tmp_path / f"{name}.sqlite") as db:
            assert db.execute("SELECT COUNT(*) FROM releases").fetchone() == (0,), name
