"""Where an owner node's rows come from: a partition of a built-in data set (simulation) or
its own file. The split and partition are deterministic in the seed, so the launcher and every
node agree on who holds which rows without any row being shipped."""

from __future__ import annotations

import numpy as np

from privfed.common.datasets import Dataset, load_builtin, load_file, partition, train_test_split
from privfed.common.errors import ConfigError
from privfed.common.rng import make_rng
from privfed.owner.handlers import LocalOwner


def owner_id(index: int) -> str:
    return f"o{index:05d}"


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


def federation_split(name: str, *, seed: int, test_fraction: float,
                     n_samples: int | None = None) -> tuple[Dataset, Dataset]:
    """The (train, test) split of a built-in data set shared by the launcher and the nodes."""
    ds = load_builtin(name, n_samples=n_samples, seed=seed)
    return train_test_split(ds, test_fraction=test_fraction, seed=seed)


def owner_generator(kind: str, seed: int | None, index: int) -> np.random.Generator:
    if kind == "seeded":
        if seed is None:
            raise ConfigError("--rng seeded needs --seed")
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, index])))
    return make_rng("secure")


def build_owners(train: Dataset, *, n_owners: int, shards: range, seed: int, rng_kind: str,
                 rng_seed: int | None, id_prefix: str = "") -> list[LocalOwner]:
    parts = partition(train.X.shape[0], n_owners, seed=seed)
    return [LocalOwner(owner_id=f"{id_prefix}{owner_id(i)}", X=train.X[parts[i]], y=train.y[parts[i]],
                       rng=owner_generator(rng_kind, rng_seed, i)) for i in shards]


def load_owner_file(path: str, bounds_spec: str | None, n_label_columns: int = 1) -> Dataset:
    if bounds_spec is None:
        raise ConfigError(f"{path}: public bounds are required with --data (--bounds lo:hi or a JSON file); "
                          "they are never computed from the private rows")
    return load_file(path, bounds=bounds_spec, n_label_columns=n_label_columns)
