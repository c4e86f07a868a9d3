"""Audit 27: an owner a resumed job counted gone (its node did not register again in time) is asked nothing more in
the job, also when its node comes back while the job runs.

``run_job`` books the planned owners whose node missed the register timeout as ``gone`` (``JobBook.lose``,
c92c004/4e1b654). ``JobBook.to_ask`` drops their tasks and ``GrpcTransport.silent_owners`` keeps them out of every
ring. Whether the node is registered again does not matter: the book is the job's, and the dispatcher's liveness
is not asked. (Whatever a coordinator sends, the owner's ledger bounds what it pays. This is the honest
coordinator's side: a node back late is not asked for the rounds the job went on without it.)
"""

from __future__ import annotations

import pytest

from privfed.common.tasks import JoinTask, Task
from privfed.server.job import GrpcTransport
from privfed.server.rounds import JobBook, PublicLimits

pytestmark = pytest.mark.in_process


class _EveryNodeBack:
    """A dispatcher whose every node is registered and answering again."""

    def silent_owners(self) -> set[str]:
        return set()


def test_a_gone_owner_is_asked_nothing_and_joins_no_ring_when_its_node_is_back():
    book = JobBook(PublicLimits(max_rows=20))
    book.begin(["owner-0.o00000", "owner-0.o00001"], asked=3)
    book.lose(["owner-1.o00000"])
    tasks = [Task(f"t{i}", o, "r", JoinTask()) for i, o in enumerate(["owner-0.o00000", "owner-1.o00000"])]
    assert [t.owner_id for t in book.to_ask(tasks)] == ["owner-0.o00000"]
    transport = GrpcTransport(lambda *a: [], _EveryNodeBack(), book=book)  # type: ignore[arg-type]
    assert "owner-1.o00000" in transport.silent_owners()
    assert book.to_report()["lost_nodes"] == ["owner-1"]
