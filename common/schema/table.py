"""A data file read against the federation schema: columns matched by name, missing cells filled,
categories one-hot encoded, labels mapped by value.

:class:`RawTable` is a file as read (:func:`privfed.common.dataset_files.read_table` reads one): its
non-blank lines, nothing interpreted. :func:`load_rows` applies a schema to it and returns the
model's rows, or raises one :class:`ConfigError` naming the file, the line and, where there is
one, the column (of each column's first bad cell):

* ``header = true``: line 1 names the columns. Every feature must be there (in any order: the
  columns are reordered by name, and :attr:`LoadedRows.reordered` says so), plus the label column
  (``label = "..."`` in the schema, else the one column that is not a feature); a missing feature,
  a duplicate or an unknown column is refused, naming it.
* ``header = false``: no header; the features in schema order, then the label.
* no ``header`` (built-in data sets, ``--bounds``): a first line of names is a header, matched by
  name as with ``true``; a first line holding a number is data, the columns in schema order. Only a
  schema whose features have no names (``x0 ..``: ``--bounds``, a count) skips a header naming none
  of them and reads the columns in order.
* a first line with ``;`` or a tab and no comma is refused as another separator.
* a missing cell (empty, ``NA``, ``N/A``, ``NaN``, ``null`` or ``?``) takes the feature's public
  fill value, and :attr:`LoadedRows.filled` counts them per feature for the owner's own log (they
  are never sent); without a fill value it is refused, as is a missing label.
* a categorical cell must be one of the feature's public categories; it becomes one-hot columns.

Pure: parses given text. A fast path (numpy's C parser) reads clean files; anything it cannot
read goes through the cell-by-cell path, which finds and names the first bad cell of each column (and a label that
is not a class) in one refusal.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.schema.values import is_numeral, value_text

if TYPE_CHECKING:
    from privfed.common.dataset import Dataset
    from privfed.common.schema.document import FederationSchema

#: Cell texts (case-insensitive, stripped) that mean "missing".
MISSING = frozenset({"", "na", "n/a", "nan", "null", "?"})


@dataclass(frozen=True)
class RawTable:
    """A data file as read: ``lines`` (its non-blank lines, CSV text) and their numbers in the file.

    ``positional``: the file cannot have a header (an NPZ file's arrays, written as lines here),
    so its columns are taken in schema order whatever the schema's header rule. ``unit`` names a
    position in messages ("line" for CSV, "row" for NPZ).
    """

    name: str
    lines: tuple[str, ...]
    linenos: tuple[int, ...]
    unit: str = "line"
    positional: bool = False

    def where(self, i: int) -> str:
        return f"{self.unit} {self.linenos[i]}"


@dataclass(frozen=True)
class LoadedRows:
    """The rows of a file as a schema reads them.

    ``X`` (n, d) in the schema's encoded columns; ``y`` class indices (None when the file had no
    label column to read); ``filled``: missing cells filled, per feature; ``reordered``: the
    header listed the features in another order; ``ignored``: columns read past (queries);
    ``header``: the header's names when the columns were matched by them, None when read in order;
    ``slow``: the file was read cell by cell (:func:`load_rows`), not by numpy's C parser.
    """

    name: str
    X: np.ndarray
    y: np.ndarray | None
    where: Callable[[int], str]
    filled: dict[str, int] = field(default_factory=dict)
    reordered: bool = False
    ignored: tuple[str, ...] = ()
    header: tuple[str, ...] | None = None
    slow: bool = False
    #: The line (index in the table's lines) that sent the fast reader to the cell-by-cell one, where it is known:
    #: the padding's copies of the rows begin there, so their try of the fast reader stops as the rows' did (audit 35,
    #: A35-2).
    trigger: int | None = None

    def dataset(self, schema: FederationSchema) -> Dataset:
        from privfed.common.dataset import Dataset

        if self.y is None:
            raise ConfigError(f"{self.name}: no label column")
        return Dataset(self.name, self.X, self.y, schema.bounds, np.array(schema.classes), schema.encoded_features)

    def notes(self) -> list[str]:
        """What the owner's log says about the load (never sent)."""
        out = []
        if self.reordered:
            out.append(f"{self.name}: columns matched to the schema's features by the header's names")
        if self.filled:
            counts = ", ".join(f"{f} {n}" for f, n in self.filled.items())
            out.append(
                f"{self.name}: filled {sum(self.filled.values())} missing value(s) with the schema's public fill "
                f"values ({counts})"
            )
        if self.ignored:
            out.append(f"{self.name}: column(s) {list(self.ignored)} are not features; ignored")
        return out


