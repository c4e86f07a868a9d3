"""Issue 20, finding 3: re-keying neighbours must not unmask one owner's input.

The attack, by a hostile coordinator with **no colluding owner**, against real ``privfed owner``
processes (real certificates, the real wire), in one pairwise-mask session:

1. Key the session honestly (steps 0 and 1), run round 0 over every member and unmask it
   honestly: the target ``u`` survives, so its neighbours reveal their shares of its self-mask
   seed ``b_u^0``; the coordinator now holds ``y_u`` and ``b_u^0``.
2. Run round 1 honestly without ``u``: ``total_0 - total_1`` is ``u``'s release, the yardstick
   for an exact recovery (a secure sum never hid a difference of sums over member sets the
   coordinator picks; it hides one ``y_u``).
3. Send ``t`` of ``u``'s neighbours a second step 0 for the same session, then step 1 with the
   original adverts, a round with ``u``'s original sealed shares, and an unmasking that names
   ``u`` as dropped: each re-keyed neighbour would reveal its share of ``u``'s mask key
   ``s_u^SK``, which its first machine refused to do.
4. With ``t`` key shares, ``s_u^SK`` gives every pair mask of ``y_u``, and ``b_u^0`` its self-mask.

Before the fix (main at bd5ff64) the attack recovered ``u``'s input exactly: see
:func:`test_rekeying_neighbours_does_not_unmask_a_target`'s docstring for the numbers.

The second test replays the attack on the machines directly, past the refusal (a machine made
anew for the same session, as a node that forgot it keyed the session would make): the shares
sealed to the first machine must not open for the second, because they are bound to the
recipient's session key.
"""

from __future__ import annotations

import secrets
from dataclasses import replace

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from hostile import boost_config, empty_history, grid_stump, ledger_history, spent_epsilon

from privfed.common.errors import RemoteProtocolError
from privfed.common.secagg import shamir
from privfed.common.secagg.aggregator import SecAggServer
from privfed.common.secagg.boxes import Box, generate_private_key, public_bytes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.masking import pair_key, pair_masks, self_mask
from privfed.common.secagg.messages import InputRequest, KeyAdvert, KeyShares, MaskedInput, UnmaskReply, UnmaskRequest
from privfed.common.secagg.pairwise import OwnerState, SecAggOwner
from privfed.common.tasks import (
    BoostEvaluateTask,
    PeerKey,
    Result,
    RingSpec,
    SecAggKeysTask,
    SecAggUnmaskTask,
    Task,
)
from privfed.proto import serde
from privfed.proto.serde_steps import peer_key_from_proto

D = 2
MAX_ABS = 1e4  # the sum's public range: wide enough for any noisy pair of the run
ROUNDS = 4
X = {
    "owner-0": (np.array([[0.2, 0.7], [0.6, 0.1], [0.9, 0.4]]), np.array([1, 0, 1])),
    "owner-1": (np.array([[0.3, 0.3], [0.8, 0.8], [0.1, 0.5]]), np.array([0, 1, 0])),
}


class WireSession:
    """One pairwise-mask session driven over the wire by the hostile coordinator, step by step."""

    def __init__(self, coordinator, members, *, max_abs: float = MAX_ABS, task_max_abs: float | None = None):
        """``max_abs``: the range the session is keyed with; ``task_max_abs``: the one its evaluate tasks
        name (the same unless a test says otherwise)."""
        self.hc, self.members = coordinator, tuple(sorted(members))
        self.session = secrets.token_hex(16)
        self.max_abs = max_abs
        self.fp = FixedPoint.choose(n_parties=len(self.members), max_abs=max_abs)
        self.server = SecAggServer(self.session, self.members, self.fp, rounds=ROUNDS)
        config = boost_config(D, f"run-{self.session[:8]}", n_bins=2, n_rounds=ROUNDS)
        task_range = max_abs if task_max_abs is None else task_max_abs
        ring = RingSpec(self.session, (), self.fp.frac_bits, self.fp.n_parties, task_range, (), {})
        self.evaluate = BoostEvaluateTask(config, empty_history(0), grid_stump(0, 1, 2), ring)
        self.certificates = {
            r.node_id: bytes(r.request.node_certificate)
            for r in coordinator.registrations
            if r.request.node_certificate
        }

    def run(self, specs: dict[str, object]) -> dict[str, Result]:
        """One batch of tasks, ``{owner: spec}``; the answers as the owner's typed results."""
        tasks = {o: Task(f"t-{secrets.token_hex(6)}", o, "secagg", spec) for o, spec in specs.items()}
        got = self.hc.run([serde.task_to_proto(t) for t in tasks.values()])
        return {o: serde.result_from_proto(got[t.task_id]) for o, t in tasks.items() if t.task_id in got}

    def peer(self, owner_id: str) -> PeerKey:
        return peer_key_from_proto(self.hc.peer_key(owner_id))

    def advertise(self, owners) -> dict[str, Result]:
        step0 = SecAggKeysTask(self.session, self.fp.frac_bits, self.fp.n_parties, self.max_abs)
        return self.run({o: step0 for o in owners})

    def share_keys(self, requests) -> dict[str, Result]:
        step0 = SecAggKeysTask(self.session, self.fp.frac_bits, self.fp.n_parties, self.max_abs)
        return self.run(
            {
                o: replace(
                    step0,
                    request=request,
                    peers=tuple(self.peer(v) for v in self.server.graph[o]),
                    certificates=self.certificates,
                )
                for o, request in requests.items()
            }
        )

    def masked(self, inputs: dict[str, InputRequest]) -> dict[str, Result]:
        return self.run({o: replace(self.evaluate, secagg=request) for o, request in inputs.items()})

    def unmask(self, requests: dict[str, UnmaskRequest]) -> dict[str, Result]:
        return self.run({o: SecAggUnmaskTask(self.session, request) for o, request in requests.items()})

    def honest_round(self, owners) -> tuple[np.ndarray, dict[str, MaskedInput], dict[str, UnmaskReply]]:
        inputs = self.server.input_requests(owners)
        masked = {o: r.payload for o, r in self.masked(inputs).items() if isinstance(r.payload, MaskedInput)}
        replies = self.unmask(self.server.on_masked(masked))
        unmasked = {o: r.payload for o, r in replies.items() if isinstance(r.payload, UnmaskReply)}
        return self.server.on_unmask(unmasked), masked, unmasked


