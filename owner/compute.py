"""Step 4 of the owner core (:mod:`privfed.owner.core`): compute is total (issue 20, finding 2).

Once a release is debited its rows are read, and from then on nothing is refused any more: whatever the
computation raises, or a release that is not finite or outside the wire's range (:func:`is_sendable`), is
replaced by the kind's data-independent fallback (the same mechanism around a public value), so whether and
what an owner answers never tells a coordinator that a row made the computation fail. A batch of one kind's
releases is computed together (``TaskKind.compute_many``, issue 27) where the kind can; a batched call that
fails leaves its releases to :func:`compute_release`, one by one. An unsendable release of the batch is replaced
by its fallback, never drawn again: a second draw made because the first was unsendable would release the
mechanism's output conditioned on that event, up to twice its ε if the event depends on the rows (rejection
sampling), while the fallback keeps the release ``M(x)`` or a data-independent value, as alone.

Timing (a coordinator sees when an answer arrives): every debited release does the same work whichever
value leaves, as a predictable transaction (Haeberlen, Pierce, Narayan, "Differential privacy under
fire", USENIX Security 2011): the release is computed from the rows and the kind's fallback is drawn, and
one of them is kept. A release some rows cannot afford (a row spent under an earlier id, by its own account:
audit 16) is computed from a view of the others (:func:`release_from`), and is then exactly the release of an
owner of those rows alone, work and all but the view's one copy of them. A release no row can afford
(:func:`fallback_release`) is computed from all of them and dropped; one they can afford draws its fallback and
drops it. An owner of no rows computes from its stand-in's one
public row (:attr:`~privfed.owner.local.LocalOwner.work_owner`), as a one-row owner of its cell would, drops
that, and answers its fallback of no rows: the release of no data (its kind's mechanism on an empty set). So whether a row was spent before (stop 35, finding 6)
does not show in the answer's time; what the computation's own time depends on is the solvers' (their
work is fixed where the privacy analysis allows it: :mod:`privfed.common.learners.newton`) and is what
``docs/owner-limits.md``'s "Limits" lists.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.tasks import Task
from privfed.owner.kinds.base import TaskKind
from privfed.owner.local import LocalOwner, Release
from privfed.proto import serde

log = logging.getLogger("privfed.owner")

#: At most this many releases are computed in one ``compute_many`` call: a batch answered in one
#: pass (the in-process transport's) keeps its temporaries bounded.
TOGETHER = 1024
_UNSENDABLE = "the release is not finite or outside the wire's range"
#: Why an owner of no rows answers its fallback: what its kind releases for no data (module docstring).
_NO_ROWS = "no rows"


def is_sendable(release: Release) -> bool:
    """Every array of a release finite, and a reply's payload encodable on the wire
    (:func:`privfed.proto.serde.payload_to_proto`: every report within
    :data:`~privfed.common.mechanisms.base.REPORT_LIMIT`, whatever field
    holds it). An array goes to its secure-sum mod, which encodes it there."""
    arrays = [getattr(release, f.name) for f in fields(release)] if is_dataclass(release) else [release]
    for a in arrays:
        if isinstance(a, np.ndarray) and a.size and (a.dtype.kind not in "iuf" or not np.all(np.isfinite(a))):
            return False
    if isinstance(release, np.ndarray):
        return True
    try:
        serde.payload_to_proto(release)
    except (ConfigError, ValueError, OverflowError):  # a report beyond the wire's range, a label below 0
        return False
    return True


def _attempt(kind: TaskKind[Any], task: Task, owner: LocalOwner) -> tuple[Release | None, str]:
    """``kind.compute`` from the rows: the release if it is sendable, else None and why (totality). An owner of
    no rows computes from its stand-in's row and gets None (module docstring, "Timing")."""
    has_rows = owner.n_rows > 0
    try:
        release = kind.compute(task, task.spec, owner.work_owner)
        if is_sendable(release) and has_rows:
            return release, ""
        return None, _UNSENDABLE if has_rows else _NO_ROWS
    except Exception as exc:  # noqa: BLE001 - totality: nothing raised here may become a refusal
        return None, f"{type(exc).__name__}: {exc}"


def _fallback(kind: TaskKind[Any], task: Task, owner: LocalOwner) -> Release:
    return kind.fallback(task.spec, owner.public, owner.n_rows, owner.rng)


def _log_source(task: Task, rows_unused: bool) -> None:
    """One debug line per release, the same for both sources ("Timing")."""
    source = "its fallback (its rows cannot afford it)" if rows_unused else "its rows"
    log.debug("task %s for %s: released from %s", task.task_id, task.owner_id, source)


