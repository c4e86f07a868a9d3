"""What every strategy shares: task construction, reply filtering, the one-round shape.

A strategy builds tasks and aggregates results (STYLE rule 12); it never sends anything: the
transport it is given does (:mod:`privfed.server.job`).
"""

from __future__ import annotations

import secrets

from privfed.common.messages import Refusal, Result, Task


def new_tasks(owner_ids, round_id, spec) -> list[Task]:
    return [
        Task(task_id=f"{round_id}-{secrets.token_hex(6)}", owner_id=o, round_id=round_id, spec=spec) for o in owner_ids
    ]


def shares_of(results: list[Result], kind) -> list:
    return [r.payload for r in results if isinstance(r.payload, kind)]


class SingleRound:
    """A strategy whose job is one round: every owner releases once, then aggregate."""

    def run(self, owner_ids, execute):
        return self.aggregate(execute(self.configure(owner_ids, "r1")))


def refusals(results: list[Result]) -> dict[str, str]:
    """owner_id -> refusal message, for the report."""
    return {r.owner_id: f"{r.payload.code}: {r.payload.message}" for r in results if isinstance(r.payload, Refusal)}
