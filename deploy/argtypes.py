"""argparse ``type=`` functions shared by the command line's modules (:mod:`privfed.deploy.cli`,
:mod:`privfed.deploy.query_flags`). Standard library only: ``privfed owner`` parses its flags before
numpy loads (:mod:`privfed.deploy.threads`)."""

from __future__ import annotations

import argparse


def address(text: str, *, lowest_port: int = 1) -> str:
    """argparse ``type=``: ``HOST:PORT`` to dial (``[v6]:PORT`` for IPv6), the port an integer
    1..65535. Without a port gRPC would dial 443, which is never the coordinator's (50051 by default)."""
    host, sep, port = text.rpartition(":")
    if (
        not sep
        or not host
        or not port.isdigit()
        or not lowest_port <= int(port) <= 65535
        or (":" in host and host[0] != "[")
    ):
        raise argparse.ArgumentTypeError(
            f"must be HOST:PORT (e.g. coord.example.org:50051, or [::1]:50051), got {text!r}"
        )
    return text


def listen_address(text: str) -> str:
    """argparse ``type=``: ``--listen HOST:PORT``; port 0 asks the system for a free one."""
    return address(text, lowest_port=0)