def _chosen(task: Task, release: Release | None, fallback: Release, reason: str) -> Release:
    """``release``, or (None: it failed) its ``fallback``, the reason to the log."""
    if release is not None:
        return release
    log.log(
        logging.DEBUG if reason == _NO_ROWS else logging.ERROR,
        "task %s for %s: %s; its data-independent fallback is released (already debited)",
        task.task_id,
        task.owner_id,
        reason,
    )
    return fallback


def release_from(kind: TaskKind[Any], task: Task, owner: LocalOwner, rows_out: frozenset[int]) -> Release:
    """``task``'s release, debited, from ``owner``'s rows but those at ``rows_out`` (the rows that cannot afford
    it: :class:`~privfed.common.ledger_records.RowsUnused`): :func:`compute_release` of the owner, or of the
    other rows' view (:meth:`~privfed.owner.local.LocalOwner.without`), or, if none is left,
    :func:`fallback_release`."""
    if not rows_out:
        return compute_release(kind, task, owner)
    if len(rows_out) >= owner.n_rows:
        return fallback_release(kind, task, owner)
    return compute_release(kind, task, owner.without(rows_out))


def compute_release(kind: TaskKind[Any], task: Task, owner: LocalOwner) -> Release:
    """The release from the rows, or the kind's data-independent fallback (module docstring). The fallback
    is drawn either way ("Timing"), as :func:`fallback_release` computes the release either way."""
    release, reason = _attempt(kind, task, owner)
    fallback = _fallback(kind, task, owner)
    _log_source(task, rows_unused=False)
    return _chosen(task, release, fallback, reason)


def fallback_release(kind: TaskKind[Any], task: Task, owner: LocalOwner) -> Release:
    """The kind's data-independent fallback for ``task``: a release debited on the owner's id whose rows may
    not be released from (:class:`~privfed.common.ledger_records.RowsUnused`: they cannot afford it, or the
    owner's policy keeps them out). Whether the rows were released from shows only through the mechanism's
    own noise: the release is computed from the rows all the same and discarded, so the answer takes the time
    :func:`compute_release` takes ("Timing"); a discarded value tells nobody anything."""
    _attempt(kind, task, owner)  # the same work as a release from the rows; its value is dropped here
    fallback = _fallback(kind, task, owner)
    _log_source(task, rows_unused=True)
    return fallback


def _fallbacks(kind: TaskKind[Any], tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release]:
    """Every task's fallback, together where the kind can (``TaskKind.fallback_many``), else one by one."""
    try:
        many = kind.fallback_many(list(tasks), list(owners))
    except Exception as exc:  # noqa: BLE001 - a bug: each fallback is then drawn alone
        log.error("task kind %s: drawing %d fallback(s) together failed (%s); one by one", kind.name, len(tasks), exc)
        many = None
    return list(many) if many is not None else [_fallback(kind, t, o) for t, o in zip(tasks, owners, strict=True)]


def compute_together(
    kind: TaskKind[Any], tasks: Sequence[Task], owners: Sequence[LocalOwner], rows_out: Sequence[frozenset[int]]
) -> list[Release | None]:
    """Releases of one kind's debited ``tasks`` (at most :data:`TOGETHER`) in one ``compute_many`` call, in
    order (an unsendable one replaced by its fallback); None where the release is left to :func:`release_from`
    (the kind has no batched computation, or the call raised). ``rows_out[i]``: the rows task ``i``'s release is
    made without (:func:`release_from`); if that is every row it answers its fallback, its release computed with
    the others all the same, and every task's fallback is drawn ("Timing")."""
    unused = [0 < owner.n_rows <= len(out) for owner, out in zip(owners, rows_out, strict=True)]
    owners = [owner.without(out) if out and not every else owner for owner, out, every in zip(owners, rows_out, unused)]
    try:
        releases = kind.compute_many(list(tasks), [owner.work_owner for owner in owners])
    except Exception as exc:  # noqa: BLE001 - totality: each task is then computed alone
        log.error("task kind %s: computing %d release(s) together failed (%s); one by one", kind.name, len(tasks), exc)
        return [None] * len(tasks)
    if releases is None:
        return [None] * len(tasks)
    out: list[Release | None] = []
    fallbacks = _fallbacks(kind, tasks, owners)  # an unsendable release's, not a second draw (module docstring)
    for task, owner, release, fallback, every in zip(tasks, owners, releases, fallbacks, unused, strict=True):
        has_rows = owner.n_rows > 0
        sendable = release if is_sendable(release) and has_rows else None
        out.append(fallback if every else _chosen(task, sendable, fallback, _UNSENDABLE if has_rows else _NO_ROWS))
        _log_source(task, every)
    return out
