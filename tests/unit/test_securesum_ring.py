"""The ring attempts of the coordinator's secure-sum machine (common/secagg/transitions.py), fed by
hand: forming, a drop at each step (member refusal, member silence, leader refusal, leader silence,
a stalled hop), re-forming under a fresh session id with the relay session closed and the new one
opened for exactly its members, bounded attempts, events out of phase; and, end to end, the machine
driving real ``RingParty`` machines through a relay that loses a party's messages."""

from __future__ import annotations

import itertools
from collections import deque

import numpy as np
import pytest

from privfed.common.errors import ConfigError, LocalProtocolError, RoundFailed
from privfed.common.secagg.boxes import generate_private_key, local_boxes
from privfed.common.secagg.coordinator import SecureSumCoordinator
from privfed.common.secagg.events import Answers, Ask, CloseRing, OpenRing
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.ring import Inbound, MessageKind, RingParty, State
from privfed.common.secagg.ring_topology import ring_peers
from privfed.common.secagg.transitions import MAX_ATTEMPTS, TRANSITIONS, Phase, SecureSum, attempt_timeout
from privfed.common.tasks import PeerKey, Refusal, RingJoined, RingTotal

RING = ("a", "b", "c", "d", "e")


def _peer(owner: str) -> PeerKey:
    return PeerKey(owner, f"node-{owner}", bytes(32), b"")


def _sum(ring=RING, **kw) -> SecureSum:
    """A ring sum whose tasks are the ring specs themselves, with session ids s0, s1, ..."""
    ids = itertools.count()
    options = dict(new_id=lambda: f"s{next(ids)}") | kw
    return SecureSum(SecureSumCoordinator("ring"), "ring", ring, lambda spec: spec, 10.0, _peer, {}, None, **options)


def _joins(machine: SecureSum, joined, refused=None, silent=()) -> list:
    session = machine.attempt.session_id
    payloads = {p: RingJoined(session) for p in joined} | {p: Refusal.of(c) for p, c in (refused or {}).items()}
    return machine.on_answers(Answers(payloads, silent=frozenset(silent)))


def _lead(machine: SecureSum, total=None, refused=None, silent=(), hops=None) -> list:
    payload = {}
    if total is not None:
        payload = {machine.attempt.leader: RingTotal(machine.attempt.session_id, np.asarray(total, dtype=float))}
    elif refused is not None:
        payload = {machine.attempt.leader: Refusal.of(refused)}
    return machine.on_answers(Answers(payload, frozenset(silent), None if hops is None else frozenset(hops)))


def test_all_join_then_the_leader_totals_in_an_open_session():
    s = _sum()
    (opened, ask) = s.start()
    assert opened == OpenRing("s0", RING) and isinstance(ask, Ask) and set(ask.specs) == set(RING[1:])
    assert ask.stalls is None and ask.specs["b"].session_id == "s0" and ask.specs["b"].ring == RING
    (lead,) = _joins(s, RING[1:])
    assert s.phase is Phase.SUMMING and list(lead.specs) == ["a"] and lead.stalls == "s0"
    assert _lead(s, [1.0, 2.0]) == [CloseRing("s0")] and s.phase is Phase.DONE
    out = s.result()
    np.testing.assert_array_equal(out.totals, [1.0, 2.0])
    assert out.summed == RING and out.attempts == 1 and out.dropped == () and out.protocol == "ring"


def test_the_ring_order_and_certificates_go_once_per_node():
    """Two owners of one node: the first task of the node carries the ring, the second does not."""
    peers = {o: PeerKey(o, "node-x" if o in "ab" else f"node-{o}", bytes(32), b"") for o in RING}
    s = SecureSum(SecureSumCoordinator("ring"), "ring", RING, lambda spec: spec, 10.0, peers.get, {"n": b"pem"}, None)
    _, ask = s.start()
    assert ask.specs["c"].ring == RING and ask.specs["c"].certificates == {"n": b"pem"}
    (lead,) = _joins(s, RING[1:])
    assert lead.specs["a"].ring == () and lead.specs["a"].certificates == {}  # b, on node-x, got them


@pytest.mark.parametrize(
    ("joined", "refused", "silent", "gone"),
    [
        (("b", "d", "e"), {"c": "budget_exceeded"}, (), ["c"]),  # a member refuses
        (("b", "c", "e"), {}, (), ["d"]),  # a member does not answer
        (("b", "c", "d", "e"), {}, ("a",), ["a"]),  # the leader's node went silent while members joined
        (("e",), {"b": "invalid_task"}, ("c",), ["b", "c", "d"]),  # several at once, kept in ring order
    ],
)
def test_a_drop_while_joining_re_forms_the_ring_under_a_fresh_session(joined, refused, silent, gone):
    s = _sum()
    s.start()
    close, opened, ask = _joins(s, joined, refused, silent)
    left = tuple(p for p in RING if p not in gone)  # order kept; the next one leads
    assert (close, opened) == (CloseRing("s0"), OpenRing("s1", left)) and set(ask.specs) == set(left[1:])
    assert s.dropped == gone and s.refused == refused and s.phase is Phase.JOINING
    assert s.attempt.number == 2 and s.attempt.ring == left


