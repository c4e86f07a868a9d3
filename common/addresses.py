"""What address the coordinator listens on and nodes dial: network ``HOST:PORT`` only (standard library only:
``privfed owner`` checks its flags before numpy loads)."""

from __future__ import annotations

from urllib.parse import unquote

#: gRPC's targets that name a Unix-domain socket, not a network address.
UNIX_SCHEMES = ("unix:", "unix-abstract:")
#: Why such an address is refused (audit 37, A37-4).
UNIX_SOCKET_REFUSED = (
    "a Unix socket is not supported: every connection over one has the same gRPC peer ('unix:'), and the coordinator "
    "tells a node's connection from another by its network address (a revoked copy of a node's key on another "
    "connection must not take the node away); give HOST:PORT (127.0.0.1:PORT for one host)"
)
#: Why a percent-encoded address is refused (audit 38, A38-5: gRPC's server decodes it, ``%75nix:50051`` into a
#: Unix socket).
PERCENT_REFUSED = "a percent-encoded address is not supported (gRPC decodes it into another); write HOST:PORT plainly"


def unix_socket(address: str) -> bool:
    """Whether gRPC reads ``address`` as a Unix-domain socket (``unix:PATH``, ``unix-abstract:NAME``), also once
    its percent-encoding is decoded, as gRPC's server decodes the address it binds."""
    return unquote(address).strip().lower().startswith(UNIX_SCHEMES)


def address_refusal(address: str) -> str | None:
    """Why ``address`` is no network ``HOST:PORT`` to listen on or dial (None: it may be one; its form is the
    command line's to check): a Unix socket, or any percent-encoding."""
    if unix_socket(address):
        return UNIX_SOCKET_REFUSED
    return PERCENT_REFUSED if "%" in address else None
