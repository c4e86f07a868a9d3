"""One-time enrolment tokens: minted by the admin, each bound to one party name, spent once.

A party that enrols (an owner node, the coordinator) makes its own key and asks the CA signer
(``deploy/enroll.py``) for a certificate, proving who it is by a token the admin handed to it
alone. The admin's ``privfed certs --out DIR --tokens N`` writes:

``DIR/ca/tokens.json``
    the signer's book: for each name, its role and the SHA-256 of its token (never the token),
    beside the CA key: only the signer is given it.
``DIR/tokens/<role>/<name>``
    the token itself (43 URL-safe characters, 256 bits from :mod:`secrets`), mode 0600, one file
    per party: hand ``owner-3`` only ``DIR/tokens/owner/owner-3``. ``kubectl create secret
    generic NAME --from-file=DIR/tokens/owner`` makes a Secret with one key per owner node.

The signer records each spent token, with the key it certified, in a file of its own state
directory (:class:`Spent`), written atomically before the certificate is sent, so a token is good
for one key even across signer restarts. Roles fix what a certificate may do (``deploy/certs.issue``): an owner
gets client auth and its name; the coordinator also server auth and the coordinator SANs; a
data user (who may submit jobs to the coordinator service) client auth and ``OU=data-user``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from privfed.common.errors import ConfigError
from privfed.common.roles import DATA_USER  # the role a data user's certificate carries (its OU)
from privfed.deploy.certs import CA_DIR, COORDINATOR, private_dir, write_file

#: The signer's book of token digests, in the CA directory.
BOOK = "tokens.json"
#: The hand-out directory under ``privfed certs --out``: one token file per party.
HANDOUT = "tokens"
OWNER, SERVER = "owner", "coordinator"
ROLES = (OWNER, SERVER, DATA_USER)
#: What a party name may be (a certificate common name, a file name, a Secret key).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_BYTES = 32  # 256-bit tokens


def digest(token: str) -> str:
    """SHA-256 (hex) of a token as the signer stores it."""
    return hashlib.sha256(token.strip().encode()).hexdigest()


@dataclass(frozen=True)
class Entry:
    """One name in the signer's book."""

    name: str
    role: str
    sha256: str


def party_roles(owner_names: Sequence[str], data_users: Sequence[str] = ()) -> dict[str, str]:
    """The coordinator, the given owner nodes and data users, each with its role."""
    return {COORDINATOR: SERVER} | dict.fromkeys(owner_names, OWNER) | dict.fromkeys(data_users, DATA_USER)


def mint(root: str | Path, roles: dict[str, str], *, replace: bool = False) -> dict[str, Path]:
    """Mint a token for each name of ``roles`` that has none yet (all of them with ``replace``).

    Writes the digests into ``root/ca/tokens.json`` and each new token into a file ``<name>``
    (0600) of ``root/tokens/<role>``. Returns the hand-out file of each new token.
    """
    root = Path(root)
    book = root / CA_DIR / BOOK
    entries = {e.name: e for e in load_book(book)} if book.exists() and not replace else {}
    private_dir(root / HANDOUT)
    written = {}
    for name, role in roles.items():
        if not NAME.fullmatch(name):
            raise ConfigError(f"{name!r} cannot name a party: letters, digits, '.', '-' and '_', at most 64")
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r} for {name}")
        if name in entries:
            continue
        token = secrets.token_urlsafe(_BYTES)
        handout = private_dir(root / HANDOUT / role)
        write_file(handout / name, (token + "\n").encode(), mode=0o600, replace=True)
        entries[name] = Entry(name, role, digest(token))
        written[name] = handout / name
    data = {"tokens": {e.name: {"role": e.role, "sha256": e.sha256} for e in entries.values()}}
    write_file(book, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode(), mode=0o600, replace=True)
    return written


def load_book(path: Path) -> list[Entry]:
    """The entries of a ``tokens.json``; :class:`ConfigError` naming the file if it is not one."""
    try:
        data = json.loads(path.read_text())["tokens"]
        entries = [Entry(name, e["role"], e["sha256"]) for name, e in data.items()]
    except FileNotFoundError:
        raise ConfigError(f"no token book at {path}; mint tokens with `privfed certs --out DIR --tokens N`") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ConfigError(f"{path}: not a token book written by `privfed certs --tokens`") from None
    if bad := [e.name for e in entries if e.role not in ROLES or len(e.sha256) != 64]:
        raise ConfigError(f"{path}: bad entries for {', '.join(bad)}")
    return entries


def read_token(path: Path) -> str:
    """The token in a hand-out file (or a mounted Secret key)."""
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the enrolment token {path}: {exc.strerror}") from None
    if not token:
        raise ConfigError(f"the enrolment token file {path} is empty")
    return token


class Refused(Exception):
    """A request the signer does not sign.

    ``reason`` goes back to the client; ``detail`` (with ``reason``) to the signer's log only.
    """

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason, self.detail = reason, detail


class Spent:
    """The tokens a signer has honoured, by digest, in ``state/spent.json`` (kept across restarts).

    Each record keeps the SHA-256 of the public key the token certified: the same token with the
    same key again is the same party whose answer was lost (it holds the key), and may have its
    certificate again; with any other key it is a replay.
    """

    def __init__(self, state: Path):
        self.path = private_dir(state) / "spent.json"
        self._spent: dict[str, dict[str, str]] = json.loads(self.path.read_text()) if self.path.exists() else {}

    def __len__(self) -> int:
        return len(self._spent)

    def check(self, book: list[Entry], name: str, token: str, key: bytes) -> tuple[Entry, bool]:
        """The entry ``token`` proves for ``name`` and whether it is spent already, for this same
        public ``key`` (DER); else :class:`Refused`."""
        d = digest(token)
        match = [e for e in book if hmac.compare_digest(e.sha256, d)]
        if not match:
            raise Refused(f"no valid token for {name}", "unknown token")
        entry = match[0]
        if entry.name != name:
            raise Refused(f"no valid token for {name}", f"the token is {entry.name}'s")
        spent = self._spent.get(entry.sha256)
        if spent is not None and spent.get("key") != hashlib.sha256(key).hexdigest():
            raise Refused(f"the token for {name} was used already", f"replay with another key (spent {spent['at']})")
        return entry, spent is not None

    def spend(self, entry: Entry, key: bytes) -> None:
        """Record ``entry``'s token as used for public ``key`` (on disk before returning)."""
        self._spent[entry.sha256] = {
            "name": entry.name,
            "key": hashlib.sha256(key).hexdigest(),
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        write_file(self.path, json.dumps(self._spent, indent=1).encode(), mode=0o600, replace=True)
