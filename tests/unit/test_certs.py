"""deploy/certs.py: keys are 0600 from their first byte, the CA key lives apart from every party's
directory, a second run refuses to replace the CA unless told, and --add issues only what is missing."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from privfed.common.errors import ConfigError
from privfed.deploy.certs import load_ca, make_certs, new_key, party_dir, write_private_key
from privfed.proto.transport import TlsFiles


@pytest.fixture
def umask0():
    old = os.umask(0)  # the most permissive umask: any key readable by others would show it
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def verifies(leaf: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        leaf.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def test_every_key_is_0600_and_every_key_directory_0700_even_with_umask_0(tmp_path, umask0):
    root = make_certs(tmp_path / "pki", owners=2)
    keys = [p for p in root.rglob("*-key.pem") if not p.is_symlink()]
    assert sorted(p.name for p in keys) == ["ca-key.pem", "coordinator-key.pem", "owner-0-key.pem", "owner-1-key.pem"]
    assert {mode(p) for p in keys} == {0o600}
    assert {mode(p.parent) for p in keys} == {0o700}


def test_a_key_is_created_with_its_mode_not_chmodded_after_writing(tmp_path, umask0):
    # os.open(..., O_EXCL, 0o600): the file never exists with another mode. Writing to a path
    # that exists is refused rather than truncating (and keeping) an old, looser mode.
    path = tmp_path / "k.pem"
    path.write_bytes(b"old")
    os.chmod(path, 0o644)
    with pytest.raises(FileExistsError):
        write_private_key(path, new_key())
    assert path.read_bytes() == b"old"
    write_private_key(path, new_key(), replace=True)  # a fresh 0600 file renamed over the old one
    assert mode(path) == 0o600 and b"PRIVATE KEY" in path.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["k.pem"]  # no temporary left behind


def test_ca_key_lives_only_in_the_ca_directory_and_party_directories_hold_only_their_own(tmp_path):
    root = make_certs(tmp_path / "pki", owners=3)
    assert [p.relative_to(root) for p in root.rglob("ca-key.pem")] == [Path("ca/ca-key.pem")]
    for name in ["coordinator", "owner-0", "owner-1", "owner-2"]:
        d = party_dir(root, name)
        assert sorted(p.name for p in d.iterdir()) == sorted(["ca.pem", f"{name}.pem", f"{name}-key.pem"])
        assert cert(d / f"{name}.pem").subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == name
        assert verifies(cert(d / f"{name}.pem"), cert(d / "ca.pem"))
        # TlsFiles.in_dir on the party's own directory finds its files
        ca, crt, key = TlsFiles.in_dir(d, name).read()
        assert ca == (root / "ca" / "ca.pem").read_bytes() and key == (d / f"{name}-key.pem").read_bytes()


def test_flat_view_keeps_the_root_usable_for_one_host_without_exposing_the_ca_key(tmp_path):
    root = make_certs(tmp_path / "pki", owners=2)
    for name in ["coordinator", "owner-1"]:
        assert TlsFiles.in_dir(root, name).read() == TlsFiles.in_dir(party_dir(root, name), name).read()
    assert not (root / "ca-key.pem").exists()
    assert sorted(p.name for p in root.iterdir() if p.is_symlink()) == sorted(
        f"{n}{s}" for n in ["coordinator", "owner-0", "owner-1"] for s in (".pem", "-key.pem")
    )
    bare = make_certs(tmp_path / "bare", owners=1, flat=False)
    assert sorted(p.name for p in bare.iterdir()) == ["ca", "coordinator", "owner-0"]


def test_a_second_run_refuses_to_replace_the_ca_unless_forced(tmp_path):
    root = make_certs(tmp_path / "pki", owners=2)
    before = {p: p.read_bytes() for p in root.rglob("*.pem") if not p.is_symlink()}
    with pytest.raises(ConfigError, match=f"{root}.*already holds certificates.*--force"):
        make_certs(root, owners=2)
    assert {p: p.read_bytes() for p in before} == before  # nothing touched
    make_certs(root, owners=2, force=True)
    assert (root / "ca" / "ca-key.pem").read_bytes() != before[root / "ca" / "ca-key.pem"]
    assert verifies(cert(root / "owner-1" / "owner-1.pem"), cert(root / "ca" / "ca.pem"))
    assert mode(root / "ca" / "ca-key.pem") == 0o600


def test_an_empty_existing_directory_is_fine(tmp_path):
    (tmp_path / "pki").mkdir()  # e.g. a fresh volume's mount point
    make_certs(tmp_path / "pki", owners=1)


def test_force_removes_the_old_flat_layouts_ca_key(tmp_path):
    root = tmp_path / "pki"
    root.mkdir()
    (root / "ca-key.pem").write_bytes(b"old CA key beside everything")
    with pytest.raises(ConfigError, match="ca-key.pem"):
        make_certs(root, owners=1)
    make_certs(root, owners=1, force=True)
    assert not (root / "ca-key.pem").exists()


def test_add_keeps_the_ca_and_existing_pairs_and_issues_missing_owners(tmp_path):
    root = make_certs(tmp_path / "pki", owners=2)
    kept = {p: p.read_bytes() for p in root.rglob("*.pem") if not p.is_symlink()}
    make_certs(root, owners=4, add=True)
    assert {p: p.read_bytes() for p in kept} == kept
    ca = cert(root / "ca" / "ca.pem")
    assert all(verifies(cert(root / f"owner-{i}" / f"owner-{i}.pem"), ca) for i in range(4))
    assert load_ca(root)[1] == ca
    with pytest.raises(ConfigError, match="lacks SAN.*10.0.0.9.*--force"):
        make_certs(root, owners=4, add=True, sans=["10.0.0.9"])
    with pytest.raises(ConfigError, match="exclude"):
        make_certs(root, owners=1, add=True, force=True)


def test_coordinator_certificate_names_and_usages(tmp_path):
    root = make_certs(tmp_path / "pki", owners=1, sans=["10.77.0.1", "coordinator-lr"])
    c = cert(root / "coordinator" / "coordinator.pem")
    names = c.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(v) for v in names.get_values_for_type(x509.DNSName)} == {"localhost", "coordinator", "coordinator-lr"}
    assert {str(v) for v in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "10.77.0.1"}
    key = serialization.load_pem_private_key((root / "owner-0" / "owner-0-key.pem").read_bytes(), password=None)
    assert key.public_key() == cert(root / "owner-0" / "owner-0.pem").public_key()


def test_cli_refuses_a_second_run_with_a_one_line_error(tmp_path):
    cmd = [sys.executable, "-m", "privfed.deploy.cli", "certs", "--out", str(tmp_path / "pki"), "--owners", "1"]
    assert subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert str(tmp_path / "pki") in lines[-1] and "--force" in lines[-1], proc.stderr


def test_missing_tls_files_beside_another_names_certificate_name_the_mix_up(tmp_path):
    """Walkthrough 15, W15-14: ``privfed owner --name clinic-1 --certs certs/clinic-0`` was told to make the
    certificates with ``privfed certs``, which existed; the name and the folder did not match."""
    import pytest

    from privfed.deploy.certs import make_certs
    from privfed.proto.transport import TlsFiles

    certs = make_certs(tmp_path / "certs", owners=0, owner_names=["clinic-0", "clinic-1"])
    with pytest.raises(FileNotFoundError, match=r"holds the certificate of clinic-0, not of clinic-1: check --name"):
        TlsFiles.in_dir(certs / "clinic-0", "clinic-1").read()
    with pytest.raises(FileNotFoundError, match=r"make them with `privfed certs`"):
        TlsFiles.in_dir(tmp_path / "nowhere", "clinic-1").read()
    assert TlsFiles.in_dir(certs / "clinic-1", "clinic-1").read()[1].startswith(b"-----BEGIN CERTIFICATE")
