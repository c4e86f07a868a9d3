"""Boosting over the in-process transport with either secure sum: the owners' real handlers, ledgers
and release code; only the secure sum's protocol differs (``secure_sum="ring"`` or ``"secagg"``).

What must not change with the protocol: the model (at ε = ∞), each owner's noisy contribution and
its ledger entries (at finite ε, seeded owners), and the refusal of an owner over budget.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.boosting.params import BoostingParams
from privfed.common.datasets import load_builtin
from privfed.common.errors import ConfigError, RoundFailed
from privfed.deploy.inprocess import InProcessTransport
from privfed.owner.data import build_owners
from privfed.server.strategies.boosting import BoostingStrategy

N_OWNERS, N_NODES = 24, 3


@pytest.fixture(scope="module")
def data():
    return load_builtin("synthetic", n_samples=480, seed=5)


def _transport(ds, secure_sum, budget=math.inf):
    per = N_OWNERS // N_NODES
    owners = []
    for j in range(N_NODES):
        owners += build_owners(
            ds,
            node_id=f"owner-{j}",
            n_owners=N_OWNERS,
            shards=range(j * per, (j + 1) * per),
            seed=0,
            rng_kind="seeded",
            rng_seed=0,
        )
    return InProcessTransport.with_ledgers(owners, epsilon_budget=budget, secure_sum=secure_sum)


def _booster(ds, **kw):
    options = {"epsilon": math.inf, "n_classes": 2, "bounds": ds.bounds, "n_rounds": 3, "n_bins": 4}
    return BoostingParams(**{**options, "weight_bound": 80.0, "max_owner_rows": 40, **kw})


def _run(ds, secure_sum, fb, budget=math.inf, seed=11):
    t = _transport(ds, secure_sum, budget)
    strategy = BoostingStrategy(fb, np.random.Generator(np.random.PCG64(seed)))
    try:
        model = strategy.run(sorted(t.owners), t)
    except RoundFailed:
        model = None  # a tiny set may give no learner better than chance; the sums are what is tested
    return t, strategy, model


def test_same_model_with_either_secure_sum_at_infinite_epsilon(data):
    fb = _booster(data)
    _, ring_strategy, ring_model = _run(data, "ring", fb)
    t, strategy, model = _run(data, "secagg", fb)
    assert ring_model is not None and model is not None
    np.testing.assert_array_equal(model.predict(data.X), ring_model.predict(data.X))
    np.testing.assert_allclose(model.alphas, ring_model.alphas, rtol=1e-9)
    assert [r["ring_size"] for r in strategy.rounds] == [r["ring_size"] for r in ring_strategy.rounds]
    assert t._secagg_runs, "the pairwise-mask secure sum never ran"


def test_same_noisy_contribution_and_ledger_entries_with_either_secure_sum(data):
    fb = _booster(data, epsilon=4.0, n_rounds=2)
    ring_t, ring_strategy, _ = _run(data, "ring", fb, budget=4.0, seed=2)
    t, strategy, _ = _run(data, "secagg", fb, budget=4.0, seed=2)
    assert strategy.evaluators == ring_strategy.evaluators
    released = 0
    for oid in sorted(t.owners):
        node = oid.split(".")[0]
        ours, theirs = t.ledgers[node].history(oid), ring_t.ledgers[node].history(oid)
        # the same entries; only the run id (random per job) in their names differs
        assert [(e["purpose"].split(":")[0], e["epsilon"], e["delta"]) for e in ours] == [
            (e["purpose"].split(":")[0], e["epsilon"], e["delta"]) for e in theirs
        ]
        for a, b in zip(ours, theirs):
            if a["purpose"].startswith("boost-eval"):
                np.testing.assert_array_equal(
                    t.release_of(oid, a["release_id"]),
                    ring_t.release_of(oid, b["release_id"]),
                )
                released += 1
    assert released > 0


def test_an_owner_over_budget_is_refused_and_the_rest_summed(data):
    fb = _booster(data, epsilon=4.0, n_rounds=2)
    probe, probe_strategy, _ = _run(data, "secagg", fb, budget=4.0, seed=2)
    first = probe_strategy.evaluators[0]
    refusing = first[1]
    t = _transport(data, "secagg", budget=4.0)
    t.ledgers[refusing.split(".")[0]].debit(
        refusing, 4.0 - fb.eval_round_epsilon / 2, purpose="elsewhere", release_id="x"
    )
    strategy = BoostingStrategy(fb, np.random.Generator(np.random.PCG64(2)))
    try:
        strategy.run(sorted(t.owners), t)
    except RoundFailed:
        pass
    assert strategy.refused[refusing] == "budget_exceeded" and refusing in strategy.dropped
    assert strategy.rounds[0]["ring_size"] == len(first) - 1


def test_unknown_secure_sum_is_a_config_error(data):
    with pytest.raises(ConfigError, match="secure_sum"):
        _transport(data, "onion")


def _recording(t):
    """Record the spec types of every batch of tasks ``t`` sends."""
    batches = []
    send = t.run_tasks

    def run_tasks(tasks, timeout=None):
        batches.append({type(task.spec).__name__ for task in tasks})
        return send(tasks, timeout)

    t.run_tasks = run_tasks
    return batches


def test_every_evaluation_group_is_keyed_in_one_batch_before_the_first_round(data):
    """Disjoint evaluation groups: one key agreement batch (steps 0 and 1, two batches of tasks)
    keys a run per group before the first share round; each round then sends only its masked
    inputs and unmasking requests, and sums over its whole group."""
    fb = _booster(data, n_rounds=3)
    t = _transport(data, "secagg")
    batches = _recording(t)
    strategy = BoostingStrategy(fb, np.random.Generator(np.random.PCG64(11)))
    strategy.run(sorted(t.owners), t)
    keys = [i for i, b in enumerate(batches) if b == {"SecAggKeysTask"}]
    assert keys == [0, 1], batches
    assert [set(s.members) for s in t._secagg_runs] == [set(e) for e in strategy.evaluators]
    assert len({s.run_id for s in t._secagg_runs}) == 3
    assert [r["ring_size"] for r in strategy.rounds] == [len(e) for e in strategy.evaluators]
    assert all(s.rounds_left == s.rounds - 1 for s in t._secagg_runs)  # each served its one sum


def test_groups_past_the_prepared_runs_are_keyed_by_their_first_sum(data, monkeypatch):
    """At most PREPARED_RUNS groups are keyed up front (both sides keep a bounded number of runs);
    a later group is keyed when its round comes, and still sums over all its members."""
    import privfed.server.job

    monkeypatch.setattr(privfed.server.job, "PREPARED_RUNS", 2)
    t = _transport(data, "secagg")
    batches = _recording(t)
    strategy = BoostingStrategy(_booster(data, n_rounds=3), np.random.Generator(np.random.PCG64(11)))
    strategy.run(sorted(t.owners), t)
    keys = [i for i, b in enumerate(batches) if b == {"SecAggKeysTask"}]
    assert keys[:2] == [0, 1] and len(keys) == 4 and keys[2] > 2, batches
    assert [set(s.members) for s in t._secagg_runs] == [set(e) for e in strategy.evaluators]
    assert [r["ring_size"] for r in strategy.rounds] == [len(e) for e in strategy.evaluators]


def test_a_prepared_key_agreement_serves_every_round_of_the_same_members(data):
    """Every owner evaluates every round (``eval_groups="all"``): one run, keyed up front with a
    seed per round plus SECAGG_ATTEMPTS - 1 for attempts again, serves every round's sum."""
    from privfed.server.job import SECAGG_ATTEMPTS

    n_rounds = SECAGG_ATTEMPTS + 1
    fb = _booster(data, n_rounds=n_rounds, eval_groups="all")
    t, strategy, _ = _run(data, "secagg", fb)
    assert [s.rounds for s in t._secagg_runs] == [n_rounds + SECAGG_ATTEMPTS - 1]
    assert [s.rounds_left for s in t._secagg_runs] == [SECAGG_ATTEMPTS - 1]
    assert [r["ring_size"] for r in strategy.rounds] == [N_OWNERS] * n_rounds


