"""Wire capture for the integration tests: what a coordinator receives, and searches of it for an
owner's private values in every encoding a leak could take.

Capture
-------
:class:`RecordingInterceptor` is a gRPC server interceptor (``CoordinatorServer(interceptors=...)``,
plan contract 8). It keeps the bytes of every request message exactly as the coordinator's gRPC
layer hands them to the deserializer, after TLS: so it captures under mTLS, where a TCP proxy sees
only ciphertext. For messages built by protobuf these are the bytes of ``request.SerializeToString()``
(a unit test checks it). Ring envelopes are inside ``Relay`` requests; :func:`envelopes` lists them.
What the coordinator *sends* (tasks) is its own choice and is not recorded.

Needles
-------
``X`` is an owner's rows in data space; ``unit`` is ``bounds.to_unit(X)`` (clipped, [-1, 1]), the
space the mechanisms and reports use; ``ball`` and ``box`` are FedDPDR's row scalings (centre at the bounds'
midpoint, divide by ``R = ||(hi - lo)/2||`` or each feature by its half-width and the row by ``sqrt(d)``, clip
the row norm to 1). On bounds of one width the two are the same rows, and both searches find a row leaked in
either (:func:`same_spaces`). The searches:

* ``value``: each value as float64 bytes and as decimal text (data space), and its unit-space
  image as float64. Text is matched by value, not by spelling: a decimal number in the capture
  with at least :data:`MIN_DIGITS` significant digits that is a rounding of a raw value (or of
  the value rounded to float32) is a hit, whether written by ``repr``, ``%.8f`` or ``%e``.
* ``row``: each row whole as contiguous float32 (data and unit space) and as contiguous int64
  grid indices ``rint(v * 2^g)``, ``g`` in 20 (the wire's grid) and 16, in data, unit, ball and box
  space (:data:`ROW_ENCODINGS`).
* ``permuted``: the grid rows as a *set* of indices that must all occur, in any order, among the
  aligned int64 words of one message (8 alignments tried).
* ``single``: each value as ONE word: a float32 (data, unit) or one grid index in the six grid
  encodings (:data:`SINGLE_ENCODINGS`). A 4-byte word occurs by chance in a large capture, and a
  legitimate perturbed report lands on a raw value's grid point by chance, so these are
  statistical tests (:class:`ChanceTest`): hits against a baseline of the same words moved by
  fixed offsets (:data:`OFFSETS` grid steps or ulps), measured on the same capture.
* labels: an owner's label sequence whole as int64, int32, float64, float32, grid indices and
  comma-separated text (:func:`label_needles`), plus the labels decoded from ``PushResults``
  compared with the truth at the rate randomized response allows (:func:`rr_agreement`).

Public values are not needles: a value clipped to a bound maps to exactly ±1 in unit space, which
every task carries, and tiny grid indices (|i| < :data:`MIN_INDEX`) are runs of 0x00/0xff bytes
found in any binary message; both are left out (a row keeps its other values).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import grpc
import numpy as np
from scipy.stats import poisson

from privfed.common.bounds import Bounds
from privfed.common.feddpdr.pca import scale_rows_to_unit_ball, scale_rows_to_unit_box
from privfed.proto import privfed_pb2 as pb

GRIDS = (20, 16)
SPACES = ("data", "unit", "ball", "box")
#: Exact per-value searches (float32 words are in :data:`SINGLE_ENCODINGS`: they occur by chance).
VALUE_ENCODINGS = ("f64", "unit-f64", "text")
ROW_ENCODINGS = tuple(f"grid{g}-{s}" for g in GRIDS for s in SPACES)
#: One word per value, held to chance (:class:`ChanceTest`).
SINGLE_ENCODINGS = ("f32", "unit-f32") + ROW_ENCODINGS
#: Baseline offsets for the single-word tests, in grid steps (or float32 ulps): distinct, so the
#: shifted words never coincide with each other or with the real one; a few hundred to a few
#: thousand steps (at most 0.05 in unit space on the 2^-16 grid), small next to the spread of a
#: perturbed report, so shifted words meet legitimate reports at the chance rate of the real ones.
OFFSETS = tuple(s * k for k in (211, 433, 877, 1361, 1777, 2243, 2683, 3079) for s in (1, -1))
MIN_INDEX = 1 << 12
#: Significant digits a decimal number needs before it counts as a match for a raw value: with
#: ~10^4 values spread over ~20 units, a 6-digit number matches one by chance w.p. ~5e-3.
MIN_DIGITS = 6
#: Values a row needs (after leaving out public ones) before its set of indices is a needle.
MIN_ROW_VALUES = 4
#: False-alarm level of one single-word test (seeded runs send the same bytes every time).
ALPHA = 1e-4


# ---------------------------------------------------------------------------- capture
@dataclass(frozen=True)
class Call:
    method: str  # "/privfed.v1.Coordinator/PushResults"
    data: bytes  # the request message as received


class RecordingInterceptor(grpc.ServerInterceptor):
    """Keeps every request message the server receives, as bytes, in arrival order: each unary call's,
    and each message of a node's Session stream (one ``Call`` per message, method ``.../Session``)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._calls: list[Call] = []

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or (handler.unary_unary is None and handler.stream_stream is None):
            return handler
        method, decode = handler_call_details.method, handler.request_deserializer

        def recorded(data: bytes):
            with self._lock:
                self._calls.append(Call(method, bytes(data)))
            return decode(data) if decode is not None else data

        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                handler.stream_stream, request_deserializer=recorded, response_serializer=handler.response_serializer
            )
        return grpc.unary_unary_rpc_method_handler(
            handler.unary_unary, request_deserializer=recorded, response_serializer=handler.response_serializer
        )

    def mark(self) -> int:
        with self._lock:
            return len(self._calls)

    def since(self, mark: int = 0) -> list[Call]:
        with self._lock:
            return list(self._calls[mark:])


