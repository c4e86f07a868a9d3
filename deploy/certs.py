"""``privfed certs``: a federation CA and mTLS certificates, made with ``cryptography``.

Layout of ``--out DIR`` (one directory per party, so that each party is given exactly its own)::

    DIR/ca/ca.pem, ca-key.pem                         the CA (directory 0700): keep it offline
    DIR/coordinator/ca.pem, coordinator.pem, coordinator-key.pem
    DIR/owner-<i>/ca.pem, owner-<i>.pem, owner-<i>-key.pem
    DIR/<user>/ca.pem, <user>.pem, <user>-key.pem     a data user (--data-user; OU=data-user)
    DIR/ca.pem, DIR/<party>.pem, DIR/<party>-key.pem  flat view: ca.pem, and symlinks into the
                                                      party directories (no link to the CA key)

Hand party ``X`` only ``DIR/X`` (``--certs DIR/X --name X``): it holds the CA certificate and X's
own pair, nothing else. The flat view keeps ``--certs DIR --name X`` working on one host (tests,
``privfed simulate``), where one user holds every party's files anyway; never mount ``DIR`` itself
into a service. Whoever holds ``ca-key.pem`` can mint owner identities, so it is written only
into ``DIR/ca``, which no service needs (``docker-compose.yml`` mounts it into its certificate
services only).

Private keys are created with mode 0600 from their first byte (``os.open`` with ``O_EXCL`` and mode
0600, or a 0600 temporary file renamed over the old key when replacing): never world-readable,
whatever the umask. Directories holding keys are 0700.

Lifetimes (walkthrough 9, W9-3: the CA and every leaf lasted one year, and a leaf added later outlived its CA): the
CA lasts :data:`CA_VALIDITY` (ten years) and every leaf :data:`VALIDITY` (one year), never past the CA's own end.
Replacing the CA means handing every party a new directory on the same day, so it should be rare; a leaf is renewed
alone under the same CA (:func:`reissue`), and a year bounds how long a leaf key that leaked unnoticed stays good.

``reissue`` (``privfed certs --reissue NAME``) gives existing parties a new key and certificate under the same CA,
for renewal or because a key leaked, and appends each replaced certificate's SHA-256 fingerprint to
``DIR/revoked-certificates.txt`` (and the coordinator's copy, ``DIR/coordinator/revoked-certificates.txt``), which
``privfed serve`` reads to refuse the old key (W9-2: re-issuing with ``--add`` left the old key working).

A second run over an existing ``DIR`` is refused (:class:`ConfigError` naming the directory)
unless ``force`` (a new CA and new keys for everyone) or ``add`` (keep the CA and every existing
pair, issue only the missing ones). The coordinator certificate (server auth, SANs localhost,
127.0.0.1, coordinator and every ``--san``) and owner certificates (client auth, common name
``owner-<i>``: the node identity the coordinator checks) use ECDSA P-256 keys. A data user's
certificate (``--data-user NAME``: client auth, subject OU ``data-user``,
:mod:`privfed.common.roles`) may submit jobs to a coordinator service and do nothing else.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
import secrets
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import (
    CertificateIssuerPrivateKeyTypes,
    CertificatePublicKeyTypes,
    PrivateKeyTypes,
)
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from privfed.common.certificates import fingerprint
from privfed.common.errors import ConfigError
from privfed.common.roles import DATA_USER, certificate_role
from privfed.server.revocation import REVOKED_FILE

#: How long a leaf certificate lasts (capped at its CA's end): renewed with ``privfed certs --reissue``.
VALIDITY = dt.timedelta(days=365)
#: How long the CA lasts: ten leaf lifetimes, since replacing it re-keys every party at once (W9-3).
CA_VALIDITY = dt.timedelta(days=3650)
#: The directory of the CA's own files, inside ``--out``.
CA_DIR = "ca"
COORDINATOR = "coordinator"
#: SANs every coordinator certificate carries (the compose service name and loopback).
BASE_SANS = ("localhost", "127.0.0.1", COORDINATOR)
__all__ = [
    "BASE_SANS",
    "CA_DIR",
    "CA_VALIDITY",
    "REVOKED_FILE",
    "VALIDITY",
    "expiries",
    "coordinator_sans",
    "issue",
    "load_ca",
    "make_certs",
    "new_key",
    "party_dir",
    "private_dir",
    "reissue",
    "write_file",
    "write_party",
    "write_private_key",
]


def party_dir(root: str | Path, name: str) -> Path:
    """The directory of party ``name`` (``coordinator``, ``owner-3``) under a ``privfed certs`` root.

    It holds ``ca.pem``, ``<name>.pem`` and ``<name>-key.pem``: pass it as ``--certs`` (or to
    ``TlsFiles.in_dir(party_dir(root, name), name)``) to give that party nothing but its own pair.
    """
    return Path(root) / name


def _name(cn: str, role: str | None = None) -> x509.Name:
    unit = [] if role is None else [x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role)]
    return x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "privfed"), *unit, x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    )


def _pem_key(key: PrivateKeyTypes) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def write_file(path: Path, data: bytes, *, mode: int, replace: bool = False) -> None:
    """Create ``path`` with ``mode`` from its first byte; ``replace`` atomically swaps an old file.

    Without ``replace`` the file is opened with ``O_CREAT | O_EXCL``: an existing file raises
    :class:`FileExistsError` and is never overwritten. With it, the data goes to a fresh temporary
    file (same directory, same mode, ``O_EXCL``) that is renamed over ``path``. Either way the
    mode is set by ``open`` itself (the umask can only remove bits), so a key written with 0600
    is never readable by anyone else, not even for an instant.
    """
    target = path if not replace else path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(target, path)
    except BaseException:
        if replace:
            target.unlink(missing_ok=True)
        raise


def write_private_key(path: Path, key: PrivateKeyTypes, *, replace: bool = False) -> None:
    """Write ``key`` (PKCS#8 PEM, unencrypted) to ``path`` with mode 0600; see :func:`write_file`."""
    write_file(path, _pem_key(key), mode=0o600, replace=replace)


def private_dir(path: Path) -> Path:
    """Create (or tighten) directory ``path`` with mode 0700."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not path.is_dir():
            raise ConfigError(f"{path} exists and is not a directory") from None
    os.chmod(path, 0o700)
    return path


def _san(entry: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(entry))
    except ValueError:
        return x509.DNSName(entry)


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


#: The names ``privfed certs`` gives owner node certificates by default (``--owners N``); a data user may not take one.
OWNER_NODE_NAME = re.compile(r"owner-\d+")


def issue(
    ca_key: CertificateIssuerPrivateKeyTypes,
    ca_cert: x509.Certificate,
    cn: str,
    public_key: CertificatePublicKeyTypes,
    *,
    sans: list[str],
    server: bool,
    now: dt.datetime | None = None,
    role: str | None = None,
    validity: dt.timedelta = VALIDITY,
) -> x509.Certificate:
    """Sign a leaf certificate for ``cn`` with the CA (``role``: the subject's OU, :mod:`privfed.common.roles`).

    It lasts ``validity``, but never past the CA's own end (W9-3: a leaf added late outlived its CA, and would have
    seemed good for weeks that no peer could verify it).

    Owners get client auth only. The coordinator (``server``) also gets client auth, so that its
    own health check (``deploy/healthcheck.py``, the image's HEALTHCHECK) can present it to the
    mTLS server; that grants no owner identity (server auth, which no owner node's certificate has, makes an
    owner refuse it as a ring peer's voucher: ``privfed.common.secagg.signed_keys``).
    """
    now = dt.datetime.now(dt.UTC) if now is None else now
    usages = (
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        if server
        else [ExtendedKeyUsageOID.CLIENT_AUTH]
    )
    return (
        x509.CertificateBuilder()
        .subject_name(_name(cn, role))
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(min(now + validity, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectAlternativeName([_san(s) for s in sans]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def _new_ca(now: dt.datetime, validity: dt.timedelta) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = new_key()
    name = _name("privfed federation CA")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return key, cert


def load_ca(root: str | Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """The CA key and certificate in ``root/ca`` (written by :func:`make_certs`)."""
    ca = Path(root) / CA_DIR
    try:
        key = serialization.load_pem_private_key((ca / "ca-key.pem").read_bytes(), password=None)
        cert = x509.load_pem_x509_certificate((ca / "ca.pem").read_bytes())
    except FileNotFoundError as exc:
        raise ConfigError(
            f"no federation CA in {ca} ({exc.filename} is missing); make one with `privfed certs --out DIR`"
        ) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ConfigError(f"{ca / 'ca-key.pem'}: not an ECDSA key; make the CA with `privfed certs --out DIR`")
    return key, cert


def _existing(out: Path, names: list[str]) -> list[str]:
    """What of a previous ``privfed certs`` run (either layout) is in ``out``."""
    candidates = [CA_DIR, "ca.pem", "ca-key.pem", *names, *(f"{n}{s}" for n in names for s in (".pem", "-key.pem"))]
    return [c for c in candidates if os.path.lexists(out / c)]


def _sans_of(cert: x509.Certificate) -> set[str]:
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(v) for v in ext.get_values_for_type(x509.DNSName) + ext.get_values_for_type(x509.IPAddress)}


def _link(root: Path, name: str, file: str, replace: bool) -> None:
    link = root / file
    if os.path.lexists(link):
        if not replace and os.path.islink(link) and os.readlink(link) == f"{name}/{file}":
            return
        if not replace:
            raise FileExistsError(link)
        link.unlink()
    os.symlink(f"{name}/{file}", link)


def coordinator_sans(extra: Sequence[str] = ()) -> list[str]:
    """The coordinator certificate's SANs: :data:`BASE_SANS` and ``extra``, without repeats."""
    return list(dict.fromkeys([*BASE_SANS, *extra]))


def write_party(
    d: Path,
    name: str,
    *,
    ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate],
    sans: list[str],
    server: bool,
    force: bool = False,
    add: bool = False,
    now: dt.datetime | None = None,
    role: str | None = None,
    validity: dt.timedelta = VALIDITY,
) -> Path:
    """Write ``ca.pem``, ``<name>.pem`` and ``<name>-key.pem`` (0600) into directory ``d`` (0700).

    ``ca`` is the CA's ``(key, certificate)``. With ``add``, an existing pair is kept (it must
    carry every SAN in ``sans``); with ``force``, it is replaced; with neither, an existing file
    raises :class:`FileExistsError`.
    """
    ca_key, ca_cert = ca
    d = private_dir(d)
    key_path, cert_path = d / f"{name}-key.pem", d / f"{name}.pem"
    if add and key_path.exists():
        if not cert_path.exists():
            raise ConfigError(f"{d} holds a key but no {cert_path.name}; rerun with --force")
        missing = set(sans) - _sans_of(x509.load_pem_x509_certificate(cert_path.read_bytes()))
        if missing:
            raise ConfigError(
                f"{cert_path} lacks SAN(s) {', '.join(sorted(missing))}; --add keeps existing "
                "certificates: rerun with --force to reissue them all"
            )
    else:
        key = new_key()
        write_private_key(key_path, key, replace=force)
        cert = issue(
            ca_key, ca_cert, name, key.public_key(), sans=sans, server=server, now=now, role=role, validity=validity
        )
        write_file(cert_path, cert.public_bytes(serialization.Encoding.PEM), mode=0o644, replace=force)
    if not (add and (d / "ca.pem").exists()):
        write_file(d / "ca.pem", ca_cert.public_bytes(serialization.Encoding.PEM), mode=0o644, replace=force)
    return d


def make_certs(
    out: str | Path,
    *,
    owners: int,
    sans: Sequence[str] = (),
    owner_names: list[str] | None = None,
    force: bool = False,
    add: bool = False,
    flat: bool = True,
    coordinator: bool = True,
    data_users: Sequence[str] = (),
    validity: dt.timedelta = VALIDITY,
    ca_validity: dt.timedelta = CA_VALIDITY,
) -> Path:
    """Create a CA, a coordinator pair and ``owners`` owner pairs under ``out``; return ``out``.

    Parameters
    ----------
    out : path
        The root (see the module docstring for the layout). Created if missing.
    owners : int
        Owner node certificates ``owner-0`` .. ``owner-<owners-1>`` (unless ``owner_names``).
    sans : list of str
        Extra coordinator DNS names or IP addresses.
    owner_names : list of str, optional
        Owner certificate names instead of ``owner-<i>``.
    force : bool
        Replace an existing CA and every pair (old certificates stop verifying).
    add : bool
        Keep an existing CA and existing pairs; issue only the missing ones (to add owners).
    flat : bool
        Also write the flat view (``out/ca.pem`` and symlinks ``out/<party>.pem``,
        ``out/<party>-key.pem``) so that ``--certs out --name X`` works on one host.
    coordinator : bool
        Write the coordinator's pair (``deploy/enroll.py`` writes it elsewhere itself).
    data_users : list of str
        Data-user certificates (OU ``data-user``) with these names: they may submit jobs to a
        coordinator service (``privfed submit``) and nothing else.
    validity, ca_validity : timedelta
        How long the leaves issued now (never past the CA) and a new CA last (shorter only in tests).

    Raises
    ------
    ConfigError
        ``out`` already holds certificates and neither ``force`` nor ``add`` is given; with
        ``add``, the existing coordinator certificate lacks a requested SAN.
    """
    if owners < 0:
        raise ValueError(f"--owners must be >= 0, got {owners}")
    if force and add:
        raise ConfigError("--force (a new CA for everyone) and --add (keep the CA) exclude each other")
    out = Path(out)
    names = owner_names if owner_names is not None else [f"owner-{i}" for i in range(owners)]
    users = list(data_users)
    clash = sorted(set(users) & {COORDINATOR, CA_DIR, *names})
    if clash or len(set(users)) != len(users):
        raise ConfigError(f"--data-user names must be distinct from each other and from the nodes, got {users}")
    node_like = [u for u in users if OWNER_NODE_NAME.fullmatch(u)]
    if node_like:  # owners accept no data user's key as a peer's, but the name would still mislead
        raise ConfigError(f"--data-user {node_like[0]!r} is an owner node's name (owner-<i>); choose another")
    out.mkdir(parents=True, exist_ok=True)
    found = _existing(out, [COORDINATOR, *names, *users])
    if found and not (force or add):
        raise ConfigError(
            f"{out} already holds certificates ({', '.join(found[:3])}{', ...' if len(found) > 3 else ''}); "
            "refusing to replace the CA and every key: pass --force to replace them, or --add "
            "to issue only the missing ones"
        )
    if force:  # the CA key of the old flat layout lay beside every other file
        (out / "ca-key.pem").unlink(missing_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_dir = private_dir(out / CA_DIR)
    if add and (ca_dir / "ca-key.pem").exists():
        ca_key, ca_cert = load_ca(out)
    else:
        ca_key, ca_cert = _new_ca(now, ca_validity)
        write_private_key(ca_dir / "ca-key.pem", ca_key, replace=force)
        write_file(ca_dir / "ca.pem", ca_cert.public_bytes(serialization.Encoding.PEM), mode=0o644, replace=force)
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    parties: list[tuple[str, list[str], bool, str | None]] = [(n, [n], False, None) for n in names]
    parties += [(u, [u], False, DATA_USER) for u in users]
    if coordinator:
        parties.insert(0, (COORDINATOR, coordinator_sans(sans), True, None))
    for name, party_sans, server, role in parties:
        write_party(
            party_dir(out, name),
            name,
            ca=(ca_key, ca_cert),
            sans=party_sans,
            server=server,
            force=force,
            add=add,
            now=now,
            role=role,
            validity=validity,
        )
        if flat:
            _link(out, name, f"{name}.pem", force)
            _link(out, name, f"{name}-key.pem", force)
    if flat and not (add and (out / "ca.pem").exists()):
        write_file(out / "ca.pem", ca_pem, mode=0o644, replace=force)
    return out


def _extended_usages(cert: x509.Certificate) -> set[x509.ObjectIdentifier]:
    return set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def reissue(
    out: str | Path, names: Sequence[str], *, validity: dt.timedelta = VALIDITY, now: dt.datetime | None = None
) -> list[tuple[str, x509.Certificate, x509.Certificate]]:
    """A new key and certificate for each existing party of ``names`` under ``out``'s CA, and each replaced
    certificate's fingerprint appended to ``out/revoked-certificates.txt``; returns (name, old, new) per party.

    The new certificate keeps the old one's role, SANs and usages (an owner node, a data user or the coordinator).
    The fingerprint is recorded before the key is replaced, so that a run stopped half-way leaves the party
    without a working key rather than the old one still good (walkthrough 9, W9-2). A party missing from ``out``
    raises :class:`ConfigError` before anything is changed.
    """
    out = Path(out)
    ca = load_ca(out)
    now = dt.datetime.now(dt.UTC) if now is None else now
    old: dict[str, x509.Certificate] = {}
    for name in dict.fromkeys(names):
        path = party_dir(out, name) / f"{name}.pem"
        if name == CA_DIR or not path.is_file():
            raise ConfigError(
                f"no certificate of {name!r} in {out} ({path} is missing): --reissue renews existing parties; "
                "make a new one with --add"
            )
        old[name] = x509.load_pem_x509_certificate(path.read_bytes())
    stamp = f"{now:%Y-%m-%dT%H:%MZ}"
    _revoke(out, [f"{fingerprint(c)}  # {n}, serial {c.serial_number:X}, reissued {stamp}" for n, c in old.items()])
    done = []
    for name, cert in old.items():
        d = party_dir(out, name)
        key = new_key()
        new = issue(
            *ca,
            name,
            key.public_key(),
            sans=[str(n.value) for n in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value],
            server=ExtendedKeyUsageOID.SERVER_AUTH in _extended_usages(cert),
            now=now,
            role=DATA_USER if certificate_role(cert) == DATA_USER else None,
            validity=validity,
        )
        write_private_key(d / f"{name}-key.pem", key, replace=True)
        write_file(d / f"{name}.pem", new.public_bytes(serialization.Encoding.PEM), mode=0o644, replace=True)
        done.append((name, cert, new))
    return done


def _revoke(out: Path, lines: list[str]) -> None:
    """Append ``lines`` to the revocation file in ``out`` and to the coordinator's copy, each replaced whole
    (a service re-reading it never sees half a line)."""
    for path in (out / REVOKED_FILE, party_dir(out, COORDINATOR) / REVOKED_FILE):
        if path.parent.is_dir():
            before = path.read_text(encoding="utf-8") if path.is_file() else REVOKED_HEADER
            write_file(path, (before + "".join(f"{line}\n" for line in lines)).encode(), mode=0o644, replace=True)


REVOKED_HEADER = (
    "# Certificates refused by privfed serve (--revoked-certificates; by default this file in its --certs).\n"
    "# One SHA-256 fingerprint of a certificate's DER a line; written by privfed certs --reissue.\n"
)


def expiries(out: str | Path) -> list[tuple[str, dt.datetime]]:
    """(party, end of its certificate) for the CA (``ca``) and every party directory under ``out``."""
    out = Path(out)
    found = [(CA_DIR, out / CA_DIR / "ca.pem")]
    found += [(d.name, d / f"{d.name}.pem") for d in sorted(out.iterdir()) if d.is_dir() and d.name != CA_DIR]
    return [(n, x509.load_pem_x509_certificate(p.read_bytes()).not_valid_after_utc) for n, p in found if p.is_file()]