def split_line(line: str) -> list[str]:
    """One CSV line's cells (double quotes as in RFC 4180), unstripped."""
    return next(csv.reader([line]))


def load_rows(
    schema: FederationSchema, table: RawTable, *, labels: bool | None | Literal["past"] = True, slow: bool = False
) -> LoadedRows:
    """Apply ``schema`` to ``table`` (module docstring). ``labels``: True, the file has a label column;
    None, it may have one, read as ``y`` (``privfed query --train-data``); ``"past"``, it may have one,
    read past whatever it holds, as the other columns besides the features (query files: README, "a
    label column is read past"); False, it has none. ``slow``: read it cell by cell whatever it holds, after
    the fast reader's try (an owner node's padding reads copies of its rows as it read its rows:
    ``privfed.owner.data.pad_load_work``; the rows that went cell by cell were tried by the fast reader first)."""
    lines, start = list(table.lines), 0
    if not lines:
        raise ConfigError(f"{table.name}: empty file (no rows)")
    past = labels == "past"
    wanted: bool | None = None if past else bool(labels) if labels is not None else None
    if not table.positional:
        _check_separator(schema, table, wanted)
    header = None if table.positional or schema.header is False else [c.strip() for c in split_line(lines[0])]
    if header is not None and schema.header is None and any(is_numeral(c) for c in header):
        header = None  # built-in schemas and --bounds: a first line holding a number is data
    by_name = header is not None and (
        schema.header is True or schema.named or bool(set(header) & set(schema.features))
    )  # built-in schemas too (walkthrough 4: a reordered header was read by position); --bounds' x0.. only if named
    matched = _match_header(schema, header, table, wanted) if by_name and header is not None else None
    if header is not None:
        start = 1
        if len(lines) == 1:
            raise ConfigError(f"{table.name}: {table.where(0)}: a header but no data rows follow")
    body = lines[start:]
    where = _where(table, start)
    if matched is not None:
        columns, label_col, ignored = matched
    else:
        columns, label_col = _positional(schema, len(split_line(body[0])), table.name, where(0), wanted)
        ignored = ()
    if past and label_col is not None:  # the label is read past, as any other column besides the features
        name = header[label_col] if matched is not None and header is not None else f"column {label_col + 1}"
        ignored, label_col = (*ignored, name), None
    n_cols = len(header) if header is not None else len(split_line(body[0]))
    reordered = columns != list(range(len(columns)))
    faults: list[_BadCell] = []
    trigger: int | None = None
    try:
        X, label_text, filled = _fast(schema, body, columns, label_col, n_cols)
        if slow:  # tried as the rows were (audit 27: the rows' failed try went over them and not their copies)
            raise _SlowPath
    except _SlowPath as why:
        trigger = None if why.row is None else start + why.row
        slow = True
        X, label_text, filled, faults = _slow(schema, body, columns, label_col, n_cols, table, start)
    y = None
    if label_text is not None:
        missing = [t.lower() in MISSING for t in label_text]  # refused as missing already (_slow)
        y, bad = schema.class_indices(np.where(missing, value_text(schema.classes[0]), label_text))
        if bad is not None:
            text = value_text(label_text[bad])
            shown = text if is_numeral(text) else repr(text)
            faults.append(
                _BadCell(
                    bad,
                    f"{table.name}: {where(bad)}: label {shown} is not a class of the federation schema "
                    f"(classes {list(schema.classes)})",
                )
            )
    if faults:
        first = trigger if trigger is not None else start + min(f.row for f in faults)
        raise _refuse(table.name, faults, first, slow)
    return LoadedRows(
        table.name,
        X,
        y,
        where,
        filled,
        reordered,
        ignored,
        None if matched is None or header is None else tuple(header),
        slow,
        trigger,
    )


def _check_separator(schema: FederationSchema, table: RawTable, labels: bool | None) -> None:
    """A first line without a comma but with ``;`` or a tab, where the schema needs two columns or more: the
    file was written with another separator (a spreadsheet's export), which every later message would
    misname (a missing header, a column count)."""
    if len(schema.features) + bool(labels) < 2:
        return
    if sep := separator_of(table.lines[0]):
        raise ConfigError(
            f"{table.name}: {table.where(0)}: the file looks separated by {sep}; privfed reads comma-separated values"
        )


