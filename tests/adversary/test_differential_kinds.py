"""Audit 6 over the real wire: two ``privfed owner`` processes of different rows in one row cell answer the
same hostile tasks of every kind (``differential.py``'s table and docstring); their reply skeletons, result
counts, ledger entries' public parts and a ring's relayed envelopes must match but for released values and
the documented public cells, and every kind of the registry must be driven somewhere."""

from __future__ import annotations

import secrets
from collections.abc import Callable

import numpy as np
import pytest
from differential import (
    BUDGET,
    CASE_IDS,
    CASES,
    COVERAGE,
    XA,
    XB,
    YA,
    YB,
    A,
    B,
    K,
    boost,
    empty_history,
    kept_history,
    normalised,
    public_ledger,
    replaced,
)
from hostile import HostileCoordinator, grid_stump, ledger_history, make_federation_certs, spawn_owner

from privfed.common.boosting.wire import at_round
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.secagg.ring import Inbound
from privfed.common.tasks import BY_NAME, Task
from privfed.proto import serde


# ----------------------------------------------------------------------------- the federation
@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """The hostile coordinator and the two owner nodes, shared by every case of the module."""
    tmp = tmp_path_factory.mktemp("differential")
    certs = make_federation_certs(tmp / "certs", owners=2)
    coordinator = HostileCoordinator(certs)
    nodes = [
        spawn_owner(tmp, coordinator.port, name, X, y, certs=certs, budget=BUDGET, shards=1)
        for name, X, y in (("owner-0", XA, YA), ("owner-1", XB, YB))
    ]
    try:
        coordinator.wait_registered([A, B])
        yield coordinator, dict(zip((A, B), nodes))
    finally:
        coordinator.stop()
        for node in nodes:
            node.stop()


def _ask_both(coordinator, nodes, name: str, spec_of: Callable[[str], object]):
    """One task of the same spec to each owner (one batch per node, at once): their results, how many
    results came per task, the ledger entries the tasks made and the envelopes relayed meanwhile."""
    run = f"{name}-{secrets.token_hex(4)}"
    before = {o: len(ledger_history(nodes[o].ledger, o, BUDGET)) for o in nodes}
    relays = len(coordinator.relays)
    since = len(coordinator.results)
    spec = spec_of(run)
    tasks = [serde.task_to_proto(Task(f"{run}-{o[6]}", o, run, spec)) for o in (A, B)]
    results = coordinator.run(tasks, timeout=120)
    counts = [sum(r.task_id == t.task_id for r in coordinator.results[since:]) for t in tasks]
    ledgers = [
        public_ledger(ledger_history(nodes[o].ledger, o, BUDGET)[before[o] :], t.task_id) for o, t in zip((A, B), tasks)
    ]
    return [results.get(t.task_id) for t in tasks], counts, ledgers, coordinator.relays[relays:]


@pytest.mark.parametrize(("kind", "case"), CASE_IDS, ids=[f"{k}/{c}" for k, c in CASE_IDS])
def test_two_owners_differ_only_in_their_released_values(federation, kind, case):
    coordinator, nodes = federation
    (ra, rb), counts, (la, lb), relays = _ask_both(coordinator, nodes, f"{kind}-{case}", CASES[kind][case])
    assert ra is not None and rb is not None, (ra, rb, [n.log()[-2000:] for n in nodes.values()])
    assert counts == [1, 1], counts
    sa, sb = normalised(ra), normalised(rb)
    assert sa == sb, (ra, rb)
    assert la == lb, (la, lb)
    assert relays == [], relays


def test_every_kind_of_the_registry_is_driven():
    """A kind added to ``privfed.common.tasks`` fails here until :data:`COVERAGE` says how it is driven."""
    assert set(COVERAGE) == set(BY_NAME), set(BY_NAME) ^ set(COVERAGE)


# ----------------------------------------------------------------------------- a secure sum's envelopes
def _envelopes(coordinator, node_id: str, session: str) -> list[tuple]:
    """What the coordinator sees of a node's relayed envelopes in one session: recipient, kind, seq, sealed length."""
    out = []
    for recipient, data in coordinator.relays_from(node_id, session):
        env = Inbound.from_bytes(data)
        out.append((recipient.replace(B, A), env.kind, env.seq, len(env.ciphertext), len(data)))
    return out


RINGS = {
    "stump": lambda run: (boost("stump", run, n_bins=4), empty_history(), grid_stump(0, 1, 4)),
    "stump-kept": lambda run: (boost("stump", run, n_bins=4), at_round(kept_history(), 1), grid_stump(1, 3, 4)),
    "ncc-joint": lambda run: (
        boost("ncc", run, labels="joint", n_bins=4),
        empty_history(),
        NearestCentroidModel(np.array([[0.25, 0.25], [0.75, 0.75]]), np.arange(K)),
    ),
}


@pytest.mark.parametrize("case", sorted(RINGS))
def test_a_ring_member_relays_the_same_envelopes_whatever_its_rows(federation, case):
    """A two-owner ring each way round: owner A in a position relays what owner B relays in it (number, kind,
    sequence, sealed length); the answers and ledger entries of the two positions are alike but for the total."""
    coordinator, nodes = federation
    seen = {}
    for ring in ([A, B], [B, A]):
        run = f"ring-{case}-{secrets.token_hex(4)}"
        config, history, learner = RINGS[case](run)
        before = {o: len(ledger_history(nodes[o].ledger, o, BUDGET)) for o in nodes}
        outcome = coordinator.run_ring(ring, learner, config, round_id=run, history=history, timeout=60)
        assert outcome.total is not None, (outcome.answers, [n.log()[-2000:] for n in nodes.values()])
        for position, o in enumerate(ring):
            result = outcome.answers[o]
            entries = ledger_history(nodes[o].ledger, o, BUDGET)[before[o] :]
            seen[(position, o)] = (
                _envelopes(coordinator, coordinator.node_of(o), outcome.session),
                normalised(result, outcome.session, run),
                [tuple(replaced(v, run) for v in e) for e in public_ledger(entries, result.task_id)],
            )
    for position in (0, 1):
        assert seen[(position, A)] == seen[(position, B)], position
        assert seen[(position, A)][0], "no envelope seen"
