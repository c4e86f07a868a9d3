"""Where an owner node's rows come from: a partition of a built-in data set (simulation) or
its own file, checked against the federation schema (:mod:`privfed.common.schema`). The split and partition are deterministic in the seed, so the launcher and every
node agree on who holds which rows without any row being shipped."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from privfed.common.datasets import (  # federation_split: re-exported
    Dataset,
    federation_split,
    parse_bounds,
    partition,
    read_rows,
)
from privfed.common.errors import ConfigError
from privfed.common.identity import owner_id
from privfed.common.rng import make_rng
from privfed.common.schema import FederationSchema
from privfed.owner.local import LocalOwner

__all__ = [
    "owner_id",
    "parse_shards",
    "federation_split",
    "owner_generator",
    "row_digests",
    "build_owners",
    "OwnerRows",
    "read_owner_rows",
    "shorthand_schema",
    "check_owner_rows",
    "load_owner_file",
]


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


def row_digests(X: np.ndarray, y: np.ndarray) -> list[bytes]:
    """One digest per row: SHA-256 of the row's features and label (float64 and int64 bytes) and
    of how many identical rows come before it. The ledger keeps an account per digest
    (``Ledger.bind_rows``), so a row's spent budget follows its content and its occurrence, not
    the owner id or the partition it is in (issue 20, finding 4)."""
    X = np.ascontiguousarray(X, dtype="<f8")
    y = np.ascontiguousarray(y, dtype="<i8")
    seen: Counter[bytes] = Counter()
    out = []
    for i in range(X.shape[0]):
        content = X[i].tobytes() + y[i].tobytes()
        out.append(hashlib.sha256(b"privfed-row\0" + content + seen[content].to_bytes(8, "little")).digest())
        seen[content] += 1
    return out


def build_owners(
    train: Dataset, *, node_id: str, n_owners: int, shards: range, seed: int, rng_kind: str, rng_seed: int | None
) -> list[LocalOwner]:
    """The logical owners ``shards`` of a partition of ``train`` into ``n_owners``, hosted by node
    ``node_id``: owner ``i`` is ``owner_id(node_id, i)`` (contract 1), so the node's certificate
    decides which ids it speaks for. Each owner's public configuration is the data set's classes and
    bounds; each row carries its digest (:func:`row_digests`) for the ledger's row accounts."""
    parts = partition(train.X.shape[0], n_owners, seed=seed)
    digests = row_digests(train.X, train.y)
    return [
        LocalOwner(
            owner_id=owner_id(node_id, i),
            X=train.X[parts[i]],
            y=train.y[parts[i]],
            rng=owner_generator(rng_kind, rng_seed, i),
            n_classes=train.n_classes,
            bounds=train.bounds,
            row_keys=tuple(digests[j] for j in parts[i]),
        )
        for i in shards
    ]


@dataclass(frozen=True)
class OwnerRows:
    """An owner's own file as read, before it is checked against the federation schema: ``X``,
    the raw label values ``labels`` (n,), the header's feature names, and ``where(i)``, which
    names row i in the file ("line 7") for error messages."""

    name: str
    X: np.ndarray
    labels: np.ndarray
    feature_names: tuple[str, ...] | None
    where: Callable[[int], str]


def read_owner_rows(path: str) -> OwnerRows:
    """Read an owner's CSV (features, then one label column) or NPZ (X, y) file; one-line
    ConfigErrors naming file and line for unreadable content (:func:`privfed.common.datasets.read_rows`)."""
    X, labels, names, where = read_rows(path, n_label_columns=1, text_labels=True)
    return OwnerRows(Path(path).name, X, labels[:, 0], names, where)


def shorthand_schema(rows: OwnerRows, bounds_spec: str | None, n_classes: int) -> FederationSchema:
    """The schema the flags ``--bounds`` and ``--classes K`` describe for ``rows``: its feature
    count, the public bounds, class values ``0 .. K-1``. Never read from the rows' values."""
    if bounds_spec is None:
        raise ConfigError(
            f"{rows.name}: public bounds are required with --data (--schema FILE, or --bounds lo:hi or a JSON "
            "file); they are never computed from the private rows"
        )
    return FederationSchema.shorthand(parse_bounds(bounds_spec, rows.X.shape[1]), n_classes)


def check_owner_rows(rows: OwnerRows, schema: FederationSchema) -> Dataset:
    """``rows`` as a data set of ``schema``, labels mapped by value (:meth:`FederationSchema.dataset`);
    a wrong feature count or an unknown label is a one-line ConfigError naming file and line."""
    return schema.dataset(rows.name, rows.X, rows.labels, rows.where, rows.feature_names)


def load_owner_file(path: str, bounds_spec: str | None, n_classes: int, n_label_columns: int = 1) -> Dataset:
    """An owner's own rows under the shorthand schema of ``--bounds`` and ``--classes K``
    (labels must be ``0 .. K-1``); see :func:`check_owner_rows`. Owner files have one label column."""
    if n_label_columns != 1:
        raise ConfigError(f"{path}: owner files have exactly one label column, got n_label_columns={n_label_columns}")
    rows = read_owner_rows(path)
    return check_owner_rows(rows, shorthand_schema(rows, bounds_spec, n_classes))