def separator_of(line: str) -> str | None:
    """``';'`` or ``'a tab'`` when ``line`` holds no comma but that separator, else None."""
    text = line.strip()
    if "," in text:
        return None
    return "';'" if ";" in text else "a tab" if "\t" in text else None


def _where(table: RawTable, start: int) -> Callable[[int], str]:
    return lambda i: table.where(start + i)


def _match_header(
    schema: FederationSchema, header: list[str], table: RawTable, labels: bool | None
) -> tuple[list[int], int | None, tuple[str, ...]]:
    """(file column of each feature, label column or None, ignored names) from the header's names."""
    at = f"{table.name}: {table.where(0)}"
    if dupes := sorted({h for h in header if header.count(h) > 1}):
        raise ConfigError(f"{at}: the header names column(s) {dupes} more than once")
    missing = [f for f in schema.features if f not in header]
    extra = [h for h in header if h not in schema.features]
    if missing:
        extra = [h for h in extra if h != schema.label]  # the label column is the schema's too
        hint = ""
        cased = sorted(h for h in extra if h.casefold() in {f.casefold() for f in missing})
        if cased:  # as some exports write them (walkthrough 11, W11-10: the hint was about a missing header)
            hint = f" (header names are matched exactly: {cased} differ from the schema's names in case only)"
        elif not set(header) & set(schema.features):
            hint = (
                " (is the header line missing? files without one need header = false in the schema)"
                if schema.header
                else " (a header line is matched by the features' names; leave it out to take the columns in order)"
            )
        unknown = f"; not in the schema: {extra}" if extra else ""
        raise ConfigError(f"{at}: the header lacks feature(s) {missing} of the federation schema{unknown}{hint}")
    label_col = None
    if schema.label is not None and schema.label in header:
        label_col = header.index(schema.label)
    elif schema.label is not None and labels:
        raise ConfigError(f"{at}: the header has no label column {schema.label!r} (the schema's label)")
    elif schema.label is None and len(extra) == 1 and labels is not False:
        label_col = header.index(extra[0])
    others = [h for h in extra if label_col is None or h != header[label_col]]
    if labels and label_col is None:
        raise ConfigError(
            f"{at}: cannot tell the label column: the columns besides the features are {extra or 'none'} "
            '(name it with label = "..." in the schema)'
        )
    if others and labels is not None:
        raise ConfigError(
            f"{at}: the header has column(s) {others} that are not in the federation schema (features "
            f"{list(schema.features)}{'' if label_col is None else ', label ' + repr(header[label_col])}); "
            f"give the node a copy of the file without them (e.g. csvcut -C {','.join(others)}): it reads no column "
            "the schema does not name, so an id column never becomes a feature by a later schema"
        )
    return [header.index(f) for f in schema.features], label_col, tuple(others)


def _positional(
    schema: FederationSchema, n_cols: int, name: str, where: str, labels: bool | None
) -> tuple[list[int], int | None]:
    d = len(schema.features)
    with_label = n_cols == d + 1 if labels is None else bool(labels)
    if n_cols != d + with_label:
        if with_label:
            raise ConfigError(
                f"{name}: {where}: {n_cols - 1} feature column(s) before the label, but the federation schema "
                f"has {d} features"
            )
        raise ConfigError(f"{name}: {where}: {n_cols} column(s), but the federation schema has {d} features")
    return list(range(d)), (d if with_label else None)


class _SlowPath(Exception):
    """The fast parser could not read the file as is: go cell by cell. ``row``: the body's line that sent it there,
    where it is known (:attr:`LoadedRows.trigger`)."""

    def __init__(self, row: int | None = None) -> None:
        super().__init__()
        self.row = row


class RowsRefused(ConfigError):
    """A file whose cells the schema refuses: ``start``, the line (index in the table's lines) that sent the fast
    reader to the cell-by-cell one, else its first fault's, and ``slow``, whether it was read cell by cell, for the
    padding of the refused load to read its copies, the rows in turn from that line, as the rows were read and to
    meet a fault as they did (:func:`privfed.owner.data.pad_refused_load`, audit 35, A35-1)."""

    def __init__(self, message: str, start: int | None = None, slow: bool = False) -> None:
        super().__init__(message)
        self.start = start
        self.slow = slow


class _BadCell(Exception):
    """A cell the cell-by-cell path refuses: its row (0-based in the body) and the words naming it."""

    def __init__(self, row: int, message: str) -> None:
        super().__init__(message)
        self.row = row


#: The most faults one refusal of a file names (the first of each column, by line).
FAULTS_NAMED = 10


