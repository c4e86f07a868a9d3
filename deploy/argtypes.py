"""argparse ``type=`` functions shared by the command line's modules (:mod:`privfed.deploy.cli`, the experiments,
:mod:`privfed.deploy.query_flags`). Standard library only: ``privfed owner`` parses its flags before
numpy loads (:mod:`privfed.deploy.threads`)."""

from __future__ import annotations

import argparse
import math

from privfed.common.addresses import address_refusal


def address(text: str, *, lowest_port: int = 1) -> str:
    """argparse ``type=``: ``HOST:PORT`` to dial (``[v6]:PORT`` for IPv6), the port an integer
    1..65535. Without a port gRPC would dial 443, which is never the coordinator's (50051 by default)."""
    refused = address_refusal(text)
    if refused:
        raise argparse.ArgumentTypeError(f"{text!r}: {refused}")
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


def epsilon_list(text: str, *, allow_zero: bool = False) -> list[float]:
    """``"0.5,1,inf"`` -> ``[0.5, 1.0, inf]``: the one way every command takes ε values
    (comma-separated numbers > 0; ``inf`` or ``∞`` is the run without noise). ``allow_zero``: also
    0 (null-space cleaning's ε is a utility loss, and 0 is its exact variant)."""
    items = [v.strip() for v in text.split(",")]
    if "" in items:
        raise argparse.ArgumentTypeError(
            f"epsilon takes numbers separated by single commas, got {text!r} (an empty item between commas)"
        )
    try:
        values = [math.inf if v in ("inf", "∞") else float(v) for v in items]
    except ValueError:
        raise argparse.ArgumentTypeError(f"epsilon takes numbers separated by commas (or inf), got {text!r}") from None
    if not values or any(not (v >= 0 if allow_zero else v > 0) for v in values):
        least = ">= 0" if allow_zero else "> 0"
        raise argparse.ArgumentTypeError(f"every epsilon must be a number {least} (or inf), got {text!r}")
    return values


def one_epsilon(text: str) -> float:
    values = epsilon_list(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(
            f"a coordinator runs one job: give one epsilon, got {text!r} (privfed simulate takes a list)"
        )
    return values[0]


def positive_float(text: str) -> float:
    """argparse ``type=``: a finite number > 0. (Plain Python, as :func:`positive_int`: parsing an
    owner command line must not load numpy, which :mod:`privfed.common.validation` imports.)"""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse ``type=``: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value
