"""Audit 23, finding 1: the pairwise-mask secure sum hides nothing from a hostile coordinator, even
one with **no colluding owner**, because there is no consistency round (Bonawitz et al. 2017, §4's
signed survivor sets). Known and documented (README, "Assumptions and limits"; the docstring of
``privfed.common.secagg.pairwise``): what it recovers is the owner's evaluation release, debited in
its ledger before it is masked, so the ledger's bound holds; the secure sum only fails at its own job.

The attack, on the real owner-side drivers (``privfed.owner.secagg.SecAggDriver``) of two nodes:
the target ``u`` masks with ``t`` of its neighbours as participants, ``P_u``. In the unmasking,
``t`` of ``u``'s neighbours are told ``u`` survived (they reveal shares of its self-mask seed), and
for each ``v`` in ``P_u``, ``t`` of ``v``'s *other* neighbours are told ``v`` dropped (they reveal
shares of ``v``'s mask key). No holder is asked both halves of one owner and each keeps ``t``
survivors, so every check an owner makes on its own request passes; ``v``'s mask key and ``u``'s
public key give every pair mask of ``u``'s input. The inconsistency is across holders, which no
owner sees alone: only a consistency round closes it.

``test_the_partner_drop_unmasks_one_input`` is a strict xfail: it passes (and so fails the suite)
the day owners refuse an inconsistent unmasking, which is when this docstring and the README's
paragraph must change. The control, the classic attack (``u`` itself named both ways), is blocked
today by the either-or rule.
"""

from __future__ import annotations

import numpy as np
import pytest
import secagg_session
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from privfed.common.errors import PrivfedError
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.masking import pair_key, pair_masks, self_mask, threshold
from privfed.common.secagg.messages import InputRequest, UnmaskRequest

pytestmark = pytest.mark.in_process
N = 16  # the smallest size at which audit 23's plan found enough holders (at N = 8 each holder can drop only 2)
NODES = {
    "owner-0": [f"owner-0.o{i:05d}" for i in range(N // 2)],
    "owner-1": [f"owner-1.o{i:05d}" for i in range(N // 2)],
}
MEMBERS = sorted(o for owners in NODES.values() for o in owners)
FP = FixedPoint.choose(n_parties=N, max_abs=10.0)


class Session(secagg_session.Session):
    """One pairwise-mask session keyed honestly (steps 0 and 1) by the two nodes' real drivers, under the id
    the coordinator gave it (the graph is drawn from it and the members)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id, NODES, FP, rounds=2)


#: Session ids a coordinator tries: it names each session, so it can draw ids until the public graph lets its plan
#: place every drop. One id works for about 85 % of targets at N = 16; with a random id the strict xfail below
#: passed by chance in about 4 runs in 10 (stop 54).
IDS_TRIED = 8


def _attack(classic: bool, seed: int) -> tuple[np.ndarray | None, np.ndarray, int]:
    """(what the coordinator recovers of the target's input or None, the input, the refusals), under the first
    of :data:`IDS_TRIED` session ids whose unmasking gives it every secret its plan needs (else the last one's)."""
    for attempt in range(IDS_TRIED):
        recovered, truth, refused = _attack_in(f"{seed:08x}{attempt:08x}", classic, seed)
        if recovered is not None:  # every secret the plan needs combined: what the coordinator itself sees
            break
    return recovered, truth, refused


def _attack_in(session_id: str, classic: bool, seed: int) -> tuple[np.ndarray | None, np.ndarray, int]:
    rng = np.random.default_rng(seed)
    s = Session(session_id)
    g = s.graph
    u = MEMBERS[int(rng.integers(N))]
    t = threshold(len(g[u]))
    inputs = {o: rng.uniform(-5, 5, size=2) for o in MEMBERS}  # stand-ins for the debited releases
    p_u = tuple(sorted(rng.choice(g[u], size=t, replace=False)))
    participants = {o: set(p_u if o == u else g[o]) for o in MEMBERS}
    masked = {
        o: s.node(o)
        ._machine(s.id, o)
        .masked_input(InputRequest(0, tuple(sorted(participants[o])), tuple(s.sealed[o])), inputs[o])
        for o in MEMBERS
    }
    # Step 3's plan: whom each holder is told dropped, within what it lets drop (it keeps t survivors).
    dropped: dict[str, set[str]] = {o: set() for o in MEMBERS}
    room = {o: len(participants[o]) - threshold(len(g[o])) for o in MEMBERS}
    self_holders = [w for w in g[u] if u in participants[w]][:t]
    wanted = (
        {u: [w for w in g[u] if w not in self_holders]} if classic else {v: [w for w in g[v] if w != u] for v in p_u}
    )
    for v, holders in wanted.items():
        for w in sorted(holders, key=lambda w: -room[w])[: len(holders)]:
            if sum(v in d for d in dropped.values()) == t:
                break
            if v in participants[w] and room[w] > 0:
                dropped[w].add(v)
                room[w] -= 1
    replies, refused = {}, 0
    for w in MEMBERS:
        request = UnmaskRequest(0, tuple(sorted(participants[w] - dropped[w])), tuple(sorted(dropped[w])))
        try:
            replies[w] = s.node(w).unmask(w, s.id, request)
        except PrivfedError:
            refused += 1
    seed_u = s.combine(u, {w: r.self_shares[u] for w, r in replies.items() if u in r.self_shares})
    if seed_u is None:
        return None, inputs[u], refused
    m = masked[u].masked.shape[0]
    mask_keys = {
        v: s.combine(v, {w: r.key_shares[v] for w, r in replies.items() if v in r.key_shares}) for v in [u, *p_u]
    }
    if classic and mask_keys[u] is not None:
        key_u = X25519PrivateKey.from_private_bytes(mask_keys[u])
        pairs = {v: key_u.exchange(X25519PublicKey.from_public_bytes(s.adverts[v].public_key)) for v in p_u}
    elif not classic and all(mask_keys[v] is not None for v in p_u):
        public_u = X25519PublicKey.from_public_bytes(s.adverts[u].public_key)
        pairs = {v: X25519PrivateKey.from_private_bytes(mask_keys[v]).exchange(public_u) for v in p_u}
    else:
        return None, inputs[u], refused
    keys = {v: pair_key(secret, s.id, u, v) for v, secret in pairs.items()}
    y = FixedPoint.sub(FixedPoint.sub(masked[u].masked, self_mask(seed_u, 0, m)), pair_masks(keys, u, 0, m))
    return FP.decode(y), inputs[u], refused


def _exact(recovered: np.ndarray | None, truth: np.ndarray) -> bool:
    return recovered is not None and bool(np.allclose(recovered, truth, rtol=0, atol=2 * FP.error_bound))


@pytest.mark.xfail(
    strict=True, raises=AssertionError, reason="no consistency round (audit 23, finding 1): documented, not fixed"
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_partner_drop_unmasks_one_input(seed):
    recovered, truth, refused = _attack(classic=False, seed=seed)
    assert not _exact(recovered, truth), f"input {truth} recovered exactly with no colluder, {refused} refusals"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_classic_attack_is_blocked(seed):
    recovered, truth, _ = _attack(classic=True, seed=seed)
    assert not _exact(recovered, truth)
