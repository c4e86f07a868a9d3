"""The owner's own files for ``privfed query`` (:mod:`privfed.owner.query`): its query rows, its training rows
for the null-space methods, and which of their columns are the model's features.

Columns
-------
Which columns of the query file are the model's features is the schema's word: by default the
schema (or, without one, the feature count F) of the GetModel answer, i.e. the coordinator's. A
hostile coordinator can then name a column the owner never meant to send -- a label or a
confidential column kept after the features, an id -- as a feature and point ``A_d`` at it: the
rank bound holds, but the one direction read is that column, sent exactly. ``--schema FILE`` pins
the federation schema the owner holds (as ``privfed owner --schema`` does): the model's schema must
be the same (sha256) and its bounds must have the schema's feature count, and the query file is
read by the owner's copy, which may read a label column past. Without it a query file holds the
features only: a column besides the F the model reads is refused, so a file that passes with an
honest model has nothing else for a hostile one to name.

Nor is how a cell is read the coordinator's to say: a schema that one-hot encodes a column refuses a
value outside its categories, and one without a fill value a missing cell, so under the coordinator's
schema whether the query is sent would tell it whether the rows' values lie in a set it chose, of any
column (wt-redteam3, ``tests/adversary/test_query_schema_oracle.py``). A coordinator's schema with
categories or fill values is refused before the file is read; the owner pins the one it holds.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from privfed.common.bounds import Bounds, flush_tiny
from privfed.common.dataset_files import is_npz, is_number
from privfed.common.dataset_files import read_table as read_raw_table
from privfed.common.errors import ConfigError, RemoteProtocolError, reason
from privfed.common.schema import FederationSchema, RawTable, is_numeral
from privfed.common.schema.table import separator_of, split_line

log = logging.getLogger("privfed.query")


def read_table(path: Path, what: str) -> np.ndarray:
    """All numeric columns of a CSV (header line optional) or of an NPZ's ``X`` then ``y``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what} {path}: file not found")
    if is_npz(path):
        table = _read_npz(path, what)
    else:
        table = _read_csv(path, what)
    if not np.all(np.isfinite(table)):
        r, c = np.argwhere(~np.isfinite(table))[0]
        raise ConfigError(
            f"{what} {path.name}: row {r + 1}, column {c + 1} is not finite (NaN and inf are not allowed)"
        )
    return table


