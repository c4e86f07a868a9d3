"""The coordinator's ring-session machine (common/secagg/session.py): forming, a drop at each
step (member refusal, member silence, leader refusal, leader silence, a stalled hop), re-forming
under a fresh session id, bounded attempts; and, end to end, the machine driving real
``RingParty`` machines through a relay that loses a party's messages."""

from __future__ import annotations

import itertools
from collections import deque

import numpy as np
import pytest

from privfed.common.errors import ConfigError, LocalProtocolError, RoundFailed
from privfed.common.secagg.boxes import generate_private_key, local_boxes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.ring import Inbound, MessageKind, RingParty, State, ring_peers
from privfed.common.secagg.session import MAX_ATTEMPTS, Phase, RingSession, attempt_timeout

RING = ("a", "b", "c", "d", "e")


def _ids():
    counter = itertools.count()
    return lambda: f"s{next(counter)}"


def test_all_join_then_the_leader_totals():
    s = RingSession(RING, new_id=_ids())
    assert s.attempt.members == RING[1:] and s.attempt.leader == "a" and s.attempt.session_id == "s0"
    assert s.on_members(RING[1:], {}) is Phase.SUMMING
    assert s.on_leader(np.array([1.0, 2.0])) is Phase.DONE
    np.testing.assert_array_equal(s.total, [1.0, 2.0])
    assert s.dropped == [] and len(s.attempts) == 1


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
    s = RingSession(RING, new_id=_ids())
    assert s.on_members(joined, refused, silent=silent) is Phase.JOINING
    assert s.dropped == gone and s.refused == refused
    assert s.attempt.number == 2 and s.attempt.session_id == "s1"
    assert s.attempt.ring == tuple(p for p in RING if p not in gone)  # order kept; the next one leads


def test_a_refusing_leader_is_dropped_and_the_next_party_leads():
    s = RingSession(RING, new_id=_ids())
    s.on_members(RING[1:], {})
    assert s.on_leader(None, refused="already_released") is Phase.JOINING
    assert s.refused == {"a": "already_released"} and s.attempt.ring == RING[1:]


def test_a_timed_out_sum_drops_the_silent_party_first_then_the_stalled_one():
    s = RingSession(RING, new_id=_ids())
    s.on_members(RING[1:], {})
    assert s.on_leader(None, silent={"d", "zz"}, hop_senders=["a", "b"]) is Phase.JOINING
    assert s.dropped == ["d"]  # known silent beats the relay's guess
    s.on_members(s.attempt.members, {})
    s.on_leader(None, silent=(), hop_senders=["a", "b"])
    assert s.dropped == ["d", "c"]  # c received b's hop and sent none


def test_a_timeout_nobody_can_be_blamed_for_fails_the_round():
    s = RingSession(RING)
    s.on_members(RING[1:], {})
    with pytest.raises(RoundFailed, match="did not close"):
        s.on_leader(None)
    assert s.phase is Phase.FAILED


def test_attempts_are_bounded_and_two_parties_is_the_least():
    s = RingSession(tuple("abcdefgh"), max_attempts=3)
    s.on_members(s.attempt.members[1:], {})
    s.on_members(s.attempt.members[1:], {})
    with pytest.raises(RoundFailed, match="failed 3 times"):
        s.on_members(s.attempt.members[1:], {})
    assert s.phase is Phase.FAILED and len(s.attempts) == 3
    s = RingSession(("a", "b", "c"))
    with pytest.raises(RoundFailed, match="fewer than 2"):
        s.on_members((), {"b": "policy", "c": "policy"})
    assert MAX_ATTEMPTS == 5


def test_events_out_of_phase_and_bad_rings_are_refused():
    s = RingSession(RING)
    with pytest.raises(LocalProtocolError):
        s.on_leader(np.zeros(2))
    s.on_members(RING[1:], {})
    with pytest.raises(LocalProtocolError):
        s.on_members(RING[1:], {})
    for bad in (("a",), ("a", "a", "b")):
        with pytest.raises(ConfigError):
            RingSession(bad)
    with pytest.raises(ConfigError):
        RingSession(RING, max_attempts=0)
    assert attempt_timeout(100) == pytest.approx(31.0) and attempt_timeout(100, 5.0) == 5.0


def test_the_session_drives_real_ring_parties_past_a_lost_party():
    """A driver that only moves bytes: the relay loses everything sent to ``c``; the attempt
    times out, the session blames ``c`` from the hop senders, and the re-formed ring sums the rest."""
    rng = np.random.Generator(np.random.PCG64(1))
    values = {p: rng.uniform(-5, 5, 2) for p in RING}
    keys = {p: generate_private_key() for p in RING}
    fp = FixedPoint.choose(len(RING), 10.0)
    s = RingSession(RING)
    while s.phase is not Phase.DONE:
        ring = s.attempt.ring
        boxes = local_boxes({p: keys[p] for p in ring}, lambda p, ring=ring: ring_peers(ring, p))
        parties = {p: RingParty(p, ring, s.attempt.session_id, fp, boxes[p]) for p in ring}
        queue = deque()
        for p in ring[1:]:
            queue.extend(parties[p].start(values[p]))
        s.on_members(ring[1:], {})
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
        s.on_leader(leader.result() if leader.state is State.DONE else None, hop_senders=hops)
    assert s.dropped == ["c"] and len(s.attempts) == 2
    np.testing.assert_allclose(s.total, sum(values[p] for p in RING if p != "c"), atol=fp.error_bound)
