"""Issue 25, item 3, over real processes: ``privfed coordinator``'s ``report.json`` carries the
strategy's typed result (``StrategyResult``): one record per round with its secure sum and SAMME
decision, the job's ε split as the owners' ledgers debit it, and the owners dropped from the sums.

A coordinator process and two owner node processes: the second node's budget covers one release of
its owners, the share or the evaluation (whichever comes first), so an owner of it asked for both
refuses the second; an evaluation it refuses drops it from that round's secure sum. The report must
name exactly those owners, and its ε split must be what the ledgers debit.
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


def test_the_coordinators_report_has_rounds_the_epsilon_split_and_the_dropped_owners(tmp_path: Path):
    flags = ["--task", "bdt", "--epsilon", str(EPSILON), "--rounds", str(ROUNDS), "--n-bins", "4"]
    flags += ["--weight-bound", "4", "--max-owner-rows", "20"]
    budgets = {"owner-0": EPSILON, "owner-1": ONE_RELEASE}
    nodes = {name: (f"{20 * i}:{20 * (i + 1)}", budget) for i, (name, budget) in enumerate(budgets.items())}
    report, _ = coordinator_job(tmp_path, flags, nodes, n_owners=N_OWNERS, dataset=DATA)
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

    # The drops: owner-1's evaluators whose budget no longer covered the evaluation, each with its
    # refusal; owner-0's owners are never dropped and never refuse.
    dropped = report["dropped"]
    assert dropped and all(o.startswith("owner-1.") for o in dropped)
    assert dropped == [o for r in rounds for o in r["secure_sum"]["dropped"]]
    assert {o for r in rounds for o in r["secure_sum"]["refused"]} == set(dropped)
    assert all(code == "budget_exceeded" for r in rounds for code in r["secure_sum"]["refused"].values())
    assert set(dropped) <= set(report["refused"]) and all(o.startswith("owner-1.") for o in report["refused"])
    assert sum(r["asked"] - r["released"] for r in rounds) == len(set(report["refused"]) - set(dropped))
