"""The coordinator's secure-sum machine against real owner nodes, joined in memory (h11 ``ConnectionPair``).

:class:`Pair` puts the coordinator's side (``SecureSumCoordinator`` and its driver,
``server/securesum.py``) and owner nodes' real cores (``OwnerCore``: ledger, evaluation release,
ring and pairwise-mask machines) on one in-memory link: every task and every reply crosses the wire
encoding (proto serde) and must decode to exactly what was sent (re-encoded byte for byte), and every
sealed envelope crosses the coordinator's own :class:`~privfed.server.relay.Relay` as bytes. Faults
are the link's: a node that never answers, envelopes to an owner lost after it joined (it stalls the
ring), an owner over budget (it refuses), an owner silent in one step of a pairwise-mask sum.

Each test checks the attempts and drops the machine decided, the total against the owners' own cached
releases, and that no owner was debited twice for one release.
"""

from __future__ import annotations

import itertools
import math
from collections import deque

import numpy as np
import pytest

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.releases import ReleasePlan
from privfed.common.boosting.wire import at_round, config_to_dict, empty_history
from privfed.common.datasets import load_builtin
from privfed.common.errors import RoundFailed
from privfed.common.identity import node_of
from privfed.common.learners.stump import Stump, thresholds
from privfed.common.ledger import Ledger
from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.runs import SECAGG_ATTEMPTS
from privfed.common.secagg.transitions import Phase
from privfed.common.tasks import (
    BoostEvaluateTask,
    PeerKey,
    Result,
    RingMessageTask,
    SecAggKeysTask,
    SecAggUnmaskTask,
    Task,
)
from privfed.owner.core import OwnerCore
from privfed.owner.keys import OwnerKeys
from privfed.proto import serde
from privfed.server.relay import Relay
from privfed.server.securesum import RelayedTransport

from ..owner_nodes import owners_over_nodes

N_OWNERS, N_NODES = 12, 3


def _wire(task: Task) -> Task:
    """``task`` as the owner node decodes it; what is sent is what is received."""
    sent = serde.task_to_proto(task)
    got = serde.task_from_proto(type(sent).FromString(sent.SerializeToString()))
    assert serde.task_to_proto(got).SerializeToString(deterministic=True) == sent.SerializeToString(deterministic=True)
    return got


def _back(result: Result) -> Result:
    sent = serde.result_to_proto(result)
    got = serde.result_from_proto(type(sent).FromString(sent.SerializeToString()))
    assert serde.result_to_proto(got).SerializeToString(deterministic=True) == sent.SerializeToString(
        deterministic=True
    )
    return got


def phase_of(tasks: list[Task], stalls: str | None) -> Phase:
    """The step of a secure sum a batch of tasks asks for, read from the tasks themselves."""
    spec = tasks[0].spec
    if isinstance(spec, SecAggKeysTask):
        return Phase.KEYS if spec.request is None else Phase.SHARES
    if isinstance(spec, SecAggUnmaskTask):
        return Phase.UNMASKING
    assert isinstance(spec, BoostEvaluateTask)
    if spec.secagg is not None:
        return Phase.MASKING
    return Phase.JOINING if stalls is None else Phase.SUMMING  # the leader's batch waits on its session


