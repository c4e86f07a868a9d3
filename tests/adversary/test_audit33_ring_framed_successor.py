"""Audit 33, A33-2: a ring member that seals garbage to its successor gets every honest owner after it dropped, and
is never dropped itself; an owner that seals garbage key shares to its neighbours in a pairwise-mask sum makes the
sum fail, every refusal an honest neighbour's (the second half of the module).

A ring that times out with every node online drops :func:`~privfed.common.secagg.ring_topology.stalled_party`: the
first party the relay saw no ``HOP`` from. A hostile member ``H`` sends its successor ``S`` a hop sealed wrongly (one
bit of the ciphertext flipped): the relay saw ``H``'s hop, ``S``'s machine fails to open it and sends nothing
(``owner/ring.py`` logs it and answers nothing), so ``S`` is blamed and dropped, and in the re-formed ring ``H``
frames its next successor. Since walkthrough 10 (W10-1) each of these attempts waits twice as long as the one
before. Real owner cores, relay and coordinator machine (``InProcessTransport``), six owners on two nodes: the sum
fails after five attempts having dropped the five honest owners, and ``H`` is never named.

Not an owner's privacy (every input is a noised, debited release, and a smaller ring's total is a sum over a member
set the coordinator could form itself), but the job's integrity and availability against one hostile owner, which
"What survives what" answers for other replies: the round's E and W lose the framed owners, the report blames
honest owners for a stall, and the sum, then the job, fails. The fix (A33-2): the recipient of a hop that does not
open complains, naming its sender (:func:`privfed.common.secagg.ring.complaint`), and the coordinator drops both ends
of that hop; a false complainer loses its own place with the one owner it names. In the pairwise-mask sum the
recipient of shares that do not open refuses its masked input with the code ``unopened`` naming the sender, and the
coordinator gives the attempt up before unmasking and leaves the sender out (with its accusers when fewer than t of
its neighbours name it)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from differential import BOUNDS, BUDGET, K, boost, kept_history

from privfed.common.boosting.wire import at_round
from privfed.common.errors import RoundFailed
from privfed.common.ledger import Ledger
from privfed.common.secagg import ring as ring_module
from privfed.common.tasks import BoostEvaluateTask
from privfed.deploy.inprocess import InProcessTransport
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner

#: No clock, no child process, no socket.
pytestmark = pytest.mark.in_process

HOSTILE = "owner-1.o00000"
RING = ("owner-0.o00000", HOSTILE, "owner-0.o00001", "owner-1.o00001", "owner-0.o00002", "owner-1.o00002")


def _transport(members=RING, seed=1, secure_sum="ring") -> InProcessTransport:
    """``members`` on owner nodes owner-0 and owner-1, four rows each, each node its own ledger."""
    rng = np.random.default_rng(seed)
    owners = []
    for n, o in enumerate(sorted(members)):
        X, y = rng.uniform(0.0, 1.0, (4, 2)), rng.integers(0, K, 4)
        owners.append(
            LocalOwner(o, X, y, np.random.Generator(np.random.PCG64(n)), K, BOUNDS, row_keys=tuple(row_digests(X, y)))
        )
    ledgers = {n: Ledger(":memory:", epsilon_budget=BUDGET, delta_budget=1e-3) for n in ("owner-0", "owner-1")}
    return InProcessTransport(owners, ledgers, secure_sum=secure_sum)


def _hostile_hops(monkeypatch) -> None:
    """``HOSTILE``'s ring machine flips the last bit of every hop it seals (its node otherwise honest and online)."""
    send = ring_module.RingParty._send

    def garbled(self, kind, recipient, seq, payload):
        out = send(self, kind, recipient, seq, payload)
        if self.party_id != HOSTILE or kind is not ring_module.MessageKind.HOP:
            return out
        sealed = out.ciphertext[:-1] + bytes([out.ciphertext[-1] ^ 1])
        return ring_module.Outbound(out.session_id, out.sender, out.recipient, out.kind, out.seq, sealed)

    monkeypatch.setattr(ring_module.RingParty, "_send", garbled)


def _sum(transport: InProcessTransport, members=RING, protocol="ring"):
    """One boosting evaluation's secure sum over ``members`` (a pairwise-mask one keyed first, as a job keys it)."""
    config = boost("stump", f"run-a33-2-{protocol}", n_bins=4)
    history = at_round(kept_history(), 1)
    bound = config.releases.contribution_bound
    if protocol == "secagg":
        transport.prepare_secure_sums([members, members], max_abs=bound, protocol="secagg")
    return transport.secure_sum(
        members,
        lambda spec: BoostEvaluateTask(config, history, history.kept[0].learner, spec),
        max_abs=bound,
        round_id="ring1",
        protocol=protocol,
        timeout=5.0,
    )