def envelopes(calls: Iterable[Call]) -> list[bytes]:
    """The sealed ring envelopes carried by the ``Relay`` requests among ``calls``."""
    return [e.data for c in calls if c.method.endswith("/Relay") for e in pb.RelayRequest.FromString(c.data).envelopes]


def is_push(call: Call) -> bool:
    """Whether ``call`` carries a ``PushResultsRequest``: a PushResults call or a Session message."""
    return call.method.endswith(("/PushResults", "/Session"))


def pushed_results(calls: Iterable[Call]) -> list[pb.Result]:
    return [r for c in calls if is_push(c) for r in pb.PushResultsRequest.FromString(c.data).results]


def owner_index(owner: str) -> int:
    """The global index of a built-in partition's owner: ``owner-1.o00042`` (or ``o00042``) -> 42."""
    return int(re.fullmatch(r"(?:.*\.)?o(\d+)", owner).group(1))


# ---------------------------------------------------------------------------- encodings
def space(X: np.ndarray, bounds: Bounds, name: str) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if name == "data":
        return X
    if name == "unit":
        return bounds.to_unit(X)
    if name == "ball":
        return scale_rows_to_unit_ball(X, bounds)
    if name == "box":
        return scale_rows_to_unit_box(X, bounds)
    raise ValueError(f"space must be one of {SPACES}, got {name!r}")


def same_spaces(bounds: Bounds) -> dict[str, str]:
    """Spaces that are one on these bounds: ``ball`` and ``box`` when every feature has the same width (the
    synthetic set's ±10), each naming the other."""
    width = np.asarray(bounds.hi) - np.asarray(bounds.lo)
    return {"ball": "box", "box": "ball"} if np.all(width == width[0]) else {}


def grid_indices(X, bounds, encoding: str) -> np.ndarray:
    """``grid<g>-<space>``: int64 indices ``rint(v * 2^g)`` of the rows in that space."""
    g, s = re.fullmatch(r"grid(\d+)-(\w+)", encoding).groups()
    return np.rint(space(X, bounds, s) * 2.0 ** int(g)).astype(np.int64)


def informative(X, bounds, encoding: str) -> np.ndarray:
    """Mask of the values that are needles in ``encoding``: not a public bound, not a tiny index."""
    mask = np.abs(bounds.to_unit(X)) < 1.0 if "unit" in encoding else np.ones(np.shape(X), bool)
    if encoding.startswith("grid"):
        mask &= np.abs(grid_indices(X, bounds, encoding)) >= MIN_INDEX
    return mask


def values_in(X, bounds, encoding: str) -> tuple[np.ndarray, np.ndarray]:
    """The needle values of ``X`` for a value encoding and the row of each: data-space encodings
    keep every value (a raw value beyond a bound is still private), unit-space ones drop the
    values clipped to a bound."""
    X = np.asarray(X, dtype=np.float64)
    if encoding.startswith("unit"):
        keep = informative(X, bounds, "unit")
        return bounds.to_unit(X)[keep], np.nonzero(keep)[0]
    return X.ravel(), np.repeat(np.arange(X.shape[0]), X.shape[1])