class Pair(RelayedTransport):
    """The coordinator's secure sums and ``N_NODES`` owner nodes' cores on one in-memory link (module docstring).

    ``silent_nodes`` never answer; envelopes to ``lost_to`` owners are dropped after the relay
    accepted them; ``quiet_in`` maps a machine phase to owners that do not answer in it. Records the
    machine phase each batch serves, as the tasks that cross the link show it (:func:`phase_of`), and
    every relay session opened (``opened``)."""

    def __init__(self, owners, budget: float, *, secure_sum: str = "ring") -> None:
        super().__init__(secure_sum)
        self.owners = {o.owner_id: o for o in owners}
        keys = {oid: generate_private_key() for oid in self.owners}
        self.peers = {o: PeerKey(o, node_of(o), public_bytes(k), b"") for o, k in keys.items()}
        nodes = sorted({node_of(o) for o in self.owners})
        self.ledgers = {n: Ledger(":memory:", epsilon_budget=budget) for n in nodes}
        self.cores = {
            n: OwnerCore(
                [o for o in owners if node_of(o.owner_id) == n],
                self.ledgers[n],
                keys=OwnerKeys({o: k for o, k in keys.items() if node_of(o) == n}, None),
            )
            for n in nodes
        }
        self.relay, self.ids = Relay(), itertools.count()
        self.silent_nodes: set[str] = set()
        self.lost_to: set[str] = set()
        self.quiet_in: dict[Phase, set[str]] = {}
        self.phases: list[Phase] = []
        self.deadlines: list[float | None] = []  # each batch's timeout, as the machine asked
        self.opened: list[tuple[str, ...]] = []
        self.noticed: set[str] = set()

    # the moves of RelayedTransport
    def run_tasks(self, tasks, timeout=None, *, stalls=None):
        self.phases.append(phase_of(tasks, stalls))
        self.deadlines.append(timeout)
        quiet = self.quiet_in.get(self.phases[-1], set())
        by_node: dict[str, list[Task]] = {}
        for t in tasks:
            if node_of(t.owner_id) in self.silent_nodes or t.owner_id in quiet:
                self.noticed.add(t.owner_id)
                continue
            by_node.setdefault(node_of(t.owner_id), []).append(_wire(t))
        results, queue = [], deque()
        for node, batch in by_node.items():
            answer = self.cores[node].answer(batch)
            results += answer.results
            queue.extend((node, out) for out in answer.outbound)
        while queue:  # envelopes as bytes through the coordinator's relay, delivered at once
            node, out = queue.popleft()
            data = out.to_bytes()
            (env,) = self.relay.accept(
                node, [(out.recipient, data)], lambda o: node_of(o) if o in self.owners else None
            )
            if node_of(env.recipient) in self.silent_nodes or env.recipient in self.lost_to:
                continue
            hop = Task(f"relay-{next(self.ids)}", env.recipient, "ring", RingMessageTask(data))
            answer = self.cores[node_of(env.recipient)].answer([_wire(hop)])
            results += answer.results
            queue.extend((node_of(env.recipient), o) for o in answer.outbound)
        return [_back(r) for r in results]

    def silent_owners(self):
        return {o for o in self.noticed if node_of(o) in self.silent_nodes}

    def peer_key(self, owner_id):
        return self.peers[owner_id]

    def certificates(self):
        return {}

    def open_ring(self, session_id, members):
        self.relay.open(session_id, members)
        self.opened.append(tuple(members))

    def close_ring(self, session_id):
        self.relay.close(session_id)

    def hop_senders(self, session_id):
        return self.relay.hop_senders(session_id)

    def debits(self, owner_id: str) -> list[str]:
        return [h["release_id"] for h in self.ledgers[node_of(owner_id)].history(owner_id)]


@pytest.fixture(scope="module")
def data():
    return load_builtin("synthetic", n_samples=240, seed=5)


def _pair(ds, budget=4.0, secure_sum="ring") -> Pair:
    owners = owners_over_nodes(ds, n_owners=N_OWNERS, n_nodes=N_NODES)
    return Pair(owners, budget, secure_sum=secure_sum)


def _boost(ds, epsilon=4.0):
    params = BoostingParams(
        epsilon=epsilon, n_classes=2, bounds=ds.bounds, n_rounds=4, n_bins=4, weight_bound=40.0, max_owner_rows=40,
        eval_groups="all",
    )  # fmt: skip
    cut = float(thresholds(ds.bounds, params.n_bins)[0, 0])
    return (
        ReleasePlan(params),
        config_to_dict(params, "boost-test"),
        Stump(attribute=0, threshold_index=1, threshold=cut, leaves=(0, 1), error=0.0),
    )


def _sum(pair: Pair, ring, plan, config, learner, round_no=0):
    history = at_round(empty_history(), round_no)
    return pair.secure_sum(
        ring,
        lambda spec: BoostEvaluateTask(config, history, learner, spec),
        max_abs=plan.contribution_bound,
        round_id=f"ring{round_no + 1}",
        timeout=5.0,
    )


def _released(pair: Pair, owners, round_no=0) -> np.ndarray:
    """The sum of the owners' own cached evaluation releases of ``round_no``."""
    rid = f"boost-eval:boost-test:{round_no}"
    return np.sum([np.asarray(pair.owners[o].released[rid].payload) for o in owners], axis=0)