def _payloads(results: dict[str, Result], kind: type) -> dict[str, object]:
    return {o: r.payload for o, r in results.items() if isinstance(r.payload, kind)}


def _codes(results: dict[str, Result]) -> dict[str, str]:
    return {o: getattr(r.payload, "code", type(r.payload).__name__) for o, r in results.items()}


def test_rekeying_neighbours_does_not_unmask_a_target(coordinator, owners):
    """Measured on main at bd5ff64 (before the fix): with 6 one-row owners on 2 nodes (complete
    graph, k = 5, t = 3) and 0 colluding owners, re-keying 3 neighbours gave 3 shares of the
    target's mask key; its public key matched the target's advert, and ``y_u`` minus the recovered
    masks was (-15.32115078, -6.05494308), equal to ``total_0 - total_1`` to 0.0 (both
    coordinates, exactly). The re-keyed neighbours' evaluations came from their cache: one ledger
    entry per owner, the honest rounds'. Now: the 3 second step 0s are refused
    (``already_released``), the steps after them fail the first machines (``invalid_task``), and no
    key share of the target comes back."""
    nodes = [owners(name, *X[name]) for name in X]
    members = sorted(o for node in nodes for o in node.owner_ids)
    wire = WireSession(coordinator, members)

    adverts = _payloads(wire.advertise(members), KeyAdvert)
    assert sorted(adverts) == members
    requests = wire.server.on_adverts(adverts)
    shares = _payloads(wire.share_keys(requests), KeyShares)
    wire.server.on_key_shares(shares)
    total_0, masked_0, unmasked_0 = wire.honest_round(members)
    target = members[0]
    total_1, _, _ = wire.honest_round([o for o in members if o != target])
    truth = total_0 - total_1

    near = wire.server.graph[target]
    t = wire.server._t(target)
    rekeyed = near[:t]
    # 3. a second step 0 to t neighbours, then everything a fresh machine would need to reveal a key share.
    step0 = wire.advertise(rekeyed)
    fresh = _payloads(step0, KeyAdvert)
    current = {**adverts, **fresh}  # a node checks its own owners' adverts against the latest it drew
    step1 = wire.share_keys(
        {v: replace(requests[v], adverts=tuple(current[w] for w in wire.server.graph[v])) for v in rekeyed}
    )
    sealed_by_target = {s.recipient: s for s in shares[target].shares}
    step2 = wire.masked({v: InputRequest(0, wire.server.graph[v], (sealed_by_target[v],)) for v in rekeyed})
    replies = wire.unmask(
        {v: UnmaskRequest(0, tuple(w for w in wire.server.graph[v] if w != target), (target,)) for v in rekeyed}
    )
    key_shares = {
        near.index(v) + 1: reply.key_shares[target]
        for v, reply in _payloads(replies, UnmaskReply).items()
        if target in reply.key_shares
    }

    recovered = _recover(wire, target, adverts, masked_0[target], unmasked_0, key_shares, t)
    print(
        f"\nre-key attack: t = {t} of k = {len(near)}, 0 colluders; step-0 answers {_codes(step0)}; "
        f"steps 1-3 {_codes(step1)} {_codes(step2)} {_codes(replies)}; key shares of the target obtained: {len(key_shares)}; "
        + (
            "nothing recovered"
            if recovered is None
            else f"recovered {recovered}, truth {truth}: |difference| = {np.abs(recovered - truth).max()}"
        )
    )
    assert not fresh, f"a second step 0 for a keyed session was answered: {sorted(fresh)}"
    assert set(_codes(step0).values()) == {"already_released"}
    assert len(key_shares) < t, "the target's mask key can be rebuilt from its neighbours' shares"
    assert recovered is None
    # The honest rounds paid for the releases once; the attack made no new one.
    for node in nodes:
        for oid in node.owner_ids:
            assert len(ledger_history(node.ledger, oid)) == 1
            assert 0 < spent_epsilon(ledger_history(node.ledger, oid)) <= node.budget
        assert node.alive(), node.log()[-2000:]


