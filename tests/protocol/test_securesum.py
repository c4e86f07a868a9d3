"""Ring secure sum (SPEC §11.2): N machines wired in memory through an untrusted relay."""

from __future__ import annotations

from fractions import Fraction
from functools import reduce

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from privfed.common.errors import ConfigError, LocalProtocolError, RemoteProtocolError
from privfed.common.secagg.boxes import generate_private_key, local_boxes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.inprocess import run_ring_in_process
from privfed.common.secagg.ring import (
    MAX_MESSAGE_BYTES,
    TRANSITIONS,
    Inbound,
    MessageKind,
    Outbound,
    RingParty,
    State,
    new_session_id,
)
from privfed.common.secagg.ring_topology import reform_ring, ring_peers, stalled_party

from .harness import Relay, RingNetwork, flip_byte, header, match, rewrite

POOL = [f"owner-{i:02d}" for i in range(20)]
KEYS = {p: generate_private_key() for p in POOL}
BOXES = local_boxes(KEYS)  # every ordered pair of the pool, built once


def network(ring, fp, relay=None, session_id=None):
    session_id = new_session_id() if session_id is None else session_id
    return RingNetwork({p: RingParty(p, ring, session_id, fp, BOXES[p]) for p in ring}, relay)


def run(values, fp, relay=None, ring=None, session_id=None):
    ring = list(values) if ring is None else ring
    return network(ring, fp, relay, session_id).start({p: values[p] for p in ring}).run()


def ring_sum(fp, values):
    return reduce(FixedPoint.add, (fp.encode(v) for v in values))


RING5 = POOL[:5]
FP5 = FixedPoint.choose(5, 10.0)
VALUES5 = {p: np.array([1.5, -2.25, 10.0, -1e-6]) * (k + 1) / 5 for k, p in enumerate(RING5)}


def test_masks_cancel_exactly_and_everyone_gets_the_total():
    net = run(VALUES5, FP5)
    assert set(net.states().values()) == {State.DONE}
    exact = ring_sum(FP5, VALUES5.values())
    for party in net.parties.values():
        np.testing.assert_array_equal(party.result_encoded(), exact)
        np.testing.assert_array_equal(party.result(), FP5.decode(exact))
    np.testing.assert_allclose(net.parties[RING5[0]].result(), sum(VALUES5.values()), atol=FP5.error_bound)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    n=st.integers(2, 20),
    m=st.integers(1, 16),
    max_abs=st.sampled_from([1e-3, 1.0, 7.5, 1e3, 1e6]),
    min_frac_bits=st.integers(0, 16),
)
def test_property_exact_ring_total_and_decode_error(data, n, m, max_abs, min_frac_bits):
    fp = FixedPoint.choose(n, max_abs, min_frac_bits=min_frac_bits)
    ring = data.draw(st.permutations(POOL).map(lambda p: p[:n]))
    elems = st.floats(-max_abs, max_abs, allow_nan=False, allow_subnormal=False)
    values = {p: data.draw(arrays(np.float64, m, elements=elems)) for p in ring}
    net = run(values, fp, ring=ring)
    exact_ring = ring_sum(fp, values.values())
    totals = [party.result_encoded() for party in net.parties.values()]
    for total in totals:
        np.testing.assert_array_equal(total, exact_ring)
    decoded = net.parties[ring[0]].result()
    for j in range(m):
        truth = sum(Fraction(float(values[p][j])) for p in ring)
        # error_bound (rounding of N encodings) + half an ulp of the float64 result (SPEC §11.1 note)
        half_ulp = Fraction(float(np.spacing(abs(decoded[j])))) / 2
        assert abs(Fraction(float(decoded[j])) - truth) <= Fraction(fp.error_bound) + half_ulp


def test_run_ring_in_process_runs_the_same_machines():
    values = {p: np.array([0.5, -1.0]) * k for k, p in enumerate(POOL[:7])}
    fp = FixedPoint.choose(7, 10.0)
    order = POOL[:7][::-1]
    total = run_ring_in_process(values, fp, BOXES, ring_order=order)
    np.testing.assert_array_equal(total, fp.decode(ring_sum(fp, values.values())))
    np.testing.assert_array_equal(run_ring_in_process(values, fp), total)  # fresh ephemeral keys
    with pytest.raises(ConfigError, match="ring_order"):
        run_ring_in_process(values, fp, BOXES, ring_order=POOL[:6])