def test_ring_attempts_drop_a_refusing_a_silent_and_a_stalled_party_and_sum_the_rest(data):
    pair = _pair(data)
    plan, config, learner = _boost(data)
    ring = sorted(pair.owners)
    refusing, stalling = ring[1], ring[5]  # owner-0.o00001, owner-1.o00005
    pair.ledgers["owner-0"].debit(refusing, 4.0, purpose="elsewhere", release_id="x")  # no budget left
    pair.silent_nodes = {"owner-2"}
    pair.lost_to = {stalling}
    out = _sum(pair, ring, plan, config, learner)
    silent = [o for o in ring if o.startswith("owner-2.")]
    survivors = tuple(o for o in ring if o not in {refusing, stalling, *silent})
    record = out.record
    assert pair.phases == [Phase.JOINING, Phase.JOINING, Phase.SUMMING, Phase.JOINING, Phase.SUMMING]
    assert record.dropped == (refusing, *silent, stalling) and record.refused == {refusing: "budget_exceeded"}
    assert record.attempts == 3 and record.summed == survivors and record.protocol == "ring"
    assert pair.opened == [tuple(ring), tuple(o for o in ring if o != refusing and o not in silent), survivors]
    assert pair.relay.open_sessions() == []  # every attempt's session closed
    np.testing.assert_allclose(out.totals, _released(pair, survivors), atol=1e-6)
    for o in ring:  # a re-formed ring reuses each member's release: one debit at most
        assert pair.debits(o).count("boost-eval:boost-test:0") <= 1


def test_a_ring_that_timed_out_with_every_node_online_waits_twice_as_long_the_next_time(data, caplog):
    """Walkthrough 10, W10-1: a ring that needed 50 s on a slow link timed out at its 30.5 s deadline in every
    attempt, each dropping a healthy owner, and the job failed. A timeout that no silent node explains doubles the
    next attempt's deadline; one a silent node explains does not."""
    plan, config, learner = _boost(data)
    slow = _pair(data)
    ring = sorted(slow.owners)
    slow.lost_to = {ring[4]}  # online, but the ring stops at it: a stall, as a slow link makes one
    with caplog.at_level("INFO"):
        out = _sum(slow, ring, plan, config, learner)
    assert f"with every node online (a slow link?): it stopped at {ring[4]}, dropped; the next attempt waits" in (
        caplog.text
    )  # W10-4: the member the ring stopped at, not only the leader's node that waited for it
    assert slow.phases == [Phase.JOINING, Phase.SUMMING, Phase.JOINING, Phase.SUMMING]
    assert slow.deadlines == [5.0, 5.0, 10.0, 10.0] and out.record.dropped == (ring[4],)
    dead = _pair(data)
    dead.silent_nodes = {"owner-2"}  # a silent node: its owners dropped, the deadline kept
    _sum(dead, ring, plan, config, learner)
    assert set(dead.deadlines) == {5.0}


def test_a_ring_that_loses_everyone_but_one_gives_up_and_closes_its_sessions(data):
    pair = _pair(data)
    plan, config, learner = _boost(data)
    ring = [o for o in sorted(pair.owners) if o.startswith("owner-0.")] + [sorted(pair.owners)[-1]]
    pair.silent_nodes = {"owner-2"}
    pair.lost_to = set(ring[1:4])
    with pytest.raises(RoundFailed, match="fewer than 2 parties left"):
        _sum(pair, ring, plan, config, learner)
    assert pair.relay.open_sessions() == []


def test_pairwise_masks_drop_an_owner_silent_at_masking_without_a_new_attempt(data):
    pair = _pair(data, secure_sum="secagg")
    plan, config, learner = _boost(data)
    owners = sorted(pair.owners)
    pair.quiet_in = {Phase.MASKING: {owners[3]}}
    out = _sum(pair, owners, plan, config, learner)
    assert pair.phases == [Phase.KEYS, Phase.SHARES, Phase.MASKING, Phase.UNMASKING]
    survivors = tuple(o for o in owners if o != owners[3])
    assert out.record.attempts == 1 and out.record.summed == survivors and out.record.dropped == (owners[3],)
    fp_error = 1e-6 * len(owners)
    np.testing.assert_allclose(out.totals, _released(pair, survivors), atol=fp_error)