def _refuse(name: str, faults: list[_BadCell], start: int | None = None, slow: bool = False) -> RowsRefused:
    """One refusal naming a file's faults, the first of each column, by line (walkthrough 11, W11-10: a file with
    several showed one per run, and each run of a 2 000 000-row file read for 40 s first); ``start`` and ``slow``:
    :class:`RowsRefused`'s."""
    faults = sorted(faults, key=lambda f: f.row)
    if len(faults) == 1:
        return RowsRefused(str(faults[0]), start, slow)
    shown = "; ".join(str(f).removeprefix(f"{name}: ") for f in faults[:FAULTS_NAMED])
    more = f"; and {len(faults) - FAULTS_NAMED} more" if len(faults) > FAULTS_NAMED else ""
    return RowsRefused(
        f"{name}: {len(faults)} faults, the first of each column that has one: {shown}{more}", start, slow
    )


def _fast(
    schema: FederationSchema, body: list[str], columns: list[int], label_col: int | None, n_cols: int
) -> tuple[np.ndarray, np.ndarray | None, dict[str, int]]:
    """Clean files: numpy's C parser for the numeric columns, text columns read as text. Lines with
    quotes or another number of cells go the slow way (which checks every line's cells)."""
    odd = ['"' in line or line.count(",") != n_cols - 1 for line in body]  # every line looked at (audit 35)
    if any(odd):
        raise _SlowPath(odd.index(True))
    cats = dict(schema.categories)
    numeric = [c for f, c in zip(schema.features, columns) if f not in cats]
    text_cols = [c for f, c in zip(schema.features, columns) if f in cats] + (
        [label_col] if label_col is not None else []
    )
    try:
        values = _loadtxt(body, np.float64, numeric) if numeric else None
    except ValueError:  # the line: found by a look at every line (audit 35, A35-2), for the padding's copies
        raise _SlowPath(_unparsed(body, numeric)) from None
    try:
        texts = np.char.strip(_loadtxt(body, str, text_cols)) if text_cols else None
    except ValueError:
        raise _SlowPath from None
    if values is not None and not np.all(np.isfinite(values)):
        raise _SlowPath(int(np.argmax(~np.isfinite(values).all(axis=1))))
    if texts is not None and (gaps := np.isin(np.char.lower(texts), list(MISSING)).any(axis=1)).any():
        raise _SlowPath(int(np.argmax(gaps)))
    n = len(body)
    parts: list[np.ndarray] = []
    num_i = text_i = 0
    for f in schema.features:
        if f in cats:
            assert texts is not None
            parts.append(_one_hot(texts[:, text_i], cats[f], f, None))
            text_i += 1
        else:
            assert values is not None
            parts.append(values[:, num_i : num_i + 1])
            num_i += 1
    X = np.hstack(parts) if parts else np.zeros((n, 0))
    label_text = texts[:, -1].astype(object) if label_col is not None and texts is not None else None
    return X, label_text, {}


def _unparsed(body: list[str], columns: list[int]) -> int | None:
    """The first line of ``body`` with a cell in ``columns`` that is not a number, every line looked at (None: none
    found, the C parser failed otherwise)."""
    bad = [not all([is_numeral(cells[c].strip()) for c in columns]) for cells in (line.split(",") for line in body)]
    return bad.index(True) if any(bad) else None


def _loadtxt(body: list[str], dtype: type, columns: list[int]) -> np.ndarray:
    return np.loadtxt(body, dtype=dtype, usecols=columns, delimiter=",", ndmin=2, comments=None, quotechar='"')


