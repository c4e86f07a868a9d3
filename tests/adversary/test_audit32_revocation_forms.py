"""Audit 32, A32-1: a fingerprint written in the revocation file in a form an operator is likely to use is silently
not listed, and the certificate it names still gets through.

``normal_fingerprint`` says it takes a fingerprint "as written by hand or by ``openssl x509 -fingerprint -sha256``",
but ``openssl`` prints the whole line ``sha256 Fingerprint=AB:CD:...`` (1.1: ``SHA256 Fingerprint=``), and that line
pasted as it is listed nothing. A file saved by an editor with a UTF-8 byte order mark (Windows Notepad) read its
first entry as ``\\ufeff...``, so the first certificate the operator revoked stayed valid. Neither was a warning:
the service logged "1 certificate(s) revoked"."""

from __future__ import annotations

import pytest

from privfed.common.certificates import pem_fingerprint
from privfed.deploy.certs import make_certs
from privfed.server.revocation import RevokedCertificates


@pytest.fixture(scope="module")
def pem(tmp_path_factory):
    certs = make_certs(tmp_path_factory.mktemp("c"), owners=1)
    return (certs / "owner-0" / "owner-0.pem").read_bytes()


def _openssl_colons(fp: str) -> str:
    return ":".join(fp[i : i + 2] for i in range(0, 64, 2)).upper()


@pytest.mark.parametrize(
    "form",
    [
        pytest.param(lambda fp: f"sha256 Fingerprint={_openssl_colons(fp)}", id="openssl-3-line"),
        pytest.param(lambda fp: f"SHA256 Fingerprint={_openssl_colons(fp)}", id="openssl-1.1-line"),
        pytest.param(lambda fp: " ".join(fp[i : i + 2] for i in range(0, 64, 2)), id="hex-pairs-spaced"),
        pytest.param(lambda fp: f"\ufeff{fp}", id="byte-order-mark"),
    ],
)
def test_a_fingerprint_in_a_usual_form_is_revoked(tmp_path, pem, form):
    listed = tmp_path / "revoked-certificates.txt"
    listed.write_text(form(pem_fingerprint(pem)) + "  # owner-0's old key\n", encoding="utf-8")
    assert RevokedCertificates(listed).revoked(pem)


def test_a_byte_order_mark_written_by_an_editor_does_not_unlist_the_first_entry(tmp_path, pem):
    listed = tmp_path / "revoked-certificates.txt"
    listed.write_bytes(pem_fingerprint(pem).encode() + b"\n")
    revoked = RevokedCertificates(listed)
    assert revoked.revoked(pem)
    listed.write_text(pem_fingerprint(pem) + "\n", encoding="utf-8-sig")  # the same file, saved by Notepad
    assert revoked.revoked(pem)


def test_an_entry_that_is_no_fingerprint_is_named_in_the_log(tmp_path, pem, caplog):
    listed = tmp_path / "revoked-certificates.txt"
    listed.write_text("owner-0\n", encoding="utf-8")  # a name where a fingerprint goes: it revokes nothing
    with caplog.at_level("WARNING", logger="privfed.coordinator"):
        assert not RevokedCertificates(listed).revoked(pem)
    assert "owner-0" in caplog.text and "fingerprint" in caplog.text