def test_pairwise_masks_reuse_a_keyed_run_then_attempt_again_without_an_owner_unmasked_before(data):
    """Sum 1 keys a run (SECAGG_ATTEMPTS rounds) and sums everyone; sum 2 reuses it (no key step).
    In sum 2 an owner whose self-mask was revealed in sum 1 stays silent: its mask key must stay secret,
    so the run cannot finish the round; the machine attempts again among the owners that sent a masked
    input, over the same run while it serves them, else keyed anew. Nobody is debited twice."""
    pair = _pair(data, budget=math.inf, secure_sum="secagg")
    plan, config, learner = _boost(data, epsilon=math.inf)
    owners = sorted(pair.owners)
    first = _sum(pair, owners, plan, config, learner, round_no=0)
    (run,) = pair.secure_sums.runs
    assert first.record.summed == tuple(owners) and run.rounds == SECAGG_ATTEMPTS
    pair.phases.clear()
    pair.quiet_in = {Phase.MASKING: {owners[0]}}  # silent in sum 2's first masking step only
    second = _sum(pair, owners, plan, config, learner, round_no=1)
    assert pair.phases[0] is Phase.MASKING  # the keyed run served: no key agreement
    assert second.record.attempts == 2 and second.record.summed == tuple(owners[1:])
    assert pair.phases[1] in (Phase.MASKING, Phase.KEYS) and pair.phases[-1] is Phase.UNMASKING
    rekeyed = pair.phases[1] is Phase.KEYS
    assert len(pair.secure_sums.runs) == (2 if rekeyed else 1)
    np.testing.assert_allclose(second.totals, _released(pair, owners[1:], round_no=1), atol=1e-6)
    for o in owners:
        ids = pair.debits(o)
        assert len(ids) == len(set(ids))  # each (run, round) release debited once, attempts included


def test_a_run_used_up_by_its_sums_is_keyed_again_for_more_rounds(data):
    """A first key agreement serves SECAGG_ATTEMPTS sums; the same members then agree keys for
    SECAGG_ROUNDS (they keep summing together: boosting's eval_groups="all")."""
    from privfed.common.secagg.runs import SECAGG_ROUNDS

    pair = _pair(data, budget=math.inf, secure_sum="secagg")
    plan, config, learner = _boost(data, epsilon=math.inf)
    owners = sorted(pair.owners)
    for r in range(SECAGG_ATTEMPTS + 1):
        pair.phases.clear()
        out = _sum(pair, owners, plan, config, learner, round_no=r)
        keyed = pair.phases[0] is Phase.KEYS
        assert keyed is (r in (0, SECAGG_ATTEMPTS)) and out.record.summed == tuple(owners)
    assert [s.rounds for s in pair.secure_sums.runs] == [SECAGG_ATTEMPTS, SECAGG_ROUNDS]


def test_pairwise_masks_send_a_node_each_neighbours_key_once_per_run(data):
    """Step 1 hands a node each box key its owners need once per run, with the first of its owners
    that has that neighbour (the node keeps a run's keys for all its owners, as it keeps the members
    and certificates sent with its first owner): no key reaches a node twice, and every owner still
    finds each neighbour's key, so the sum is over everyone and exact."""
    pair = _pair(data, budget=math.inf, secure_sum="secagg")
    plan, config, learner = _boost(data, epsilon=math.inf)
    owners = sorted(pair.owners)
    shares: list[Task] = []
    run_tasks = pair.run_tasks

    def recording(tasks, timeout=None, *, stalls=None):
        shares.extend(t for t in tasks if isinstance(t.spec, SecAggKeysTask) and t.spec.request is not None)
        return run_tasks(tasks, timeout, stalls=stalls)

    pair.run_tasks = recording  # type: ignore[method-assign]
    out = _sum(pair, owners, plan, config, learner)
    assert out.record.summed == tuple(owners) and out.record.attempts == 1
    np.testing.assert_allclose(out.totals, _released(pair, owners), atol=1e-6)
    assert {t.owner_id for t in shares} == set(owners)
    for node in {node_of(o) for o in owners}:
        keys = [k.owner_id for t in shares if node_of(t.owner_id) == node for k in t.spec.peers]
        assert keys and len(keys) == len(set(keys)), f"{node} was sent a key twice: {sorted(keys)}"
