"""Issue 9, item 9: "at most one release per boosting run" cannot be dodged with new run ids.

Before the fix the per-run check keyed on the round id only, so shares under run ids runB, runC, ...
were released again (only the ε total capped it). A fresh run id may release again — it is a new
run — but only with a debit, until the budget is spent; then ``budget_exceeded``. Re-asking under
a run id already used gets the same share again (a resumed coordinator lost the first answer),
byte for byte and without a debit: nothing new leaves.
"""

import secrets

import numpy as np
from hostile import (
    BUDGET,
    assert_still_serving,
    boost_config,
    boost_share,
    kind,
    ledger_history,
    refusal_code,
    spent_epsilon,
)

D = 2
X = np.array([[0.25, 0.75], [0.6, 0.4]])
Y = np.array([1, 0])
RUN_EPSILON = 0.5


def test_new_run_ids_release_only_with_a_debit_until_the_budget_is_spent(coordinator, owners):
    node = owners("owner-0", X, Y)
    victim, spare = node.owner_ids
    prefix = secrets.token_hex(3)
    outcomes = []
    for i in range(12):
        run = f"run-{prefix}-{i}"
        task = boost_share(f"share-{prefix}-{i}", victim, run, boost_config(D, run, epsilon=RUN_EPSILON))
        result = coordinator.run([task])[task.task_id]
        assert kind(result) in ("boost_share", "refusal"), result
        outcomes.append((run, task.task_id, result))
        if kind(result) == "refusal":
            break
        if i == 0:  # the same run again, under a new task id: the same share sent again, nothing debited
            spent = spent_epsilon(ledger_history(node.ledger, victim))
            again = boost_share(f"again-{prefix}", victim, run, boost_config(D, run, epsilon=RUN_EPSILON))
            repeat = coordinator.run([again])[again.task_id]
            assert kind(repeat) == "boost_share", repeat
            assert repeat.boost_share.SerializeToString() == result.boost_share.SerializeToString(), (
                "a repeated share request got a new draw"
            )
            assert spent_epsilon(ledger_history(node.ledger, victim)) == spent
    released = [(run, tid) for run, tid, r in outcomes if kind(r) == "boost_share"]
    last = outcomes[-1][2]
    assert kind(last) == "refusal" and refusal_code(last) == "budget_exceeded", (
        f"12 run ids, {len(released)} releases, never refused: {last}"
    )

    history = ledger_history(node.ledger, victim)
    spent = spent_epsilon(history)
    assert spent <= BUDGET * (1 + 1e-9), history
    for run, tid in released:  # every release is on the ledger, under its run
        assert any(run in h["purpose"] or run in h["release_id"] or tid in h["release_id"] for h in history), (
            f"share of {run} left without a debit: {history}"
        )
    per_share = spent / len(released)
    assert per_share > 0
    assert len(released) <= BUDGET / per_share + 1e-9

    assert_still_serving(coordinator, node, spare, d=D)
    assert_still_serving(coordinator, node, victim, d=D)


def test_one_evaluation_release_per_run_whatever_the_coordinator_changes(coordinator, owners):
    """Within one run an owner evaluates once (``eval_groups="disjoint"``, the default): asking
    again under the same run id with another ε, another weight bound or another round number gets
    a refusal or the cached pair — never a fresh, second release."""
    from hostile import empty_history, grid_stump

    node = owners("owner-0", np.array([[0.25, 0.75], [0.6, 0.4], [0.1, 0.9]]), np.array([1, 0, 1]))
    a, b, spare = node.owner_ids
    run = f"eval-{secrets.token_hex(3)}"
    config = boost_config(D, run, epsilon=RUN_EPSILON)
    first = coordinator.run_ring([a, b], grid_stump(0, 1, 2), config, round_id=run)
    assert first.total is not None, (first.answers, node.log()[-3000:])
    spent = {o: spent_epsilon(ledger_history(node.ledger, o)) for o in (a, b)}
    assert all(v > 0 for v in spent.values()), spent

    round_one = empty_history(1)
    variants = {
        "other-epsilon": (boost_config(D, run, epsilon=2 * RUN_EPSILON), None),
        "other-weight-bound": (boost_config(D, run, epsilon=RUN_EPSILON, weight_bound=0.5), None),
        "other-round": (config, round_one),
        "same": (config, None),
    }
    for name, (cfg, history) in variants.items():
        out = coordinator.run_ring([a, b], grid_stump(0, 1, 2), cfg, round_id=run, history=history)
        if out.total is not None:  # only the cached pair may come back
            np.testing.assert_array_equal(out.total, first.total, err_msg=f"{name}: a second, fresh release")
        else:
            assert out.refusals(), f"{name}: neither refused nor answered: {out.answers}"
        now = {o: spent_epsilon(ledger_history(node.ledger, o)) for o in (a, b)}
        assert now == spent, f"{name}: debited again {now} after {spent}"
    assert_still_serving(coordinator, node, spare, d=D)
