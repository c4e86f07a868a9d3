"""The job announcement on the wire (:class:`~privfed.common.jobinfo.JobInfo` <-> ``privfed.v1.JobInfo``),
and the JSON messages of the job API a data user calls (``privfed submit``, ``privfed jobs``,
``privfed job``): a gRPC service of its own on the coordinator service's port, whose requests and
answers are JSON objects (:data:`JOB_METHODS`)."""

from __future__ import annotations

import json
from typing import Any

from privfed.common.errors import RemoteProtocolError
from privfed.common.jobinfo import JobInfo
from privfed.proto import privfed_pb2 as pb
from privfed.proto.serde_arrays import LastEncoded, decoded_once

#: The job API's gRPC service name and methods (request and answer: one JSON object each).
JOB_SERVICE = "privfed.v1.Jobs"
JOB_METHODS = ("Submit", "List", "Show", "Logs", "Cancel", "Model", "Delete")
#: The largest job API request accepted (a job file is a few hundred bytes).
MAX_JOB_REQUEST_BYTES = 64 * 1024


def job_info_to_proto(job: JobInfo | None) -> pb.JobInfo | None:
    """The announcement every response of a job carries: encoded once per job (the message is only
    ever copied into its parents)."""
    return None if job is None else _announcement(job)


def _encode_job(job: JobInfo) -> pb.JobInfo:
    return pb.JobInfo(
        job_id=job.job_id,
        data_user=job.data_user,
        task=job.task,
        epsilon=job.epsilon,
        delta=job.delta,
        schema_sha256=job.schema_sha256,
    )


_announcement = LastEncoded(_encode_job)


def job_info_from_proto(message: pb.JobInfo, present: bool) -> JobInfo | None:
    """The announced job of a response (None when the field is unset); a malformed one raises
    :class:`RemoteProtocolError` (a node then answers nothing of the response). Checked once per
    distinct announcement (every response of a job carries the same one)."""
    if not present:
        return None
    return _announced(message)


def _checked_job(message: pb.JobInfo) -> JobInfo:
    try:
        return JobInfo(
            job_id=message.job_id,
            data_user=message.data_user,
            task=message.task,
            epsilon=message.epsilon,
            delta=message.delta,
            schema_sha256=message.schema_sha256,
        )
    except Exception as exc:  # noqa: BLE001 - whatever a coordinator sends, the node goes on
        raise RemoteProtocolError(f"the coordinator announced a malformed job: {exc}") from exc


_announced = decoded_once(pb.JobInfo, _checked_job)


def encode_json(value: dict[str, Any]) -> bytes:
    return json.dumps(value).encode("utf-8")


def decode_answer(data: bytes) -> dict[str, Any]:
    """A job API answer (:func:`decode_json` with no bound but the channel's)."""
    return decode_json(data, limit=None)


def decode_json(data: bytes, *, limit: int | None = MAX_JOB_REQUEST_BYTES) -> dict[str, Any]:
    """A job API message: one JSON object of at most ``limit`` bytes (:data:`MAX_JOB_REQUEST_BYTES`, a request: a job
    file of a few hundred bytes; None: an answer, of any size the channel carries, as a report or listing of a job whose
    hundreds of owners declined it lists each one: walkthrough 13, W13-2, ``privfed jobs`` and ``privfed job show``
    ended in a gRPC traceback past 64 KiB)."""
    if limit is not None and len(data) > limit:
        raise RemoteProtocolError(f"a job API message may hold at most {limit} bytes")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RemoteProtocolError(f"a job API message must be a JSON object ({exc})") from exc
    if not isinstance(value, dict):
        raise RemoteProtocolError("a job API message must be a JSON object")
    return value
