"""Where an owner node's rows come from: a partition of a built-in data set (simulation) or
its own file. The split and partition are deterministic in the seed, so the launcher and every
node agree on who holds which rows without any row being shipped."""

from __future__ import annotations

import numpy as np

from privfed.common.datasets import Dataset, federation_split, load_file, partition  # federation_split: re-exported
from privfed.common.errors import ConfigError
from privfed.common.identity import owner_id
from privfed.common.rng import make_rng
from privfed.owner.handlers import LocalOwner

__all__ = ["owner_id", "parse_shards", "federation_split", "owner_generator", "build_owners", "load_owner_file"]


def parse_shards(spec: str, n_owners: int) -> range:
    """``"A:B"`` hosts logical owners A..B-1; ``"K"`` hosts 0..K-1."""
    try:
        if ":" in spec:
            a, b = (int(p) for p in spec.split(":", 1))
        else:
            a, b = 0, int(spec)
    except ValueError:
        raise ConfigError(f"--shards must be 'A:B' or a count, got {spec!r}") from None
    if not 0 <= a < b <= n_owners:
        raise ConfigError(f"--shards {spec!r} must satisfy 0 <= A < B <= --n-owners ({n_owners})")
    return range(a, b)


def owner_generator(kind: str, seed: int | None, index: int) -> np.random.Generator:
    if kind == "seeded":
        if seed is None:
            raise ConfigError("--rng seeded needs --seed")
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, index])))
    return make_rng("secure")


def build_owners(
    train: Dataset, *, node_id: str, n_owners: int, shards: range, seed: int, rng_kind: str, rng_seed: int | None
) -> list[LocalOwner]:
    """The logical owners ``shards`` of a partition of ``train`` into ``n_owners``, hosted by node
    ``node_id``: owner ``i`` is ``owner_id(node_id, i)`` (contract 1), so the node's certificate
    decides which ids it speaks for. Each owner's public configuration is the data set's classes."""
    parts = partition(train.X.shape[0], n_owners, seed=seed)
    return [
        LocalOwner(
            owner_id=owner_id(node_id, i),
            X=train.X[parts[i]],
            y=train.y[parts[i]],
            rng=owner_generator(rng_kind, rng_seed, i),
            n_classes=train.n_classes,
        )
        for i in shards
    ]


def load_owner_file(path: str, bounds_spec: str | None, n_classes: int | None, n_label_columns: int = 1) -> Dataset:
    """An owner's own rows with its declared public configuration.

    ``n_classes`` (``--classes K``, 2 by default) is public: labels are the integers ``0 .. K-1``
    and a row whose label falls outside them is rejected here, with a one-line local error. The
    number of classes is never taken from the rows (a task's class count is checked against it,
    and a refusal that depended on the labels held would tell the coordinator about them).
    """
    if bounds_spec is None:
        raise ConfigError(
            f"{path}: public bounds are required with --data (--bounds lo:hi or a JSON file); "
            "they are never computed from the private rows"
        )
    if not isinstance(n_classes, int) or n_classes < 2:
        raise ConfigError(
            f"{path}: --classes K must be an integer >= 2: the number of classes is public "
            f"configuration, never read from the private rows (got {n_classes!r})"
        )
    if n_label_columns != 1:
        raise ConfigError(f"{path}: owner files have exactly one label column, got n_label_columns={n_label_columns}")
    ds = load_file(path, bounds=bounds_spec, n_label_columns=1)
    labels = np.asarray(ds.classes)[ds.y]  # load_file stores labels as indices into the values it found
    bad = np.flatnonzero((labels < 0) | (labels >= n_classes))
    if bad.size:
        raise ConfigError(
            f"{ds.name}: row {int(bad[0]) + 1} has label {int(labels[bad[0]])}, outside the declared "
            f"classes 0..{n_classes - 1} (--classes {n_classes}; declare the number of classes with "
            "--classes K)"
        )
    return Dataset(ds.name, ds.X, labels.astype(np.int64), ds.bounds, np.arange(n_classes), ds.feature_names)
