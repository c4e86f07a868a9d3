"""What a node saw of its ledger, kept beside it (``LEDGER.seen``): a node does not start on a ledger that holds
fewer releases than it saw there, nor on another ledger made anew at that path.

Either gives the owners back the budget of the releases it lacks: an older copy put back (walkthrough 9, as walkthrough
7's W7-5: a restored backup let hospital-a take part in a job its day limit refused to the nodes with the same
history, and only an INFO line said what the ledger held), or a ledger deleted and started again. The node stops
with what it saw, what the ledger holds, and what to do; an owner who means it (its ledger lost, the copy the latest
there is) removes the ``.seen`` file. The file is written at the start, after each batch of releases the ledger
commits (before they are computed or leave the node: a node killed mid-job, its ledger then put back from before the
job, is caught), after each job the node hears end, and at the stop, so it never runs ahead of the ledger; it holds
counts and a digest, nothing of any owner's. A copy of the ledger *and* its ``.seen`` file together is not caught.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

from privfed.common.errors import ConfigError, reason
from privfed.common.files import replace_file
from privfed.common.ledger import Ledger

log = logging.getLogger("privfed.owner")

SEEN_SUFFIX = ".seen"


def seen_path(ledger_path: Path) -> Path:
    return ledger_path.with_name(ledger_path.name + SEEN_SUFFIX)


def check_seen(ledger: Ledger) -> None:
    """ConfigError if ``ledger`` holds fewer releases than its node saw there, or is another ledger than the one the
    node saw there holding releases; nothing if no node recorded one (a new ledger, or one of an older privfed)."""
    path = seen_path(ledger.path)
    try:
        seen = json.loads(path.read_text(encoding="utf-8"))
        saw, ledger_id, when = int(seen["releases"]), str(seen["ledger"]), str(seen["at"])
    except FileNotFoundError:
        return
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: cannot read what this node saw of its ledger ({reason(exc)}); remove it") from exc
    last = ledger.last_release()
    holds = 0 if last is None else last[0]  # releases are numbered and never deleted: one index lookup
    if ledger.identity() != ledger_id and saw > 0:
        what = f"{ledger.path} is not the ledger this node last used there, which held {saw} release(s) on {when}"
    elif holds < saw:
        what = f"{ledger.path} holds {holds} release(s), fewer than the {saw} this node saw there on {when}"
    else:
        return
    raise ConfigError(
        f"ledger {what}: an older copy put back, or a ledger made anew, gives the owners back the budget of the "
        f"releases it lacks; put the latest ledger back, or, if it is lost and this is the latest copy there is, "
        f"remove {path} to go on with it"
    )


def record_seen(ledger: Ledger) -> None:
    """Record what ``ledger`` holds now for the next start's :func:`check_seen`; a file that cannot be written is
    logged, and the node goes on."""
    path = seen_path(ledger.path)
    doc = {
        "ledger": ledger.identity(),
        "releases": 0 if (last := ledger.last_release()) is None else last[0],  # one index lookup, each batch
        "at": f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC",
    }
    try:
        replace_file(path, json.dumps(doc) + "\n")
    except OSError as exc:
        log.warning("%s: cannot record what this node saw of its ledger (%s)", path, reason(exc))
