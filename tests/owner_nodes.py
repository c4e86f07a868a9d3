"""Owners spread over owner nodes, in process: the one fixture of the tests that host a partition's owners on
several nodes (``owner-0``, ``owner-1``, ...), as ``privfed simulate`` spreads them over its node processes."""

from __future__ import annotations

from privfed.common.dataset import Dataset
from privfed.owner.data import build_owners
from privfed.owner.local import LocalOwner


def owners_over_nodes(
    ds: Dataset, *, n_owners: int, n_nodes: int, seed: int = 0, rng_seed: int | None = None
) -> list[LocalOwner]:
    """The ``n_owners`` owners of a partition of ``ds`` (seed ``seed``), in index order, node ``owner-j``
    hosting the ``j``-th run of ``ceil(n_owners / n_nodes)`` of them; seeded noise (``rng_seed``, default
    ``seed``: each owner's generator is drawn from it and the owner's index)."""
    per = -(-n_owners // n_nodes)
    owners: list[LocalOwner] = []
    for j in range(n_nodes):
        shards = range(j * per, min((j + 1) * per, n_owners))
        owners += build_owners(
            ds,
            node_id=f"owner-{j}",
            n_owners=n_owners,
            shards=shards,
            seed=seed,
            rng_kind="seeded",
            rng_seed=seed if rng_seed is None else rng_seed,
        )
    return owners