def test_an_evaluate_task_in_another_range_than_its_session_is_refused_before_the_debit(coordinator, owners):
    """Audit 23, finding 2. A session keyed at ``max_abs`` 0.5 took an evaluate task naming 1e4: the owner
    clipped its debited pair to the task's range and the session's encoding raised on it, so the answer
    was a masked input or ``internal`` (after the debit) as the release was within 0.5 or not, a
    threshold on the release the coordinator picks, again on the cached release in every new session.
    Measured on 75cabd4: 6 of 6 owners answered ``internal``, each with its evaluation debited. Now the
    mismatch is refused on the task's public fields, before any row is read or anything debited."""
    nodes = [owners(name, *X[name]) for name in X]
    members = sorted(o for node in nodes for o in node.owner_ids)
    wire = WireSession(coordinator, members, max_abs=0.5, task_max_abs=MAX_ABS)
    adverts = _payloads(wire.advertise(members), KeyAdvert)
    requests = wire.server.on_adverts(adverts)
    wire.server.on_key_shares(_payloads(wire.share_keys(requests), KeyShares))

    answers = wire.masked(wire.server.input_requests(members))

    assert sorted(answers) == members
    assert set(_codes(answers).values()) == {"invalid_task"}, _codes(answers)
    for node in nodes:
        for oid in node.owner_ids:
            assert ledger_history(node.ledger, oid) == []
        assert node.alive(), node.log()[-2000:]


def _recover(wire, target, adverts, y, unmasked, key_shares, t) -> np.ndarray | None:
    """The target's input from ``y_u``, round 0's self-mask shares and ``t`` key shares, or None."""
    if len(key_shares) < t:
        return None
    key = X25519PrivateKey.from_private_bytes(shamir.combine(key_shares, t))
    if public_bytes(key) != adverts[target].public_key:
        return None
    near = wire.server.graph[target]
    seed = shamir.combine(
        {near.index(v) + 1: reply.self_shares[target] for v, reply in unmasked.items() if target in reply.self_shares},
        t,
    )
    m = y.masked.shape[0]
    pairs = {
        v: pair_key(key.exchange(X25519PublicKey.from_public_bytes(adverts[v].public_key)), wire.session, target, v)
        for v in near
    }
    masks = FixedPoint.add(self_mask(seed, 0, m), pair_masks(pairs, target, 0, m))
    return wire.fp.decode(y.masked - masks)


# ---------------------------------------------------------------------------- the binding, past the refusal
def test_shares_sealed_to_one_session_key_do_not_open_for_another():
    """A node that forgot it keyed a session makes a second machine for it, with the same
    long-lived box key, and is handed the target's old sealed shares: they are bound to the first
    machine's session key, so opening them fails and nothing is revealed."""
    ids = [f"o{i:03d}" for i in range(6)]
    fp = FixedPoint.choose(n_parties=len(ids), max_abs=10.0)
    keys = {o: generate_private_key() for o in ids}

    def machine(o: str) -> SecAggOwner:
        box_for = lambda peer: Box(o, keys[o], peer, public_bytes(keys[peer]))  # noqa: E731
        return SecAggOwner(o, "run-rekey", fp, box_for, lambda advert: None)

    machines = {o: machine(o) for o in ids}
    server = SecAggServer("run-rekey", ids, fp, rounds=2)
    adverts = {o: m.start(lambda pk: b"") for o, m in machines.items()}
    requests = server.on_adverts(adverts)
    server.on_key_shares({o: machines[o].on_share_keys(r) for o, r in requests.items()})
    inputs = server.input_requests()
    target = ids[0]
    holder = server.graph[target][0]
    sealed = next(s for s in inputs[holder].key_shares if s.sender == target)

    again = machine(holder)
    assert again.start(lambda pk: b"").public_key != adverts[holder].public_key
    again.on_share_keys(requests[holder])
    with pytest.raises(RemoteProtocolError, match="authentication"):
        again.masked_input(InputRequest(0, server.graph[holder], (sealed,)), np.array([1.0, 2.0]))
    assert again.state is OwnerState.FAILED
    # The first machine, whose session key the shares were sealed to, opens them.
    assert machines[holder].masked_input(inputs[holder], np.array([1.0, 2.0])).round == 0
