"""The coordinator's secure sums, sans-I/O (SPEC §11): as h11's ``Connection`` over its ``_state.py``.

One :class:`SecureSumCoordinator` serves every secure sum of a coordinator: it picks each sum's
protocol (:func:`~privfed.common.secagg.secure_sum_for`: the ring or pairwise masks), keeps the keyed
pairwise-mask runs later sums reuse (:class:`~privfed.common.secagg.runs.KeyedRuns`), and builds the
machine of each sum (:class:`~privfed.common.secagg.transitions.SecureSum`) and of a job's batch key
agreement (:class:`~privfed.common.secagg.transitions.KeyPreparation`). Every transition of those
machines is in :mod:`privfed.common.secagg.transitions`; the driver that runs them over a transport is
``privfed.server.securesum``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from privfed.common.secagg import SECURE_SUMS, secure_sum_for
from privfed.common.secagg.events import PeerKeys
from privfed.common.secagg.requests import KeyAgreement
from privfed.common.secagg.runs import KeyedRuns
from privfed.common.secagg.transitions import KeyPreparation, SecureSum, attempt_timeout
from privfed.common.tasks import RingSpec, TaskSpec
from privfed.common.validation import check_choice


class SecureSumCoordinator(KeyedRuns):
    """Every secure sum of one coordinator (module docstring): the default protocol and the keyed runs."""

    def __init__(self, protocol: str = "auto") -> None:
        super().__init__()
        self.protocol = check_choice(protocol, name="secure_sum", allowed=SECURE_SUMS)

    def secure_sum(
        self,
        parties: Sequence[str],
        task_for: Callable[[RingSpec], TaskSpec],
        *,
        max_abs: float,
        peer_key: PeerKeys,
        certificates: Mapping[str, bytes],
        timeout: float | None = None,
        protocol: str | None = None,
    ) -> SecureSum:
        """The machine of one sum of ``parties`` (in ring order), each asked ``task_for(its ring spec)``."""
        chosen = secure_sum_for(protocol or self.protocol, len(parties))
        return SecureSum(self, chosen, parties, task_for, max_abs, peer_key, certificates, timeout)

    def prepare(
        self,
        groups: Sequence[Sequence[str]],
        *,
        max_abs: float,
        peer_key: PeerKeys,
        certificates: Mapping[str, bytes],
        timeout: float | None = None,
        protocol: str | None = None,
    ) -> KeyPreparation | None:
        """Key the pairwise-mask runs of planned sums in one batch (None: nothing to key): the runs
        :meth:`~privfed.common.secagg.runs.KeyedRuns.to_prepare` picks; nothing for a group summed by
        the ring; a group left out, or one whose key agreement fails, is keyed by its first sum."""
        sums: dict[tuple[str, ...], int] = {}
        for group in groups:
            if secure_sum_for(protocol or self.protocol, len(set(group))) == "secagg":
                members = tuple(sorted(set(group)))
                sums[members] = sums.get(members, 0) + 1
        batch = self.to_prepare(sums, max_abs)
        if not batch:
            return None
        agreement = KeyAgreement(batch, max_abs, peer_key, certificates, strict=False)
        return KeyPreparation(self, agreement, attempt_timeout(sum(len(m) for m, _ in batch), timeout))
