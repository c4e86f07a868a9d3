"""``privfed query``: private prediction with null-space cleaning (seed 003, Algorithm 1; SPEC §10).

An owner wants labels for its query rows from a model the coordinator serves, without handing the
coordinator rows from which it could predict the owner's *confidential* labels. Each row is
cleaned here, before anything leaves the process:

1. Read the query rows and this owner's own training rows (local files; nothing is sent yet).
2. ``GetModel``: the model's public bounds (so F) and its first linear stage ``A_d`` (F×m_d,
   data space; :func:`privfed.server.servicer.model_linear_stage`).
3. ``A_c = fit_linear_map(X_own, Y_c)`` on the owner's rows and the chosen confidential label
   columns, centred at the owner's feature mean ``x̄`` (Algorithm 1, step 1). ``Y_c``, ``A_c`` and
   the raw rows never leave this process.
4. ``x̃ = x̄ + NullSpaceCleaner(ε).fit(A_d, A_c).transform(x − x̄)`` for every query row at once.
5. ``Predict`` with the cleaned rows in chunks; print or write the labels.

Centring
--------
:func:`~privfed.common.nullspace.fit_linear_map` centres: the confidential predictor is
``ŷ_c = Ȳ_c + A_cᵀ(x − x̄)``, so the cleaner works on ``x − x̄`` and ``x̄`` is added back. Removing
all of A_c's view of ``x − x̄`` then leaves the coordinator's linear guess at ``Ȳ_c``, the
prediction from the mean feature vector (the paper's reference for "complete privacy"). The
served model's own offset does not matter: ``A_dᵀ(x − x̃)`` is what changes its decision scores,
and with ``--clean-epsilon 0`` it is zero, so a linear model predicts the same labels for ``x̃`` as
for ``x`` (up to the wire grid, below).

No clipping
-----------
Cleaned rows are sent as they are, *not* clipped to the public bounds: clipping moves ``x̃`` along
directions ``A_d`` reads (breaking ``e_utility = ε``, and label preservation at ε = 0) and along
directions ``A_c`` reads (putting back what cleaning removed). The served model applies its own
public preprocessing on its side: LR clips rows to the bounds, FedDPDR scales by the bounds'
radius and clips row norms to 1. A row (raw or cleaned) outside the bounds can therefore get a
different label than the linear algebra promises; the number of cleaned values outside the bounds
is logged. Raw query rows are not clipped either.

Wire
----
Rows travel as int64 indices on the 2^-20 grid (proto ``Reports``); the rounding moves each
decision score by at most ``max_j Σ_i |A_d[i, j]| · 2^-21``, so a label can differ from the raw
row's only for a row whose score is that close to a decision boundary. What leaves this process:
the model id, then the cleaned rows. (A cleaned row is ``x̄`` plus what survives cleaning; with an
ε that covers every component it is ``x̄`` itself, an aggregate of the owner's rows.)

References
----------
K. Xu, S. Shah, T. Cao, C. Maung, H. Schweitzer. Enhancing the Privacy of Predictors. AAAI 2017
(seed 003), Algorithm 1 and Theorem 1.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, PrivfedError, RemoteProtocolError
from privfed.common.nullspace import METHODS, CleaningResult, NullSpaceCleaner, fit_linear_map
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto import serde
from privfed.proto.transport import (
    MAX_MESSAGE_BYTES, PREDICT_TIMEOUT, TlsFiles, channel_credentials, channel_options,
)

log = logging.getLogger("privfed.query")

CHUNK_ROWS = 1000  # rows per Predict call (fewer when F is so large that a call would near the size bound)


# ---------------------------------------------------------------------------- command line
def _clean_epsilon(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--clean-epsilon takes a number >= 0, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(
            f"--clean-epsilon must be finite and >= 0 (the utility loss per row; 0 = exact null space), got {text!r}")
    return value


def parse_columns(text: str) -> tuple[int, ...]:
    """``"0,2"`` -> ``(0, 2)``: distinct 0-based label-column indices."""
    try:
        cols = tuple(int(c) for c in text.split(",") if c.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--confidential-labels takes 0-based column indices separated by commas (e.g. 1,2), got {text!r}"
        ) from None
    if not cols or min(cols) < 0 or len(set(cols)) != len(cols):
        raise argparse.ArgumentTypeError(
            f"--confidential-labels needs at least one index, each >= 0 and none repeated, got {text!r}")
    return cols


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--coordinator", required=True, help="HOST:PORT of the coordinator serving the model")
    p.add_argument("--name", default="owner-0", help="this node's identity: the CN of its certificate")
    p.add_argument("--certs", type=Path, help="directory written by `privfed certs`")
    p.add_argument("--insecure", action="store_true", help="no TLS (byte-capture tests only)")
    p.add_argument("--target-name", help="TLS name to expect from the coordinator when dialing an address")
    p.add_argument("--model-id", required=True, help="id of the served model")
    p.add_argument("--queries", type=Path, required=True,
                   help="query rows: CSV (F feature columns, optionally label columns after them, ignored) "
                        "or NPZ with X")
    p.add_argument("--train-data", type=Path, required=True,
                   help="this owner's own rows: CSV with F feature columns then label columns, or NPZ with X, y; "
                        "they never leave this process")
    p.add_argument("--confidential-labels", type=parse_columns, required=True,
                   help="0-based indices among the label columns of --train-data (comma-separated)")
    p.add_argument("--clean-epsilon", type=_clean_epsilon, default=0.0,
                   help="utility loss per row ||A_d^T (x - x~)||^2; 0 = exact null-space cleaning (default)")
    p.add_argument("--method", choices=METHODS, default="subspace",
                   help="eigenproblem: 'subspace' (robust, default) or 'generalized' (SPEC as written)")
    p.add_argument("--out", type=Path, help="write the labels to this CSV (header 'label') instead of printing them")


# ---------------------------------------------------------------------------- local files
def read_table(path: Path, what: str) -> np.ndarray:
    """All numeric columns of a CSV (header line optional) or of an NPZ's ``X`` then ``y``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what} {path}: file not found")
    with path.open("rb") as fh:
        magic = fh.read(2)
    if path.suffix.lower() == ".npz" or magic == b"PK":
        table = _read_npz(path, what)
    else:
        table = _read_csv(path, what)
    if not np.all(np.isfinite(table)):
        r, c = np.argwhere(~np.isfinite(table))[0]
        raise ConfigError(f"{what} {path.name}: row {r + 1}, column {c + 1} is not finite "
                          "(NaN and inf are not allowed)")
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
        raise ConfigError(f"{what} {path.name}: not a readable NPZ file ({exc})") from None
    if X.ndim != 2 or X.shape[0] < 1 or X.dtype.kind not in "biuf":
        raise ConfigError(f"{what} {path.name}: X must be a non-empty 2-D numeric array, got {X.dtype} {X.shape}")
    if y is None:
        return X.astype(np.float64)
    y = y.reshape(len(y), -1) if y.ndim == 1 else y
    if y.ndim != 2 or y.shape[0] != X.shape[0] or y.dtype.kind not in "biuf":
        raise ConfigError(f"{what} {path.name}: y must be numeric with one row per row of X ({X.shape[0]}), "
                          f"got {y.dtype} {y.shape}")
    return np.hstack([X, y]).astype(np.float64)


