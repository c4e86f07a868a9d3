"""Mutation round 3 (common/secagg/pairwise.py, step 1 ``_share_keys``): fresh self-mask seeds, and the encoding's
party count.

* ``secrets.token_bytes`` replaced by ``bytes(32)`` for the self-mask seeds ``b_u^r`` passed every secagg test,
  the hostile-coordinator ones included: every owner then masks every round with ``PRG(0, r)``, a public stream.
  The self-mask is what protects an owner a coordinator *calls* dropped (it then collects the owner's mask-key
  shares, rebuilds its pairwise masks, and only ``b_u^r`` still hides ``x_u`` in ``y_u``, Bonawitz et al. CCS
  2017 §4): with a public seed that owner's input is in the clear. The sums still cancel, so no test saw it.
* Dropping the refusal of more members than the encoding's ``n_parties`` passed: the fixed-point range
  (``N (max_abs 2^f + 1/2) < 2^63``) holds for ``n_parties`` summands only, so a coordinator naming more
  members can make the ring sum wrap and decode to a wrong total, silently.
"""

import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from privfed.common.errors import RemoteProtocolError
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.masking import pair_masks, self_mask
from privfed.common.secagg.messages import KeyAdvert, ShareKeysRequest
from privfed.common.secagg.pairwise import OwnerState

sys.path.insert(0, str(Path(__file__).parents[1]))
from protocol.secagg_harness import Federation  # noqa: E402


def test_every_owner_draws_a_fresh_secret_seed_for_every_round():
    fed = Federation(6, rounds=3)
    fed.key_agreement()
    seeds = [s for o in fed.ids for s in fed.owners[o]._seeds]
    assert len(seeds) == 6 * 3 and all(isinstance(s, bytes) and len(s) == 32 for s in seeds)
    assert len(set(seeds)) == len(seeds)  # no two owners, no two rounds share one
    assert bytes(32) not in seeds


def test_an_owner_called_dropped_is_still_hidden_by_its_self_mask():
    """What a coordinator learns by calling an owner dropped: its pairwise masks. ``y_u`` minus them is
    ``x_u`` plus the self-mask, which must not be a stream anyone can compute (the zero seed's)."""
    fed = Federation(6, rounds=2)
    fed.key_agreement()
    x = {o: np.array([1.0, -2.0, 3.5]) for o in fed.ids}
    masked = fed.masked(x)
    u = fed.ids[0]
    machine = fed.owners[u]
    rnd = masked[u].round
    pairs = pair_masks({v: machine._pair_keys[v] for v in machine._participants}, u, rnd, 3)
    rest = np.subtract(masked[u].masked, pairs, dtype=np.uint64)  # in Z_2^64
    encoded = fed.fp.encode(x[u])
    assert np.array_equal(rest, FixedPoint.add(encoded, self_mask(machine._seeds[rnd], rnd, 3)))  # the construction
    assert not np.array_equal(rest, FixedPoint.add(encoded, self_mask(bytes(32), rnd, 3)))
    assert not np.array_equal(rest, encoded)


def test_more_members_than_the_encodings_parties_are_refused():
    fed = Federation(5)
    adverts = {o: m.start(partial(fed._sign, o)) for o, m in fed.owners.items()}
    requests = fed.server.on_adverts(adverts)
    u = fed.ids[0]
    owner = fed.owners[u]
    owner.fixed_point = FixedPoint.choose(n_parties=4, max_abs=10.0)  # the run's encoding is for 4 parties
    with pytest.raises(RemoteProtocolError, match="exceed the encoding"):
        owner.on_share_keys(ShareKeysRequest(requests[u].members, requests[u].adverts, requests[u].rounds))
    assert owner.state is OwnerState.FAILED


@pytest.mark.parametrize("which", [0, -1])
def test_a_neighbours_unusable_mask_key_fails_the_machine(which):
    """Dropping the refusal of an unusable (low-order) mask key passed: the machine then raised an
    UnboundLocalError (not a protocol error: not FAILED) for its first neighbour, and for a later one keyed
    that neighbour with the previous neighbour's agreement, silently."""
    fed = Federation(6)
    adverts = {o: m.start(partial(fed._sign, o)) for o, m in fed.owners.items()}
    requests = fed.server.on_adverts(adverts)
    u = fed.ids[0]
    req = requests[u]
    bad = req.adverts[which].owner_id
    forged = tuple(KeyAdvert(a.owner_id, bytes(32), a.signature) if a.owner_id == bad else a for a in req.adverts)
    with pytest.raises(RemoteProtocolError, match="unusable mask key"):
        fed.owners[u].on_share_keys(ShareKeysRequest(req.members, forged, req.rounds))
    assert fed.owners[u].state is OwnerState.FAILED