def test_an_honest_ring_sums_every_member():
    """Control: the same ring with no garbled hop sums all six in one attempt."""
    record = _sum(_transport()).record
    assert sorted(record.summed) == sorted(RING) and record.attempts == 1 and not record.dropped


def test_a_member_sealing_garbage_to_its_successor_is_the_one_dropped(monkeypatch, caplog):
    """``HOSTILE``'s successor cannot open its hop and complains, naming it (A33-2's fix): the coordinator drops both
    ends of that hop, ``HOSTILE`` and one honest owner, and the re-formed ring of the other four sums."""
    caplog.set_level(logging.WARNING)
    _hostile_hops(monkeypatch)
    try:
        record = _sum(_transport()).record
        dropped = list(record.dropped)
    except RoundFailed as exc:
        dropped = list(getattr(exc, "dropped", ()))
        # before the fix: 'fewer than 2 parties left ... (5 dropped in all)', every one of them honest
        raise AssertionError(f"the sum failed: {exc} (dropped {dropped})") from exc
    honest_dropped = [o for o in dropped if o != HOSTILE]
    assert HOSTILE in dropped and len(honest_dropped) <= 1, dropped
    assert honest_dropped == [RING[2]] and record.attempts == 2, record  # the successor, in one attempt
    assert sorted(record.summed) == sorted(set(RING) - {HOSTILE, RING[2]}), record
    assert not any("slow link" in r.getMessage() for r in caplog.records)  # no stall, no stretched deadline


#: A member that complains about its honest predecessor's hop (which opened) instead of passing the sum on.
COMPLAINER = RING[2]


def _false_complaints(monkeypatch) -> None:
    """``COMPLAINER``'s machine answers its predecessor's hop with a complaint naming it, whatever the hop."""
    on_message = ring_module.RingParty.on_message

    def complaining(self, msg):
        if self.party_id != COMPLAINER or msg.kind is not ring_module.MessageKind.HOP:
            return on_message(self, msg)
        return [ring_module.complaint(msg)]

    monkeypatch.setattr(ring_module.RingParty, "on_message", complaining)


def test_a_false_complainer_loses_its_own_place(monkeypatch):
    """A complaint costs the complainer its place: ``COMPLAINER`` names its honest predecessor falsely, both are
    dropped (the coordinator cannot tell which lied), and the other four sum. So a hostile complainer takes at most
    one honest owner with it per complaint, and itself first."""
    _false_complaints(monkeypatch)
    record = _sum(_transport()).record
    assert sorted(record.dropped) == sorted([RING[1], COMPLAINER]) and record.attempts == 2, record
    assert sorted(record.summed) == sorted(set(RING) - {RING[1], COMPLAINER}), record


def test_a_complaint_about_a_member_that_sent_nothing_to_the_complainer_is_not_heard(monkeypatch):
    """The relay records a complaint only about a sender whose envelope to the complainer it relayed in the session:
    a member cannot name an owner that never sealed anything to it (here ``COMPLAINER`` names the leader at once,
    and then passes nothing on): the attempt stalls at ``COMPLAINER`` and only ``COMPLAINER`` is dropped."""
    on_message = ring_module.RingParty.on_message

    def complaining(self, msg):
        if self.party_id != COMPLAINER or msg.kind is not ring_module.MessageKind.HOP:
            return on_message(self, msg)
        forged = ring_module.Inbound(msg.session_id, RING[0], msg.recipient, msg.kind, msg.seq, msg.ciphertext)
        return [ring_module.complaint(forged)]

    monkeypatch.setattr(ring_module.RingParty, "on_message", complaining)
    record = _sum(_transport()).record
    assert list(record.dropped) == [COMPLAINER] and record.attempts == 2, record


# ----------------------------------------------------------------------------- the pairwise masks
#: Sixteen owners on two nodes: each owner has fewer neighbours than members (the graph is not complete).
MEMBERS = tuple(sorted(f"owner-{j}.o{i:05d}" for j in range(2) for i in range(8)))
SEALER = "owner-0.o00001"


def _secagg_transport() -> InProcessTransport:
    return _transport(MEMBERS, seed=2, secure_sum="secagg")


def _flipped(share):
    """``share`` with the last bit of its ciphertext flipped."""
    from privfed.common.secagg.messages import SealedShare

    return SealedShare(share.sender, share.recipient, share.ciphertext[:-1] + bytes([share.ciphertext[-1] ^ 1]))


