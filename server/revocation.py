"""The data users a service's operator has revoked (``privfed serve --revoked-data-users FILE``).

A data user's certificate is valid for a year, and the only other way to stop one (a key that leaked, a user who
left) was to replace the whole CA, re-keying every owner node (walkthrough 7, W7-9). The file lists certificate
names, one per line (``#`` starts a comment); it is read again when it changes, so a name added takes effect at the
data user's next call without a restart. A revoked data user's job API calls are refused (``PERMISSION_DENIED``),
and a job of theirs still queued fails when its turn comes, before any owner is asked. A file that can no longer be
read revokes every data user until it can: an edit meant to lock one out must not let them back in. Owners' own
consent per data user stays in their policies (``data_users``).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from privfed.common.errors import ConfigError, reason
from privfed.common.files import file_state
from privfed.server.joblog import outside_jobs

log = logging.getLogger("privfed.coordinator")

#: What every data user is while the file cannot be read.
EVERYONE = frozenset({"*"})


def read_names(path: Path) -> frozenset[str]:
    """The names the file ``path`` lists; ConfigError if it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--revoked-data-users {path}: cannot read it ({reason(exc)})") from exc
    return frozenset(name for line in text.splitlines() if (name := line.split("#", 1)[0].strip()))


class RevokedDataUsers:
    """The revoked names of ``path`` (None: no file, nobody revoked), read again when the file changes.

    Called from every gRPC thread at once: one lock holds a caller while another reads the changed file, and the
    state recorded is the one seen before that read (audit 27: the state was recorded first and the names read
    after, unlocked, so a call that came during the read was judged by the names before the change, a name just
    revoked let through; and two reads of two quick changes could end with the older names kept until the file
    changed again)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._state = None if path is None else file_state(path)
        self._names = frozenset() if path is None else read_names(path)  # unreadable at the start: the service stops

    def revoked(self, name: str) -> bool:
        if self.path is None:
            return False
        with self._lock:
            now = file_state(self.path)
            if now != self._state:
                # the operator's: not in a running job's log, whichever thread reads the change first (audit 28,
                # A28-3b: the job's revocation watch read it every second, and its data user read the file's path
                # and how many data users were revoked in `privfed job logs`)
                with outside_jobs():
                    try:
                        names = read_names(self.path)
                    except ConfigError as exc:
                        names = EVERYONE
                        log.error("%s; every data user is refused until it can be read", exc)
                    else:
                        log.info("--revoked-data-users %s changed: %d name(s) revoked", self.path, len(names))
                self._state, self._names = now, names  # a change during the read is read at the next call
            return self._names is EVERYONE or name in self._names


def revoked_message(name: str) -> str:
    return f"data user {name!r} is revoked by this service's operator (privfed serve --revoked-data-users)"