def value_needles(X, bounds, encoding: str) -> tuple[list[bytes], np.ndarray]:
    """Byte needles (``f64``, ``unit-f64``, ``f32``, ``unit-f32``) and the row of each, one per value."""
    vals, rows = values_in(X, bounds, encoding)
    dtype = "<f8" if encoding.endswith("f64") else "<f4"
    return [v.tobytes() for v in vals.astype(dtype)], rows


def float32_rows(X, bounds, encoding: str) -> np.ndarray:
    """Rows whole as float32 (``f32``: data space, ``unit-f32``: unit space), shape (n, d)."""
    return space(X, bounds, "unit" if encoding.startswith("unit") else "data").astype("<f4")


def label_needles(y) -> list[bytes]:
    """An owner's label sequence whole, in every multi-byte encoding it would take if sent. Only
    for sequences of at least 4 labels with at least two labels of each of two classes: a constant
    sequence is a run of zero bytes or one repeated word, and one that is constant but for one label
    is such a run with one odd word, which reports with many zero coordinates on a coarse grid
    (Algorithm 4 at a large noise scale, SPEC §12) contain by chance: ``[0]*7 + [1]`` as float64 is
    62 zero bytes and ``f0 3f``."""
    y = np.asarray(y, dtype=np.int64)
    counts = np.sort(np.bincount(y - y.min())) if y.size else np.zeros(1, dtype=np.int64)
    if y.size < 4 or counts.size < 2 or counts[-2] < 2:
        return []
    return [
        y.astype("<i8").tobytes(),
        y.astype("<i4").tobytes(),
        y.astype("<f8").tobytes(),
        y.astype("<f4").tobytes(),
        (y << 20).astype("<i8").tobytes(),
        ",".join(map(str, y)).encode(),
    ]


# ---------------------------------------------------------------------------- search
def _words(blob: bytes, width: int) -> np.ndarray:
    dtype = {8: "<u8", 4: "<u4"}[width]
    parts = [
        np.frombuffer(blob, dtype=dtype, offset=a, count=(len(blob) - a) // width) for a in range(min(width, len(blob)))
    ]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype)


_DECIMAL = re.compile(rb"[-+]?(\d*)\.(\d+)(?:[eE]([-+]?\d+))?")


