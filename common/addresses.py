"""What address the coordinator listens on and nodes dial: network ``HOST:PORT`` only (standard library only:
``privfed owner`` checks its flags before numpy loads)."""

from __future__ import annotations

#: gRPC's targets that name a Unix-domain socket, not a network address.
UNIX_SCHEMES = ("unix:", "unix-abstract:")
#: Why such an address is refused (audit 37, A37-4).
UNIX_SOCKET_REFUSED = (
    "a Unix socket is not supported: every connection over one has the same gRPC peer ('unix:'), and the coordinator "
    "tells a node's connection from another by its network address (a revoked copy of a node's key on another "
    "connection must not take the node away); give HOST:PORT (127.0.0.1:PORT for one host)"
)


def unix_socket(address: str) -> bool:
    """Whether gRPC reads ``address`` as a Unix-domain socket (``unix:PATH``, ``unix-abstract:NAME``)."""
    return address.strip().lower().startswith(UNIX_SCHEMES)