def _hop_values(net, kind=MessageKind.HOP):
    """Decrypt every recorded HOP with the recipient's box: what each intermediate value was."""
    out = {}
    for wire in net.relay.recorded:
        msg = header(wire)
        if msg.kind is kind:
            plain = BOXES[msg.recipient][msg.sender].open(msg.ciphertext, msg.aad())
            out[msg.seq] = np.frombuffer(plain, "<u8")
    return out


@pytest.mark.parametrize("fill", [0.0, 10.0])
def test_every_hop_value_is_uniform_on_the_ring_whatever_the_inputs(fill):
    ring, m, runs = POOL[:4], 8, 400
    fp = FixedPoint.choose(4, 10.0)
    values = {p: np.full(m, fill * (-1) ** k) for k, p in enumerate(ring)}
    hops = {seq: [] for seq in range(1, 5)}
    for _ in range(runs):
        for seq, v in _hop_values(run(values, fp, ring=ring)).items():
            hops[seq].append(v)
    for seq, chunks in hops.items():
        u = np.concatenate(chunks)
        counts = np.bincount(u.view(np.uint8), minlength=256)  # 25 600 bytes, 100 per bin expected
        assert stats.chisquare(counts).pvalue > 1e-6, f"hop {seq} bytes not uniform"
        top = (u >> np.uint64(11)).astype(np.float64) * 2.0**-53
        assert stats.kstest(top, "uniform").pvalue > 1e-6, f"hop {seq} top bits not uniform"
    # The same tests reject the unmasked partial sums, so they can fail.
    plain = np.concatenate([ring_sum(fp, [values[p] for p in ring[:2]])] * runs)
    assert stats.chisquare(np.bincount(plain.view(np.uint8), minlength=256)).pvalue < 1e-6


def test_relay_sees_no_plaintext_value():
    net = run(VALUES5, FP5)
    wire = b"".join(net.relay.recorded)
    hops = _hop_values(net)
    secrets_on_path = [FP5.encode(v) for v in VALUES5.values()] + list(hops.values())
    secrets_on_path.append(ring_sum(FP5, VALUES5.values()))
    for arr in secrets_on_path:
        for word in arr.astype("<u8"):
            assert word.tobytes() not in wire


# ---------------------------------------------------------------- an active relay


def _failed_with(net, party, pattern):
    assert net.parties[party].state is State.FAILED
    assert net.errors[party], f"{party} raised nothing"
    assert isinstance(net.errors[party][0], RemoteProtocolError)
    assert pattern in str(net.errors[party][0]), net.errors[party][0]
    assert pattern in net.parties[party].failure_reason
    assert net.parties[party].result() is None


@pytest.mark.parametrize("seq", [1, 2, 5])
@pytest.mark.parametrize("offset", [1, 16, 17, 40, 55])  # tag, tag, body, body, nonce
def test_tampered_ciphertext_fails_the_recipient(seq, offset):
    relay = Relay().tamper(match(kind=MessageKind.HOP, seq=seq), lambda w: flip_byte(w, offset))
    net = run(VALUES5, FP5, relay)
    recipient = RING5[seq % 5]
    _failed_with(net, recipient, "fails authentication")
    net.timeout()
    assert net.failed() == set(RING5)


@pytest.mark.parametrize(
    "field, value, pattern",
    [
        ("seq", 3, "expected HOP seq 2"),
        ("sender", RING5[0], "expected HOP seq 2"),
        ("kind", MessageKind.RESULT, "unexpected RESULT"),
        ("recipient", RING5[3], "expected HOP seq 3 from"),
    ],
)
def test_forged_header_fails_the_recipient(field, value, pattern):
    relay = Relay().tamper(match(seq=2), lambda w: rewrite(w, **{field: value}))
    net = run(VALUES5, FP5, relay)
    victim = value if field == "recipient" else RING5[2]
    _failed_with(net, victim, pattern)


def test_redirected_hop_with_consistent_header_fails_authentication():
    # P2 -> P3 hop presented to P4 as if from P3: header passes, the P3/P4 key does not open it.
    relay = Relay().tamper(match(seq=2), lambda w: rewrite(w, sender=RING5[2], recipient=RING5[3], seq=3))
    _failed_with(run(VALUES5, FP5, relay), RING5[3], "fails authentication")


def test_misrouted_unchanged_envelope_is_refused():
    net = network(RING5, FP5)
    net.start(VALUES5)
    first = header(net.in_flight[0])  # P1 -> P2, handed to P3 as is
    third = net.parties[RING5[2]]
    with pytest.raises(RemoteProtocolError, match="misrouted"):
        third.on_message(first)
    assert third.state is State.FAILED and "misrouted" in third.failure_reason


