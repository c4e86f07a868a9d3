"""Audit 28, A28-1: a ring's leader stops waiting once a new process took over a member's node (``Dispatcher._rekeyed``,
walkthrough 7, W7-3), and the re-formed ring must then drop *that* member. The secure sum blamed
:func:`~privfed.common.secagg.ring_topology.stalled_party`, the first member in ring order the relay saw no ``HOP`` from.
The new process calls (it is not silent), and the wait ends at the next liveness check, when the sum may not have
reached the member yet: the first member without a hop is then an honest one still to come (or the leader itself). A
hostile owner's node that leaves and registers again with new keys right after the joins (a node that left may be
taken over at once) had an honest party dropped in its place, at each of the ring's attempts, and stayed in the sum.

The machine and the owners' cores are the real ones (the in-memory link of ``test_securesum_coordinator``); the first
summing attempt is cut as the dispatcher cuts it: the leader's ``HOP`` relayed, nothing more, no total. The
dispatcher's part is checked on the real :class:`~privfed.server.dispatcher.Dispatcher`."""

from __future__ import annotations

from privfed.common.identity import node_of, owner_id
from privfed.common.secagg.ring import Inbound, MessageKind, new_session_id
from privfed.common.secagg.transitions import Phase
from privfed.common.tasks import OwnerInfo
from privfed.server.dispatcher import Dispatcher

from .test_securesum_coordinator import Pair, _boost, _pair, _released, _sum, data, phase_of  # noqa: F401

TAKEN_OVER = "owner-2"  # the node a new process takes over while the first attempt's sum is on its way


class TakenOver(Pair):
    """The first summing attempt ends as the dispatcher ends it once ``TAKEN_OVER``'s node has new ring keys: the
    leader passed the sum on (its ``HOP`` went through the relay), nobody else has yet, no total came."""

    def __init__(self, pair: Pair) -> None:
        self.__dict__.update(pair.__dict__)
        self.cut: str | None = None

    def run_tasks(self, tasks, timeout=None, *, stalls=None):
        if stalls is None or self.cut is not None:
            return super().run_tasks(tasks, timeout, stalls=stalls)
        self.phases.append(phase_of(tasks, stalls))
        self.cut = stalls
        (lead,) = tasks
        from .test_securesum_coordinator import _wire

        answer = self.cores[node_of(lead.owner_id)].answer([_wire(lead)])
        first = answer.outbound[0]
        self.relay.accept(
            node_of(lead.owner_id),
            [(first.recipient, first.to_bytes())],
            lambda o: node_of(o) if o in self.owners else None,
        )
        return []

    def rekeyed_owners(self, session_id):
        if session_id != self.cut:
            return set()
        passed = self.relay.hop_senders(session_id)
        return {o for o in self.relay.members(session_id) if node_of(o) == TAKEN_OVER and o not in passed}


def test_a_ring_drops_the_member_a_new_process_took_over_not_the_first_the_sum_had_not_reached(data):  # noqa: F811
    pair = TakenOver(_pair(data))
    plan, config, learner = _boost(data)
    ring = sorted(pair.owners)
    taken = tuple(o for o in ring if node_of(o) == TAKEN_OVER)
    assert ring[0] not in taken and ring[1] not in taken  # the sum had reached neither of them
    out = _sum(pair, ring, plan, config, learner)
    assert out.record.dropped == taken, (out.record.dropped, "should be", taken)
    survivors = tuple(o for o in ring if o not in taken)
    assert out.record.summed == survivors and pair.phases[-1] == Phase.SUMMING
    assert len(out.totals) and (abs(out.totals - _released(pair, survivors)) < 1e-6).all()


def test_the_dispatcher_names_the_members_of_a_taken_over_node_that_had_not_passed_the_sum_on():
    a0, b0, b1, c0 = owner_id("node-a", 0), owner_id("node-b", 0), owner_id("node-b", 1), owner_id("node-c", 0)
    d = Dispatcher(node_timeout=15.0)
    d.register("node-a", [OwnerInfo(owner_id=a0, x25519_public_key=b"\1" * 32)])
    d.register("node-b", [OwnerInfo(owner_id=o, x25519_public_key=bytes([2 + i]) * 32) for i, o in enumerate((b0, b1))])
    d.register("node-c", [OwnerInfo(owner_id=c0, x25519_public_key=b"\5" * 32)])
    s = new_session_id()
    d.open_ring(s, [a0, b0, b1, c0])
    d.relay("node-a", [(b0, Inbound(s, a0, b0, MessageKind.HOP, 1, b"\0" * 32).to_bytes())])
    d.relay("node-b", [(b1, Inbound(s, b0, b1, MessageKind.HOP, 2, b"\0" * 32).to_bytes())])
    assert d.rekeyed_owners(s) == set()  # same processes: nobody to blame
    d.leave("node-b", None)  # its process stops cleanly, a new one takes over at once with new keys
    d.register("node-b", [OwnerInfo(owner_id=o, x25519_public_key=bytes([7 + i]) * 32) for i, o in enumerate((b0, b1))])
    assert d.rekeyed_owners(s) == {b1}  # b0 passed the sum on before; a0 and c0 are on their first processes
    d.close_ring(s)
    assert d.rekeyed_owners(s) == set()
