"""Waiting for the owners a job expects, and saying who is missing (issue 23, item 5).

While it waits, the coordinator logs at intervals how many owners registered, which nodes did,
and who has not: the node certificates of the federation it can see that no node registered
under, and, for a built-in data set's partition, the owner indices no node registered. The
timeout's error names them too, so a user knows which node to start or to look at.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from privfed.common.errors import ConfigError
from privfed.common.identity import SEPARATOR
from privfed.common.roles import DATA_USER, role_of
from privfed.server.dispatcher import Dispatcher

log = logging.getLogger("privfed.coordinator")

#: Seconds between the log lines that name who has not registered yet.
REPORT_EVERY = 10.0
#: At most this many names in one line (the rest are counted).
MAX_NAMES = 10


@dataclass(frozen=True)
class Expected:
    """Who a job waits for: ``owners`` logical owners; ``nodes``, node ids the federation issued
    certificates to (public: the coordinator can see them); ``partition``, the owner count of a
    built-in data set's partition, whose owner ``i`` is ``<node>.o<i>`` whatever node hosts it."""

    owners: int
    nodes: tuple[str, ...] = ()
    partition: int | None = None


def certificate_nodes(cert_dir: Path) -> tuple[str, ...]:
    """Node ids of the owner certificates in ``cert_dir`` (``privfed certs`` writes ``<node>.pem``),
    the CA's and the coordinator's aside; empty if the directory holds none (compose's coordinator
    sees only ``ca.pem`` and its own pair)."""
    names = {p.stem for p in cert_dir.glob("*.pem")} - {"ca", "coordinator"}
    nodes = (n for n in names if not n.endswith("-key") and not _data_user(cert_dir / f"{n}.pem"))
    return tuple(sorted(nodes, key=_natural))


def _data_user(path: Path) -> bool:
    """Whether ``path`` is a data user's certificate (no node registers under it)."""
    try:
        return role_of(path.read_bytes()) == DATA_USER
    except (OSError, ConfigError):
        return False


def _natural(name: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _ranges(values: Iterable[int]) -> str:
    """``0-4, 7, 9-12`` (at most MAX_NAMES ranges)."""
    spans: list[list[int]] = []
    for v in sorted(values):
        if spans and v == spans[-1][1] + 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in spans[:MAX_NAMES]]
    return ", ".join(text) + (f", ... ({len(spans) - MAX_NAMES} more ranges)" if len(spans) > MAX_NAMES else "")


def _names(names: list[str]) -> str:
    more = f", ... ({len(names) - MAX_NAMES} more)" if len(names) > MAX_NAMES else ""
    return ", ".join(names[:MAX_NAMES]) + more


def missing(expected: Expected, owners: Iterable[str], nodes: dict[str, int]) -> str:
    """Who has not registered, in one line (empty if nothing more can be said)."""
    parts = []
    absent = [n for n in expected.nodes if n not in nodes]
    if absent:
        parts.append(f"no node registered yet with certificate {_names(absent)}")
    if expected.partition is not None:
        held = set()
        for o in owners:
            match = re.fullmatch(r"o(\d+)", o.rpartition(SEPARATOR)[2])
            if match:
                held.add(int(match.group(1)))
        gone = set(range(expected.partition)) - held
        if gone:
            parts.append(f"owner indices {_ranges(gone)} of the {expected.partition}-owner partition not registered")
    return "; ".join(parts)


def status(dispatcher: Dispatcher, expected: Expected) -> str:
    """``k of N owners registered (nodes: owner-0 with 200, owner-1 silent); <who is missing>``: only the owners
    of nodes that call count (:meth:`~privfed.server.dispatcher.Dispatcher.live_owners`); a node silent for longer
    than the node timeout (exited, or hung) is named ``silent``, one that said it stops ``left``, and their owners
    are missing."""
    owners, states, every = dispatcher.live_owners(), dispatcher.node_states(), dispatcher.nodes()
    nodes = {n: k for n, k in every.items() if states.get(n, "online") == "online"}
    registered = ", ".join(
        [f"{n} with {k}" for n, k in sorted(nodes.items(), key=lambda kv: _natural(kv[0]))]
        + [f"{n} {state}" for n, state in sorted(states.items(), key=lambda kv: _natural(kv[0])) if state != "online"]
        # a node of the service's last run that has not registered since its restart (walkthrough 10, W10-6)
        + [f"{n} not back since the restart" for n in sorted(dispatcher.known_before - set(every), key=_natural)]
    )
    line = f"{len(owners)} of {expected.owners} owners registered (nodes: {registered or 'none'})"
    gone = missing(expected, owners, every)
    return f"{line}; {gone}" if gone else line


def wait_for_registration(
    dispatcher: Dispatcher,
    expected: Expected,
    timeout: float,
    progress: Callable[[int], None] | None = None,
    every: float = REPORT_EVERY,
) -> int:
    """Wait up to ``timeout`` s for ``expected.owners``; every ``every`` s, log :func:`status`.
    Returns the number registered (fewer on timeout or abort)."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        n = dispatcher.wait_for_owners(expected.owners, max(0.0, min(left, every)), progress)
        if n >= expected.owners or dispatcher.aborted or time.monotonic() >= deadline:
            return n
        log.info("waiting for owners: %s", status(dispatcher, expected))