def test_unprepared_sums_key_lazily_then_the_same_members_key_again(data):
    """Without the batch up front (a transport that has none), the first key agreement shares
    seeds for SECAGG_ATTEMPTS sums and serves them, then the same members key again for
    SECAGG_ROUNDS; each round's sum is over every owner."""
    from privfed.server.job import SECAGG_ATTEMPTS, SECAGG_ROUNDS

    fb = _booster(data, n_rounds=SECAGG_ATTEMPTS + 1, eval_groups="all")
    t = _transport(data, "secagg")
    t.prepare_secure_sums = None
    strategy = BoostingStrategy(fb, np.random.Generator(np.random.PCG64(11)))
    strategy.run(sorted(t.owners), t)
    assert [s.rounds for s in t._secagg_runs] == [SECAGG_ATTEMPTS, SECAGG_ROUNDS]
    assert [s.rounds_left for s in t._secagg_runs] == [0, SECAGG_ROUNDS - 1]
    assert [r["ring_size"] for r in strategy.rounds] == [N_OWNERS] * (SECAGG_ATTEMPTS + 1)


def test_secure_sum_for_picks_pairwise_masks_from_the_crossover_on():
    from privfed.common.secagg import SECAGG_FROM, secure_sum_for

    assert secure_sum_for("auto", SECAGG_FROM - 1) == "ring"
    assert secure_sum_for("auto", SECAGG_FROM) == "secagg"
    assert secure_sum_for("ring", 10**6) == "ring" and secure_sum_for("secagg", 3) == "secagg"
    with pytest.raises(ConfigError, match="secure_sum"):
        secure_sum_for("onion", 10)


@pytest.mark.parametrize("crossover, secagg", [(N_OWNERS, True), (N_OWNERS + 1, False)])
def test_auto_is_the_default_and_sums_by_pairwise_masks_from_the_crossover_on(data, monkeypatch, crossover, secagg):
    """The transport's default ``auto``: every round's sum of all N owners runs pairwise masks when
    N reaches the crossover, the ring otherwise (no pairwise-mask run keyed)."""
    import privfed.common.secagg

    monkeypatch.setattr(privfed.common.secagg, "SECAGG_FROM", crossover)
    t = _transport(data, "auto")
    assert InProcessTransport.with_ledgers([], epsilon_budget=1.0).secure_sum_protocol == "auto"
    strategy = BoostingStrategy(_booster(data, n_rounds=2, eval_groups="all"), np.random.Generator(np.random.PCG64(11)))
    strategy.run(sorted(t.owners), t)
    assert bool(t._secagg_runs) is secagg
    assert [r["ring_size"] for r in strategy.rounds] == [N_OWNERS] * 2
