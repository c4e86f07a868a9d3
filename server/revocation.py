"""What a service's operator has revoked: data users by name (``privfed serve --revoked-data-users FILE``) and
certificates by fingerprint (``privfed serve --revoked-certificates FILE``).

A data user's certificate is valid for a year, and the only other way to stop one (a key that leaked, a user who
left) was to replace the whole CA, re-keying every owner node (walkthrough 7, W7-9). The file lists certificate
names, one per line (``#`` starts a comment); it is read again when it changes, so a name added takes effect at the
data user's next call without a restart. A revoked data user's job API calls are refused (``PERMISSION_DENIED``),
and a job of theirs still queued fails when its turn comes, before any owner is asked. A file that can no longer be
read revokes every data user until it can: an edit meant to lock one out must not let them back in. Owners' own
consent per data user stays in their policies (``data_users``).

A name cannot retire one key of a party that keeps its name: an owner node re-keyed after a leak kept its name, and
its old key still registered as the node and called Predict (walkthrough 9, W9-2). ``privfed certs --reissue``
therefore lists the replaced certificate's SHA-256 fingerprint (:mod:`privfed.common.certificates`), and every call
that presents a listed certificate is refused, whoever holds it (:class:`RevokedCertificates`, checked by an
interceptor of the service's gRPC server: ``privfed.server.app``). Both files are one :class:`WatchedList`.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from privfed.common.errors import ConfigError, reason
from privfed.common.files import file_state
from privfed.server.joblog import outside_jobs

log = logging.getLogger("privfed.coordinator")

#: The file of revoked certificates' fingerprints (``--revoked-certificates``) that ``privfed certs --reissue``
#: writes, in its ``--out`` and in the coordinator's directory, where ``privfed serve`` and ``privfed coordinator``
#: read it by default.
REVOKED_FILE = "revoked-certificates.txt"
#: What every entry is while the file cannot be read.
EVERYONE = frozenset({"*"})


def read_names(path: Path) -> frozenset[str]:
    """The entries the file ``path`` lists, one a line (``#`` starts a comment); ConfigError if it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # an editor's byte order mark is no part of a line (A32-1)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it ({reason(exc)})") from exc
    return frozenset(name for line in text.splitlines() if (name := line.split("#", 1)[0].strip()))


class WatchedList:
    """The entries of ``path`` (None: no file, nothing listed), read again when the file changes; ``flag`` names the
    file in messages, ``what`` its entries, and ``normal`` puts an entry and a line in one form.

    Called from every gRPC thread at once: one lock holds a caller while another reads the changed file, and the
    state recorded is the one seen before that read (audit 27: the state was recorded first and the names read
    after, unlocked, so a call that came during the read was judged by the names before the change, a name just
    revoked let through; and two reads of two quick changes could end with the older names kept until the file
    changed again)."""

    def __init__(
        self, path: Path | None, *, flag: str, what: str, normal: Callable[[str], str] = str, optional: bool = False
    ) -> None:
        self.path, self.flag, self.what, self._normal = path, flag, what, normal
        # a file not there yet lists nothing, until it is made: then, as any, one that goes is read as unreadable
        self._optional = optional
        self._lock = threading.Lock()
        self._state = None if path is None else file_state(path)
        self._names = frozenset() if path is None else self._read(path)  # unreadable at the start: the service stops

    def _read(self, path: Path) -> frozenset[str]:
        if self._optional and not path.exists():
            return frozenset()
        try:
            names = frozenset(map(self._normal, read_names(path)))
        except ConfigError as exc:
            raise ConfigError(f"{self.flag} {exc}") from exc
        self._optional = False  # made: a file that goes now refuses everything (emptied, it lists nothing)
        return names

    def listed(self, entry: str) -> bool:
        """Whether ``entry`` is listed (everything is while the file cannot be read)."""
        if self.path is None:
            return False
        name = self._normal(entry)
        names = self.entries()
        return names is EVERYONE or name in names

    def entries(self) -> frozenset[str]:
        """What the file lists now (:data:`EVERYONE` while it cannot be read), read again if it changed."""
        if self.path is None:
            return frozenset()
        with self._lock:
            now = file_state(self.path)
            if now != self._state:
                # the operator's: not in a running job's log, whichever thread reads the change first (audit 28,
                # A28-3b: the job's revocation watch read it every second, and its data user read the file's path
                # and how many data users were revoked in `privfed job logs`)
                with outside_jobs():
                    try:
                        names = self._read(self.path)
                    except ConfigError as exc:
                        names = EVERYONE
                        log.error("%s; every %s is refused until it can be read", exc, self.what)
                    else:
                        log.info("%s %s changed: %d %s(s) revoked", self.flag, self.path, len(names), self.what)
                self._state, self._names = now, names  # a change during the read is read at the next call
            return self._names


class RevokedDataUsers(WatchedList):
    """``privfed serve --revoked-data-users``: data users revoked by their certificate's name."""

    def __init__(self, path: Path | None) -> None:
        super().__init__(path, flag="--revoked-data-users", what="data user")

    def revoked(self, name: str) -> bool:
        return self.listed(name)


class RevokedCertificates(WatchedList):
    """``privfed serve --revoked-certificates``: certificates revoked by their SHA-256 fingerprint (W9-2), any
    party's, as ``privfed certs --reissue`` lists them. ``optional``: the default file in ``--certs``, which the
    federation's first reissue makes while the service runs (audit 30, A30-3: it was never read until a restart)."""

    def __init__(self, path: Path | None, *, optional: bool = False) -> None:
        super().__init__(
            path, flag="--revoked-certificates", what="certificate", normal=_normal_fingerprint, optional=optional
        )

    def revoked(self, pem: bytes) -> bool:
        """Whether the PEM certificate ``pem`` (a TLS peer's) is revoked."""
        names = self.entries()  # the file looked at once a call (every gRPC call passes here)
        if not names:  # nothing listed (the default file not made yet): no certificate parsed, no
            return False  # cryptography imported by an idle coordinator (tests/integration/test_idle_imports.py)
        # any of its fingerprints: an ECDSA certificate re-encoded with its signature's other s is as valid (A30-1)
        return names is EVERYONE or not names.isdisjoint(_fingerprints(pem))


def _normal_fingerprint(text: str) -> str:
    from privfed.common.certificates import is_fingerprint, normal_fingerprint  # cryptography: not when idle

    normal = normal_fingerprint(text)
    if not is_fingerprint(normal):  # read when the file changes: it revokes nothing, and says so (A32-1)
        log.warning("--revoked-certificates: %r is no SHA-256 fingerprint (64 hex digits): it revokes nothing", text)
    return normal


@functools.lru_cache(maxsize=1024)
def _fingerprints(pem: bytes) -> frozenset[str]:  # once per connection's certificate, not once per call
    from privfed.common.certificates import pem_fingerprints

    return pem_fingerprints(pem)


def revoked_certificate_message(name: str) -> str:
    return (
        f"certificate of {name!r} is revoked by this service's operator (privfed serve --revoked-certificates): "
        "it was reissued; use the new one"
    )


def revoked_message(name: str) -> str:
    return f"data user {name!r} is revoked by this service's operator (privfed serve --revoked-data-users)"
