"""Audit 36, item 1 over the real wire (no finding; a control for A33-2b's refusal ``unopened``): a hostile
coordinator that relays every key share garbles the shares one neighbour sealed to owners A and B (``differential.py``:
3 rows on the corners, one label; 4 rows inside, both labels; each on a node of its own, four ``privfed owner``
processes over mTLS, real certificates). Both refuse their masked input with ``unopened`` naming that neighbour, after
their debit; the coordinator's machine leaves the neighbour out (named by 2 of its 3 neighbours, at least t), keys the
other three anew, and their releases, kept by each owner, are sent again, masked by the new keys.

Compared for A and B: every answer of every step (skeleton, as ``test_audit33_secagg_wire_differential.py``: the
refusal's code and text, the accused id and the other steps' sizes), how many answers per task, and the public parts
of the ledger entries each made (one debit each across both attempts). Whether an owner refuses, what it names and
when it is debited are functions of the forwarded shares, not of its rows."""

from __future__ import annotations

import dataclasses

from differential import BUDGET, A, B, normalised, public_ledger, replaced
from hostile import ledger_history
from test_audit33_secagg_wire_differential import (  # noqa: F401 - the fixture
    WireTransport,
    _public,
    federation,
    pairwise_sum,
)

from privfed.common.secagg.messages import SealedShare
from privfed.common.tasks import BoostEvaluateTask

#: The neighbour whose shares to A and B the coordinator garbles (its own node, honest).
THIRD = "owner-2.o00000"


class GarblingTransport(WireTransport):
    """The first masking request to A and to B forwards THIRD's share with its ciphertext's last bit flipped."""

    def __init__(self, coordinator) -> None:
        super().__init__(coordinator)
        self.garbled: set[str] = set()

    def run_tasks(self, tasks, timeout=None, *, stalls=None):
        out = []
        for t in tasks:
            spec = t.spec
            if (
                t.owner_id in {A, B} - self.garbled
                and isinstance(spec, BoostEvaluateTask)
                and spec.secagg
                and spec.secagg.key_shares
            ):
                shares = tuple(
                    SealedShare(s.sender, s.recipient, s.ciphertext[:-1] + bytes([s.ciphertext[-1] ^ 1]))
                    if s.sender == THIRD
                    else s
                    for s in spec.secagg.key_shares
                )
                assert shares != spec.secagg.key_shares, "THIRD sealed no share to this owner"
                spec = dataclasses.replace(spec, secagg=dataclasses.replace(spec.secagg, key_shares=shares))
                t = dataclasses.replace(t, spec=spec)
                self.garbled.add(t.owner_id)
            out.append(t)
        return super().run_tasks(out, timeout, stalls=stalls)


def test_two_owners_refuse_garbled_shares_alike_and_are_debited_once(federation):  # noqa: F811 - the fixture
    coordinator, nodes = federation
    transport = GarblingTransport(coordinator)
    done = pairwise_sum(federation, transport)
    members, ledgers, before, run, outcome = done.members, done.ledgers, done.before, done.run, done.outcome
    assert transport.garbled == {A, B}
    assert outcome.refused == {A: "unopened", B: "unopened"}, outcome
    assert set(outcome.summed) == set(members) - {THIRD} and list(outcome.dropped) == [THIRD], outcome
    refusals = 0
    for batch in transport.batches:
        by_owner = {}
        for kind, results in batch:
            for r in results:
                by_owner.setdefault(r.owner_id, []).append((kind, len(results), _public(normalised(r, run, *members))))
                refusals += r.WhichOneof("kind") == "refusal"
        if A in by_owner or B in by_owner:
            assert by_owner.get(A) == [
                (k, n, [tuple(replaced(v, B, A) for v in item) for item in sk]) for k, n, sk in by_owner.get(B, [])
            ], (batch, by_owner.get(A), by_owner.get(B))
    assert refusals == 2, refusals
    entries = {o: public_ledger(ledger_history(ledgers[o], o, BUDGET)[before[o] :], "-") for o in (A, B)}
    assert len(entries[A]) == 1, entries  # the evaluation, debited once across both attempts
    assert [tuple(replaced(v, B, A) for v in e) for e in entries[B]] == entries[A], entries
    for node in nodes.values():
        assert node.alive(), node.log()[-2000:]
