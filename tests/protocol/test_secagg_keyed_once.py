"""A pairwise-mask session is keyed once per owner, and no owner's neighbours reveal both halves of it.

Two nodes' real :class:`~privfed.owner.secagg.SecAggDriver` s (the owner node's code) host six
owners; a hostile coordinator, drawn by hypothesis, mixes honest rounds with second key
agreements, repeated step 1s, replayed sealed shares and unmasking requests that name any owner
dropped, over two sessions. Whatever it does, for every session and owner ``u``, no neighbour
ever reveals both a share of ``u``'s self-mask seed and a share of ``u``'s mask key (issue 20,
finding 3: the invariant must hold across re-keys, not only within one machine's memory).
"""

from __future__ import annotations

import math
import os
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from privfed.common.errors import PrivfedError
from privfed.common.secagg.aggregator import SecAggServer
from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.messages import InputRequest, KeyAdvert, UnmaskReply, UnmaskRequest
from privfed.common.tasks import PeerKey
from privfed.owner.keys import OwnerKeys
from privfed.owner.kinds.base import Refused as TaskRefused
from privfed.owner.secagg import SecAggDriver

NODES = {"owner-0": [f"owner-0.o{i:05d}" for i in range(3)], "owner-1": [f"owner-1.o{i:05d}" for i in range(3)]}
MEMBERS = sorted(o for owners in NODES.values() for o in owners)
FP = FixedPoint.choose(n_parties=len(MEMBERS), max_abs=10.0)
EXAMPLES = int(os.environ.get("PRIVFED_FUZZ_EXAMPLES", "40"))


class Federation:
    """The two drivers, and what a coordinator learns from them (every reply, every refusal)."""

    def __init__(self) -> None:
        keys = {o: generate_private_key() for o in MEMBERS}
        self.peers = {o: PeerKey(o, o.split(".")[0], public_bytes(keys[o]), b"") for o in MEMBERS}
        self.driver = {
            node: SecAggDriver(OwnerKeys({o: keys[o] for o in owners}, None)) for node, owners in NODES.items()
        }
        self.servers: dict[str, SecAggServer] = {}
        self.requests: dict[str, dict] = {}
        self.sealed: dict[str, dict] = {}  # session -> (sender, recipient) -> the sealed shares sent
        self.adverts: dict[str, dict[str, KeyAdvert]] = {}
        self.replies: list[tuple[str, UnmaskReply]] = []
        self.refused: list[str] = []

    def node(self, owner: str) -> SecAggDriver:
        return self.driver[owner.split(".")[0]]

    def attempt(self, step, *args):
        try:
            return step(*args)
        except (PrivfedError, TaskRefused) as exc:
            self.refused.append(type(exc).__name__)
            return None

    def key(self, session: str) -> None:
        """Steps 0 and 1, honestly."""
        server = self.servers[session] = SecAggServer(session, MEMBERS, FP, rounds=4)
        self.adverts[session] = {o: self.node(o).advertise(o, session, FP) for o in MEMBERS}
        self.requests[session] = server.on_adverts(self.adverts[session])
        shares = {o: self.share_keys(session, o) for o in MEMBERS}
        server.on_key_shares(shares)
        self.sealed[session] = {(s.sender, s.recipient): s for reply in shares.values() for s in reply.shares}

    def share_keys(self, session: str, owner: str):
        near = self.servers[session].graph[owner]
        request = self.requests[session][owner]
        adverts = tuple(self.adverts[session][v] for v in near)
        return self.node(owner).share_keys(
            owner, session, type(request)(request.members, adverts, request.rounds), [self.peers[v] for v in near]
        )

    def honest_round(self, session: str) -> None:
        server = self.servers[session]
        try:
            inputs = server.input_requests()
        except PrivfedError:
            return
        masked = {}
        for o, request in inputs.items():
            out = self.attempt(self.masked_input, session, o, request)
            if out is not None:
                masked[o] = out
        try:
            unmask = server.on_masked(masked)
        except PrivfedError:
            return
        answers = {}
        for o, request in unmask.items():
            reply = self.attempt(self.unmask, session, o, request)
            if reply is not None:
                answers[o] = reply
        self.attempt(server.on_unmask, answers)

    def masked_input(self, session: str, owner: str, request: InputRequest):
        # The machine's own step 2 (the driver adds only the debited release before it).
        return self.node(owner)._machine(session, owner).masked_input(request, np.ones(2))

    def unmask(self, session: str, owner: str, request: UnmaskRequest) -> UnmaskReply:
        reply = self.node(owner).unmask(owner, session, request)
        self.replies.append((session, reply))
        return reply

    def rekey(self, session: str, owner: str) -> None:
        """A second step 0 and everything a fresh machine would need to answer again."""
        advert = self.attempt(self.node(owner).advertise, owner, session, FP)
        if advert is not None:
            self.adverts[session][owner] = advert
        self.attempt(self.share_keys, session, owner)

    def hostile_round(self, session: str, owner: str, round_no: int, dropped: list[str]) -> None:
        """A step 2 with every neighbour's original sealed shares, then an unmasking naming ``dropped``."""
        near = self.servers[session].graph[owner]
        sealed = tuple(self.sealed[session][(v, owner)] for v in near)
        self.attempt(self.masked_input, session, owner, InputRequest(round_no, near, sealed))
        gone = tuple(v for v in near if v in dropped)
        self.attempt(
            self.unmask, session, owner, UnmaskRequest(round_no, tuple(v for v in near if v not in gone), gone)
        )