def test_replayed_hop_fails_the_recipient_and_is_never_reused():
    net = run(VALUES5, FP5, Relay().duplicate(match(seq=1)))
    _failed_with(net, RING5[1], "unexpected HOP")
    assert {p for p, s in net.states().items() if s is State.DONE} == set(RING5) - {RING5[1]}


def test_replay_after_done_fails_and_withdraws_the_result():
    net = run(VALUES5, FP5)
    ret = next(w for w in net.relay.recorded if header(w).seq == 5)
    net.inject(ret)
    _failed_with(net, RING5[0], "unexpected HOP")
    with pytest.raises(LocalProtocolError, match="FAILED"):
        net.parties[RING5[0]].on_message(header(ret))


def test_cross_session_replay_fails():
    old = run(VALUES5, FP5)
    first_old = old.relay.recorded[0]
    net = network(RING5, FP5)
    net.start(VALUES5)
    new_session = header(net.in_flight[0]).session_id
    net.inject(first_old)  # header still names the old session
    _failed_with(net, RING5[1], "session")
    net = network(RING5, FP5, session_id=new_session)
    net.start(VALUES5)
    net.inject(rewrite(first_old, session_id=new_session))  # header relabelled: key and AAD differ
    _failed_with(net, RING5[1], "fails authentication")


def test_result_before_hop_is_refused():
    old = run(VALUES5, FP5)
    result_old = next(
        w for w in old.relay.recorded if header(w).kind is MessageKind.RESULT and header(w).recipient == RING5[2]
    )
    net = network(RING5, FP5)
    net.start(VALUES5)
    net.inject(rewrite(result_old, session_id=header(net.in_flight[0]).session_id))
    _failed_with(net, RING5[2], "unexpected RESULT")


def test_reordered_result_broadcast_is_harmless():
    relay = Relay().hold(match(kind=MessageKind.RESULT))
    net = run(VALUES5, FP5, relay)
    assert len(relay.held) == 4 and net.parties[RING5[1]].state is State.AWAIT_RESULT
    net.release(reverse=True)
    assert set(net.states().values()) == {State.DONE}


@pytest.mark.parametrize("extra", [1, -1])
def test_wrong_size_ciphertext_fails(extra):
    def resize(w):
        msg = header(w)
        return rewrite(w, ciphertext=msg.ciphertext + b"\0" if extra > 0 else msg.ciphertext[:-1])

    _failed_with(run(VALUES5, FP5, Relay().tamper(match(seq=1), resize)), RING5[1], "bytes, expected")


def test_envelope_parsing_refuses_malformed_and_oversized_input():
    out = Outbound("s", "a", "b", MessageKind.HOP, 1, b"x" * 40)
    wire = out.to_bytes()
    assert Inbound.from_bytes(wire).ciphertext == out.ciphertext
    for bad in (wire[:-1], wire + b"\0", b"XXXX" + wire[4:], wire[:3], b"\0" * (MAX_MESSAGE_BYTES + 1)):
        with pytest.raises(RemoteProtocolError):
            Inbound.from_bytes(bad)
    with pytest.raises(RemoteProtocolError, match="seq"):
        Inbound("s", "a", "b", MessageKind.HOP, -1, b"")
    with pytest.raises(LocalProtocolError, match="sender"):
        Outbound("s", "", "b", MessageKind.HOP, 1, b"")
    with pytest.raises(RemoteProtocolError, match="ciphertext"):
        Inbound("s", "a", "b", MessageKind.HOP, 1, b"\0" * (MAX_MESSAGE_BYTES + 1))


def test_mismatched_vector_lengths_fail():
    values = dict(VALUES5)
    values[RING5[2]] = values[RING5[2]][:3]
    _failed_with(run(values, FP5), RING5[2], "expected")


# ---------------------------------------------------------------- dropouts and re-forming


@pytest.mark.parametrize("dropped", [RING5[0], RING5[2], RING5[4]])
def test_dropped_party_times_out_and_the_reformed_ring_sums_the_rest(dropped):
    relay = Relay().drop(match(recipient=dropped))
    net = run(VALUES5, FP5, relay)
    session = net.parties[RING5[1]].session_id
    assert State.DONE not in net.states().values()
    net.timeout()
    assert net.failed() == set(RING5)
    assert all("timed out" in m.failure_reason for m in net.parties.values())
    suspect = stalled_party(RING5, relay.hop_senders(session))
    assert suspect == dropped
    ring = reform_ring(RING5, [suspect])
    retry = run({p: VALUES5[p] for p in ring}, FP5, ring=ring)
    assert retry.parties[ring[0]].session_id != session
    np.testing.assert_array_equal(retry.parties[ring[0]].result_encoded(), ring_sum(FP5, [VALUES5[p] for p in ring]))


