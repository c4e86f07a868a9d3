"""Mutation round 2 (common/secagg/masking.py): the threshold is a strict majority of a member's neighbours.

Honest neighbours answer an unmasking request with either a self-mask share or a key share of an owner, never
both, so a coordinator that asks one half of an owner's ``k`` neighbours for its self-mask seed and the other half
for its mask key gets ``t`` of each only if ``2 t <= k``. Mutants ``t = k // 2`` and ``t = k // 3 + 1`` passed every
secagg test: the graph pins and the protocol runs only need ``t`` shares to recover, never that ``t`` is too many
to collect twice. So the rule is checked exactly, and on a real split of an owner's shares.
"""

import secrets

import pytest

from privfed.common.secagg import shamir
from privfed.common.secagg.masking import MIN_MEMBERS, degree, threshold


@pytest.mark.parametrize("k", range(1, 41))
def test_threshold_is_the_smallest_strict_majority(k):
    t = threshold(k)
    assert 2 * t > k, f"t={t} of k={k}: two disjoint sets of t neighbours exist"
    assert 2 * (t - 1) <= k, f"t={t} of k={k} is more than a strict majority: fewer drops tolerated"
    assert t <= k


@pytest.mark.parametrize("n", [MIN_MEMBERS, 4, 5, 8, 9, 16, 17, 100, 1000, 10**5])
def test_every_degree_leaves_no_two_disjoint_quorums(n):
    k = degree(n)
    assert k <= n - 1
    assert 2 * threshold(k) > k


@pytest.mark.parametrize("k", [2, 3, 4, 6, 8, 10])
def test_half_of_the_neighbours_cannot_recover_a_secret_the_other_half_also_holds(k):
    """Split one secret among ``k`` neighbours at the run's threshold: neither half (the coordinator's two
    questions) reaches ``t`` shares, and the whole of either half fails to rebuild it."""
    secret = secrets.token_bytes(shamir.SECRET_BYTES)
    t = threshold(k)
    shares = shamir.split(secret, range(1, k + 1), t)
    first, second = list(shares)[: k // 2], list(shares)[k // 2 :]
    assert len(first) < t, "the first half alone holds a quorum"
    assert any(len(half) < t for half in (first, second)), "both halves hold a quorum: both halves of an owner leak"
    assert shamir.combine({x: shares[x] for x in list(shares)[:t]}, t) == secret