def test_a_refusing_leader_is_dropped_and_the_next_party_leads():
    s = _sum()
    s.start()
    _joins(s, RING[1:])
    _lead(s, refused="already_released")
    assert s.refused == {"a": "already_released"} and s.attempt.ring == RING[1:] and s.phase is Phase.JOINING


def test_a_timed_out_sum_drops_the_silent_party_first_then_the_stalled_one():
    s = _sum()
    s.start()
    _joins(s, RING[1:])
    _lead(s, silent={"d", "zz"}, hops=["a", "b"])
    assert s.dropped == ["d"]  # known silent beats the relay's guess
    _joins(s, s.attempt.members)
    _lead(s, hops=["a", "b"])
    assert s.dropped == ["d", "c"]  # c received b's hop and sent none


def test_a_timeout_nobody_can_be_blamed_for_fails_the_round():
    s = _sum()
    s.start()
    _joins(s, RING[1:])
    with pytest.raises(RoundFailed, match="did not close"):
        _lead(s)  # no silent node, and the relay's hop senders unknown
    assert s.phase is Phase.FAILED and "did not close" in s.failure_reason
    with pytest.raises(LocalProtocolError):  # FAILED is terminal
        _joins(s, RING[1:])


def test_attempts_are_bounded_and_two_parties_is_the_least():
    s = _sum(tuple("abcdefgh"), max_attempts=3)
    s.start()
    _joins(s, s.attempt.members[1:])
    _joins(s, s.attempt.members[1:])
    with pytest.raises(RoundFailed, match="failed 3 times"):
        _joins(s, s.attempt.members[1:])
    assert s.phase is Phase.FAILED and len(s.attempts) == 3
    s = _sum(("a", "b", "c"))
    s.start()
    with pytest.raises(RoundFailed, match="fewer than 2"):
        _joins(s, (), {"b": "policy", "c": "policy"})
    assert MAX_ATTEMPTS == 5


def test_events_out_of_phase_and_bad_rings_are_refused():
    s = _sum()
    with pytest.raises(LocalProtocolError):
        s.result()
    s.start()
    with pytest.raises(LocalProtocolError):
        s.start()
    _joins(s, RING[1:])
    _lead(s, [0.0])
    with pytest.raises(LocalProtocolError):
        _joins(s, RING[1:])  # DONE is terminal
    for bad in (("a",), ("a", "a", "b")):
        with pytest.raises(ConfigError):
            _sum(bad)
    with pytest.raises(ConfigError):
        _sum(max_attempts=0)
    assert attempt_timeout(100) == pytest.approx(31.0) and attempt_timeout(100, 5.0) == 5.0


def test_the_transition_table_is_closed_and_every_live_phase_can_fail():
    """Every phase a table leads to is a terminal one or has its own row; every waiting phase can give up."""
    targets = {p for row in TRANSITIONS.values() for p in row.values()}
    assert targets - set(TRANSITIONS) <= {Phase.DONE, Phase.FAILED}
    assert all(
        any(p is Phase.FAILED for p in row.values()) for ph, row in TRANSITIONS.items() if ph is not Phase.SHARES
    )


def test_the_machine_drives_real_ring_parties_past_a_lost_party():
    """A driver that only moves bytes: the relay loses everything sent to ``c``; the attempt
    times out, the machine blames ``c`` from the hop senders, and the re-formed ring sums the rest."""
    rng = np.random.Generator(np.random.PCG64(1))
    values = {p: rng.uniform(-5, 5, 2) for p in RING}
    keys = {p: generate_private_key() for p in RING}
    s = SecureSum(SecureSumCoordinator("ring"), "ring", RING, lambda spec: spec, 10.0, _peer, {}, None)
    actions = s.start()
    while s.phase is not Phase.DONE:
        (ask,) = [a for a in actions if isinstance(a, Ask)]
        spec = next(iter(ask.specs.values()))
        ring, fp = s.attempt.ring, FixedPoint(spec.frac_bits, spec.n_parties, spec.max_abs)
        boxes = local_boxes({p: keys[p] for p in ring}, lambda p, ring=ring: ring_peers(ring, p))
        parties = {p: RingParty(p, ring, s.attempt.session_id, fp, boxes[p]) for p in ring}
        queue = deque()
        for p in ring[1:]:
            queue.extend(parties[p].start(values[p]))
        (lead,) = _joins(s, ring[1:])
        queue.extend(parties[ring[0]].start(values[ring[0]]))
        hops = []
        while queue:
            msg = Inbound.from_bytes(queue.popleft().to_bytes())
            if msg.kind is MessageKind.HOP:
                hops.append(msg.sender)
            if msg.recipient != "c":
                queue.extend(parties[msg.recipient].on_message(msg))
        for party in parties.values():
            party.on_timeout()
        leader = parties[ring[0]]
        actions = _lead(s, leader.result() if leader.state is State.DONE else None, hops=hops)
    out = s.result()
    assert out.dropped == ("c",) and out.attempts == 2
    np.testing.assert_allclose(out.totals, sum(values[p] for p in RING if p != "c"), atol=fp.error_bound)