def _read_csv(path: Path, what: str) -> np.ndarray:
    try:
        lines = [line for line in path.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path.name}: not UTF-8 text (is it a binary file?)") from None
    if lines and not any(_is_number(f) for f in lines[0].split(",")):
        lines = lines[1:]  # a header line: no numeric field
    if not lines:
        raise ConfigError(f"{what} {path.name}: no data rows")
    try:
        return np.loadtxt(lines, delimiter=",", dtype=np.float64, ndmin=2, comments=None)
    except ValueError as exc:
        raise ConfigError(f"{what} {path.name}: not a numeric CSV file ({' '.join(str(exc).split())})") from None


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return bool(field.strip())


def split_features(table: np.ndarray, n_features: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(features (n, F), the columns after them (n, L))``."""
    if table.shape[1] < n_features:
        raise ConfigError(f"{what} has {table.shape[1]} column(s) but the model reads F = {n_features} features; "
                          "pass the F feature columns first")
    return table[:, :n_features], table[:, n_features:]


# ---------------------------------------------------------------------------- cleaning (pure)
@dataclass(frozen=True)
class CleanedQueries:
    """Cleaned rows (data space), the trace of Algorithm 1 and the owner's local quantities.

    Attributes
    ----------
    rows : (n, F) ``x̄ + clean(x − x̄)``: what is sent.
    details : the cleaner's trace on the centred rows ``x − x̄``.
    feature_mean : (F,) ``x̄``, the owner's own feature mean.
    A_c : (F, m_c) the confidential map fitted locally (never sent).
    centred : (n, F) the raw rows minus ``x̄`` (never sent).
    """

    rows: np.ndarray
    details: CleaningResult
    feature_mean: np.ndarray
    A_c: np.ndarray
    centred: np.ndarray

    @property
    def e_privacy(self) -> np.ndarray:
        """Per-row ``‖A_cᵀ(x − x̃)‖²`` against the owner's own A_c."""
        return np.sum(((self.centred - self.details.x_clean) @ self.A_c) ** 2, axis=1)


def clean_queries(queries: np.ndarray, A_d: np.ndarray, X_own: np.ndarray, Y_conf: np.ndarray, *,
                  epsilon: float, method: str = "subspace") -> CleanedQueries:
    """Clean query rows against ``A_d`` with the owner's locally fitted ``A_c`` (module docstring).

    Parameters
    ----------
    queries : (n, F) raw query rows.
    A_d : (F, m_d) the served model's first linear stage (data space).
    X_own : (n_own, F) the owner's own rows; Y_conf : (n_own, m_c) their confidential labels.
    epsilon : float ≥ 0, the requested ``e_utility`` per row (0 = exact null space).
    method : "subspace" or "generalized" (:class:`~privfed.common.nullspace.NullSpaceCleaner`).

    Raises
    ------
    ConfigError
        Shapes that do not match, non-finite values, a confidential map that is all zeros.
    """
    X_own = np.asarray(X_own, dtype=np.float64)
    Y_conf = np.asarray(Y_conf, dtype=np.float64)
    if X_own.ndim != 2 or X_own.shape[0] < 2:
        raise ConfigError(f"the owner's training rows must be a 2-D array with at least 2 rows, got {X_own.shape}")
    A_c = fit_linear_map(X_own, Y_conf)
    x_bar = X_own.mean(axis=0)
    centred = np.asarray(queries, dtype=np.float64) - x_bar
    details = NullSpaceCleaner(epsilon=epsilon, method=method).fit(A_d, A_c).transform_with_details(centred)
    return CleanedQueries(rows=x_bar + details.x_clean, details=details, feature_mean=x_bar, A_c=A_c,
                          centred=centred)


# ---------------------------------------------------------------------------- network
def _rpc_error(exc: grpc.RpcError, what: str, target: str, timeout: float) -> PrivfedError:
    code, details = exc.code(), exc.details()
    if code == grpc.StatusCode.UNAVAILABLE:
        return PrivfedError(f"{what}: coordinator {target} unreachable ({details}); is it running, and do "
                            "--certs/--name/--target-name match its certificate?")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return PrivfedError(f"{what}: coordinator {target} did not answer within {timeout:.0f} s")
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return ConfigError(f"{what}: the coordinator refused: {details}")
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return PrivfedError(f"{what}: the coordinator rejected the request as malformed: {details}")
    return PrivfedError(f"{what}: the coordinator answered {code.name}: {details}")


class _Coordinator:
    """The two RPCs of private prediction on one channel, errors mapped by ``.code()``."""

    def __init__(self, channel: grpc.Channel, target: str):
        self._stub = pb_grpc.CoordinatorStub(channel)
        self._target = target

    def get_model(self, model_id: str) -> tuple[str, Bounds, np.ndarray]:
        try:
            reply = self._stub.GetModel(pb.GetModelRequest(model_id=model_id), timeout=PREDICT_TIMEOUT)
        except grpc.RpcError as exc:
            raise _rpc_error(exc, "GetModel", self._target, PREDICT_TIMEOUT) from exc
        bounds = serde.bounds_from_proto(reply.bounds)
        A_d = serde.matrix_from_proto(reply.linear_stage)
        if A_d.ndim != 2 or A_d.shape[0] != bounds.d or A_d.shape[1] < 1 or not np.all(np.isfinite(A_d)):
            raise RemoteProtocolError(f"model {model_id!r}: linear stage of shape {A_d.shape} does not fit "
                                      f"its {bounds.d} features")
        return reply.kind, bounds, A_d

    def predict(self, model_id: str, rows: np.ndarray) -> tuple[np.ndarray, int]:
        """Labels for ``rows``, in chunks; returns ``(labels, number of calls)``."""
        per_call = max(1, min(CHUNK_ROWS, MAX_MESSAGE_BYTES // (2 * 8 * max(rows.shape[1], 1))))
        labels, calls = [], 0
        for start in range(0, rows.shape[0], per_call):
            chunk = rows[start:start + per_call]
            request = pb.PredictRequest(model_id=model_id, rows=serde.reports_to_proto(chunk))
            try:
                reply = self._stub.Predict(request, timeout=PREDICT_TIMEOUT)
            except grpc.RpcError as exc:
                raise _rpc_error(exc, "Predict", self._target, PREDICT_TIMEOUT) from exc
            if len(reply.labels) != chunk.shape[0]:
                raise RemoteProtocolError(f"Predict answered {len(reply.labels)} label(s) for {chunk.shape[0]} rows")
            labels.append(np.asarray(reply.labels, dtype=np.int64))
            calls += 1
        return (np.concatenate(labels) if labels else np.zeros(0, dtype=np.int64)), calls


def _channel(target: str, tls: TlsFiles | None, target_name: str | None) -> grpc.Channel:
    opts = channel_options(target_name)
    if tls is None:
        log.warning("--insecure: query traffic is not encrypted (byte-capture tests only)")
        return grpc.insecure_channel(target, options=opts)
    return grpc.secure_channel(target, channel_credentials(tls), options=opts)


def _write_labels(labels: np.ndarray, out: Path | None) -> None:
    text = "\n".join(map(str, np.asarray(labels, dtype=np.int64).tolist()))
    if out is None:
        if text:
            sys.stdout.write(text + "\n")
        return
    out.write_text("label\n" + (text + "\n" if text else ""))


def run_query(args, tls: TlsFiles | None) -> int:
    """``privfed query``: clean locally, ask the served model, print or write the labels."""
    queries_table = read_table(args.queries, "--queries")
    train_table = read_table(args.train_data, "--train-data")
    with _channel(args.coordinator, tls, args.target_name) as channel:
        coordinator = _Coordinator(channel, args.coordinator)
        kind, bounds, A_d = coordinator.get_model(args.model_id)
        F = bounds.d
        log.info("model %r (%s): F = %d features, first linear stage A_d of shape %s",
                 args.model_id, kind, F, A_d.shape)
        queries, _ = split_features(queries_table, F, f"--queries {args.queries.name}")
        X_own, labels = split_features(train_table, F, f"--train-data {args.train_data.name}")
        cols = list(args.confidential_labels)
        if max(cols) >= labels.shape[1]:
            valid = f"valid indices 0..{labels.shape[1] - 1}" if labels.shape[1] else "add them after the features"
            raise ConfigError(f"--confidential-labels {','.join(map(str, cols))}: --train-data "
                              f"{args.train_data.name} has {labels.shape[1]} label column(s) after its {F} "
                              f"features ({valid})")
        cleaned = clean_queries(queries, A_d, X_own, labels[:, cols], epsilon=args.clean_epsilon, method=args.method)
        changed = int(np.count_nonzero(np.any(cleaned.rows != queries, axis=1)))
        log.info("cleaned %d of %d query row(s) (clean-epsilon %g, %s, A_c from %d own row(s) and %d confidential "
                 "label(s)): mean e_utility %.6g, mean e_privacy %.6g against the local A_c", changed,
                 queries.shape[0], args.clean_epsilon, args.method, X_own.shape[0], len(cols),
                 float(np.mean(cleaned.details.e_utility)) if queries.shape[0] else 0.0,
                 float(np.mean(cleaned.e_privacy)) if queries.shape[0] else 0.0)
        _, outside = bounds.clip(cleaned.rows)
        if outside:
            log.warning("%d cleaned value(s) lie outside the public bounds; they are sent unclipped (clipping "
                        "would undo the cleaning), and the model's own clipping may change those rows' labels",
                        outside)
        predicted, calls = coordinator.predict(args.model_id, cleaned.rows)
    log.info("%d label(s) from %d Predict call(s)", predicted.shape[0], calls)
    _write_labels(predicted, args.out)
    return 0
