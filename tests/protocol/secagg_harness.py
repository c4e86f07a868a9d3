"""N pairwise-mask secure-aggregation machines and the coordinator's machine, wired in memory.

The owners are real :class:`SecAggOwner` machines with real end-to-end boxes; the test plays the
driver (or a hostile coordinator) and decides what each step delivers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from privfed.common.secagg.aggregator import SecAggServer
from privfed.common.secagg.boxes import Box, generate_private_key, public_bytes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.messages import KeyAdvert, MaskedInput, UnmaskReply, UnmaskRequest
from privfed.common.secagg.pairwise import SecAggOwner


class Federation:
    """``n`` owners ``o000..`` with their machines, keyed by a coordinator machine of ``rounds`` rounds."""

    def __init__(
        self,
        n: int,
        *,
        rounds: int = 4,
        max_abs: float = 10.0,
        run_id: str = "run-test",
        verify: Callable[[KeyAdvert], None] = lambda advert: None,
    ) -> None:
        self.ids = [f"o{i:03d}" for i in range(n)]
        self.fp = FixedPoint.choose(n_parties=n, max_abs=max_abs)
        keys = {o: generate_private_key() for o in self.ids}
        publics = {o: public_bytes(k) for o, k in keys.items()}

        def box_for(o: str) -> Callable[[str], Box]:
            return lambda peer: Box(o, keys[o], peer, publics[peer])

        self.owners = {o: SecAggOwner(o, run_id, self.fp, box_for(o), verify) for o in self.ids}
        self.server = SecAggServer(run_id, self.ids, self.fp, rounds=rounds)

    def key_agreement(self, *, no_advert: Iterable[str] = (), no_shares: Iterable[str] = ()) -> None:
        skip = set(no_advert)
        requests = self.server.on_adverts({o: m.start(lambda pk: b"") for o, m in self.owners.items() if o not in skip})
        skip |= set(no_shares)
        self.server.on_key_shares({o: self.owners[o].on_share_keys(r) for o, r in requests.items() if o not in skip})

    def masked(self, values: Mapping[str, np.ndarray], *, silent: Iterable[str] = ()) -> dict[str, MaskedInput]:
        """Step 2 of the next round: the masked inputs of those that answer."""
        requests = self.server.input_requests()
        return {o: self.owners[o].masked_input(r, values[o]) for o, r in requests.items() if o not in set(silent)}

    def unmask(self, requests: Mapping[str, UnmaskRequest], *, silent: Iterable[str] = ()) -> dict[str, UnmaskReply]:
        return {o: self.owners[o].on_unmask(r) for o, r in requests.items() if o not in set(silent)}

    def round(
        self,
        values: Mapping[str, np.ndarray],
        *,
        silent_input: Iterable[str] = (),
        silent_unmask: Iterable[str] = (),
    ) -> np.ndarray:
        requests = self.server.on_masked(self.masked(values, silent=silent_input))
        return self.server.on_unmask(self.unmask(requests, silent=silent_unmask))

    def exact_sum(self, values: Mapping[str, np.ndarray], included: Iterable[str]) -> np.ndarray:
        """What the secure sum must return: the ring sum of the encoded values, decoded."""
        total = np.zeros(len(next(iter(values.values()))), dtype=np.uint64)
        for o in included:
            total = FixedPoint.add(total, self.fp.encode(values[o]))
        return self.fp.decode(total)
