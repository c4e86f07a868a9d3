"""The coordinator's keyed pairwise-mask runs, kept across secure sums (SPEC §11).

A key agreement (:class:`~privfed.common.secagg.requests.KeyAgreement`) costs each owner one Shamir
sharing of a self-mask seed per round it serves, so a run is keyed for several sums and reused by
later sums among its members. :class:`KeyedRuns` holds them: which run serves a sum (:meth:`keyed`),
how many rounds a new one gets (:meth:`rounds_for`), and which planned groups one batch keys up front
(:meth:`to_prepare`). The decisions a sum takes on them are the machines'
(:mod:`privfed.common.secagg.transitions`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from privfed.common.secagg.aggregator import SecAggServer
from privfed.common.secagg.masking import MIN_MEMBERS
from privfed.common.secagg.messages import MAX_ROUNDS

#: Secure sums one pairwise-mask key agreement serves for members keyed before.
SECAGG_ROUNDS = 16
#: Attempts of one pairwise-mask secure sum, and the sums a first key agreement serves.
SECAGG_ATTEMPTS = 3
#: Keyed pairwise-mask runs kept, as many as an owner node keeps (``privfed.owner.secagg.KEPT_SESSIONS``).
KEPT_RUNS = 64
#: Runs one preparation keys at most: half of what both sides keep, so runs keyed later by their
#: first sum never evict a prepared one unused.
PREPARED_RUNS = KEPT_RUNS // 2


class KeyedRuns:
    """The keyed pairwise-mask runs of one coordinator, newest last (at most :data:`KEPT_RUNS`)."""

    def __init__(self) -> None:
        self.runs: tuple[SecAggServer, ...] = ()

    def keyed(self, owners: Iterable[str], max_abs: float) -> SecAggServer | None:
        """A keyed run (same public range, rounds left) in which every one of ``owners`` can take part:
        still in the run, with ``t`` neighbours among them (owners gone since may leave too few)."""
        wanted = sorted(set(owners))
        for server in reversed(self.runs):
            if (
                server.rounds_left > 0
                and server.fixed_point.max_abs == max_abs
                and set(wanted) <= server.keyed - server.burned
                and len(server.participants(wanted)) == len(wanted)
            ):
                return server
        return None

    def rounds_for(self, owners: Iterable[str]) -> int:
        """Rounds of a new key agreement among ``owners``: more when the same members keyed before."""
        again = any(set(s.members) == set(owners) for s in self.runs)
        return SECAGG_ROUNDS if again else SECAGG_ATTEMPTS

    def keep(self, servers: Iterable[SecAggServer]) -> None:
        self.runs = (*self.runs, *servers)[-KEPT_RUNS:]

    def to_prepare(self, sums: Mapping[tuple[str, ...], int], max_abs: float) -> list[tuple[tuple[str, ...], int]]:
        """(members, rounds) of the runs one batch keys for planned pairwise-mask ``sums`` (members ->
        sums among them): a run per distinct group with a self-mask seed per sum plus
        ``SECAGG_ATTEMPTS - 1``, at most :data:`PREPARED_RUNS`, the first ones; none for a group that
        overlaps an earlier one of the batch or that a kept run serves (those are keyed by their first sum)."""
        batch: list[tuple[tuple[str, ...], int]] = []
        taken: set[str] = set()
        for members, n in sums.items():
            if len(batch) == PREPARED_RUNS:
                break
            if len(members) >= MIN_MEMBERS and taken.isdisjoint(members) and self.keyed(members, max_abs) is None:
                taken.update(members)
                batch.append((members, min(MAX_ROUNDS, n + SECAGG_ATTEMPTS - 1)))
        return batch
