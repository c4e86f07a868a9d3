"""Boosting over the in-process transport with either secure sum: the owners' real handlers, ledgers
and release code; only the secure sum's protocol differs (``secure_sum="ring"`` or ``"secagg"``).

What must not change with the protocol: the model (at ε = ∞), each owner's noisy contribution and
its ledger entries (at finite ε, seeded owners), and the refusal of an owner over budget.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from privfed.common.boosting.params import BoostingParams
from privfed.common.datasets import load_builtin
from privfed.common.errors import ConfigError
from privfed.deploy.inprocess import InProcessTransport
from privfed.server.strategies.base import Transport
from privfed.server.strategies.boosting import BoostingStrategy

from ..owner_nodes import owners_over_nodes

N_OWNERS, N_NODES = 24, 3


@pytest.fixture(scope="module")
def data():
    return load_builtin("synthetic", n_samples=480, seed=5)


def _transport(ds, secure_sum, budget=math.inf):
    owners = owners_over_nodes(ds, n_owners=N_OWNERS, n_nodes=N_NODES)
    return InProcessTransport.with_ledgers(owners, epsilon_budget=budget, secure_sum=secure_sum)


def _booster(ds, **kw):
    options = {"epsilon": math.inf, "n_classes": 2, "bounds": ds.bounds, "n_rounds": 3, "n_bins": 4}
    return BoostingParams(**{**options, "weight_bound": 80.0, "max_owner_rows": 40, **kw})


def _run(ds, secure_sum, fb, budget=math.inf, seed=11):
    """(transport, the run's result) of a boosting run over ``secure_sum``."""
    t = _transport(ds, secure_sum, budget)
    return t, BoostingStrategy(fb, np.random.Generator(np.random.PCG64(seed))).run(sorted(t.owners), t)


def _sizes(result):
    """The owners each round's secure sum summed."""
    return [len(r.secure_sum.summed) for r in result.rounds]


def test_same_model_with_either_secure_sum_at_infinite_epsilon(data):
    fb = _booster(data)
    _, ring = _run(data, "ring", fb)
    t, result = _run(data, "secagg", fb)
    np.testing.assert_array_equal(result.model.predict(data.X), ring.model.predict(data.X))
    np.testing.assert_allclose(result.model.alphas, ring.model.alphas, rtol=1e-9)
    assert _sizes(result) == _sizes(ring)
    assert {r.secure_sum.protocol for r in result.rounds} == {"secagg"} and t.secure_sums.runs
    assert {r.secure_sum.protocol for r in ring.rounds} == {"ring"}


def test_same_noisy_contribution_and_ledger_entries_with_either_secure_sum(data):
    fb = _booster(data, epsilon=4.0, n_rounds=2)
    ring_t, ring = _run(data, "ring", fb, budget=4.0, seed=2)
    t, result = _run(data, "secagg", fb, budget=4.0, seed=2)
    assert [r.evaluators for r in result.rounds] == [r.evaluators for r in ring.rounds]
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
    _, probe = _run(data, "secagg", fb, budget=4.0, seed=2)
    first = probe.rounds[0].evaluators
    refusing = first[1]
    t = _transport(data, "secagg", budget=4.0)
    t.ledgers[refusing.split(".")[0]].debit(
        refusing, 4.0 - fb.eval_round_epsilon / 2, purpose="elsewhere", release_id="x"
    )
    result = BoostingStrategy(fb, np.random.Generator(np.random.PCG64(2))).run(sorted(t.owners), t)
    assert result.refused[refusing] == "budget_exceeded" and refusing in result.dropped
    assert _sizes(result)[0] == len(first) - 1 and result.rounds[0].secure_sum.attempts == 1


def test_unknown_secure_sum_is_a_config_error(data):
    with pytest.raises(ConfigError, match="secure_sum"):
        _transport(data, "onion")


def _recording(t):
    """Record the spec types of every batch of tasks ``t`` sends (``run_tasks`` goes through ``fold_tasks``)."""
    batches = []
    send = t.fold_tasks

    def fold_tasks(tasks, fold, timeout=None):
        batches.append({type(task.spec).__name__ for task in tasks})
        return send(tasks, fold, timeout)

    t.fold_tasks = fold_tasks
    return batches


def test_every_evaluation_group_is_keyed_in_one_batch_before_the_first_round(data):
    """Disjoint evaluation groups: one key agreement batch (steps 0 and 1, two batches of tasks)
    keys a run per group before the first share round; each round then sends only its masked
    inputs and unmasking requests, and sums over its whole group."""
    fb = _booster(data, n_rounds=3)
    t = _transport(data, "secagg")
    batches = _recording(t)
    result = BoostingStrategy(fb, np.random.Generator(np.random.PCG64(11))).run(sorted(t.owners), t)
    keys = [i for i, b in enumerate(batches) if b == {"SecAggKeysTask"}]
    assert keys == [0, 1], batches
    runs = t.secure_sums.runs
    assert [set(s.members) for s in runs] == [set(r.evaluators) for r in result.rounds]
    assert len({s.run_id for s in runs}) == 3
    assert _sizes(result) == [len(r.evaluators) for r in result.rounds]
    assert all(s.rounds_left == s.rounds - 1 for s in runs)  # each served its one sum


def test_groups_past_the_prepared_runs_are_keyed_by_their_first_sum(data, monkeypatch):
    """At most PREPARED_RUNS groups are keyed up front (both sides keep a bounded number of runs);
    a later group is keyed when its round comes, and still sums over all its members."""
    import privfed.common.secagg.runs

    monkeypatch.setattr(privfed.common.secagg.runs, "PREPARED_RUNS", 2)
    t = _transport(data, "secagg")
    batches = _recording(t)
    strategy = BoostingStrategy(_booster(data, n_rounds=3), np.random.Generator(np.random.PCG64(11)))
    result = strategy.run(sorted(t.owners), t)
    keys = [i for i, b in enumerate(batches) if b == {"SecAggKeysTask"}]
    assert keys[:2] == [0, 1] and len(keys) == 4 and keys[2] > 2, batches
    assert [set(s.members) for s in t.secure_sums.runs] == [set(r.evaluators) for r in result.rounds]
    assert _sizes(result) == [len(r.evaluators) for r in result.rounds]


def test_a_prepared_key_agreement_serves_every_round_of_the_same_members(data):
    """Every owner evaluates every round (``eval_groups="all"``): one run, keyed up front with a
    seed per round plus SECAGG_ATTEMPTS - 1 for attempts again, serves every round's sum."""
    from privfed.common.secagg.runs import SECAGG_ATTEMPTS

    n_rounds = SECAGG_ATTEMPTS + 1
    fb = _booster(data, n_rounds=n_rounds, eval_groups="all")
    t, result = _run(data, "secagg", fb)
    assert [s.rounds for s in t.secure_sums.runs] == [n_rounds + SECAGG_ATTEMPTS - 1]
    assert [s.rounds_left for s in t.secure_sums.runs] == [SECAGG_ATTEMPTS - 1]
    assert _sizes(result) == [N_OWNERS] * n_rounds


def test_unprepared_sums_key_lazily_then_the_same_members_key_again(data):
    """Without the batch up front (a transport that has none), the first key agreement shares
    seeds for SECAGG_ATTEMPTS sums and serves them, then the same members key again for
    SECAGG_ROUNDS; each round's sum is over every owner."""
    from privfed.common.secagg.runs import SECAGG_ATTEMPTS, SECAGG_ROUNDS

    fb = _booster(data, n_rounds=SECAGG_ATTEMPTS + 1, eval_groups="all")
    t = _transport(data, "secagg")
    t.prepare_secure_sums = functools.partial(Transport.prepare_secure_sums, t)  # the protocol's default: a no-op
    result = BoostingStrategy(fb, np.random.Generator(np.random.PCG64(11))).run(sorted(t.owners), t)
    assert [s.rounds for s in t.secure_sums.runs] == [SECAGG_ATTEMPTS, SECAGG_ROUNDS]
    assert [s.rounds_left for s in t.secure_sums.runs] == [0, SECAGG_ROUNDS - 1]
    assert _sizes(result) == [N_OWNERS] * (SECAGG_ATTEMPTS + 1)


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
    result = strategy.run(sorted(t.owners), t)
    assert bool(t.secure_sums.runs) is secagg
    assert _sizes(result) == [N_OWNERS] * 2
