"""The network side of ``privfed query``: ``GetModel`` and ``Predict`` on one channel, and where the
answers go (stdout or ``--out``).

Everything ``GetModel`` answers is the coordinator's word: :func:`privfed.owner.query.check_linear_stage`
checks the stage before any row is cleaned or sent. The label values and the federation schema it
names are only used to read the query file and to print the answers.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np

from privfed.common.bounds import Bounds, flush_tiny
from privfed.common.errors import ConfigError, PrivfedError, RemoteProtocolError
from privfed.common.schema import FederationSchema
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto import serde
from privfed.proto.transport import (
    MAX_MESSAGE_BYTES,
    PREDICT_TIMEOUT,
    TlsFiles,
    channel_credentials,
    channel_options,
    tls_failure,
)

log = logging.getLogger("privfed.query")

CHUNK_ROWS = 1000  # rows per Predict call (fewer when F is so large that a call would near the size bound)


def rpc_error(exc: grpc.RpcError, what: str, target: str, timeout: float) -> PrivfedError:
    """A failed call as one line, by its status code."""
    code, details = exc.code(), " ".join(str(exc.details()).split())  # the coordinator's text, on one line
    cause = tls_failure(details) if code == grpc.StatusCode.UNAVAILABLE else None
    if cause is not None:  # as privfed owner and privfed jobs say it (walkthrough 14, W14-6: the handshake's raw text)
        return ConfigError(f"{what}: {cause}")
    if code == grpc.StatusCode.UNAVAILABLE:
        return PrivfedError(
            f"{what}: coordinator {target} unreachable ({details}); is it running, and do "
            "--certs/--name/--target-name match its certificate?"
        )
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return PrivfedError(f"{what}: coordinator {target} did not answer within {timeout:.0f} s")
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return ConfigError(f"{what}: the coordinator refused: {details}")
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return PrivfedError(f"{what}: the coordinator rejected the request as malformed: {details}")
    return PrivfedError(f"{what}: the coordinator answered {code.name}: {details}")


@dataclass(frozen=True)
class ModelDescription:
    """A ``GetModel`` answer: kind, public bounds, first linear stage, the label value of each class
    index, whether Predict has probabilities, and the federation schema rows are read by (or None)."""

    kind: str
    bounds: Bounds
    A_d: np.ndarray
    classes: tuple[str, ...]
    probabilities: bool
    schema: FederationSchema | None


@dataclass(frozen=True)
class Answers:
    """Predict's answers for every row: label values and, if asked, probabilities (n, K)."""

    values: list[str]
    probabilities: np.ndarray | None
    calls: int