def _slow(
    schema: FederationSchema,
    body: list[str],
    columns: list[int],
    label_col: int | None,
    n_cols: int,
    table: RawTable,
    start: int,
) -> tuple[np.ndarray, np.ndarray | None, dict[str, int], list[_BadCell]]:
    """Cell by cell: every cell checked, the first bad one of each column named (:func:`_refuse`, with a label that is
    not a class: :func:`load_rows`); missing cells filled. Returns the faults rather than raise them."""
    rows = [split_line(line) for line in body]
    uneven = [len(row) != n_cols for row in rows]  # every line's count, then the first that differs (audit 35)
    for i in [uneven.index(True)] if any(uneven) else []:
        row = rows[i]
        if len(row) != n_cols:
            first = table.where(0)
            if body[i].count('"') % 2:  # the csv reader took the rest of the line into one field
                raise ConfigError(f"{table.name}: {table.where(start + i)}: a quoted field is not closed")
            raise ConfigError(
                f"{table.name}: {table.where(start + i)}: {len(row)} columns, expected {n_cols} (as on {first})"
            )
    cells = np.array(rows, dtype=object).reshape(len(rows), n_cols)
    cats, fills = dict(schema.categories), dict(schema.fill)
    filled: dict[str, int] = {}

    def at(i: int, col: int, feature: str) -> str:
        return f"{table.name}: {table.where(start + i)}, column {col + 1} ({feature})"

    parts, faults = [], []
    for f, col in zip(schema.features, columns):
        texts = [str(c).strip() for c in cells[:, col]]
        missing = np.array([t.lower() in MISSING for t in texts], dtype=bool)
        # Every cell of every column is read, whatever its faults (audit 35, A35-1: each column stopped at its first
        # bad cell, so the time of a refusal by the coordinator's schema told where that cell's row lies).
        unfilled: _BadCell | None = None
        if missing.any():
            first = int(np.argmax(missing))
            if f not in fills:
                unfilled = _BadCell(
                    first,
                    f"{at(first, col, f)}: missing value; declare a public fill value for it in the schema "
                    f"([fill] {f} = ...) or complete the file",
                )
            else:
                filled[f] = int(missing.sum())
        try:
            if f in cats:
                parts.append(_one_hot(np.array(texts, dtype=object), cats[f], f, (at, col, missing, fills.get(f))))
            else:
                parts.append(_numbers(texts, missing, fills.get(f), lambda i: at(i, col, f))[:, None])
        except _BadCell as fault:
            unfilled = unfilled or fault  # a missing cell without a fill is named first, as before
        if unfilled is not None:
            faults.append(unfilled)
    label_text = None
    if label_col is not None:
        label_text = np.array([str(c).strip() for c in cells[:, label_col]], dtype=object)
        gaps = [i for i, t in enumerate(label_text) if t.lower() in MISSING]
        if gaps:
            where = f"{table.name}: {table.where(start + gaps[0])}, column {label_col + 1}"
            faults.append(_BadCell(gaps[0], f"{where}: missing label"))
    return (np.hstack(parts) if not faults else np.zeros((len(rows), 0))), label_text, filled, faults


def _numbers(texts: list[str], missing: np.ndarray, fill: object, at: Callable[[int], str]) -> np.ndarray:
    """A numeric column's cells, missing ones as ``fill`` (None: NaN, a fault named by the caller); the first cell
    that is not a finite number raises, once every cell is read (audit 35, A35-1: the reading stopped there)."""
    values = np.full(len(texts), np.nan)
    filler = np.nan if fill is None else float(fill)  # type: ignore[arg-type]
    numeral = np.ones(len(texts), dtype=bool)
    for i, t in enumerate(texts):
        if missing[i]:
            values[i] = filler
            continue
        numeral[i] = "_" not in t and is_numeral(t)
        values[i] = float(t) if numeral[i] else np.nan
    bad = ~numeral | (~missing & ~np.isfinite(values))
    if bad.any():
        i = int(np.argmax(bad))
        if not numeral[i]:
            raise _BadCell(i, f"{at(i)}: non-numeric value {texts[i][:40]!r}")
        raise _BadCell(i, f"{at(i)}: value {texts[i][:40]!r} is not finite")
    return values


def _one_hot(
    texts: np.ndarray,
    categories: Sequence[str],
    feature: str,
    slow: tuple[Callable[[int, int, str], str], int, np.ndarray, object] | None,
) -> np.ndarray:
    """One-hot columns (n, len(categories)) of a categorical feature's cells. ``slow``: (how to name a
    cell, its column, the missing mask, the fill category) for the cell-by-cell path; the fast path
    has no missing cells and raises :class:`_SlowPath` on an unknown category."""
    lookup = {c: k for k, c in enumerate(categories)}
    index = np.empty(len(texts), dtype=np.int64)
    for i, t in enumerate(texts):
        if slow is not None and slow[2][i]:
            t = slow[3]
        index[i] = lookup.get(value_text(t), -1)
    if (index < 0).any():  # once every cell is read (audit 35, A35-1: the reading stopped at the first unknown one)
        i = int(np.argmax(index < 0))
        if slow is None:
            raise _SlowPath(i)
        t = slow[3] if slow[2][i] else texts[i]
        raise _BadCell(
            i,
            f"{slow[0](i, slow[1], feature)}: category {str(t)[:40]!r} is not one of the schema's categories "
            f"{list(categories)}",
        )
    out = np.zeros((len(texts), len(categories)))
    out[np.arange(len(texts)), index] = 1.0
    return out
