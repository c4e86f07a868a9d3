"""An owner policy's daily limit counts every release of the last day, announced or not (issue 26, item 2).

A node that ran without ``--policy`` answered tasks no job was announced for (their ledger entries
carry the empty job). Restarted with ``max_epsilon_per_day``, it must count them among "what the
other jobs spent today", or a coordinator spends the day's limit unannounced first and then again
in an announced job. Over the real protocol: the hostile coordinator spends 1.0 unannounced, the
owner restarts with a daily limit of 1.5, the coordinator announces a job of 1.0: declined (rule
``epsilon_per_day``), nothing debited. (The path holds: an entry
without a job is stored as '' -- not NULL, which SQL's ``job != ?`` would have skipped.)
"""

import numpy as np
from hostile import WAIT, kind, ledger_history, ncc_task, pb, refusal_code, spent_epsilon

D = 2
X = np.array([[0.2, 0.9], [0.7, 0.4]])
Y = np.array([0, 1])
BUDGET = 10.0


def test_the_daily_limit_counts_releases_made_before_the_policy(coordinator, owners, tmp_path):
    node = owners("owner-0", X, Y, budget=BUDGET)
    victim = node.owner_ids[0]
    got = coordinator.run([ncc_task("morning", victim, d=D, epsilon=0.5, label_epsilon=0.5)])
    assert kind(got.get("morning")) == "ncc_share", f"unannounced share not answered: {got}\n{node.log()[-2000:]}"
    node.stop()

    policy = tmp_path / "policy.toml"
    policy.write_text("max_epsilon_per_day = 1.5\n")
    coordinator.job = pb.JobInfo(job_id="afternoon", task="ncc", epsilon=1.0, delta=0.0)
    node = owners("owner-0", X, Y, budget=BUDGET, extra=("--policy", str(policy)))
    got = coordinator.run([ncc_task("afternoon-1", victim, d=D, epsilon=0.5, label_epsilon=0.5)], timeout=WAIT)
    result = got.get("afternoon-1")
    assert kind(result) == "refusal", f"a job past the day's limit was answered: {result}"
    assert refusal_code(result) == "policy" and "epsilon_per_day" in result.refusal.message, result.refusal
    assert spent_epsilon(ledger_history(node.ledger, victim, BUDGET)) == 1.0  # the morning's release alone
