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
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np

from privfed.common.mechanisms.base import REPORT_LIMIT
from privfed.common.tasks import Task
from privfed.owner.kinds.base import TaskKind
from privfed.owner.local import LocalOwner, Release

log = logging.getLogger("privfed.owner")

#: At most this many releases are computed in one ``compute_many`` call: a batch answered in one
#: pass (the in-process transport's) keeps its temporaries bounded.
TOGETHER = 1024
_UNSENDABLE = "the release is not finite or outside the wire's range"


def is_sendable(release: object) -> bool:
    """Every array of a release finite, and every report within the wire's range (:data:`REPORT_LIMIT`)."""
    arrays = (
        [(f.name, getattr(release, f.name)) for f in fields(release)]
        if is_dataclass(release)
        else [("values", release)]
    )
    for name, a in arrays:
        if not isinstance(a, np.ndarray) or not a.size:
            continue
        if a.dtype.kind not in "iuf" or not np.all(np.isfinite(a)):
            return False
        if name == "reports" and np.max(np.abs(a)) >= REPORT_LIMIT:
            return False
    return True


def compute_release(kind: TaskKind[Any], task: Task, owner: LocalOwner) -> Release:
    """The release from the rows, or the kind's data-independent fallback (module docstring)."""
    spec = task.spec
    try:
        release = kind.compute(task, spec, owner)
        if is_sendable(release):
            return release
        reason = _UNSENDABLE
    except Exception as exc:  # noqa: BLE001 - totality: nothing raised here may become a refusal
        reason = f"{type(exc).__name__}: {exc}"
    log.error(
        "task %s for %s: %s; its data-independent fallback is released (already debited)",
        task.task_id,
        task.owner_id,
        reason,
    )
    return kind.fallback(spec, owner.public, owner.n_rows, owner.rng)


def fallback_release(kind: TaskKind[Any], task: Task, owner: LocalOwner) -> Release:
    """The kind's data-independent fallback for ``task``: a release debited on the owner's id whose rows may
    not be read (:class:`~privfed.common.ledger_records.RowsUnused`: they cannot afford it, or the owner's
    policy keeps them out). Whether the rows were read shows only through the mechanism's own noise."""
    log.info(
        "task %s for %s: its rows cannot afford it; the data-independent fallback is released",
        task.task_id,
        task.owner_id,
    )
    return kind.fallback(task.spec, owner.public, owner.n_rows, owner.rng)


def compute_together(kind: TaskKind[Any], tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release | None]:
    """Releases of one kind's debited ``tasks`` (at most :data:`TOGETHER`) in one ``compute_many`` call, in
    order (an unsendable one replaced by its fallback); None where the release is left to
    :func:`compute_release` (the kind has no batched computation, or the call raised)."""
    try:
        releases = kind.compute_many(list(tasks), list(owners))
    except Exception as exc:  # noqa: BLE001 - totality: each task is then computed alone
        log.error("task kind %s: computing %d release(s) together failed (%s); one by one", kind.name, len(tasks), exc)
        return [None] * len(tasks)
    if releases is None:
        return [None] * len(tasks)
    out: list[Release | None] = []
    for task, owner, release in zip(tasks, owners, releases, strict=True):
        if is_sendable(release):
            out.append(release)
        else:  # its fallback, not a second draw (module docstring)
            log.error("task %s for %s: %s; its fallback is released", task.task_id, task.owner_id, _UNSENDABLE)
            out.append(kind.fallback(task.spec, owner.public, owner.n_rows, owner.rng))
    return out
