"""A user's data files: rows from CSV or NPZ, the raw table a federation schema reads, the schema, bounds specs.

Every :class:`Dataset` read from a user's file carries the *public* feature bounds given with it
(``--bounds lo:hi`` or a JSON file, :func:`parse_bounds`); they are never computed from the rows
(STYLE rule 6, SPEC §4). Errors are one line naming the file, the line or row and the fault.

This module and :mod:`privfed.common.datasets` (the built-in sets and their splits) are the
``datasets`` part of ``common`` allowed to read files (STYLE rule 1).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.dataset import Dataset
from privfed.common.errors import ConfigError
from privfed.common.validation import check_int

if TYPE_CHECKING:
    from privfed.common.schema import FederationSchema, RawTable


def _one_line(text: object, limit: int = 200) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def read_text(path: Path) -> str:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        import gzip  # here: an owner node reading plain CSV never loads it

        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ConfigError(f"{path.name}: corrupt gzip data ({_one_line(exc)})") from None
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):  # what spreadsheets save as "Unicode text" (walkthrough 7, W7-8)
        raise ConfigError(f"{path.name}: UTF-16 text (it starts with a UTF-16 byte-order mark); save it as CSV UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path.name}: line {line}: not UTF-8 text (is it a binary file?)") from None


def is_number(field: str) -> bool:
    """Whether a CSV field is a number as numpy's reader reads one (a line without one is a header)."""
    if not field.strip() or "_" in field:  # float() accepts '1_0', numpy's loadtxt does not
        return False
    try:
        float(field)
    except ValueError:
        return False
    return True


def parse_csv(
    name: str, text: str, n_label_columns: int
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...] | None, np.ndarray]:
    """Parse numeric CSV text: (X, labels (n, L) float, feature names or None, 1-based line numbers)."""
    numbered = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()]
    if not numbered:
        raise ConfigError(f"{name}: empty file (no rows)")
    header, ref = None, numbered[0][0]
    first = numbered[0][1].split(",")
    if not any(is_number(f) for f in first):
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
            if not is_number(field):
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
    if is_npz(path):
        X, labels = _load_npz(path)
        return X, labels, None, lambda i: f"row {i + 1}"
    X, labels, names, linenos = parse_csv(path.name, read_text(path), n_label_columns)
    return X, labels, names, lambda i: f"line {linenos[i]}"


def is_npz(path: Path) -> bool:
    """Whether ``path`` is an NPZ file (its suffix, or a zip archive's magic bytes), not CSV."""
    with path.open("rb") as fh:
        magic = fh.read(2)
    return path.suffix.lower() == ".npz" or magic == b"PK"


def existing_file(path: str | Path, what: str = "file") -> Path:
    """``path``, or a one-line :class:`ConfigError` if it is no file (missing, or a folder): ``a.csv: file not
    found``. An owner node checks its files so before it opens its ledger (walkthrough 14, W14-9: a mistyped
    ``--data`` left a new, empty ledger behind)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: {what} not found")
    return path


def read_table(path: str | Path) -> RawTable:
    """A data file as read, before any schema applies (:class:`~privfed.common.schema.RawTable`):
    a CSV's non-blank lines (UTF-8, optionally gzip-compressed), or an NPZ's ``X`` and ``y`` arrays
    written as lines (no header: columns in schema order). One-line ConfigErrors for a missing,
    binary or empty file; the schema names any bad line or cell (:func:`privfed.common.schema.load_rows`)."""
    from privfed.common.schema import RawTable  # the schema package imports this module lazily

    path = existing_file(path)
    if is_npz(path):
        X, labels = _load_npz(path)
        cells = np.hstack([X.astype(str), labels.astype(str)])
        lines = tuple(",".join(row) for row in cells)
        return RawTable(path.name, lines, tuple(range(1, len(lines) + 1)), unit="row", positional=True)
    numbered = [(i + 1, line) for i, line in enumerate(read_text(path).splitlines()) if line.strip()]
    if not numbered:
        raise ConfigError(f"{path.name}: empty file (no rows)")
    return RawTable(path.name, tuple(line for _, line in numbered), tuple(k for k, _ in numbered))


def read_schema(path: str | Path) -> FederationSchema:
    """The federation schema in file ``path`` (TOML, or JSON starting with ``{``; :mod:`privfed.common.schema`),
    read as the data files are (:func:`read_text`: UTF-8 past a byte-order mark, which an editor on Windows
    writes; walkthrough 4: "invalid TOML ... line 1, column 1", and a JSON schema read as TOML)."""
    from privfed.common.schema import FederationSchema  # schema.py imports this module

    path = existing_file(path, "schema file")
    return FederationSchema.parse(read_text(path), source=str(path))


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
