"""The open Session streams of the nodes (issue 27): one per node.

A node opens a session with its first message on the stream; a second session of the same node
ends the first (its ``cancel`` is called), so a node holds at most one of the coordinator's worker
threads with a session, as with a long poll, however often it reconnects. A session holds its thread
for as long as it is open, so at most ``capacity`` are open at once (half the workers by default,
:class:`~privfed.server.app.CoordinatorServer`): the nodes past it are told to use unary calls, whose
long polls free their thread within ``PULL_WAIT``, and a federation of more nodes than workers never
waits for a session to end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Sessions:
    """``capacity``: the most sessions open at once (None: no limit)."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._open: dict[str, tuple[object, Callable[[], object]]] = {}
        self.opened = 0  # sessions opened so far

    def open(self, node_id: str, cancel: Callable[[], object]) -> object | None:
        """Record a new session of ``node_id`` (``cancel`` ends it) and end its older one; returns
        the new session's token, or None when ``capacity`` sessions of other nodes are open."""
        token = object()
        with self._lock:
            older = self._open.get(node_id)
            if older is None and self.capacity is not None and len(self._open) >= self.capacity:
                return None
            self._open[node_id] = (token, cancel)
            self.opened += 1
        if older is not None:
            older[1]()
        return token

    def current(self, node_id: str, token: object) -> bool:
        """Whether ``token`` is ``node_id``'s newest session."""
        with self._lock:
            entry = self._open.get(node_id)
            return entry is not None and entry[0] is token

    def close(self, node_id: str, token: object) -> None:
        """Forget the session ``token`` (if it is still ``node_id``'s newest)."""
        with self._lock:
            entry = self._open.get(node_id)
            if entry is not None and entry[0] is token:
                del self._open[node_id]

    def end_all(self) -> int:
        """End every open session (each node opens another with its next exchange); returns how many."""
        with self._lock:
            ended, self._open = list(self._open.values()), {}
        for _, cancel in ended:
            cancel()
        return len(ended)

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)
