"""The refusal an owner sends for a task that failed (DESIGN "Release discipline", contract 3): a fixed text per
code (``REFUSAL_TEXTS``) and at most a detail built from the task's own fields and the owner's public
configuration; the full reason goes to the local log only (:mod:`privfed.owner.core`)."""

from __future__ import annotations

import logging

from privfed.common.errors import BudgetExceeded, ConfigError, LocalProtocolError, ProtocolError
from privfed.common.tasks import POLICY_DECLINED, Refusal, Result, Task
from privfed.owner.history import HistoryRewritten
from privfed.owner.kinds.base import Refused

log = logging.getLogger("privfed.owner")  # the core's logger: its refusals are logged as they were


def refusal_for(task: Task, exc: BaseException, *, detail: bool = True) -> Result:
    """The refusal a coordinator gets for a task that failed with ``exc``: the code's fixed text and
    at most a detail from the task and public configuration (``validate``'s messages; a secure
    sum's steps give none); the exception in full to the log only."""
    text = ""
    if isinstance(exc, Refused):
        code, text = exc.code, exc.detail
    elif isinstance(exc, BudgetExceeded):
        code = "budget_exceeded"
    elif isinstance(exc, LocalProtocolError):  # AlreadyReleased, or a release id the ledger holds
        code = "already_released"
    elif isinstance(exc, HistoryRewritten):
        code = "invalid_task"  # the fixed text alone
    elif isinstance(exc, ConfigError | ProtocolError):
        code, text = "invalid_task", str(exc)  # raised by validate, which sees public inputs only
    elif isinstance(exc, TypeError | ValueError | ArithmeticError):
        code = "invalid_task"
    else:
        log.error("task %s for %s failed", task.task_id, task.owner_id, exc_info=exc)
        code = "internal"
    cause = "" if exc.__cause__ is None else f" ({exc.__cause__})"  # e.g. the budget's numbers: one line per task
    # the policy's declines are the owner's own choice, not a problem: a node says them in one line a batch
    level = logging.DEBUG if code == POLICY_DECLINED else logging.WARNING
    log.log(level, "refusing task %s for %s (%s): %s%s", task.task_id, task.owner_id, code, exc, cause)
    return Result(task.task_id, task.owner_id, Refusal.of(code, text if detail else ""))
