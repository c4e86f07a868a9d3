"""Where an owner node's rows come from: a partition of a built-in data set (simulation) or
its own file, checked against the federation schema (:mod:`privfed.common.schema`). The split and partition are deterministic in the seed, so the launcher and every
node agree on who holds which rows without any row being shipped."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from pathlib import Path

import numpy as np

from privfed.common.bounds import flush_tiny
from privfed.common.dataset_files import parse_bounds, read_table
from privfed.common.datasets import Dataset, federation_split, partition  # federation_split: re-exported
from privfed.common.errors import ConfigError
from privfed.common.files import FileState, file_state
from privfed.common.identity import owner_id
from privfed.common.ledger_rows import RowLayout
from privfed.common.rng import make_rng
from privfed.common.schema import FederationSchema, RawTable
from privfed.common.schema.table import LoadedRows, RowsRefused, split_line
from privfed.common.schema.values import value_text
from privfed.common.work_rows import work_rows
from privfed.owner.local import LocalOwner

__all__ = [
    "owner_id",
    "parse_shards",
    "federation_split",
    "owner_generator",
    "row_digests",
    "row_layout",
    "in_layout",
    "build_owners",
    "read_owner_rows",
    "shorthand_schema",
    "check_owner_rows",
    "load_owner_file",
    "DataFileWatch",
]

log = logging.getLogger("privfed.owner")


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


def owner_generator(kind: str, seed: int | None, index: int, stream: int = 0) -> np.random.Generator:
    """Owner ``index``'s noise: ``secure`` (the OS's), or ``seeded`` (tests and reproducible simulations only:
    PCG64 from ``seed``, which whoever knows the seed can remove) on its ``stream``, the number of releases
    the node's ledger held when it started, so a node restarted on its ledger does not draw its noise again
    for new releases (audit 20: a new share of the same query after a restart was the old one, bit for bit,
    and a second query at the same place in the stream would have had the same noise)."""
    if kind == "seeded":
        if seed is None:
            raise ConfigError("--rng seeded needs --seed")
        entropy = [seed, index] if stream == 0 else [seed, index, stream]  # a fresh ledger: the simulation's stream
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))
    return make_rng("secure")


def row_digests(X: np.ndarray, y: np.ndarray) -> list[bytes]:
    """One digest per row: SHA-256 of the row's features and label (float64 and int64 bytes) and
    of how many identical rows come before it. The ledger keeps an account per digest
    (``Ledger.bind_rows``), so a row's spent budget follows its content and its occurrence, not
    the owner id or the partition it is in (issue 20, finding 4). A zero is hashed as ``+0.0`` (``x + 0.0``
    under IEEE 754 round-to-nearest): ``-0.0`` is the same number to every release, and a file that writes it
    so must not give the row a fresh account (``tests/adversary/test_row_digest_signed_zero.py``); for the same
    reason a value below :data:`~privfed.common.bounds.TINY` is hashed as the 0 every release reads it as
    (:func:`~privfed.common.bounds.flush_tiny`, as :class:`~privfed.owner.local.LocalOwner` reads its rows)."""
    X = np.ascontiguousarray(flush_tiny(X), dtype="<f8") + 0.0
    y = np.ascontiguousarray(y, dtype="<i8")
    seen: Counter[bytes] = Counter()
    out = []
    for i in range(X.shape[0]):
        content = X[i].tobytes() + y[i].tobytes()
        out.append(hashlib.sha256(b"privfed-row\0" + content + seen[content].to_bytes(8, "little")).digest())
        seen[content] += 1
    return out


def row_layout(data: Dataset) -> RowLayout | None:
    """How ``data``'s rows are laid out: its encoded feature names in column order and its class values' texts
    (:func:`~privfed.common.schema.values.value_text`) in index order; None for a data set without feature names
    or with several label columns."""
    if data.feature_names is None or data.classes.ndim != 1:
        return None
    return tuple(data.feature_names), tuple(value_text(c) for c in data.classes)


def in_layout(data: Dataset, layout: RowLayout | None) -> tuple[np.ndarray, np.ndarray]:
    """``data``'s rows and labels in ``layout`` (a permutation of :func:`row_layout` ``(data)``, as the ledger
    recorded it: ``Ledger.row_layout``): columns reordered by feature name, labels renumbered by class value, so
    a schema that lists the same features and classes in another order digests every row as before
    (``tests/adversary/test_schema_order_budget.py``). ``data``'s own rows for any other layout, or None."""
    own = row_layout(data)
    if own is None or layout is None or own == layout or sorted(own[0]) != sorted(layout[0]):
        return data.X, data.y
    if sorted(own[1]) != sorted(layout[1]):
        return data.X, data.y
    columns = [own[0].index(f) for f in layout[0]]
    labels = np.array([layout[1].index(c) for c in own[1]], dtype=np.int64)
    return data.X[:, columns], labels[data.y]


