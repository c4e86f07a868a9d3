"""An owner node waiting out an unreachable coordinator logs it at INFO once a minute, not once a backoff
(walkthrough 5b: a daemon wrote a retry line every 1.1 s while the coordinator was down), and still says the
first failure at once. The failures are real: gRPC calls to a port nobody listens on."""

from __future__ import annotations

import logging
import socket
import threading
import types

import grpc

from privfed.owner import retry as retry_module

FAILURES = 30
SECONDS_PER_TRY = 7.0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_coordinator_is_said_at_info_once_a_minute(monkeypatch, caplog):
    clock = [1000.0]
    monkeypatch.setattr(retry_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(retry_module, "Backoff", lambda: types.SimpleNamespace(next_delay=lambda: 0.0))
    channel = grpc.insecure_channel(f"127.0.0.1:{_closed_port()}")
    stub = channel.unary_unary("/privfed.v1.Coordinator/PullTasks")
    tries = []

    def call() -> str:
        tries.append(clock[0])
        if len(tries) <= FAILURES:
            clock[0] += SECONDS_PER_TRY
            stub(b"", timeout=2.0)  # raises UNAVAILABLE: nobody listens
        return "answered"

    with caplog.at_level(logging.DEBUG, logger="privfed.owner"), channel:
        got = retry_module.retry(
            call, "register", target="127.0.0.1", connect_timeout=1e9, stop_event=threading.Event()
        )
    assert got == "answered" and len(tries) == FAILURES + 1
    lines = [r for r in caplog.records if "coordinator not reachable" in r.getMessage()]
    assert len(lines) == FAILURES
    info = [r.getMessage() for r in lines if r.levelno == logging.INFO]
    # 30 failures 7 s apart: said at the 1st (7 s), then once 60 s have passed since the last said (70, 133, 196 s)
    assert len(info) == 4, info
    assert (
        "register: coordinator not reachable or answered badly: no connection, or it dropped (UNAVAILABLE), for 7 s"
        in (info[0])
    )  # in words first (walkthrough 10, W10-9), gRPC's name for whoever searches for it
    assert "said again every 60 s" in info[0] and "for 70 s" in info[1], info