def test_reform_ring_and_helpers():
    assert reform_ring(["a", "b", "c"], ["a"]) == ["b", "c"]
    with pytest.raises(ConfigError, match="not in ring"):
        reform_ring(["a", "b", "c"], ["z"])
    with pytest.raises(ConfigError, match="at least 2"):
        reform_ring(["a", "b"], ["a"])
    assert ring_peers(["a", "b", "c", "d"], "a") == ["b", "c", "d"]
    assert ring_peers(["a", "b", "c", "d"], "c") == ["b", "d", "a"]
    assert ring_peers(["a", "b"], "b") == ["a"]
    assert stalled_party(["a", "b", "c"], []) == "a"
    assert stalled_party(["a", "b", "c"], ["a", "b", "c"]) == "a"
    assert new_session_id() != new_session_id()


# ---------------------------------------------------------------- N = 1, N = 2 and API misuse


def test_single_party_ring_is_refused():
    fp = FixedPoint.choose(1, 1.0)
    with pytest.raises(ConfigError, match="at least 2"):
        RingParty(POOL[0], [POOL[0]], "s", fp, {})
    with pytest.raises(ConfigError, match="at least 2"):
        run_ring_in_process({POOL[0]: np.ones(2)}, fp)


def test_two_party_ring():
    fp = FixedPoint.choose(2, 1.0)
    net = run({POOL[0]: np.array([0.25]), POOL[1]: np.array([-1.0])}, fp)
    assert [r.tolist() for r in net.results().values()] == [[-0.75], [-0.75]]


def test_machine_api_misuse():
    fp, ring = FixedPoint.choose(3, 1.0), POOL[:3]
    leader = RingParty(ring[0], ring, "s", fp, BOXES[ring[0]])
    member = RingParty(ring[1], ring, "s", fp, BOXES[ring[1]])
    msg = Inbound("s", ring[0], ring[1], MessageKind.HOP, 1, b"\0" * 36)
    with pytest.raises(LocalProtocolError, match="start"):
        member.on_message(msg)
    with pytest.raises(ConfigError, match="max_abs"):
        leader.start(np.array([2.0]))
    with pytest.raises(ConfigError, match="1-D"):
        leader.start(np.ones((2, 2)))
    assert leader.state is State.IDLE and leader.result() is None
    (hop,) = leader.start(np.array([0.5]))
    assert (hop.recipient, hop.kind, hop.seq) == (ring[1], MessageKind.HOP, 1)
    with pytest.raises(LocalProtocolError, match="start"):
        leader.start(np.array([0.5]))
    with pytest.raises(TypeError):
        leader.on_message(hop)  # an Outbound is not an Inbound
    assert leader.waiting_for == ring[2]
    assert member.on_timeout() == [] and member.state is State.FAILED and "start()" in member.failure_reason


def test_construction_is_validated():
    fp, ring = FixedPoint.choose(3, 1.0), POOL[:3]
    with pytest.raises(ConfigError, match="no Box"):
        RingParty(ring[0], ring, "s", fp, {ring[1]: BOXES[ring[0]][ring[1]]})
    with pytest.raises(ConfigError, match="must be a Box"):  # a box of another pair
        RingParty(ring[0], ring, "s", fp, {ring[1]: BOXES[ring[0]][ring[1]], ring[2]: BOXES[ring[1]][ring[2]]})
    with pytest.raises(ConfigError, match="n_parties"):
        RingParty(ring[0], ring, "s", FixedPoint.choose(2, 1.0), BOXES[ring[0]])
    with pytest.raises(ConfigError, match="not in ring"):
        RingParty(POOL[5], ring, "s", fp, BOXES[POOL[5]])
    with pytest.raises(ConfigError, match="duplicate"):
        RingParty(ring[0], [ring[0], ring[1], ring[1]], "s", fp, BOXES[ring[0]])
    assert RingParty(ring[1], ring, "s", fp, BOXES[ring[1]].__getitem__).waiting_for is None  # callable boxes


def test_transition_table_covers_exactly_the_non_terminal_states():
    for _role, table in TRANSITIONS.items():
        assert State.DONE not in table and State.FAILED not in table
        assert State.IDLE in table