def _decimals(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    """``[lo, hi]`` per decimal number of at least :data:`MIN_DIGITS` significant digits: the
    values that print as that number (its value ± half a unit in its last place)."""
    lo, hi = [], []
    for m in _DECIMAL.finditer(blob):
        whole, frac, exp = m.group(1), m.group(2), m.group(3)
        if len((whole + frac).lstrip(b"0")) < MIN_DIGITS:
            continue
        v = float(m.group(0))
        half = 0.5 * 10.0 ** (int(exp or 0) - len(frac))
        lo.append(v - half * (1 + 1e-9))
        hi.append(v + half * (1 + 1e-9))
    return np.array(lo), np.array(hi)


class Haystack:
    """The captured messages, indexed for fast exact search: every 8- and 4-byte window (all
    alignments) as sorted integers, and the decimal numbers written in it as intervals."""

    def __init__(self, messages: Sequence[bytes]):
        self.messages = [bytes(m) for m in messages]
        self.blob = b"\x00".join(self.messages)
        self.words8 = _words(self.blob, 8)
        self.words4 = _words(self.blob, 4)
        self.decimals = _decimals(self.blob)

    @classmethod
    def of(cls, calls: Iterable[Call]) -> Haystack:
        return cls([c.data for c in calls])

    def __len__(self) -> int:
        return len(self.blob)

    def _has_words(self, words: np.ndarray, table: np.ndarray) -> np.ndarray:
        i = np.searchsorted(table, words)
        return (i < table.size) & (table[np.minimum(i, table.size - 1)] == words)

    def contains(self, needles: Sequence[bytes]) -> np.ndarray:
        """Boolean per needle: does it occur anywhere (8/4-byte needles by the window tables)."""
        out = np.zeros(len(needles), bool)
        for width, table in ((8, self.words8), (4, self.words4)):
            idx = [i for i, n in enumerate(needles) if len(n) == width]
            if idx and table.size:
                words = np.frombuffer(b"".join(needles[i] for i in idx), dtype=f"<u{width}")
                out[idx] = self._has_words(words, table)
        for i, n in enumerate(needles):
            if len(n) not in (4, 8):
                out[i] = n in self.blob
        return out

    def written(self, values: np.ndarray) -> np.ndarray:
        """Boolean per value: some decimal number in the capture is a rounding of it."""
        lo, hi = self.decimals
        values = np.asarray(values, dtype=np.float64)
        if not lo.size:
            return np.zeros(values.shape, bool)
        order = np.argsort(lo)
        lo, hi = lo[order], np.maximum.accumulate(hi[order])
        k = np.searchsorted(lo, values, side="right") - 1  # the last interval starting at or below
        return (k >= 0) & (hi[np.maximum(k, 0)] >= values)

    def has_indices(self, indices: np.ndarray) -> np.ndarray:
        """Boolean per int64 index: present as an 8-byte window anywhere."""
        words = np.ascontiguousarray(indices, dtype="<i8").view("<u8")
        return self._has_words(words, self.words8) if self.words8.size else np.zeros(words.shape, bool)

    def rows_contiguous(self, rows: np.ndarray) -> np.ndarray:
        """Boolean per row (int64 or float32 words): the row's bytes occur whole in one message."""
        rows = np.ascontiguousarray(rows)
        width = rows.dtype.itemsize
        table = {8: self.words8, 4: self.words4}[width]
        words = rows.view(f"<u{width}")
        maybe = np.all(self._has_words(words, table), axis=1) if table.size else np.zeros(len(rows), bool)
        return np.array(
            [bool(m) and any(r.tobytes() in msg for msg in self.messages) for r, m in zip(rows, maybe)], bool
        )

    def rows_as_sets(self, rows: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """Boolean per row: its kept indices (at least :data:`MIN_ROW_VALUES`) all occur, in any
        order, among the int64 words of one message at one alignment."""
        rows = np.asarray(rows, dtype="<i8")
        present = self.has_indices(rows) | ~keep
        out = np.zeros(rows.shape[0], bool)
        for r in np.flatnonzero(np.all(present, axis=1) & (keep.sum(axis=1) >= MIN_ROW_VALUES)):
            want = rows[r][keep[r]]
            for msg in self.messages:
                if any(
                    np.all(np.isin(want, np.frombuffer(msg, "<i8", offset=a, count=(len(msg) - a) // 8)))
                    for a in range(min(8, len(msg)))
                ):
                    out[r] = True
                    break
        return out


@dataclass(frozen=True)
class ChanceTest:
    """Single-word hits against chance, measured on one capture.

    ``hits`` of ``n`` needles occur; ``baseline_hits`` of ``baseline_n`` shifted needles occur
    (the same words moved by :data:`OFFSETS` steps: grid steps for indices, ulps for float32, so
    the same magnitudes and byte structure but no owner's value). The chance rate's upper bound is
    the baseline rate plus three of its standard errors (counts are Poisson: ``sqrt(b + 1)``); the
    test allows the ``1 - ALPHA`` quantile of a Poisson count with ``n`` times that rate. A leak of
    every value as one word gives hits near ``n``."""

    hits: int
    n: int
    baseline_hits: int
    baseline_n: int

    @property
    def expected(self) -> float:
        return self.n * self.baseline_hits / max(self.baseline_n, 1)

    @property
    def allowed(self) -> int:
        b = self.baseline_hits
        rate_hi = (b + 1 + 3 * math.sqrt(b + 1)) / max(self.baseline_n, 1)
        return int(poisson.isf(ALPHA, self.n * rate_hi))

    @property
    def above_chance(self) -> bool:
        return self.hits > self.allowed


def _shifted(words: np.ndarray) -> np.ndarray:
    return (words[:, None] + np.asarray(OFFSETS, dtype=words.dtype)[None, :]).ravel()


def single_word_test(hay: Haystack, X, bounds, encoding: str) -> ChanceTest:
    """The chance test for ``encoding``: ``grid<g>-<space>`` (one int64 index per value) or
    ``f32`` / ``unit-f32`` (one float32 per value)."""
    if encoding.startswith("grid"):
        idx = grid_indices(X, bounds, encoding)[informative(X, bounds, encoding)]
        return ChanceTest(
            int(hay.has_indices(idx).sum()),
            idx.size,
            int(hay.has_indices(_shifted(idx)).sum()),
            idx.size * len(OFFSETS),
        )
    vals, _ = values_in(X, bounds, encoding)
    bits = vals.astype("<f4").view("<i4").astype(np.int64)
    base = _shifted(bits).astype("<i4")

    def count(words):
        return int(hay.contains([w.tobytes() for w in words.astype("<i4")]).sum())

    return ChanceTest(count(bits), bits.size, count(base), base.size)


@dataclass(frozen=True)
class Found:
    """What the deterministic searches found: ``{search name: {(owner index, row), ...}}``
    (``row = -1`` for a label sequence); only searches with hits appear."""

    hits: dict

    def rows(self, search: str) -> set:
        return self.hits.get(search, set())


def search_owners(hay: Haystack, owners: Sequence[tuple[int, np.ndarray, np.ndarray]], bounds: Bounds) -> Found:
    """Every deterministic search for ``owners = [(index, X, y), ...]``: ``value:<enc>`` for
    ``f64``, ``unit-f64``, ``text``; ``row:<enc>`` for float32 rows and the six grid encodings;
    ``permuted:<grid enc>``; ``labels``."""
    hits: dict[str, set] = {}

    def add(name, index, rows):
        if len(rows):
            hits.setdefault(name, set()).update((index, int(r)) for r in rows)

    for i, X, y in owners:
        X = np.asarray(X, dtype=np.float64)
        for enc in ("f64", "unit-f64"):
            needles, rows = value_needles(X, bounds, enc)
            add(f"value:{enc}", i, rows[hay.contains(needles)])
        vals, rows = values_in(X, bounds, "text")
        add("value:text", i, rows[hay.written(vals) | hay.written(vals.astype(np.float32).astype(np.float64))])
        for enc in ("f32", "unit-f32"):
            add(f"row:{enc}", i, np.flatnonzero(hay.rows_contiguous(float32_rows(X, bounds, enc))))
        for enc in ROW_ENCODINGS:
            idx = grid_indices(X, bounds, enc).astype("<i8")
            add(f"row:{enc}", i, np.flatnonzero(hay.rows_contiguous(idx)))
            add(f"permuted:{enc}", i, np.flatnonzero(hay.rows_as_sets(idx, informative(X, bounds, enc))))
        needles = label_needles(y)
        if needles and hay.contains(needles).any():
            add("labels", i, [-1])
    return Found(hits)


def single_word_tests(hay: Haystack, X, bounds) -> dict[str, ChanceTest]:
    return {enc: single_word_test(hay, X, bounds, enc) for enc in SINGLE_ENCODINGS}


# ---------------------------------------------------------------------------- labels
def reported_labels(calls: Iterable[Call], kind: str = "ncc_share") -> dict[str, np.ndarray]:
    """Labels each owner sent in ``kind`` results (``boost_share.ncc``: a boosting share's NCC rows), as
    the coordinator decoded them."""
    out = {}
    for r in pushed_results(calls):
        message = r
        for name in kind.split("."):
            if message.WhichOneof("kind") != name:
                break
            message = getattr(message, name)
        else:
            out[r.owner_id] = np.asarray(message.labels, dtype=np.int64)
    return out


@dataclass(frozen=True)
class RrAgreement:
    """Reported labels against true labels under k-ary randomized response at ``epsilon``.

    ``p = e^ε / (e^ε + K - 1)`` keeps a label. ``agree`` of ``n`` labels equal the truth;
    ``whole`` owners' sequences are reported unchanged, against ``Σ p^{n_i}`` expected."""

    agree: int
    n: int
    whole: int
    owners: int
    p: float
    whole_expected: float
    whole_var: float

    def consistent(self, z: float = 4.0) -> bool:
        se = math.sqrt(self.p * (1 - self.p) / self.n)
        return (
            abs(self.agree / self.n - self.p) <= z * se
            and self.whole <= self.whole_expected + z * math.sqrt(self.whole_var) + 1
        )


def rr_agreement(
    reported: dict[str, np.ndarray], truth: dict[int, np.ndarray], *, epsilon: float, n_classes: int
) -> RrAgreement:
    p = 1.0 / (1.0 + (n_classes - 1) * math.exp(-epsilon))
    agree = n = whole = 0
    e_whole = v_whole = 0.0
    for owner, labels in reported.items():
        y = truth[owner_index(owner)]
        assert labels.shape == y.shape, (owner, labels.shape, y.shape)
        agree += int(np.sum(labels == y))
        n += y.size
        whole += bool(np.all(labels == y))
        q = p**y.size
        e_whole, v_whole = e_whole + q, v_whole + q * (1 - q)
    return RrAgreement(agree, n, whole, len(reported), p, e_whole, v_whole)
