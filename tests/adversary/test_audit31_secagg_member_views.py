"""Audit 31, finding 2: each owner computes the run's graph from the member list its own step-1 request
carries, and nothing makes two owners' lists agree, so a hostile coordinator can give one target ``u`` a
list of itself and three of its neighbours: in ``u``'s view ``k = 3`` and ``t = 2``, whatever the run's size.
Its neighbours accept its shares (``u`` is their neighbour in the real graph), so its self-mask opens with 2
shares and it masks with 2 partners, which shrinks what audit 23's and A31-1's plans need (``2 t_v`` key
shares instead of ``t_u t_v``). The either-or rule still holds in ``u``'s view (2 of 3 is a majority), so
this adds no leak of its own: it makes the known ones cheaper. At N = 7, where A31-1 has no plan
(``test_audit31_secagg_cross_round.test_no_plan_at_some_sizes``), it makes one.

Fixed: key shares are sealed to the member list's digest (``privfed.common.secagg.masking.members_digest``, in
the associated data of their box), so shares sealed under one list open only for a neighbour handed the same
list. The target cannot open its neighbours' shares, nor they its: the first to try refuses the run, before any
masked input of a round is sent.
"""

from __future__ import annotations

import numpy as np
import pytest
from secagg_session import Session, nodes_of
from test_audit31_secagg_cross_round import Plan, _exact, _flow, _forwarded, _fp, _k_t, run_plan

from privfed.common.errors import PrivfedError, RemoteProtocolError
from privfed.common.secagg.messages import InputRequest

pytestmark = pytest.mark.in_process


def _attack(n: int, seed: int) -> tuple[np.ndarray | None, np.ndarray, list[str]]:
    nodes = nodes_of(n)
    members = sorted(o for owners in nodes.values() for o in owners)
    u = members[seed % n]
    honest = Session(f"{seed:08x}{0:08x}view", nodes, _fp(n), rounds=2)  # only to read the public graph
    near = honest.graph[u]
    view = tuple(sorted({u, *near[:3]}))  # k = 3, t = 2 in u's view
    try:
        s = Session(honest.id, nodes, _fp(n), rounds=2, views={u: view})
    except PrivfedError as exc:  # an owner refused the list: what the strict xfail waits for
        return None, np.zeros(2), [str(exc)]
    g = s.near  # the holders of each owner's shares, as it sees them
    p_u = tuple(v for v in view if v != u)[:2]
    holders = [v for v in view if v != u][:2]
    first = {}
    for w in holders:
        others = sorted((x for x in g[w] if x != u), key=lambda x: x in p_u)
        first[w] = (u, *others[: _k_t(g, w)[1] - 1])
    drops = _flow(g, p_u, {w: set(f) for w, f in first.items()})
    if drops is None:
        pytest.fail("no plan")  # not an AssertionError
    return run_plan(s, Plan(u, p_u, first, drops), np.random.default_rng(seed))


@pytest.mark.parametrize(("n", "seed"), [(7, 0), (7, 3), (16, 0)])
def test_a_target_keyed_with_its_own_member_list_is_refused_before_it_masks(n, seed):
    with pytest.raises(RemoteProtocolError, match=r"secagg-key-shares/[0-9a-f]{32}.*fails authentication"):
        recovered, truth, refused = _attack(n, seed)
        assert not _exact(recovered, truth, n), f"round-0 input {truth} recovered exactly, {refused} refusals"


@pytest.mark.parametrize("n", [7, 16])
def test_owners_handed_the_same_list_open_each_others_shares(n):
    """The control: every owner handed the run's one list opens its neighbours' shares and masks its input."""
    s = Session(f"{0:08x}{0:08x}same", nodes_of(n), _fp(n), rounds=2)
    for o in s.members:
        request = InputRequest(0, s.near[o], _forwarded(s, o))
        assert s.node(o)._machine(s.id, o).masked_input(request, np.zeros(2)).masked.shape == (2,)
