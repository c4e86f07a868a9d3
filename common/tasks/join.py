"""The accept round's task kind (walkthrough 5, F1): before a job's first release, the coordinator asks every
owner the job would ask whether it takes part, and plans the job over those that do (``privfed.server.job``).

An owner answers a :class:`JoinTask` from the job's announcement (:class:`~privfed.common.jobinfo.JobInfo`, which
travels with every task), its policy and its ledger's spending totals alone -- the same check, in the same place
of the owner core, as the policy's refusal of any other task of a declined job (``privfed.owner.core``): an
empty :class:`JoinAccepted`, or the refusal ``policy`` with the rule's name. Neither reads a row, debits anything
or carries anything but that: no row count, nothing from rows (the DESIGN.md allowlist).
"""

from __future__ import annotations

from dataclasses import dataclass

from privfed.common.jobinfo import JOB_TASKS
from privfed.common.tasks.base import Kind, LedgerEntries, Payload, TaskSpec
from privfed.common.tasks.contract import PublicLimits


@dataclass(frozen=True)
class JoinTask:
    """Whether the owner takes part in the job announced with the task; no release, no ledger entry."""

    def ledger_entries(self) -> LedgerEntries:
        return []


@dataclass(frozen=True)
class JoinAccepted:
    """The owner takes part in the announced job. Empty: what it says is its type."""


def accepted_as_is(spec: TaskSpec, payload: Payload, limits: PublicLimits) -> None:
    """An acceptance has no field to check: its type (checked before a contract is asked) is all of it."""


#: Sent in every job, before its first release (an owner answers it in a job announced as any task).
JOIN = Kind("join", JoinTask, (JoinAccepted,), accepted_as_is, tasks=JOB_TASKS)
