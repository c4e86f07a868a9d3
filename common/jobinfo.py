"""What a coordinator announces about the job its tasks belong to (issue 26, item 2).

An owner node with a policy (``privfed owner --policy``, :mod:`privfed.owner.policy`) decides from
this announcement, its policy and its own ledger, before anything is computed or debited, whether
it takes part; every release it then makes is recorded under ``job_id`` in its ledger, and the job's
releases together may not exceed the ``epsilon`` and ``delta`` announced here (the announcement is a
commitment the owner holds the coordinator to). Every field is public configuration of the job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from privfed.common.errors import ConfigError

#: At most this many UTF-8 bytes per text field (ids and names, a hex digest).
MAX_FIELD_BYTES = 256


#: The jobs a federation runs (``--task``): what a job announces and what an owner's policy may name.
JOB_TASKS = ("ncc", "lr", "feddpdr", "bdt", "nb")


@dataclass(frozen=True)
class JobInfo:
    """One job as announced to the owners.

    Parameters
    ----------
    job_id : str
        The job's id (the service's job id; a run directory's name for ``privfed coordinator``).
    data_user : str
        The identity (certificate name) of the data user who submitted the job; empty when the
        coordinator's operator runs it (``privfed coordinator``, ``privfed simulate``).
    task : str
        The job's task (one of :data:`JOB_TASKS`).
    epsilon, delta : float
        The most each owner releases in the job (the strategy's privacy split,
        :class:`~privfed.server.strategies.result.PrivacySplit`).
    schema_sha256 : str
        The digest of the federation schema the job reads rows by.
    """

    job_id: str
    data_user: str
    task: str
    epsilon: float
    delta: float
    schema_sha256: str

    def __post_init__(self) -> None:
        for name in ("job_id", "data_user", "task", "schema_sha256"):
            value = getattr(self, name)
            if not isinstance(value, str) or len(value.encode("utf-8")) > MAX_FIELD_BYTES:
                raise ConfigError(f"job {name} must be text of at most {MAX_FIELD_BYTES} bytes, got {value!r:.80}")
        if not self.job_id:
            raise ConfigError("an announced job needs a job id")
        for name in ("epsilon", "delta"):
            value = getattr(self, name)
            if not isinstance(value, float | int) or math.isnan(value) or value < 0:
                raise ConfigError(f"job {name} must be a number >= 0 (inf allowed for epsilon), got {value!r}")
        if math.isinf(self.delta) or self.delta > 1:
            raise ConfigError(f"job delta must be in [0, 1], got {self.delta!r}")
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "delta", float(self.delta))
