"""The coordinator's reading of gRPC's handshaker trace (issue 23, item 5): records as the installed
gRPC writes them (recorded from a coordinator that rejected a node's certificate and one whose
certificate the node rejected) give the peer and the cause; every other line passes through."""

from __future__ import annotations

import os
import queue
import threading

from privfed.server.handshakes import _pump, parse_record

ARGS = (
    " shutdown=false index=2, args={endpoint=0x7f8978001c40, args={grpc.http2.max_ping_strikes=0, "
    "grpc.internal.endpoint_local_address=ipv4:127.0.0.1:50612, grpc.internal.endpoint_peer_address=ipv4:127.0.0.1:34316, "
    "grpc.so_reuseport=0}, read_buffer.Length()=0, exit_early=0}"
)
REJECTED = (
    "I1125 17:06:07.503032   26872 handshaker.cc:155] CallNextHandshakerLocked: error=UNKNOWN: Ssl handshake failed "
    "(TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:1a000064:ECDSA routines:OPENSSL_internal:BAD_SIGNATURE: "
    "certificate signature failure: OK\n=== Source Location Trace: ===\nsrc/core/util/status_helper.cc:68\n" + ARGS
)
CLOSED = (
    "I1125 16:57:25.447440   16830 handshaker.cc:155] CallNextHandshakerLocked: error=UNAVAILABLE: Handshake read "
    "failed (Socket closed)\n" + ARGS
)
STARTED = "I1125 16:57:25.443530   16828 handshaker.cc:155] CallNextHandshakerLocked: error=OK" + ARGS


def test_a_rejected_certificate_and_a_closed_handshake_name_the_peer_and_the_cause():
    assert parse_record(REJECTED) == (
        "ipv4:127.0.0.1:34316",
        "the node's certificate is not signed by the federation's CA (certificate signature failure)",
    )
    peer, cause = parse_record(CLOSED)
    assert peer == "ipv4:127.0.0.1:34316" and cause.startswith("the peer closed the connection during the handshake")
    assert parse_record(STARTED) is None
    assert parse_record("I1125 16:57:25.4 1 log.cc:102] Log level INFO is not suitable for production.") is None


def test_the_pump_passes_other_lines_through_and_reports_rejections():
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    found: queue.SimpleQueue = queue.SimpleQueue()
    pump = threading.Thread(target=_pump, args=(read_in, write_out, found))
    pump.start()
    text = "\n".join(
        [
            "2026-11-25 17:20:16,550 privfed.coordinator INFO coordinator listening on port 50618",
            STARTED,
            REJECTED,
            "privfed coordinator: error: only 0 of 1 owners registered",
            CLOSED,
            "Traceback (most recent call last):",
            '  File "x.py", line 1',
        ]
    )
    os.write(write_in, (text + "\n").encode())
    os.close(write_in)
    pump.join(5)
    os.close(write_out)
    with os.fdopen(read_out) as out:
        passed = out.read().splitlines()
    assert passed == [
        "2026-11-25 17:20:16,550 privfed.coordinator INFO coordinator listening on port 50618",
        "privfed coordinator: error: only 0 of 1 owners registered",
        "Traceback (most recent call last):",
        '  File "x.py", line 1',
    ]
    assert [found.get_nowait()[1][:30] for _ in range(2)] == [
        "the node's certificate is not ",
        "the peer closed the connection",
    ]
