"""The owner's part of every task kind: validate / debits / compute / fallback, looked up by the kind's name.

A task kind is declared once, in ``privfed.common.tasks`` (its spec and reply types, ledger entries,
reply contract); its serde pair is in ``proto/serde.py`` and what an owner does with it is here,
each in one table keyed by the kind's name. As Flower's ClientApp routes a message type to the
function registered for it, the owner core (``privfed.owner.core``) looks a task's kind up here,
once; nothing else dispatches on task types. Release kinds declare validate / debits / compute /
fallback (:mod:`privfed.owner.kinds.base`); step kinds are a secure sum's protocol messages, handed
to the mod they name; the join kind (the accept round) is answered by the core from the job's
announcement and the node's policy.
"""

from __future__ import annotations

import math
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from privfed.common.errors import ConfigError
from privfed.common.tasks import TaskSpec
from privfed.common.tasks import kind_of as task_kind_of
from privfed.owner.kinds.base import JoinKind, OwnerKind, StepKind

if TYPE_CHECKING:
    OWNER_KINDS: dict[str, OwnerKind]


@cache
def owner_kinds() -> dict[str, OwnerKind]:
    """Every kind an owner answers, by the kind's name (``privfed.common.tasks.DECLARED``), built on the
    first task a node looks up (issue 27: an idle node imports no kind's code). Every task's lookup --
    whatever its kind, known or not -- goes through here, and kinds are public: which of them a node
    has imported says nothing of its data."""
    from privfed.common.tasks import JOIN, RING_MESSAGE, SECAGG_KEYS, SECAGG_UNMASK
    from privfed.owner.kinds.boosting import BoostEvaluateKind, BoostShareKind
    from privfed.owner.kinds.feddpdr import PcaShareKind, SvmShareKind
    from privfed.owner.kinds.gradient import LrGradientKind
    from privfed.owner.kinds.naive_bayes import NbReportKind
    from privfed.owner.kinds.shares import LrShareKind, NccShareKind

    return {
        kind.kind.name: kind
        for kind in (
            NccShareKind(),
            LrShareKind(),
            PcaShareKind(),
            SvmShareKind(),
            BoostShareKind(),
            BoostEvaluateKind(),
            # a ring hop alone: the next hop waits for its envelope; the secure-sum steps are cheap, any number
            StepKind(RING_MESSAGE, mod="ring", batch=1),
            StepKind(SECAGG_KEYS, mod="secagg", batch=math.inf),
            StepKind(SECAGG_UNMASK, mod="secagg", batch=math.inf),
            LrGradientKind(),
            NbReportKind(),
            JoinKind(JOIN),  # answered by the owner core itself, from the announcement and the policy
        )
    }


def kind_of(spec: object) -> OwnerKind | None:
    """The owner's part of a task spec's kind, or None (no task kind, or one this owner does not answer)."""
    kinds = owner_kinds()
    try:
        kind = task_kind_of(cast("TaskSpec", spec))  # ConfigError for any object that is no task spec
    except ConfigError:
        return None
    return kinds.get(kind.name)


def __getattr__(name: str) -> Any:
    """PEP 562: ``OWNER_KINDS`` (:func:`owner_kinds`) on first read."""
    if name == "OWNER_KINDS":
        return owner_kinds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
