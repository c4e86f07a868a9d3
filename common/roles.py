"""Certificate roles (issue 26, item 1): what a federation certificate lets its holder do.

``privfed certs`` issues three kinds of leaf certificates under the federation CA, told apart by
the subject's organizational unit (OU):

* ``coordinator``: no OU (the coordinator's pair; server and client auth);
* owner nodes: no OU (client auth): they register owners and answer tasks;
* ``data-user`` (OU ``data-user``; ``privfed certs --data-user NAME``): submits, lists and cancels
  jobs on a coordinator service (``privfed submit``), and nothing else: a node certificate cannot
  submit, and a data-user certificate cannot register owners.

The CA signs the OU, so a holder cannot change its role without a new certificate.
"""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import NameOID

from privfed.common.errors import ConfigError

#: The OU of a data user's certificate.
DATA_USER = "data-user"


def role_of(pem: bytes) -> str:
    """The role a PEM certificate carries: ``"data-user"``, or ``"node"`` (no role OU)."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise ConfigError(f"not a PEM certificate ({exc})") from exc
    return certificate_role(cert)


def certificate_role(cert: x509.Certificate) -> str:
    """The role a parsed certificate carries (:func:`role_of`)."""
    units = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)]
    return DATA_USER if DATA_USER in units else "node"
