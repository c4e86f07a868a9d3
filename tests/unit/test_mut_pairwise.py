"""Mutation round 2 (common/secagg/pairwise.py ``_unmask``): an owner unmasks only the round it masked.

Dropping the refusal ``msg.round != self._round`` passed every secagg test, the hostile-coordinator ones
included. Without it a coordinator can ask, after round r, for the self-mask shares of another round's seed
(``at = (1 + round) * SHARE_BYTES`` reads whatever seed that round names): the seeds of rounds not yet masked,
or a round's shares twice. The either-or rule still holds per owner, so this is a protocol rule, not a
leak by itself; an exact check that it refuses, fails the machine and reveals nothing.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

from privfed.common.errors import RemoteProtocolError
from privfed.common.secagg.messages import UnmaskRequest
from privfed.common.secagg.pairwise import OwnerState

sys.path.insert(0, str(Path(__file__).parents[1]))
from protocol.secagg_harness import Federation  # noqa: E402


@pytest.mark.parametrize("shift", [1, -1])
def test_unmasking_a_round_other_than_the_masked_one_is_refused(shift):
    fed = Federation(8)
    fed.key_agreement()
    requests = fed.server.on_masked(fed.masked({o: np.array([1.0, 2.0]) for o in fed.ids}))
    honest = "o000"
    req = requests[honest]
    hostile = UnmaskRequest(req.round + shift, req.survivors, req.dropped)
    with pytest.raises(RemoteProtocolError, match="the masked round is"):
        fed.owners[honest].on_unmask(hostile)
    assert fed.owners[honest].state is OwnerState.FAILED


def test_unmasking_must_split_exactly_the_rounds_participants():
    """Dropping ``survivors | dropped != participants`` (or joining it to the length check with ``and``) passed
    every test: a coordinator could name an owner outside the round (here a member that is not a participant
    of this owner, swapped for one that is) and collect shares about it, and pass the threshold with it."""
    fed = Federation(8)
    fed.key_agreement()
    requests = fed.server.on_masked(fed.masked({o: np.array([1.0, 2.0]) for o in fed.ids}))
    honest = "o000"
    req = requests[honest]
    named = {*req.survivors, *req.dropped}
    outsider = next(o for o in fed.ids if o != honest and o not in named)
    hostile = UnmaskRequest(req.round, (outsider, *req.survivors[1:]), req.dropped)
    with pytest.raises(RemoteProtocolError, match="split exactly"):
        fed.owners[honest].on_unmask(hostile)
    assert fed.owners[honest].state is OwnerState.FAILED