def build_owners(
    train: Dataset,
    *,
    node_id: str,
    n_owners: int,
    shards: range,
    seed: int,
    rng_kind: str,
    rng_seed: int | None,
    rng_stream: int = 0,
    layout: RowLayout | None = None,
) -> list[LocalOwner]:
    """The logical owners ``shards`` of a partition of ``train`` into ``n_owners``, hosted by node
    ``node_id``: owner ``i`` is ``owner_id(node_id, i)`` (contract 1), so the node's certificate
    decides which ids it speaks for. Each owner's public configuration is the data set's classes and
    bounds; each row carries its digest (:func:`row_digests`) for the ledger's row accounts, of the row in
    ``layout`` (:func:`in_layout`: the layout the node's ledger recorded)."""
    parts = partition(train.X.shape[0], n_owners, seed=seed)
    digests = row_digests(*in_layout(train, layout))
    return [
        LocalOwner(
            owner_id=owner_id(node_id, i),
            X=train.X[parts[i]],
            y=train.y[parts[i]],
            rng=owner_generator(rng_kind, rng_seed, i, rng_stream),
            n_classes=train.n_classes,
            bounds=train.bounds,
            row_keys=tuple(digests[j] for j in parts[i]),
        )
        for i in shards
    ]


def pad_load_work(
    rows: RawTable,
    schema: FederationSchema,
    loaded: Dataset | None,
    padded: int,
    *,
    slow: bool = False,
    n_owners: int = 0,
    seed: int = 0,
    layout: RowLayout | None = None,
    start: int | None = None,
) -> None:
    """Read and digest ``padded - n`` more rows, copies of ``rows``' own, and keep nothing of them: with the
    ``n`` real rows :func:`check_owner_rows` and :func:`row_digests` read when a node loads its rows after its
    registration, the node's work is that of ``padded`` rows, its owners' public row cells
    (:func:`~privfed.common.work_rows.work_rows`) summed. The coordinator times the gap between a node's
    registration and its first call, and the load took ~7.5 us a row (30 ms for 3000 rows, 226 ms for 30000:
    ``docs/owner-limits.md``, "Timing"); the ledger's row accounts are padded the same way
    (``privfed.common.ledger_rows``).

    The copies are the file's rows in turn (not one row: a row's cost depends on its text), read by the reader
    that read the rows (``slow``: cell by cell, :attr:`~privfed.common.schema.table.LoadedRows.slow`; audit 26:
    a file with one filled or quoted cell was read cell by cell, ~5 us a row slower, and its copies of a clean
    last line by numpy's C parser, so the time grew with the real rows again). ``loaded`` None: the rows did not
    fit the schema (:func:`pad_refused_load`), and the copies are read, not digested, as the rows were.

    Audit 27: the copies get every step the rows get after they are read, not only the digests: the count of values
    outside the bounds (:func:`outside_counts`) and the split into ``n_owners`` owners by ``seed`` in ``layout``
    (:func:`_pad_owner_work`, what :func:`build_owners` does). Those steps were left out, and they were the
    4-6 % (1-2 ms) that audit 26 measured between 2600 and 4000 rows in cells of 512 and could not trace: counted
    without a clock, the rows' split, the owners' ``flush_tiny`` and the bounds check went over the real rows
    alone (``tests/adversary/test_audit27_load_work_trace.py``). The copies' lines are made by tuple
    repetition, not a Python loop, which balanced :func:`build_owners`' loop over the real rows only by chance.

    Audit 35 (A35-1): ``start`` (an index in ``rows.lines``), the line that sent the rows' fast reader to the
    cell-by-cell one (:attr:`~privfed.common.schema.table.LoadedRows.trigger`: a quoted or a missing cell, A35-2) or a
    refused load's first fault: the copies are the rows in turn from there, so they meet it as the rows did wherever
    it lies (the copies were the file's first lines: a fault past their count let them load and a data set be built,
    and a quoted line past it let their fast reader's try go on, so the time told whether it lay past it)."""
    n = len(rows.lines) if loaded is None else int(loaded.X.shape[0])
    extra = max(0, padded - n)
    if extra == 0 or n == 0:
        return
    head = rows.lines[: len(rows.lines) - n] if loaded is not None else ()  # a header, if the file has one
    body = rows.lines[len(head) :]
    if loaded is None and len(body) > 1:  # a header the schema would skip is read as the rows' first line
        head, body = body[:1], body[1:]
    at = 0 if start is None else start - len(head)  # where the copies begin (audit 35): that line's index in body
    at = at if 0 <= at < len(body) else 0
    body = [*body[at:], *body[:at]]  # the rows in turn from there (a copy made whatever ``at``: the same work)
    lines = (*head, *(body * -(-extra // len(body)))[:extra])  # the rows in turn, no Python loop over them
    copies = RawTable(rows.name, lines, tuple(range(1, len(lines) + 1)), rows.unit, rows.positional)
    try:
        dummy = schema.load(copies, slow=slow).dataset(schema)
    except ConfigError:  # rows that do not fit: their copies fail as they did, after as much reading
        return
    if loaded is not None:
        outside_counts(dummy)  # check_owner_rows' count for the node's log
        _pad_owner_work(dummy, n_owners, seed, layout)


def _pad_owner_work(dummy: Dataset, n_owners: int, seed: int, layout: RowLayout | None) -> None:
    """What :func:`build_owners` does to a node's rows, done to ``dummy`` (the padding's copies) and kept nowhere:
    the seeded permutation and split of :func:`~privfed.common.datasets.partition` (which refuses more owners
    than rows, so it is not called: the copies may be fewer than the owners), the digests in ``layout``, and each
    owner's rows, labels, row keys and :func:`~privfed.common.bounds.flush_tiny` (``LocalOwner``). ``n_owners``
    0: digests alone (a caller that builds no owners)."""
    digests = row_digests(*in_layout(dummy, layout))
    if n_owners < 1:
        return
    perm = make_rng("seeded", seed).permutation(int(dummy.X.shape[0])).astype(np.int64)
    for part in np.array_split(perm, n_owners):
        flush_tiny(dummy.X[part])
        _ = dummy.y[part], tuple(digests[j] for j in part)


def outside_counts(data: Dataset) -> np.ndarray:
    """How many of ``data``'s values lie outside the schema's public bounds, per encoded feature."""
    return np.asarray(np.count_nonzero((data.X < data.bounds.lo) | (data.X > data.bounds.hi), axis=0))


def pad_refused_load(
    rows: RawTable, schema: FederationSchema, shards: int, declared: int | None, refusal: ConfigError | None = None
) -> None:
    """The padding of a load whose rows the schema refused (:func:`pad_load_work`): they were read up to where
    they failed, as many as the file's lines at most, and the copies take the work up to the cells of that many
    rows over ``shards`` owners (``declared``: ``--work-rows``). Audit 26: the coordinator chooses the schema (a
    class list without one of the rows' classes), and the node's ``schema_mismatch`` came after a gap that
    counted its rows (2600 rows 3.3 ms, 4000 rows 4.9 ms, in cells of 512 over 10 owners). ``refusal``: the
    schema's (:class:`~privfed.common.schema.table.RowsRefused`): the copies are read by the reader that read the
    rows, its faults' lines first (audit 35, A35-1: the time told where the first fault lay)."""
    lines = len(rows.lines)
    cells = shards * (declared or work_rows(-(-lines // max(shards, 1))))
    if isinstance(refusal, RowsRefused):
        pad_load_work(rows, schema, None, cells, slow=refusal.slow, start=refusal.start)
    else:
        pad_load_work(rows, schema, None, cells)


def read_owner_rows(path: str) -> RawTable:
    """Read an owner's CSV (a header naming the features and the label, unless the schema says
    files have none) or NPZ (X, y) file as text (:func:`privfed.common.dataset_files.read_table`); the
    federation schema then reads it (:func:`check_owner_rows`)."""
    return read_table(path)


def shorthand_schema(rows: RawTable, bounds_spec: str | None, n_classes: int) -> FederationSchema:
    """The schema the flags ``--bounds`` and ``--classes K`` describe for ``rows``: its feature
    count (the columns before the label), the public bounds, class values ``0 .. K-1``, columns in
    order. Never read from the rows' values."""
    if bounds_spec is None:
        raise ConfigError(
            f"{rows.name}: public bounds are required with --data (--schema FILE, or --bounds lo:hi or a JSON "
            "file); they are never computed from the private rows"
        )
    d = len(split_line(rows.lines[0])) - 1  # a header line, if any, has as many columns as the rows
    if d < 1:
        raise ConfigError(f"{rows.name}: {rows.where(0)}: no feature column before the label")
    return FederationSchema.shorthand(parse_bounds(bounds_spec, d), n_classes)


def check_owner_rows(
    rows: RawTable,
    schema: FederationSchema,
    *,
    log_to: logging.Logger | None = None,
    read: list[LoadedRows] | None = None,
) -> Dataset:
    """``rows`` as a data set of ``schema`` (:meth:`FederationSchema.dataset`): columns matched by the
    header's names, missing cells filled, categories one-hot, labels mapped by value. A file that does
    not fit is a one-line ConfigError naming file, line and column. ``log_to``: where the load's notes
    go (filled cells per feature, reordered columns): the owner's own log, never the wire. ``read``: the
    rows as the schema read them are appended to it (how: :func:`pad_load_work` reads its copies alike)."""
    loaded = schema.load(rows)
    if read is not None:
        read.append(loaded)
    dataset = loaded.dataset(schema)
    if log_to is not None:
        for note in loaded.notes():
            log_to.info("%s", note)
        outside = outside_counts(dataset)  # the padding counts its copies too (pad_load_work)
        # counted here, in the owner's own log; every mechanism clips them to the bounds. The line is written
        # whatever the count (audit 26: written only when some value was outside, it took 10-50 us more then)
        names = schema.encoded_features
        counts = ", ".join(f"{names[j]} {int(outside[j])}" for j in np.flatnonzero(outside)) or "none"
        log_to.info(
            "%s: %d value(s) outside the schema's public bounds, clipped to them where they are used (%s)",
            rows.name,
            int(outside.sum()),
            counts,
        )
    return dataset


def load_owner_file(path: str, bounds_spec: str | None, n_classes: int, n_label_columns: int = 1) -> Dataset:
    """An owner's own rows under the shorthand schema of ``--bounds`` and ``--classes K``
    (labels must be ``0 .. K-1``); see :func:`check_owner_rows`. Owner files have one label column."""
    if n_label_columns != 1:
        raise ConfigError(f"{path}: owner files have exactly one label column, got n_label_columns={n_label_columns}")
    rows = read_owner_rows(path)
    return check_owner_rows(rows, shorthand_schema(rows, bounds_spec, n_classes))


#: What :class:`DataFileWatch` compares: (device, inode, size, modification time in ns), or the error's text.
class DataFileWatch:
    """The data file (``--data``) a node read its rows from, as it was when it read them (walkthrough 4, S2: a
    daemon answered job after job from the rows it read at start, after the file was replaced by an invalid one
    and then deleted, and said nothing). :meth:`check` (a ``stat``: cheap, called when the node takes a new job's
    tasks and when it registers, never per task) logs a WARNING once per change in the owner's own log: the node
    still answers from the rows it read then, and a restart reads the file again. The node never re-reads it
    itself: the rows it was started with are the ones its owners' keys, ledger row accounts and schema decision
    were made for; a restart does it all over (and the rows' budget follows them: ``ledger_rows``). Nothing of
    this reaches the coordinator.

    Create it before the file is read (:meth:`before_reading`): a change made while it is read is then reported.
    """

    def __init__(self, path: str | Path, state: FileState, rows: int | None = None) -> None:
        self.path = Path(path)
        self._read = state
        self._warned: FileState = state
        #: How many rows were read (None: not known yet): named in the warning.
        self.rows = rows

    @classmethod
    def before_reading(cls, path: str | Path) -> DataFileWatch:
        return cls(path, file_state(Path(path)))

    def check(self) -> bool:
        """Whether the file is as it was read; logs a WARNING the first time it is seen in a new state."""
        now = file_state(self.path)
        if now == self._read:
            self._warned = now  # back as it was (a change undone): a new change is told again
            return True
        if now != self._warned:
            self._warned = now
            what = now if isinstance(now, str) else "it changed (size, modification time or inode)"
            rows = "the rows" if self.rows is None else f"the {self.rows} row(s)"
            log.warning(
                "data file %s: %s since this node read it at start; the node still answers from %s it read then "
                "and does not read the file again: restart it to answer from the file as it is now (a row keeps "
                "the budget it spent: the ledger's row accounts follow the rows)",
                self.path,
                what,
                rows,
            )
        return False
