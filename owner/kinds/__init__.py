"""The registry of task kinds an owner answers: one object per kind, looked up by the task's spec type.

As Flower's ClientApp routes a message type to the function registered for it, the owner core
(``privfed.owner.core``) looks a task's kind up here, once; nothing else dispatches on task types.
Release kinds declare validate / debits / compute / fallback (:mod:`privfed.owner.kinds.base`);
step kinds are a secure sum's protocol messages, handed to the mod they name.
"""

from __future__ import annotations

import math

from privfed.common.messages import RingMessageTask, SecAggKeysTask, SecAggUnmaskTask
from privfed.owner.kinds.base import StepKind, TaskKind
from privfed.owner.kinds.boosting import BoostEvaluateKind, BoostShareKind
from privfed.owner.kinds.feddpdr import PcaShareKind, SvmShareKind
from privfed.owner.kinds.shares import LrShareKind, NccShareKind

Kind = TaskKind | StepKind

#: Every kind, by the spec type of its tasks (``common.messages``).
KINDS: tuple[Kind, ...] = (
    NccShareKind(),
    LrShareKind(),
    PcaShareKind(),
    SvmShareKind(),
    BoostShareKind(),
    BoostEvaluateKind(),
    # a ring hop alone: the next hop waits for its envelope; the secure-sum steps are cheap, any number
    StepKind("ring_message", RingMessageTask, mod="ring", batch=1),
    StepKind("secagg_keys", SecAggKeysTask, mod="secagg", batch=math.inf),
    StepKind("secagg_unmask", SecAggUnmaskTask, mod="secagg", batch=math.inf),
)
REGISTRY: dict[type, Kind] = {kind.spec_type: kind for kind in KINDS}


def kind_of(spec: object) -> Kind | None:
    """The kind of a task spec, or None (a task kind this owner does not answer)."""
    return REGISTRY.get(type(spec))
