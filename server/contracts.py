"""The public contract of every owner reply, checked before the reply is used (issue 23, item 1).

An owner is trusted with nothing the coordinator aggregates: a reply is used only if it has the
shape, the value range, the support and the labels that the task's own public parameters allow
an honest owner's release to have. A reply that breaks its contract is never aggregated; the
job excludes that owner and names it in the report under ``rejected_owners`` with a reason code
(:data:`REJECTION_CODES`), and goes on (``privfed.server.rounds``).

Each task kind declares its contract with the rest of the kind (``Kind.contract`` in
:mod:`privfed.common.tasks`: a pure function of task spec, reply and :class:`PublicLimits`, with
what one owner can move written beside it); :func:`check_reply` looks it up by the task's kind.
This module adds what the coordinator keeps of a violation: a :class:`Rejection`.
"""

from __future__ import annotations

from dataclasses import dataclass

from privfed.common.tasks import check_reply
from privfed.common.tasks.contract import REJECTION_CODES, ContractViolation, PublicLimits, count_limit

__all__ = ["REJECTION_CODES", "ContractViolation", "PublicLimits", "Rejection", "check_reply", "count_limit"]


@dataclass(frozen=True)
class Rejection:
    """An owner's answer to one task that the job does not use: the reason ``code``
    (:data:`REJECTION_CODES`) and a one-line ``detail`` built from the reply and public configuration."""

    task_id: str
    owner_id: str
    code: str
    detail: str

    def line(self) -> str:
        return f"{self.code}: {self.detail}"
