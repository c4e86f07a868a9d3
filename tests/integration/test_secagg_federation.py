"""The pairwise-mask secure sum (``--secure-sum secagg``) over real gRPC with mTLS and real owner
node processes: the same model as the ring at ε = ∞, the same ledger debits at finite ε, and an
owner node killed between the key agreement and the masked inputs recovered without re-running
the round (its owners' masks cancelled from their neighbours' key shares)."""

import math
import os
import signal

import numpy as np
import pytest
from fedharness import Federation
from liveness import LivenessClock

from privfed.common.boosting.wire import empty_history, owner_weights
from privfed.common.ledger import Ledger
from privfed.common.mechanisms import clip_error_pairs
from privfed.common.secagg.aggregator import SecAggServer
from privfed.common.secagg.masking import neighbour_graph, threshold
from privfed.owner.data import build_owners, federation_split
from privfed.server.strategies import make_strategy

pytestmark = pytest.mark.slow

DATA = ["--dataset", "synthetic", "--n-samples", "480", "--seed", "3", "--test-fraction", "0.25"]
N_OWNERS = 60
NODES = {"owner-0": "0:20", "owner-1": "20:40", "owner-2": "40:60"}


def _strategy(eps: float, secure_sum: str, **kw):
    _, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=480)
    options = dict(
        mechanism="pm",
        epsilon=eps,
        n_classes=2,
        bounds=test.bounds,
        n_rounds=3,
        n_bins=4,
        weight_bound=4.0,
        seed=5,
        secure_sum=secure_sum,
    )
    return make_strategy("bdt", **(options | kw)), test


def _federate(tmp_path, strategies, budget: float, nodes=NODES, **fed_options):
    """Each strategy's job in turn on one federation of real owner node processes."""
    fed = Federation(tmp_path, **fed_options)
    try:
        for node, shards in nodes.items():
            fed.spawn(node, n_owners=N_OWNERS, shards=shards, budget=budget, dataset=DATA)
        return [
            fed.run(strategy, sum(int(b) - int(a) for a, b in (s.split(":") for s in nodes.values())))
            for strategy in strategies
        ]
    finally:
        fed.close()


def _debits(tmp_path, owner_ids) -> list[tuple[str, str, float]]:
    """Every ledger entry of every owner: (owner, purpose without the run id, ε)."""
    out = []
    for path in sorted(tmp_path.glob("owner-*.sqlite")):
        with Ledger(path, epsilon_budget=16.0) as ledger:
            for o in (o for o in owner_ids if o.startswith(path.stem + ".")):
                for h in ledger.history(o):
                    kind, _run, *slot = h["purpose"].split(":")
                    out.append((o, ":".join([kind, *slot]), h["epsilon"]))
    return sorted(out)


def test_secagg_gives_the_rings_model_at_infinite_epsilon(tmp_path):
    ring, test = _strategy(math.inf, "ring")
    secagg, _ = _strategy(math.inf, "secagg")
    ring_outcome, outcome = _federate(tmp_path, [ring, secagg], math.inf)
    rounds, ring_rounds = outcome.result.rounds, ring_outcome.result.rounds
    assert [r.secure_sum.attempts for r in rounds] == [1] * len(rounds)
    assert {r.secure_sum.protocol for r in rounds} == {"secagg"} and {r.secure_sum.protocol for r in ring_rounds} == {
        "ring"
    }
    for a, b in zip(rounds, ring_rounds, strict=True):
        assert len(a.secure_sum.summed) == len(b.secure_sum.summed)
        assert math.isclose(a.decision.err_total, b.decision.err_total, abs_tol=1e-6)
        assert math.isclose(a.decision.weight_total, b.decision.weight_total, abs_tol=1e-6)
    np.testing.assert_array_equal(outcome.model.predict(test.X), ring_outcome.model.predict(test.X))


def test_secagg_debits_what_the_ring_debits_at_finite_epsilon(tmp_path):
    ring, _ = _strategy(16.0, "ring")
    secagg, _ = _strategy(16.0, "secagg")
    two = {"owner-0": "0:20", "owner-1": "20:40"}
    [ring_outcome] = _federate(tmp_path / "ring", [ring], 16.0, nodes=two)
    [outcome] = _federate(tmp_path / "secagg", [secagg], 16.0, nodes=two)
    debits = _debits(tmp_path / "secagg", outcome.epsilon_by_owner)
    assert debits == _debits(tmp_path / "ring", ring_outcome.epsilon_by_owner)
    assert any(rid.startswith("boost-eval:") for _, rid, _ in debits)
    assert outcome.epsilon_by_owner == ring_outcome.epsilon_by_owner
    assert outcome.result.privacy.parameters["eval_noise_scale"] > 0


