"""Walkthrough 9: certificates could not be revoked or re-keyed (W9-2), and nobody said when they expire (W9-3).

W9-2: an owner node's key was taken to have leaked. ``privfed certs --add`` after deleting the node's directory
issued a new pair, but the old key still registered as the node and called Predict on the coordinator;
``--revoked-data-users`` covers data users by name only, and a name cannot tell a party's old key from its new one.
Now ``privfed certs --reissue NAME`` re-keys a party under the same CA and lists the old certificate's fingerprint
in ``revoked-certificates.txt``, and ``privfed serve --revoked-certificates`` (by default that file in ``--certs``)
refuses every call that presents it, read again when the file changes. These run the real service in process over
mTLS with certificates from ``make_certs``, as ``test_audit27_revocation.py`` does.

W9-3: the CA and every leaf lasted one year, a leaf added later outlived its CA, and nothing warned before the end.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cryptography import x509

from privfed.deploy.certs import REVOKED_FILE, make_certs, reissue

NODE, USER = "hospital-b", "alice"


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_reissue_keeps_each_partys_role_and_names_and_records_the_old_fingerprint(tmp_path):
    certs = make_certs(tmp_path / "c", owners=1, owner_names=[NODE], data_users=[USER], sans=["coord.example"])
    before = {n: _cert(certs / n / f"{n}.pem") for n in (NODE, USER, "coordinator")}
    done = reissue(certs, [NODE, USER, "coordinator"])
    assert [n for n, _, _ in done] == [NODE, USER, "coordinator"]
    listed = (certs / REVOKED_FILE).read_text()
    assert listed == (certs / "coordinator" / REVOKED_FILE).read_text()
    for name, cert in before.items():
        new = _cert(certs / name / f"{name}.pem")
        assert new.fingerprint(new.signature_hash_algorithm) != cert.fingerprint(cert.signature_hash_algorithm)
        assert f"{cert.fingerprint(cert.signature_hash_algorithm).hex()}  # {name}, serial {cert.serial_number:X}" in (
            listed
        )
        assert new.subject == cert.subject and new.issuer == cert.issuer
        for ext in (x509.SubjectAlternativeName, x509.ExtendedKeyUsage):
            assert new.extensions.get_extension_for_class(ext) == cert.extensions.get_extension_for_class(ext)
    assert (certs / f"{NODE}.pem").resolve() == (certs / NODE / f"{NODE}.pem").resolve()  # the flat view follows


def test_a_leaf_never_outlives_its_ca_and_the_ca_outlives_the_leaves(tmp_path):
    certs = make_certs(tmp_path / "c", owners=1)
    ca, leaf = _cert(certs / "ca" / "ca.pem"), _cert(certs / "owner-0" / "owner-0.pem")
    assert ca.not_valid_after_utc - leaf.not_valid_after_utc > dt.timedelta(days=365 * 5)
    short = make_certs(tmp_path / "s", owners=1, ca_validity=dt.timedelta(days=10))
    ca = _cert(short / "ca" / "ca.pem")
    reissue(short, ["owner-0"])  # a renewal too is capped
    for name in ("coordinator", "owner-0"):
        assert _cert(short / name / f"{name}.pem").not_valid_after_utc == ca.not_valid_after_utc
