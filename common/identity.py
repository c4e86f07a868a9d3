"""Owner identities bound to node certificates.

A logical owner's id is ``<node id>.<local name>``, where the node id is the common name of the
certificate its node presents over mTLS (a free-form name such as ``hospital-a`` from
``privfed certs --names``, or ``owner-<i>`` from ``privfed certs --owners N``) and the local name
(``o00042``) says which shard of that node it is. So the certificate a node holds decides which
owner ids it may speak for:

* the coordinator refuses to register an owner id whose node part is not the caller's verified
  identity (no node can register, or answer for, another node's owners, nor invent sybils under
  another name);
* a ring peer accepts an X25519 key for owner ``n.o7`` only when it is signed by the key of
  certificate ``n`` (``privfed.common.secagg.signed_keys.verify_public_key`` with ``cert_identity=n``).

Pure string functions; no I/O.
"""

from __future__ import annotations

import re

from privfed.common.errors import ConfigError, RemoteProtocolError

#: Separates the node part from the local part of an owner id.
SEPARATOR = "."
#: A node name: letters, digits, ``-`` and ``_``, starting with a letter or digit, at most 64
#: characters (an X.509 common name's limit); it is a certificate's CN, a directory name under
#: ``privfed certs --out`` and the first part of every owner id the node hosts.
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
#: Names a node cannot take: the coordinator's certificate and the CA's directory.
RESERVED_NAMES = ("coordinator", "ca")


def check_node_name(name: str, *, flag: str = "--name") -> str:
    """``name`` if it can name an owner node (:data:`NODE_NAME`, not :data:`RESERVED_NAMES`), else ConfigError."""
    if not isinstance(name, str) or not NODE_NAME.fullmatch(name) or name.lower() in RESERVED_NAMES:
        raise ConfigError(
            f"{flag} {name!r} cannot name an owner node: use letters, digits, '-' and '_' (at most 64, starting "
            f"with a letter or digit; not {' or '.join(RESERVED_NAMES)}), e.g. hospital-a"
        )
    return name


def owner_id(node_id: str, index: int) -> str:
    """The id of logical owner ``index`` hosted by node ``node_id`` (``owner-3.o00042``)."""
    if not node_id or SEPARATOR in node_id:
        raise ConfigError(f"a node id must be non-empty and contain no {SEPARATOR!r}, got {node_id!r}")
    if index < 0:
        raise ConfigError(f"an owner index must be >= 0, got {index}")
    return f"{node_id}{SEPARATOR}o{index:05d}"


def node_of(owner: str) -> str:
    """The node part of an owner id; raises :class:`RemoteProtocolError` if it has none."""
    node, sep, local = owner.partition(SEPARATOR)
    if not sep or not node or not local:
        raise RemoteProtocolError(f"owner id {owner!r} is not of the form <node id>{SEPARATOR}<local name>")
    return node


def check_owned_by(owner: str, node_id: str) -> None:
    """Raise :class:`RemoteProtocolError` unless ``owner`` belongs to node ``node_id``."""
    if node_of(owner) != node_id:
        raise RemoteProtocolError(
            f"owner id {owner!r} does not belong to node {node_id!r}: an owner id is "
            f"'<node id>{SEPARATOR}<local name>' and the node id is the certificate's name"
        )
