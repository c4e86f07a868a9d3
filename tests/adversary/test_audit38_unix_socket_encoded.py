"""Audit 38, A38-5: A37-4's refusal of a Unix socket is by prefix, but gRPC percent-decodes the address it binds:
``%75nix:50051`` (``%75`` is ``u``) passes ``privfed.common.addresses.unix_socket`` and the ``HOST:PORT`` check of
``--listen`` / ``--coordinator`` (host ``%75nix``, port 50051), and ``grpc.Server.add_secure_port`` serves it as the
Unix socket ``./50051``, which clients reach as ``unix:50051`` (a library caller, or a local forwarder such as socat;
gRPC's *client* reads ``%75nix:50051`` as a DNS name, so ``privfed owner --coordinator`` cannot be coaxed the same
way). So A37-4 is back on the service's side: over a Unix socket every peer is ``unix:``, and a stale, revoked copy of a node's key makes the re-keyed node leave (``Registry.revoked``
compares the refused call's peer with the node's, both ``unix:``).

Same harness as ``test_audit37_revocation_unix_socket.py`` (real service in this process over mTLS, certificates from
``make_certs``; its TCP control holds). Severity as A37-4: low (no budget moves, nothing is learned; an eviction of
an honest node by a holder of its revoked key), but the fix does not hold against the operator's own typo-like
input or a crafted deployment file. Suggested fix: decide by what gRPC will do, not by the text: accept only
``HOST:PORT`` whose host is a DNS name or an IP literal (``[A-Za-z0-9.-]+`` or a bracketed IPv6), refusing ``%`` and
any ``scheme:`` form; or check ``context.peer()`` at registration and refuse a ``unix:`` peer.

Fixed: ``privfed.common.addresses.address_refusal`` decodes before its prefix check and refuses any ``%``, on the
command line and in ``CoordinatorServer.start``.
"""

from __future__ import annotations

import argparse

import pytest
from test_audit37_revocation_unix_socket import _evicted_by_a_stale_copy

from privfed.common.addresses import unix_socket
from privfed.common.errors import ConfigError
from privfed.deploy.argtypes import address, listen_address

ENCODED = "%75nix:50051"


def test_the_command_line_refuses_a_percent_encoded_unix_socket():
    assert unix_socket(ENCODED)
    for check in (address, listen_address):
        with pytest.raises(argparse.ArgumentTypeError):
            check(ENCODED)


def test_a_percent_encoded_unix_socket_does_not_let_a_stale_key_evict_the_node(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where gRPC makes the socket ./50051
    try:
        # the clients dial the socket by its plain name (a library caller, or a local forwarder: gRPC's client reads
        # %75nix:50051 as a DNS name); the service's own check is what lets the socket be served
        state = _evicted_by_a_stale_copy(tmp_path, ENCODED, "unix:50051")
    except ConfigError:
        return  # refused before any node connects: fixed
    assert state == "online", state  # on current code the honest node left


def test_control_over_tcp_the_stale_copy_evicts_nothing(tmp_path):
    assert _evicted_by_a_stale_copy(tmp_path, "127.0.0.1:0", "127.0.0.1:{port}") == "online"
