"""Which log records go to a running job's ``job.log``, which ``privfed job logs`` gives the job's
data user.

While a job runs, the service adds a handler to the ``privfed`` logger for it
(:meth:`~privfed.server.service.CoordinatorService._run`), so records of every thread reach it: the
job's own, the owner nodes' calls it waits for, and whatever else the service serves meanwhile. The
records made while serving a call that is not the job's -- the job API (another data user's job ids,
settings and refusals) and Predict or GetModel (the model ids a caller asked for, the models served
to it) -- are kept out of it (:func:`outside_jobs`, :class:`JobRecords`; wt-redteam3,
``tests/adversary/test_data_user_isolation.py``); they stay in the service's own log.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_OUTSIDE = ContextVar("privfed_outside_jobs", default=False)


@contextmanager
def outside_jobs() -> Iterator[None]:
    """Records logged by this thread while the block runs go to no job's log."""
    token = _OUTSIDE.set(True)
    try:
        yield
    finally:
        _OUTSIDE.reset(token)


class JobRecords(logging.Filter):
    """A job log handler's filter: drops the records logged inside :func:`outside_jobs` (a handler's
    filters run in the logging thread, whose context says whether it serves such a call)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _OUTSIDE.get()


class JobLogFile(logging.FileHandler):
    """A running job's ``job.log``: a record it cannot write (a full disk) is dropped here, with no traceback on the
    service's stderr for each line; the service's own log keeps the record, and says once that the store cannot be
    written (walkthrough 9, W9-1)."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        if not isinstance(sys.exc_info()[1], OSError):  # a bad log call still shows
            super().handleError(record)