@pytest.mark.parametrize(
    "victim_owners, attempts, when",
    [
        (6, None, "input"),  # 10 %: the dropped owners' masks are cancelled from their neighbours' key shares
        (20, None, "input"),  # a third: the sparse graph loses t around some owner more often; then keyed anew once
        (6, {1}, "keys"),  # found silent before the round: left out of it, the run keyed up front still serves
        (20, {1}, "keys"),  # too few neighbours left around some: keyed anew among the live ones before asking
    ],
)
def test_a_node_killed_after_the_key_agreement_is_recovered(tmp_path, monkeypatch, victim_owners, attempts, when):
    """SIGKILL owner-2 once the coordinator holds every key share (keyed up front, before the first
    share round), either just then (``keys``: the round's share tasks find the node silent, so its
    owners are not asked to evaluate) or just before the round's masked inputs (``input``: they
    never send one, and their masks are cancelled from their neighbours' key shares). The round is
    summed over the others exactly (ε = ∞), without re-running while the survivors hold enough shares.

    ``input``: the run's public graph is random (seeded by its run id), so whether some owner is left
    with fewer than ``t`` live neighbours (then the round is attempted again among the live owners,
    keyed anew) is read from it: one attempt when every member keeps ``t``, else two."""
    strategy, _ = _strategy(math.inf, "secagg", ring_timeout=8.0, n_rounds=1)
    split = (N_OWNERS - victim_owners) // 2
    nodes = {"owner-0": f"0:{split}", "owner-1": f"{split}:{N_OWNERS - victim_owners}"}
    nodes["owner-2"] = f"{N_OWNERS - victim_owners}:{N_OWNERS}"
    clock = LivenessClock(nodes)  # silence counts only while the nodes expected alive show life
    fed = Federation(tmp_path, node_timeout=2.0, clock=clock)
    killed, graphs = [], []
    hook = "on_key_shares" if when == "keys" else "input_requests"
    original = getattr(SecAggServer, hook)

    def kill_after_key_agreement(self, *args):
        out = original(self, *args)
        if not killed:
            os.kill(victim.pid, signal.SIGKILL)
            clock.forget("owner-2")
            victim.wait(10)
            killed.append(sorted(o for o in self.keyed if o.startswith("owner-2")))
            graphs.append(neighbour_graph(self.run_id, self.members))
        return out

    monkeypatch.setattr(SecAggServer, hook, kill_after_key_agreement)
    try:
        for node, shards in nodes.items():
            proc = fed.spawn(node, n_owners=N_OWNERS, shards=shards, budget=math.inf, dataset=DATA)
        victim = proc  # owner-2, the last one spawned
        outcome = fed.run(strategy, N_OWNERS)
    finally:
        fed.close()
    assert killed and killed[0], "owner-2's owners were in the key agreement"
    rec = outcome.result.rounds[0]
    if attempts is None:  # from the graph: does every member keep t live neighbours?
        (graph,) = graphs
        live = {o for o in graph if not o.startswith("owner-2")}
        keeps_t = all(sum(w in live for w in near) >= threshold(len(near)) for near in graph.values())
        attempts = {1} if keeps_t else {2}
    assert rec.secure_sum.attempts in attempts and rec.secure_sum.protocol == "secagg"
    evaluators = rec.evaluators
    survivors = [o for o in evaluators if not o.startswith("owner-2")]
    assert len(survivors) < len(evaluators), "owner-2 hosts evaluators of the round"
    assert set(outcome.result.dropped) == (set(evaluators) - set(survivors) if when == "input" else set())
    assert rec.secure_sum.summed == tuple(sorted(survivors))
    # The total is exactly the survivors' contributions, recomputed from their rows.
    train, _ = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=480)
    owners = {
        o.owner_id: o
        for node, shards in nodes.items()
        for o in build_owners(
            train,
            node_id=node,
            n_owners=N_OWNERS,
            shards=range(*map(int, shards.split(":"))),
            seed=3,
            rng_kind="seeded",
            rng_seed=3,
        )
    }
    learner = outcome.model.learners[0]
    sums = []
    for oid in survivors:
        o = owners[oid]
        w = np.minimum(owner_weights(empty_history(), o.X, o.y), strategy.params.eval_row_bound)
        sums.append([float(np.dot(w, learner.predict(o.X) != o.y)), float(w.sum())])
    err, wsum = clip_error_pairs(sums).sum(axis=0)
    d = rec.decision
    assert math.isclose(d.err_total, err, abs_tol=1e-6) and math.isclose(d.weight_total, wsum, abs_tol=1e-6)
    assert outcome.lost_nodes == ["owner-2"]