def _read_npz(path: Path, what: str) -> np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as z:
            if "X" not in z.files:
                raise ConfigError(f"{what} {path.name}: an NPZ file must hold an array 'X'; found {sorted(z.files)}")
            X, y = z["X"], (z["y"] if "y" in z.files else None)
    except (ValueError, OSError, EOFError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{what} {path.name}: not a readable NPZ file ({reason(exc)})") from None
    if X.ndim != 2 or X.shape[0] < 1 or X.dtype.kind not in "biuf":
        raise ConfigError(f"{what} {path.name}: X must be a non-empty 2-D numeric array, got {X.dtype} {X.shape}")
    if y is None:
        return X.astype(np.float64)
    y = y.reshape(len(y), -1) if y.ndim == 1 else y
    if y.ndim != 2 or y.shape[0] != X.shape[0] or y.dtype.kind not in "biuf":
        raise ConfigError(
            f"{what} {path.name}: y must be numeric with one row per row of X ({X.shape[0]}), got {y.dtype} {y.shape}"
        )
    return np.hstack([X, y]).astype(np.float64)


def _read_csv(path: Path, what: str) -> np.ndarray:
    try:
        lines = [line for line in path.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path.name}: not UTF-8 text (is it a binary file?)") from None
    if lines and (sep := separator_of(lines[0])):
        raise ConfigError(
            f"{what} {path.name}: the file looks separated by {sep}; privfed reads comma-separated values"
        )
    if lines and not any(is_number(f) for f in lines[0].split(",")):
        lines = lines[1:]  # a header line: no numeric field
    if not lines:
        raise ConfigError(f"{what} {path.name}: no data rows")
    try:
        return np.loadtxt(lines, delimiter=",", dtype=np.float64, ndmin=2, comments=None)
    except ValueError as exc:
        raise ConfigError(f"{what} {path.name}: not a numeric CSV file ({' '.join(str(exc).split())})") from None


def read_training(path: Path, own_schema: FederationSchema | None, confidential: tuple[int, ...] = ()) -> np.ndarray:
    """``--train-data``'s rows for the null-space methods: the model's features, then the label columns that
    ``--confidential-labels`` indexes. Read before contact (:mod:`privfed.owner.query`, "Timing").

    Without ``--schema``: the file's numeric columns (:func:`read_table`), the features first. With it, the
    file is read as the owner's own rows are (:meth:`FederationSchema.load`: columns by the header's names,
    categories one-hot, missing cells filled), so its features come in the schema's encoded columns; its
    label columns are the columns besides the features in the file's order, the schema's label as its class
    index and any other as a number. The log names them with their indices. A ``confidential`` index (of
    ``--confidential-labels``) naming the schema's label is refused: the served model predicts that label, so its
    answers tell it to the coordinator whatever the cleaning (walkthrough 15, W15-2)."""
    path = Path(path)
    if own_schema is None:
        return read_table(path, "--train-data")
    if not path.is_file():
        raise ConfigError(f"--train-data {path}: file not found")
    raw = read_raw_table(path)
    loaded = own_schema.load(raw, labels=None)
    for note in dataclasses.replace(loaded, ignored=()).notes():  # the others are label columns here
        log.info("--train-data %s", note)
    columns = _label_columns(raw, own_schema, loaded.header, loaded.y)
    log.info(
        "--train-data %s: label columns for --confidential-labels: %s",
        raw.name,
        ", ".join(f"{k} {c.name}{SCHEMA_LABEL * c.schema_label}" for k, c in enumerate(columns)) or "none",
    )
    for k in confidential:
        if k < len(columns) and columns[k].schema_label:
            raise ConfigError(
                f"--confidential-labels {k}: label column {k} of --train-data {raw.name} is {columns[k].name}, the "
                "schema's label, which the served model predicts: its answers tell the coordinator that label "
                "whatever the cleaning; name a label the model does not predict; nothing sent"
            )
    labels = [c.values[:, None] for c in columns]
    table = np.hstack([loaded.X, *labels]) if labels else loaded.X
    return table.astype(np.float64)


#: How the log names the schema's label among ``--train-data``'s label columns.
SCHEMA_LABEL = " (the schema's label, as its class index)"


class LabelColumn(NamedTuple):
    """One of ``--train-data``'s columns besides the features: its name, its values, whether it is the schema's label."""

    name: str
    values: np.ndarray
    schema_label: bool = False


def _label_columns(
    raw: RawTable, schema: FederationSchema, header: tuple[str, ...] | None, y: np.ndarray | None
) -> list[LabelColumn]:
    """``raw``'s columns besides the schema's features, in the file's order: the schema's label as its class index,
    any other column (by the ``header``'s names the schema matched) as numbers."""
    if header is None:  # columns by position: the features, then the label
        return [] if y is None else [LabelColumn(schema.label or "label", y.astype(np.float64), True)]
    body = [split_line(line) for line in raw.lines[1:]]
    out: list[LabelColumn] = []
    for col, name in enumerate(header):
        if name in schema.features:
            continue
        if y is not None and name == (schema.label or name):
            out.append(LabelColumn(name, y.astype(np.float64), True))
            y = None  # one label column
            continue
        cells = [row[col].strip() if col < len(row) else "" for row in body]
        bad = next((i for i, t in enumerate(cells) if "_" in t or not is_numeral(t)), None)
        if bad is not None:
            raise ConfigError(
                f"--train-data {raw.name}: {raw.where(bad + 1)}, column {col + 1} ({name}): non-numeric value "
                f"{cells[bad][:40]!r}; a confidential label column must hold numbers"
            )
        values = np.array([float(t) for t in cells])
        if not np.all(np.isfinite(values)):
            raise ConfigError(f"--train-data {raw.name}: column {col + 1} ({name}) is not finite everywhere")
        out.append(LabelColumn(name, flush_tiny(values)))
    return out


def split_features(table: np.ndarray, n_features: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(features (n, F), the columns after them (n, L))``."""
    if table.shape[1] < n_features:
        raise ConfigError(
            f"{what} has {table.shape[1]} column(s) but the model reads F = {n_features} features; "
            "pass the F feature columns first"
        )
    return table[:, :n_features], table[:, n_features:]


def pinned_schema(
    own: FederationSchema, served: FederationSchema | None, bounds: Bounds, model_id: str
) -> FederationSchema:
    """The owner's own federation schema (``--schema``, "Columns"; read before contact), which the served
    model's must equal (sha256) and whose bounds the model's must be (:class:`RemoteProtocolError`: nothing is
    sent). The bounds are the box the rows are cleaned into (:class:`~privfed.common.nullspace.StageProjection`,
    "Inside a box"): under the owner's schema they are its own, not the coordinator's word."""
    if served is not None and served.digest() != own.digest():
        why = f"it reads rows by another schema (sha256 {served.digest()[:12]}, --schema's {own.digest()[:12]})"
    elif own.d != bounds.d:
        why = f"its bounds have {bounds.d} features, the schema {own.d}"
    elif not (np.array_equal(bounds.lo, own.bounds.lo) and np.array_equal(bounds.hi, own.bounds.hi)):
        why = "its bounds are not the schema's"
    else:
        return own
    raise RemoteProtocolError(f"model {model_id!r}: {why}; nothing sent")


@dataclass(frozen=True)
class QueryFile:
    """The query file as read before the coordinator is contacted (:mod:`privfed.owner.query`, "Timing"): its text (for a schema
    the model names), its numeric columns or why it has none, and its rows by the owner's own schema."""

    path: Path
    raw: RawTable | None  # CSV text lines (numbers in one width when all are numbers); None for an NPZ file
    numeric: np.ndarray | None  # every column, when the file is plain numbers (:func:`read_table`)
    problem: ConfigError | None  # why ``numeric`` is None
    own: np.ndarray | None  # the rows by ``--schema`` (pinned), else None


def read_queries(path: Path, own_schema: FederationSchema | None) -> QueryFile:
    """Every read and parse of the query file that needs no word of the coordinator (:mod:`privfed.owner.query`, "Timing"); errors
    that would stop any reading (a missing file, a bad ``--schema`` reading, and without ``--schema`` a cell that is not
    a number, which every model's reading refuses: audit 34, A34-5) are raised here. Values below
    :data:`~privfed.common.bounds.TINY` are read as 0 (:func:`~privfed.common.bounds.flush_tiny`), in the text a
    coordinator's schema reads too: a subnormal's arithmetic in the gap is slower, and on the wire's 2^-20 grid
    it is the 0 it rounds to (``tests/adversary/test_subnormal_query.py``)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--queries {path}: file not found")
    csv = not is_npz(path)
    raw = read_raw_table(path) if csv else None
    own = None
    if own_schema is not None and raw is not None:
        loaded = own_schema.load(raw, labels="past")
        for note in loaded.notes():
            log.info("--queries %s", note)
        own = flush_tiny(loaded.X)
    try:
        numeric = flush_tiny(read_table(path, "--queries"))  # no subnormal in the gap's arithmetic (audit 8)
    except ConfigError as exc:
        if own_schema is None:  # no model's word reads it: refused now, not after GetModel (audit 34, A34-5)
            raise ConfigError(
                f"{exc}; without --schema a query file holds numbers only (no model's schema may fill or encode a "
                "column: query_rows), so it is refused before the coordinator is asked, which would otherwise learn "
                "that your rows hold such a cell; pin the federation schema you hold with --schema to have its fill "
                "values read missing cells; nothing sent"
            ) from exc
        return QueryFile(path, raw, None, exc, own)
    return QueryFile(path, None if raw is None else _fixed_width(raw, numeric), numeric, None, own)


def _fixed_width(raw: RawTable, numeric: np.ndarray) -> RawTable:
    """``raw`` with every number written in one width (``%+.16e``: 17 significant digits, which give the
    double back exactly), its header line kept: a schema the model names reads this text after
    ``GetModel`` in a time its row and column counts set, not the digits of the owner's values
    (:mod:`privfed.owner.query`, "Timing"; values beyond 1e±99 take one character more)."""
    header = raw.lines[: len(raw.lines) - numeric.shape[0]]  # the line read_table skipped, if any
    body = tuple(",".join(f"{v:+.16e}" for v in row) for row in numeric)
    return dataclasses.replace(raw, lines=(*header, *body))


def query_rows(
    file: QueryFile, schema: FederationSchema | None, n_features: int, *, pinned: bool = False
) -> np.ndarray:
    """The query rows as the model reads them: by the federation schema when there is one (columns
    matched by the header's names, categories one-hot, missing cells filled), else the first F
    numeric columns (:func:`read_table`). Columns besides the features (a label) are read past only
    under the owner's own schema (``pinned``, ``--schema``); under the coordinator's word they are
    refused, as is a schema with categories or fill values, before the file is read by it ("Columns").

    Called after ``GetModel``; nothing is read from disk here. Only a schema the coordinator names (no
    ``--schema``) reads the file's text here, and that reading's time shows it (:mod:`privfed.owner.query`,
    "Timing")."""
    name = file.path.name
    if schema is not None and not pinned and (schema.categories or schema.fill):
        raise ConfigError(
            f"--queries {name}: the model's schema one-hot encodes or fills columns, so whether your rows fit it "
            "would depend on their values, and that schema is the coordinator's word: pin the federation schema "
            "you hold with --schema; nothing sent"
        )
    if schema is not None and file.raw is not None:
        if pinned and file.own is not None:
            return file.own  # read before contact by the same schema (pinned_schema checked the digest)
        loaded = schema.load(file.raw, labels="past")
        for note in loaded.notes():
            log.info("--queries %s", note)
        others = len(loaded.ignored)
        queries = loaded.X
    else:
        if file.numeric is None:
            assert file.problem is not None
            raise file.problem
        queries, rest = split_features(file.numeric, n_features, f"--queries {name}")
        others = rest.shape[1]
    if others and not pinned:
        raise ConfigError(
            f"--queries {name}: {others} column(s) besides the model's {n_features} features; which columns are "
            "features is the coordinator's word, so a query file holds the features only: drop the others (a "
            "label), or pin the federation schema you hold with --schema; nothing sent"
        )
    return queries


def check_confidential_labels(
    training: tuple[Path, tuple[int, ...]], train_table: np.ndarray, n_features: int | None
) -> None:
    """Before contact: ``--confidential-labels`` against the label columns ``--train-data`` has after its
    ``n_features`` features (``--schema``'s), or, with F still the model's word (None), after at least one:
    an index no model could make valid is refused before the coordinator is asked (walkthrough 4)."""
    train_data, cols = training
    if n_features is not None:
        confidential_columns(training, train_table, n_features)
        return
    most = train_table.shape[1] - 1
    if max(cols) >= most:
        valid = f"indices 0..{most - 1} at most" if most > 0 else "add them after the features"
        raise ConfigError(
            f"--confidential-labels {','.join(map(str, cols))}: --train-data {train_data.name} has "
            f"{train_table.shape[1]} column(s), so at most {most} label column(s) after the model's features "
            f"(at least one; {valid}); nothing sent"
        )


def confidential_columns(
    training: tuple[Path, tuple[int, ...]], train_table: np.ndarray, n_features: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(X_own, Y_conf)``: the training rows' F features and their ``--confidential-labels`` columns."""
    train_data, cols = training
    X_own, labels = split_features(train_table, n_features, f"--train-data {train_data.name}")
    if max(cols) >= labels.shape[1]:
        valid = f"valid indices 0..{labels.shape[1] - 1}" if labels.shape[1] else "add them after the features"
        raise ConfigError(
            f"--confidential-labels {','.join(map(str, cols))}: --train-data {train_data.name} has "
            f"{labels.shape[1]} label column(s) after its {n_features} features ({valid})"
        )
    return X_own, labels[:, list(cols)]
