"""Who is in a ring secure sum and who talks to whom (SPEC §11.2; seed paper 002 §3.3).

:func:`check_ring` validates a ring (distinct ids, at least 2 parties); :func:`ring_peers` names the
peers a party needs a :class:`~privfed.common.secagg.boxes.Box` for; :func:`reform_ring` drops
parties that failed an attempt, :func:`complained_hops` names both ends of each hop whose recipient complained that it
did not open (A33-2) and :func:`stalled_party` the one that stalled it otherwise, all for the
coordinator's machine (:class:`privfed.common.secagg.transitions.SecureSum`). The party's own
machine is :class:`privfed.common.secagg.ring.RingParty`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from privfed.common.errors import ConfigError
from privfed.common.secagg.sizes import MAX_ID_BYTES


def check_id(name: str, value: object, error: type[Exception]) -> None:
    if not isinstance(value, str) or not 1 <= len(value.encode("utf-8")) <= MAX_ID_BYTES:
        raise error(f"{name} must be a str of 1..{MAX_ID_BYTES} UTF-8 bytes, got {value!r:.80}")


class _RingCheckCache:
    """The last ring validated, held by reference: every party of a session is built from the
    same tuple, and validating (or even hashing) N ids for each of N parties would make a ring
    O(N^2). Identity is safe because the cache keeps the object alive."""

    last: tuple = ()


def check_ring(ring: Sequence[str]) -> tuple[str, ...]:
    if ring is _RingCheckCache.last:
        return ring
    ring = tuple(ring)
    for p in ring:
        check_id("ring member", p, ConfigError)
    if len(set(ring)) != len(ring):
        raise ConfigError(f"ring has duplicate party ids: {list(ring)}")
    if len(ring) < 2:
        raise ConfigError(
            f"a ring secure sum needs at least 2 parties, got {list(ring)}; with one party the sum "
            "is that party's own input, so nothing can be hidden"
        )
    _RingCheckCache.last = ring
    return ring


def ring_peers(ring: Sequence[str], party_id: str, index: int | None = None) -> list[str]:
    """The peers ``party_id`` needs a :class:`Box` for: all others for the leader (RESULT), else
    predecessor, successor and leader.

    ``index`` is ``party_id``'s position in ``ring`` if the caller knows it (O(1) for a member
    instead of a scan: a coordinator that builds the peers of every member of a ring of N
    parties would otherwise spend O(N^2)).
    """
    k = list(ring).index(party_id) if index is None else index
    if ring[k] != party_id:
        raise ConfigError(f"ring position {k} holds {ring[k]!r}, not {party_id!r}")
    if k == 0:
        return list(ring[1:])
    return list(dict.fromkeys((ring[k - 1], ring[(k + 1) % len(ring)], ring[0])))


def reform_ring(ring: Sequence[str], dropped: Iterable[str]) -> list[str]:
    """``ring`` without ``dropped``, order kept (the next party leads if the leader dropped).

    Raises
    ------
    ConfigError
        If a dropped id is not in the ring, or fewer than 2 parties remain.
    """
    ring, dropped = list(ring), set(dropped)
    if unknown := dropped - set(ring):
        raise ConfigError(f"cannot drop {sorted(unknown)}: not in ring {ring}")
    return list(check_ring([p for p in ring if p not in dropped]))


def complained_hops(ring: Sequence[str], complaints: Iterable[tuple[str, str]]) -> set[str]:
    """Both ends of every ``(complainer, accused)`` hop in ``ring`` whose recipient said the message did not open.

    Audit 33, A33-2: the coordinator cannot tell whether the accused sealed garbage or the complainer lies, so it
    drops both. A hostile sealer then takes at most its one recipient with it (not every honest successor in turn,
    as when the recipient's silence was blamed as a stall), and a false complainer loses its own place each time
    with the one owner it names. The relay records a complaint only about an envelope it relayed from the accused
    to the complainer in the session (``privfed.server.relay``), so a member can name only a peer that sealed to it.
    """
    members = set(ring)
    return {p for pair in complaints if set(pair) <= members and pair[0] != pair[1] for p in pair}


def stalled_party(ring: Sequence[str], hop_senders: Iterable[str]) -> str:
    """Which party stalled a session, from the senders of the ``HOP`` messages the relay saw.

    It is the first party in ring order that sent no hop; if all did, the leader (which got the
    return hop but did not announce).
    """
    seen = set(hop_senders)
    return next((p for p in ring if p not in seen), ring[0])
