"""Audit 35 (A35-3, not a privacy finding: the report's accounting): a job's report names, per owner, the ε of the
releases it was asked whose answer never came (``epsilon_unanswered_by_owner``, walkthrough 10, W10-3: what it may
have spent beyond ``epsilon_by_owner``). A batch the quorum stops before it goes out (``JobBook.to_ask`` checks it
before a batch that releases) asked no one: its releases must not be named there, where the data user and the
operator read that each of its owners may have spent them.
"""

from __future__ import annotations

import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import QuorumLost
from privfed.common.identity import owner_id
from privfed.server.contracts import PublicLimits
from privfed.server.rounds import JobBook
from privfed.server.strategies import make_strategy

OWNERS = [owner_id("owner-0", i) for i in range(4)]


def test_a_batch_the_quorum_stops_before_it_goes_out_is_not_reported_as_asked():
    tasks = make_strategy("ncc", epsilon=2.0, labels="rr", n_classes=2, bounds=Bounds.of(0.0, 1.0, 3)).configure(
        OWNERS, "r1"
    )
    book = JobBook(PublicLimits(max_rows=2), quorum=3, owner_ids=OWNERS)
    with pytest.raises(QuorumLost, match="before anyone spends more|before any release"):
        book.to_ask(tasks, silent_owners=set(OWNERS))  # every node gone: the batch never goes out
    assert book.unanswered_epsilon() == {}
    assert book.to_report()["epsilon_unanswered_by_owner"] == {}
