"""N pairwise-mask secure-aggregation machines and the coordinator's machine, wired in memory.

The owners are real :class:`SecAggOwner` machines with real end-to-end boxes
(:class:`~privfed.common.secagg.inprocess.InProcessSecAgg`); the test plays the driver (or a
hostile coordinator) and decides what each step delivers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.inprocess import InProcessSecAgg
from privfed.common.secagg.messages import KeyAdvert


class Federation(InProcessSecAgg):
    """``n`` owners ``o000..`` keyed by a coordinator machine of ``rounds`` rounds."""

    def __init__(
        self,
        n: int,
        *,
        rounds: int = 4,
        max_abs: float = 10.0,
        run_id: str = "run-test",
        verify: Callable[[KeyAdvert], None] = lambda advert: None,
        sign: Callable[[str, bytes], bytes] = lambda owner, pk: b"",
    ) -> None:
        ids = [f"o{i:03d}" for i in range(n)]
        super().__init__(
            ids, FixedPoint.choose(n_parties=n, max_abs=max_abs), run_id, rounds=rounds, verify=verify, sign=sign
        )

    def exact_sum(self, values: Mapping[str, np.ndarray], included: Iterable[str]) -> np.ndarray:
        """What the secure sum must return: the ring sum of the encoded values, decoded."""
        total = np.zeros(len(next(iter(values.values()))), dtype=np.uint64)
        for o in included:
            total = FixedPoint.add(total, self.fp.encode(values[o]))
        return self.fp.decode(total)
