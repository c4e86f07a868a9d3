"""Audit 37, A37-4: over a Unix-domain socket every connection has the same gRPC peer (``unix:``), so the service's
binding of a node to "the connection it registered from" binds nothing: the refusal of a stale, revoked copy of a
node's key takes the re-keyed node away (``NodeCalls.revoked`` / ``Registry.revoked``, walkthrough 14, W14-3).

``privfed serve --listen`` checks only ``HOST:PORT`` (``deploy/argtypes.address``): ``unix:50051`` passes (host
``unix``, port 50051), and ``grpc.Server.add_secure_port`` serves it as the Unix socket ``./50051`` (the service logs
"listening on port 1"); owners dial it with ``--coordinator unix:50051``, which passes the same check (or a library
caller gives ``unix:PATH``: a socket shared with a sidecar, a proxy or containers on one host). ``Registry.revoked`` skips a
refused call "on another connection" by comparing ``context.peer()`` with the peer the node registered from; over
a Unix socket both are ``unix:`` for every client, so whoever holds a revoked certificate of the node's name (the
leaked key the re-keying was for) makes the honest node with its new key leave, at once and as often as it likes:
its owners are no longer counted, its round goes on without them (``test_walk9_certificates.py`` checks the same
over TCP, where it holds). The same comparison guards ``Registry.caller`` and ``leave`` (a fenced old process).

No privacy leak (nothing is learned, no budget moves): an eviction of an honest node by a holder of its revoked key.
Fixed: a Unix socket is refused (``privfed.common.addresses``), by the command line and by ``CoordinatorServer.start``.
Real service in this process over mTLS, certificates from ``make_certs``; the control is the same sequence over TCP.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import pytest
from test_walk9_certificates import NODE, USER, _code, _register

from privfed.deploy.certs import REVOKED_FILE, make_certs, reissue
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto.transport import TlsFiles, channel_credentials, channel_options


def _channel(target: str, d: Path) -> grpc.Channel:
    tls = TlsFiles.in_dir(d / NODE, NODE)
    return grpc.secure_channel(target, channel_credentials(tls), options=channel_options("127.0.0.1"))


def _evicted_by_a_stale_copy(tmp_path: Path, listen: str, target: str) -> str:
    """The re-keyed node's state after a stale copy of its revoked key calls the service once."""
    from tls_service import mtls_service

    certs = make_certs(tmp_path / "certs", owners=1, owner_names=[NODE], data_users=[USER])
    revoked = certs / "coordinator" / REVOKED_FILE
    revoked.write_text("")
    old = tmp_path / "old"
    shutil.copytree(certs / NODE, old / NODE)
    reissue(certs, [NODE])  # the key leaked: re-keyed before the node came back
    config = {"node_timeout": 600.0, "revoked_certificates": revoked, "listen": listen}
    with mtls_service(tmp_path, certs / "coordinator", **config) as (svc, port):
        target = target.format(port=port)
        with _channel(target, certs) as channel:  # the honest node, new key
            _register(pb_grpc.CoordinatorStub(channel), certs)
            assert svc.server.dispatcher.node_states() == {NODE: "online"}
            with _channel(target, old) as stale:  # the thief's copy of the old key, its own connection
                code = _code(pb_grpc.CoordinatorStub(stale).PullTasks, pb.PullTasksRequest(node_id=NODE, wait_ms=10))
                assert code == grpc.StatusCode.PERMISSION_DENIED
            return svc.server.dispatcher.node_states()[NODE]


def test_neither_the_command_line_nor_the_service_takes_a_unix_socket(tmp_path, monkeypatch):
    """Fixed: a Unix socket is refused, on the command line (``--listen``, ``--coordinator``) and by the server
    itself (a library caller's ``listen``), with the reason, before any node can connect."""
    import argparse

    from privfed.common.errors import ConfigError
    from privfed.deploy.argtypes import address, listen_address

    for text in ("unix:50051", "unix:/run/privfed.sock", "UNIX:x", "unix-abstract:privfed"):
        for check in (address, listen_address):
            with pytest.raises(argparse.ArgumentTypeError, match="a Unix socket is not supported"):
                check(text)
    monkeypatch.chdir(tmp_path)  # where a socket ./50051 would have been made
    with pytest.raises(ConfigError, match=r"^--listen unix:50051: a Unix socket is not supported"):
        _evicted_by_a_stale_copy(tmp_path, "unix:50051", "unix:50051")
    assert not (tmp_path / "50051").exists()


def test_control_over_tcp_the_stale_copy_evicts_nothing(tmp_path):
    assert _evicted_by_a_stale_copy(tmp_path, "127.0.0.1:0", "127.0.0.1:{port}") == "online"
