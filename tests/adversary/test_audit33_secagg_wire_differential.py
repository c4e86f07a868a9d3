"""Audit 33 over the real wire: a pairwise-mask secure sum (``--secure-sum secagg``) keyed and run by the real
coordinator machines (``RelayedTransport``) through a recording coordinator (``hostile.HostileCoordinator``, mTLS,
real certificates) over four honest ``privfed owner`` processes. Owners A and B (``differential.py``: 3 rows on the
corners, one label, every row misclassified by the kept learner; 4 rows inside the box, both labels) sit on nodes of
their own; two more owners hold other rows. In the session's complete graph (4 members) A and B play the same part,
so each step's answer (the signed mask key, the sealed key shares, the masked release, the unmasking shares), how
many answers came per task, whether it refused, and the ledger entries it made must be alike for both but for the
released values (``differential.RELEASED``) and the mask key's ECDSA signature, whose DER length (70 to 72 bytes)
follows its random nonce. The in-process twin, with the work trace, is
``test_audit33_keyed_session_work.py``."""

from __future__ import annotations

import dataclasses
import secrets
from pathlib import Path

import numpy as np
import pytest
from differential import BUDGET, XA, XB, YA, YB, A, B, K, boost, kept_history, normalised, public_ledger, replaced
from hostile import HostileCoordinator, ledger_history, make_federation_certs, spawn_owner

from privfed.common.boosting.wire import at_round
from privfed.common.tasks import BoostEvaluateTask, PeerKey
from privfed.proto import serde
from privfed.proto.serde_steps import peer_key_from_proto
from privfed.server.securesum import RelayedTransport
from privfed.server.strategies.result import SumRecord

_RNG = np.random.default_rng(35)
OTHERS = {f"owner-{i}": (_RNG.uniform(0.0, 1.0, (4, 2)), _RNG.integers(0, K, 4)) for i in (2, 3)}


class WireTransport(RelayedTransport):
    """The coordinator's secure-sum driving over the recording coordinator: every batch of tasks is sent as the
    real coordinator's wire form, its answers decoded as the real coordinator decodes them."""

    def __init__(self, coordinator: HostileCoordinator) -> None:
        super().__init__("secagg")
        self.coordinator = coordinator
        self.batches: list[list[tuple[str, object]]] = []  # per batch: (task's spec kind, its results)

    def run_tasks(self, tasks, timeout=None, *, stalls=None):
        protos = [serde.task_to_proto(t) for t in tasks]
        since = len(self.coordinator.results)
        got = self.coordinator.run(protos, timeout=120)
        self.batches.append(
            [
                (type(t.spec).__name__, [r for r in self.coordinator.results[since:] if r.task_id == t.task_id])
                for t in tasks
            ]
        )
        return [serde.result_from_proto(got[t.task_id]) for t in tasks if t.task_id in got]

    def silent_owners(self) -> set[str]:
        return set()

    def peer_key(self, owner_id: str) -> PeerKey:
        return peer_key_from_proto(self.coordinator.peer_key(owner_id))

    def certificates(self) -> dict[str, bytes]:
        return dict(self.coordinator._certificates)

    def open_ring(self, session_id, members) -> None:  # no envelope is relayed in a pairwise-mask sum
        pass

    def close_ring(self, session_id) -> None:
        pass

    def hop_senders(self, session_id) -> set[str]:
        return set()


#: A P-256 ECDSA signature in DER is 8 to 72 bytes, 70 to 72 almost always: its length follows the bits of its
#: random (r, s), not what it signs (a mask key drawn for the session).
SIGNATURE = "key_advert.signature"


def _public(skeleton: list) -> list:
    """A result's skeleton with the mask key's signature length read as "a DER signature" (:data:`SIGNATURE`)."""
    out = []
    for item in skeleton:
        if item[0] == SIGNATURE:
            assert item[1] == "bytes" and 8 <= item[2] <= 72, item
            item = (SIGNATURE, "bytes", "DER ECDSA")
        out.append(item)
    return out


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("secagg-wire")
    certs = make_federation_certs(tmp / "certs", owners=4)
    coordinator = HostileCoordinator(certs)
    rows = {"owner-0": (XA, YA), "owner-1": (XB, YB), **OTHERS}
    nodes = {
        name: spawn_owner(tmp, coordinator.port, name, X, y, certs=certs, budget=BUDGET, shards=1)
        for name, (X, y) in rows.items()
    }
    try:
        coordinator.wait_registered([f"{n}.o00000" for n in nodes])
        yield coordinator, nodes
    finally:
        coordinator.stop()
        for node in nodes.values():
            node.stop()


@dataclasses.dataclass
class PairwiseSum:
    """One pairwise-mask evaluation sum over the federation's four owners, and what A's and B's ledgers held before."""

    members: tuple[str, ...]
    ledgers: dict[str, Path]
    before: dict[str, int]
    run: str
    outcome: SumRecord


def pairwise_sum(federation, transport: WireTransport) -> PairwiseSum:
    """Run a boosting evaluation's pairwise-mask sum through ``transport`` over the real owner processes."""
    _, nodes = federation
    members = tuple(sorted(f"{n}.o00000" for n in nodes))
    ledgers = {o: nodes[o.split(".")[0]].ledger for o in (A, B)}
    before = {o: len(ledger_history(ledgers[o], o, BUDGET)) for o in (A, B)}
    run = f"wire-{secrets.token_hex(4)}"
    config = boost("stump", run, n_bins=4)
    history = at_round(kept_history(), 1)
    bound = config.releases.contribution_bound
    transport.prepare_secure_sums([members, members], max_abs=bound, protocol="secagg")
    outcome = transport.secure_sum(
        members,
        lambda spec: BoostEvaluateTask(config, history, history.kept[0].learner, spec),
        max_abs=bound,
        round_id="ring1",
        protocol="secagg",
    ).record
    return PairwiseSum(members, ledgers, before, run, outcome)


def test_two_owners_answer_every_step_of_a_pairwise_mask_sum_alike(federation):
    coordinator, nodes = federation
    transport = WireTransport(coordinator)
    done = pairwise_sum(federation, transport)
    members, ledgers, before, run, outcome = done.members, done.ledgers, done.before, done.run, done.outcome
    assert outcome.protocol == "secagg" and outcome.summed == members and not outcome.refused, outcome
    steps = set()
    for batch in transport.batches:
        by_owner = {}
        for kind, results in batch:
            for r in results:
                by_owner.setdefault(r.owner_id, []).append((kind, len(results), _public(normalised(r, run, *members))))
        if A in by_owner or B in by_owner:
            steps |= {(k, r.WhichOneof("kind")) for k, results in batch for r in results}
            assert by_owner.get(A) == [
                (k, n, [tuple(replaced(v, B, A) for v in item) for item in sk]) for k, n, sk in by_owner.get(B, [])
            ], (batch, by_owner.get(A), by_owner.get(B))
    assert {
        ("SecAggKeysTask", "key_advert"),
        ("SecAggKeysTask", "key_shares"),
        ("BoostEvaluateTask", "masked_input"),
        ("SecAggUnmaskTask", "unmask_reply"),
    } <= steps, steps
    entries = {o: public_ledger(ledger_history(ledgers[o], o, BUDGET)[before[o] :], "-") for o in (A, B)}
    assert entries[A] and [tuple(replaced(v, B, A) for v in e) for e in entries[B]] == entries[A], entries
    for node in nodes.values():
        assert node.alive(), node.log()[-2000:]
