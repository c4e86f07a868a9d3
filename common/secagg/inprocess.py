"""Pairwise-mask secure aggregation with every party in this process, joined in memory: the owners'
state machines (:mod:`.pairwise`) and the coordinator's (:mod:`.aggregator`). For tests, experiments
and benchmarks; the networked drivers are ``privfed.server.job`` and ``privfed.owner.secagg``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial

import numpy as np

from privfed.common.errors import RoundFailed
from privfed.common.secagg.aggregator import SecAggServer
from privfed.common.secagg.boxes import Box, generate_private_key, public_bytes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.messages import KeyAdvert, MaskedInput, UnmaskReply, UnmaskRequest
from privfed.common.secagg.pairwise import SecAggOwner


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