class ModelClient:
    """The two RPCs of private prediction on one channel, errors mapped by ``.code()``."""

    def __init__(self, channel: grpc.Channel, target: str):
        self._stub = pb_grpc.CoordinatorStub(channel)
        self._target = target

    def get_model(self, model_id: str) -> ModelDescription:
        try:
            reply = self._stub.GetModel(pb.GetModelRequest(model_id=model_id), timeout=PREDICT_TIMEOUT)
        except grpc.RpcError as exc:
            raise rpc_error(exc, "GetModel", self._target, PREDICT_TIMEOUT) from exc
        bounds = serde.bounds_from_proto(reply.bounds)
        # checked by check_linear_stage before use; entries below 2^-300 read as 0: a stage tilted by 2^-1021 made
        # the query rows' products underflow in the gap a coordinator times (audit 9)
        A_d = flush_tiny(serde.matrix_from_proto(reply.linear_stage))
        schema = None
        if reply.schema:
            schema = FederationSchema.parse(reply.schema, source=f"model {model_id!r}'s schema")
            if schema.d != bounds.d:
                raise RemoteProtocolError(
                    f"model {model_id!r}: its schema reads {schema.d} columns, its bounds {bounds.d}"
                )
        return ModelDescription(reply.kind, bounds, A_d, tuple(reply.classes), reply.probabilities, schema)

    def predict(self, model_id: str, rows: np.ndarray, *, probabilities: bool = False) -> Answers:
        """Label values (and probabilities) for ``rows``, in chunks."""
        per_call = max(1, min(CHUNK_ROWS, MAX_MESSAGE_BYTES // (2 * 8 * max(rows.shape[1], 1))))
        chunks = [rows[start : start + per_call] for start in range(0, rows.shape[0], per_call)]
        # every chunk is encoded before the first is sent: a row the wire cannot carry stops the run whole
        requests = [
            pb.PredictRequest(model_id=model_id, rows=serde.reports_to_proto(c), probabilities=probabilities)
            for c in chunks
        ]
        values: list[str] = []
        proba: list[np.ndarray] = []
        for chunk, request in zip(chunks, requests):
            try:
                reply = self._stub.Predict(request, timeout=PREDICT_TIMEOUT)
            except grpc.RpcError as exc:
                raise rpc_error(exc, "Predict", self._target, PREDICT_TIMEOUT) from exc
            if len(reply.labels) != chunk.shape[0] or len(reply.label_values) not in (0, chunk.shape[0]):
                raise RemoteProtocolError(f"Predict answered {len(reply.labels)} label(s) for {chunk.shape[0]} rows")
            values += list(reply.label_values) or [str(v) for v in reply.labels]  # an older coordinator: indices
            if probabilities:
                p = serde.matrix_from_proto(reply.probabilities, "probabilities")
                if p.ndim != 2 or p.shape[0] != chunk.shape[0] or not np.all(np.isfinite(p)):
                    raise RemoteProtocolError(
                        f"Predict answered probabilities of shape {p.shape} for {chunk.shape[0]} rows"
                    )
                proba.append(p)
        stacked = np.vstack(proba) if proba else None
        return Answers(values, stacked, len(requests))


def channel(target: str, tls: TlsFiles | None, target_name: str | None) -> grpc.Channel:
    opts = channel_options(target_name)
    if tls is None:
        log.warning("--insecure: query traffic is not encrypted (byte-capture tests only)")
        return grpc.insecure_channel(target, options=opts)
    return grpc.secure_channel(target, channel_credentials(tls), options=opts)


def answers_csv(answers: Answers, classes: tuple[str, ...], label: str) -> list[str]:
    """One line per row: the label value, then (with probabilities) one column per class; a header
    line first when there are probabilities (``label,p(benign),p(malignant)``)."""
    if answers.probabilities is None:
        return [_cell(v) for v in answers.values]
    header = ",".join([_cell(label)] + [_cell(f"p({c})") for c in classes])
    rows = [",".join([_cell(v)] + [f"{p:.6g}" for p in ps]) for v, ps in zip(answers.values, answers.probabilities)]
    return [header, *rows]


def _cell(text: str) -> str:
    return f'"{text.replace(chr(34), chr(34) * 2)}"' if any(c in text for c in ',"\n') else text


@contextmanager
def answers_out(out: Path | None, force: bool = False) -> Iterator[None]:
    """Around a run that writes its labels to ``out`` (``--out``; None: stdout): its temp file
    (:func:`write_answers`) is created next to it first, before the coordinator is contacted, so an
    ``--out`` that cannot be written stops the run with nothing sent (walkthrough 4: all rows went out in
    a Predict call, then "cannot write the labels", and a retry sent them again), as ``privfed export``
    checks its folder first; the temp file is removed unless the labels were moved onto ``out``. An existing
    ``out`` stops it too unless ``force`` (walkthrough 11, W11-8: it was replaced silently, where ``privfed
    export`` and ``privfed job model`` never overwrite), and so does an existing temp file (audit 34: a file the user
    kept by that name was emptied and removed)."""
    if out is None:
        yield
        return
    if out.is_dir():
        raise ConfigError(
            f"--out {out}: is a directory; name the labels file (e.g. {out / 'labels.csv'}); nothing sent"
        )
    if out.exists() and not force:
        raise ConfigError(f"{_exists(out)} (nothing sent)")
    partial = _partial(out)
    try:
        partial.open("w" if force else "x").close()  # a file of its name is the user's too (audit 34)
    except FileExistsError:
        raise ConfigError(
            f"--out {out}: {partial} exists (a run stopped before it wrote its labels leaves it; or it is yours): "
            "remove it, give another file, or --force to replace both; nothing sent"
        ) from None
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot write the labels there ({exc.strerror or exc}); nothing sent") from exc
    try:
        yield
    finally:
        partial.unlink(missing_ok=True)


def _exists(out: Path) -> str:
    return f"--out {out} exists; give another file, or --force to replace it"


def _partial(out: Path) -> Path:
    return out.with_name(out.name + ".partial")  # a full disk leaves no half-written labels file


def write_answers(lines: list[str], out: Path | None, header: str | None, force: bool = False) -> None:
    """Print ``lines``, or write them to ``out`` (CSV; ``header`` first when the lines have none) through its
    temp file (:func:`answers_out`): over an existing ``out`` only if ``force``."""
    if out is None:
        if lines:
            sys.stdout.write("\n".join(lines) + "\n")
        return
    body = ([header] if header is not None else []) + lines
    partial = _partial(out)
    try:
        partial.write_text("\n".join(body) + "\n")
        if force:
            partial.replace(out)
        else:
            os.link(partial, out)  # never over a file that appeared since the run began
            partial.unlink()
    except FileExistsError:
        partial.unlink(missing_ok=True)
        raise ConfigError(f"{_exists(out)} (it was made while the queries ran; the labels were not written)") from None
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ConfigError(f"--out {out}: cannot write the labels ({exc.strerror or exc})") from exc