HOLDERS = st.sampled_from([MEMBERS[0], MEMBERS[-1]])  # one per node: attacks on one holder meet more often
ACTION = st.one_of(
    st.tuples(st.just("honest"), st.integers(0, 1)),
    st.tuples(st.just("rekey"), st.integers(0, 1), HOLDERS),
    st.tuples(st.just("share_keys"), st.integers(0, 1), HOLDERS),
    st.tuples(
        st.just("hostile"),
        st.integers(0, 1),
        HOLDERS,
        st.integers(0, 3),
        st.lists(st.sampled_from(MEMBERS), max_size=2, unique=True),
    ),
)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(actions=st.lists(ACTION, min_size=1, max_size=10))
@example(actions=[("rekey", 0, MEMBERS[-1]), ("hostile", 0, MEMBERS[-1], 1, [MEMBERS[0]])])  # issue 20's attack
def test_no_neighbour_reveals_both_halves_of_an_owner_whatever_the_coordinator_does(actions):
    fed = Federation()
    sessions = ["session-a", "session-b"]
    for session in sessions:
        fed.key(session)
    fed.honest_round(sessions[0])  # self-mask shares of every owner revealed in session a
    for action in actions:
        kind, session = action[0], sessions[action[1]]
        if kind == "honest":
            fed.honest_round(session)
        elif kind == "rekey":
            fed.rekey(session, action[2])
        elif kind == "share_keys":
            fed.attempt(fed.share_keys, session, action[2])
        else:
            fed.hostile_round(session, *action[2:])
    revealed: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: {"self": set(), "key": set()})
    for session, reply in fed.replies:
        for target in reply.self_shares:
            revealed[(session, target)]["self"].add(reply.owner_id)
        for target in reply.key_shares:
            revealed[(session, target)]["key"].add(reply.owner_id)
    for (session, target), by in revealed.items():
        both = by["self"] & by["key"]
        assert not both, f"{sorted(both)} revealed both halves of {target} in {session}"
        t = math.floor(len(fed.servers[session].graph[target]) / 2) + 1
        assert len(by["self"]) < t or len(by["key"]) < t, f"{target}'s input in {session} can be unmasked"


def test_a_second_step_0_is_refused_with_a_fixed_code_also_once_the_session_is_forgotten():
    from privfed.owner import secagg

    fed = Federation()
    fed.key("session-a")
    owner = MEMBERS[0]
    with pytest.raises(TaskRefused) as refused:
        fed.node(owner).advertise(owner, "session-a", FP)
    assert refused.value.code == "already_released"
    for i in range(secagg.KEPT_SESSIONS + 1):  # the node forgets session a's machines
        fed.node(owner).advertise(owner, f"filler-{i}", FP)
    with pytest.raises(TaskRefused) as refused:
        fed.node(owner).advertise(owner, "session-a", FP)
    assert refused.value.code == "already_released"
    other = NODES["owner-0"][1]  # never keyed in session a on this node: the session is closed all the same
    with pytest.raises(TaskRefused):
        fed.node(other).advertise(other, "session-a", FP)


def test_a_long_lived_node_holds_a_bounded_record_and_still_refuses_every_session_it_keyed():
    from privfed.owner import secagg

    node, owner = Federation().node(MEMBERS[0]), MEMBERS[0]
    sessions = [f"job-{i}" for i in range(10 * secagg.KEPT_SESSIONS)]  # a node that served many boosting jobs
    for session in sessions:
        node.advertise(owner, session, FP)
    held = {name: len(v) for name, v in vars(node).items() if isinstance(v, dict | set | list)}
    assert max(held.values()) <= secagg.KEPT_SESSIONS, held
    for session in sessions:
        with pytest.raises(TaskRefused) as refused:
            node.advertise(owner, session, FP)
        assert refused.value.code == "already_released"
