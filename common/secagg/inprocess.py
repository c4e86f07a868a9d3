"""Secure sums with every party in this process, joined in memory, for tests, experiments and benchmarks.

Pairwise-mask secure aggregation (:class:`InProcessSecAgg`): the owners' state machines
(:mod:`.pairwise`) and the coordinator's (:mod:`.aggregator`); the networked drivers are
``privfed.server.job`` and ``privfed.owner.secagg``. The ring secure sum
(:func:`run_ring_in_process`): the parties' :class:`~privfed.common.secagg.ring.RingParty`
machines, messages passed through their wire form.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial

import numpy as np

from privfed.common.errors import ConfigError, LocalProtocolError, RoundFailed
from privfed.common.secagg.aggregator import SecAggServer
from privfed.common.secagg.boxes import Box, generate_private_key, local_boxes, public_bytes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.messages import KeyAdvert, MaskedInput, UnmaskReply, UnmaskRequest
from privfed.common.secagg.pairwise import SecAggOwner
from privfed.common.secagg.ring import Inbound, Outbound, RingParty, State, new_session_id
from privfed.common.secagg.ring_topology import check_ring, ring_peers


class InProcessSecAgg:
    """Owners' machines and the coordinator's machine of one run in this process, joined in memory.

    For tests, experiments and benchmarks: long-lived box keys drawn here, mask keys unsigned
    unless ``verify`` and ``sign`` are given. Each step takes the owners that stay silent in it.
    """

    def __init__(
        self,
        owners: Sequence[str],
        fixed_point: FixedPoint,
        run_id: str,
        *,
        rounds: int,
        verify: Callable[[KeyAdvert], None] = lambda advert: None,
        sign: Callable[[str, bytes], bytes] = lambda owner, pk: b"",
    ) -> None:
        self.ids = list(owners)
        self.fp = fixed_point
        self._sign = sign
        keys = {o: generate_private_key() for o in self.ids}
        publics = {o: public_bytes(k) for o, k in keys.items()}

        def box_for(o: str) -> Callable[[str], Box]:
            return lambda peer: Box(o, keys[o], peer, publics[peer])

        self.owners = {o: SecAggOwner(o, run_id, fixed_point, box_for(o), verify) for o in self.ids}
        self.server = SecAggServer(run_id, self.ids, fixed_point, rounds=rounds)

    def key_agreement(self, *, no_advert: Iterable[str] = (), no_shares: Iterable[str] = ()) -> None:
        """Steps 0 and 1."""
        skip = set(no_advert)
        adverts = {o: m.start(partial(self._sign, o)) for o, m in self.owners.items() if o not in skip}
        requests = self.server.on_adverts(adverts)
        skip |= set(no_shares)
        self.server.on_key_shares({o: self.owners[o].on_share_keys(r) for o, r in requests.items() if o not in skip})

    def masked(self, values: Mapping[str, np.ndarray], *, silent: Iterable[str] = ()) -> dict[str, MaskedInput]:
        """Step 2 of the next round: the masked inputs of those that answer."""
        requests = self.server.input_requests()
        quiet = set(silent)
        return {o: self.owners[o].masked_input(r, values[o]) for o, r in requests.items() if o not in quiet}

    def unmask(self, requests: Mapping[str, UnmaskRequest], *, silent: Iterable[str] = ()) -> dict[str, UnmaskReply]:
        """Step 3 answers of those that answer."""
        quiet = set(silent)
        return {o: self.owners[o].on_unmask(r) for o, r in requests.items() if o not in quiet}

    def round(
        self,
        values: Mapping[str, np.ndarray],
        *,
        silent_input: Iterable[str] = (),
        silent_unmask: Iterable[str] = (),
        attempts: int = 1,
    ) -> np.ndarray:
        """One secure sum; run again (up to ``attempts`` in all) when :meth:`SecAggServer.on_masked` asks."""
        for attempt in range(attempts):
            try:
                requests = self.server.on_masked(self.masked(values, silent=silent_input))
            except RoundFailed:
                if attempt + 1 == attempts:
                    raise
                continue
            return self.server.on_unmask(self.unmask(requests, silent=silent_unmask))
        raise RoundFailed("no attempt")  # attempts < 1


def drive_in_process(
    values: Mapping[str, np.ndarray],
    fixed_point: FixedPoint,
    run_id: str,
    *,
    rounds: int = 1,
    drop: Mapping[str, Sequence[str]],
) -> list[np.ndarray]:
    """The body of :func:`run_in_process`."""
    run = InProcessSecAgg(list(values), fixed_point, run_id, rounds=2 * rounds)
    run.key_agreement(no_advert=drop.get("keys", ()), no_shares={*drop.get("keys", ()), *drop.get("shares", ())})
    gone = {o for step in ("keys", "shares", "input") for o in drop.get(step, ())}
    totals = [run.round(values, silent_input=gone, silent_unmask=drop.get("unmask", ()), attempts=2)]
    gone |= set(drop.get("unmask", ()))
    totals += [run.round(values, silent_input=gone, attempts=2) for _ in range(rounds - 1)]
    return totals


def run_in_process(
    values: Mapping[str, np.ndarray],
    fixed_point: FixedPoint,
    run_id: str,
    *,
    rounds: int = 1,
    drop: Mapping[str, Sequence[str]] | None = None,
) -> list[np.ndarray]:
    """Run ``rounds`` secure sums among owners in this process; return each round's total.

    For tests, experiments and benchmarks: unsigned keys, fresh long-lived box keys.
    ``drop[step]`` lists owners that stop answering from that step on (``"keys"``, ``"shares"``,
    ``"input"``, ``"unmask"``); :class:`~privfed.common.secagg.aggregator.SecAggServer` does the rest.
    """
    return drive_in_process(values, fixed_point, run_id, rounds=rounds, drop=drop or {})


def run_ring_in_process(
    values_by_party: Mapping[str, np.ndarray],
    fixed_point: FixedPoint,
    boxes: Mapping[str, Mapping[str, Box]] | None = None,
    ring_order: Sequence[str] | None = None,
    *,
    session_id: str | None = None,
) -> np.ndarray:
    """Run one ring secure sum with every party in this process; return the total.

    The same :class:`RingParty` machines as the networked driver, messages passed through
    ``to_bytes``/``from_bytes``, delivered in FIFO order. For tests, experiments and benchmarks.

    Parameters
    ----------
    values_by_party : mapping party id → 1-D array
    fixed_point : FixedPoint
    boxes : mapping, optional
        ``boxes[party][peer]``; default: fresh X25519 keys and the boxes the ring needs.
    ring_order : list of str, optional
        Default: the order of ``values_by_party``.
    session_id : str, optional
        Default: :func:`new_session_id`.

    Raises
    ------
    ConfigError
        Ring and values disagree, or any machine's configuration error.
    """
    ring = list(values_by_party) if ring_order is None else list(ring_order)
    if sorted(ring) != sorted(values_by_party):
        raise ConfigError(f"ring_order {ring} must list exactly the parties of values_by_party {list(values_by_party)}")
    session_id = new_session_id() if session_id is None else session_id
    if boxes is None:
        keys = {p: generate_private_key() for p in ring}
        boxes = local_boxes(keys, partial(ring_peers, check_ring(ring)))
    missing = [p for p in ring if p not in boxes]
    if missing:
        raise ConfigError(f"no boxes for parties {missing}")
    parties = {p: RingParty(p, ring, session_id, fixed_point, boxes[p]) for p in ring}
    queue: deque[Outbound] = deque()
    for p in ring:
        queue.extend(parties[p].start(values_by_party[p]))
    while queue:
        msg = Inbound.from_bytes(queue.popleft().to_bytes())
        queue.extend(parties[msg.recipient].on_message(msg))
    stuck = {p: m.state.name for p, m in parties.items() if m.state is not State.DONE}
    if stuck:
        raise LocalProtocolError(f"in-process ring ended with parties not DONE: {stuck}")
    total = parties[ring[0]].result()
    assert total is not None  # every party is DONE
    return total
