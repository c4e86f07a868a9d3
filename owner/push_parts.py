"""A node's results as PushResults requests that each fit the coordinator's message bound (issue 27).

A node that pulled many small tasks can hold results far larger than the tasks were: at 10^5 BDT owners
a node pulled ~4400 key-share tasks at once and their results came to 18-20 MB, past gRPC's 16 MiB. One
request per run of results that fits (:func:`~privfed.proto.transport.size_parts`), in order; only the
last asks for the node's next tasks (``pull``), so a node still takes its next tasks after it delivered
all its results.
"""

from __future__ import annotations

from collections.abc import Sequence

from privfed.common.tasks import Result
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde
from privfed.proto.transport import REQUEST_FIELDS_ROOM, size_parts


def push_parts(
    node_id: str, results: Sequence[Result], max_message_bytes: int, *, pull: bool = False, wait_ms: int = 0
) -> list[tuple[int, pb.PushResultsRequest]]:
    """``results`` as requests of at most ``max_message_bytes`` each, in order, each with the number
    of results it carries; the last with ``pull`` and ``wait_ms``. No results: one request (a poll)."""
    budget = max_message_bytes - len(node_id.encode()) - REQUEST_FIELDS_ROOM
    parts = size_parts([serde.result_to_proto(r) for r in results], budget)
    requests = [(len(p), pb.PushResultsRequest(node_id=node_id, results=p, hear_ended=True)) for p in parts]
    requests[-1][1].pull, requests[-1][1].wait_ms = pull, wait_ms
    return requests