def _hostile_shares(monkeypatch) -> None:
    """``SEALER``'s machine flips the last bit of every key share it seals to a neighbour (step 1)."""
    from privfed.common.secagg import pairwise
    from privfed.common.secagg.messages import KeyShares

    share_keys = pairwise.SecAggOwner._share_keys

    def garbled(self, msg):
        out = share_keys(self, msg)
        if self.owner_id != SEALER:
            return out
        return KeyShares(out.owner_id, tuple(s if s.recipient == SEALER else _flipped(s) for s in out.shares))

    monkeypatch.setattr(pairwise.SecAggOwner, "_share_keys", garbled)


def _secagg_sum(transport: InProcessTransport):
    return _sum(transport, MEMBERS, "secagg")


def test_an_honest_pairwise_mask_sum_sums_every_member():
    """Control: the same sixteen owners, no garbled share: all summed in one attempt."""
    record = _secagg_sum(_secagg_transport()).record
    assert sorted(record.summed) == list(MEMBERS) and record.attempts == 1 and not record.dropped


def test_an_owner_sealing_garbage_shares_is_the_one_left_out(monkeypatch, caplog):
    """Each neighbour of ``SEALER`` fails to open its share when asked to mask. Before the fix it refused
    (``internal``, after its debit, naming nobody); the coordinator dropped them, some dropped owner then lacked t
    surviving neighbours, the round was run again over fewer owners, keyed again, ``SEALER`` garbled again, and the sum
    failed with "no masked input survived", every refusal an honest owner's. Now each refuses ``unopened`` naming
    ``SEALER``; named by all its neighbours (at least t), ``SEALER`` alone is left out and the rest, keyed anew, sum."""
    caplog.set_level(logging.WARNING)
    honest = _secagg_transport()
    _secagg_sum(honest)
    _hostile_shares(monkeypatch)
    transport = _secagg_transport()
    try:
        record = _secagg_sum(transport).record
    except RoundFailed as exc:
        raise AssertionError(f"the sum failed: {exc}") from exc
    assert SEALER not in record.summed and len(record.summed) == len(MEMBERS) - 1, record
    assert list(record.dropped) == [SEALER] and record.attempts == 2, record
    assert set(record.refused.values()) == {"unopened"}, record.refused  # the neighbours, who named SEALER
    for o in MEMBERS:  # the second attempt reused each owner's cached release: nobody debited twice
        node = o.split(".")[0]
        assert len(transport.ledgers[node].history(o)) == len(honest.ledgers[node].history(o)), o


def false_pairwise_complainer(monkeypatch) -> list[str]:
    """Make the first neighbour of SEALER asked to mask (the graph is drawn per key agreement) refuse ``unopened``
    naming SEALER, falsely; returns the list that then holds that complainer."""
    from privfed.common.errors import Unopened
    from privfed.common.secagg import pairwise

    masked_input = pairwise.SecAggOwner._masked_input
    complainers: list[str] = []

    def complaining(self, msg, values):
        if SEALER in self.neighbours and msg.key_shares and self.owner_id in (complainers or [self.owner_id]):
            complainers[:] = [self.owner_id]
            raise Unopened(f"{SEALER}'s shares (falsely)", SEALER)
        return masked_input(self, msg, values)

    monkeypatch.setattr(pairwise.SecAggOwner, "_masked_input", complaining)
    return complainers


def test_a_false_pairwise_complainer_loses_its_own_place(monkeypatch):
    """``SEALER``, here honest in what it seals, is named by one neighbour only (``COMPLAINER``, which refuses its
    masked input with ``unopened`` though the shares opened): fewer than t of ``SEALER``'s neighbours name it, so both
    are left out, and the other fourteen sum. A false complainer takes at most the one owner it names with it."""
    complainers = false_pairwise_complainer(monkeypatch)
    transport = _secagg_transport()
    record = _secagg_sum(transport).record
    assert len(complainers) == 1 and complainers[0] != SEALER, complainers
    assert sorted(record.dropped) == sorted([complainers[0], SEALER]) and record.attempts == 2, record
    assert len(record.summed) == len(MEMBERS) - 2, record


def test_a_complaint_travels_on_the_wire_with_the_owner_it_names():
    """The refusal ``unopened`` carries the accused id through the wire; another code carries none."""
    from privfed.common.tasks import Refusal
    from privfed.proto.serde import refusal_from_proto, refusal_to_proto

    sent = Refusal.of("unopened", accused=SEALER)
    assert refusal_from_proto(refusal_to_proto(sent), "o") == sent
    other = refusal_to_proto(Refusal.of("internal"))
    other.accused = SEALER
    assert refusal_from_proto(other, "o").accused == ""
