"""An owner node's policy: which jobs it takes part in (``privfed owner --policy policy.toml``;
issue 26, item 2).

The policy is the owner's own configuration (a TOML file; every key optional)::

    tasks = ["ncc", "bdt"]          # tasks it answers (default: every task)
    max_epsilon_per_job = 2.0       # the most epsilon one job may ask of each hosted owner
    max_delta_per_job = 1e-5        # the most delta one job may ask
    max_epsilon_per_day = 4.0       # epsilon of the last 24 hours, this job's announced epsilon included
    max_epsilon_total = 20.0        # epsilon of every job so far, this job's announced epsilon included
    data_users = ["alice"]          # data users whose jobs it answers (default: any)
    schema_sha256 = "ab12...ef"     # the federation schema it accepts, its 64-digit SHA-256 (default: any)

A job is judged by what the coordinator announces about it (:class:`~privfed.common.jobinfo.JobInfo`),
the policy, and the owner's own ledger: public inputs and the owner's own accounting, never its
rows. A declined job is refused with the fixed code ``policy`` and the name of the rule
(:data:`RULES`), before any task of it is validated, computed or debited (``privfed.owner.core``).
A job the policy accepts is held to what it announced: its releases together may not spend more
than its announced epsilon and delta (rule ``announced``). A node with a policy answers only
announced jobs (rule ``unannounced``).

A policy declines by what the owner's id released (the coordinator asked for all of it). A node
restarted with another ``--shards`` or ``--name``, or with a changed data file (its rows dealt anew to its ids,
``privfed.owner.data.partition``), gives its rows other owner ids, but the rows bring their jobs', days' and
total spending with them, as they bring their budget (``privfed.common.ledger_rows``): a release that would take
a row past a limit, counting what the row can have spent in the limit's window (the releases each id that held
the row made while it held it, and the owner's own in this run: :meth:`~privfed.common.ledger.Ledger.spent_by_holdings`),
is not made from that row (:func:`rows_kept_out`; the release is made from the owner's other rows, or, if none
is left, the owner sends its kind's fallback), so that no refusal tells the coordinator that a row was spent
before, and no row's history moves the release by more than leaving that row out does (audit 16: the sum over
every holder of any row kept all the rows out). Until walkthrough 8 (W8-5) a row counted every release of every id
that ever held it: after a changed file about twice its own spending, which kept most rows out of every release
under a day or total limit though they could pay.
"""

from __future__ import annotations

import logging
import math
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from privfed.common.errors import ConfigError, reason
from privfed.common.files import file_state
from privfed.common.jobinfo import JOB_TASKS, JobInfo
from privfed.common.ledger import REL_TOL, Budget, Debit, Ledger
from privfed.common.ledger_rows import Holdings
from privfed.common.validation import check_non_negative, check_probability

log = logging.getLogger("privfed.owner")

#: Every rule a policy declines a job by; a refusal names one (its detail), nothing else.
RULES = (
    "unreadable",
    "unannounced",
    "task",
    "data_user",
    "schema",
    "epsilon_per_job",
    "delta_per_job",
    "epsilon_per_day",
    "epsilon_total",
    "announced",
)
_KEYS = (
    "tasks",
    "max_epsilon_per_job",
    "max_delta_per_job",
    "max_epsilon_per_day",
    "max_epsilon_total",
    "data_users",
    "schema_sha256",
)


def _within(value: float, limit: float) -> bool:
    return value <= limit * (1 + REL_TOL) if math.isfinite(limit) else True


def _fits(asked: float, room: float, limit: float) -> bool:
    """Whether ``asked`` fits in what is left (``room``) of ``limit``, to the limit's rounding (:func:`_within`: the
    spent sum plus ``asked`` against the limit). An infinite limit always fits; spending that is infinite (the
    non-private bypass) leaves no room."""
    return True if math.isinf(limit) else asked <= room + limit * REL_TOL


@dataclass(frozen=True)
class OwnerPolicy:
    """The policy of one owner node (module docstring); it applies to each hosted owner alike.
    None or infinity: no limit of that kind."""

    tasks: tuple[str, ...] | None = None
    max_epsilon_per_job: float = math.inf
    max_delta_per_job: float = 1.0
    max_epsilon_per_day: float = math.inf
    max_epsilon_total: float = math.inf
    data_users: tuple[str, ...] | None = None
    schema_sha256: str | None = None
    #: Not a key of the file: the policy a node answers by while its file cannot be read (:data:`DECLINE_EVERY_JOB`).
    unreadable: bool = False

    def __post_init__(self) -> None:
        for name in ("max_epsilon_per_job", "max_epsilon_per_day", "max_epsilon_total"):
            check_non_negative(getattr(self, name), name=name, allow_inf=True)
        check_probability(self.max_delta_per_job, name="max_delta_per_job")
        for name in ("tasks", "data_users"):
            value = getattr(self, name)
            if value is not None:
                if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
                    raise ConfigError(f"policy {name} must be a list of names, got {value!r}")
                object.__setattr__(self, name, tuple(value))
        unknown = sorted(set(self.tasks or ()) - set(JOB_TASKS))
        if unknown:  # a typo would decline every job of the task meant, silently
            raise ConfigError(f"policy tasks: unknown task(s) {', '.join(unknown)}; known: {', '.join(JOB_TASKS)}")
        if self.schema_sha256 is not None and not (
            isinstance(self.schema_sha256, str) and re.fullmatch(r"[0-9a-f]{64}", self.schema_sha256)
        ):
            raise ConfigError(
                f"policy schema_sha256 must be a SHA-256 hex digest (64 of 0-9a-f), got {self.schema_sha256!r}"
            )

    @classmethod
    def read(cls, path: Path) -> OwnerPolicy:
        """The policy in the TOML file ``path``; an unknown key or a bad value raises ConfigError naming it."""
        try:
            doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"--policy {path}: not a readable TOML file ({reason(exc)})") from exc
        unknown = sorted(set(doc) - set(_KEYS))
        if unknown:
            raise ConfigError(f"--policy {path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(_KEYS)}")
        try:
            return cls(**doc)
        except (ConfigError, TypeError) as exc:
            raise ConfigError(f"--policy {path}: {exc}") from exc

    def declines(self, job: JobInfo | None, ledger: Ledger, owner_id: str) -> str | None:
        """The rule by which this policy declines ``job`` for ``owner_id`` (None: it takes part).
        Reads the announcement, the policy and the owner's own ledger: nothing of its rows."""
        if self.unreadable:
            return "unreadable"
        if job is None:
            return "unannounced"
        if self.tasks is not None and job.task not in self.tasks:
            return "task"
        if self.data_users is not None and job.data_user not in self.data_users:
            return "data_user"
        if self.schema_sha256 is not None and job.schema_sha256 != self.schema_sha256:
            return "schema"
        if not _within(job.epsilon, self.max_epsilon_per_job):
            return "epsilon_per_job"
        if not _within(job.delta, self.max_delta_per_job):
            return "delta_per_job"
        return self.over_limit(job, lambda **which: ledger.spent_on(owner_id, **which))

    def headroom(self, spent: Callable[..., Budget], other_than: str | None = None) -> Headroom:
        """What a job may still ask of an owner under each epsilon limit of this policy, given ``spent(other_than=,
        since=)``, what the owner spent on jobs other than ``other_than`` (``Ledger.spent_on``; a ledger file's, for
        ``privfed ledger show --policy``): what :meth:`over_limit` holds a job's announced epsilon to. Negative where
        the owner already spent past a limit."""
        day = spent(other_than=other_than, since="-1 day").epsilon if math.isfinite(self.max_epsilon_per_day) else 0.0
        total = spent(other_than=other_than).epsilon if math.isfinite(self.max_epsilon_total) else 0.0
        return Headroom(self.max_epsilon_per_job, self.max_epsilon_per_day - day, self.max_epsilon_total - total)

    def over_limit(self, job: JobInfo, spent: Callable[..., Budget]) -> str | None:
        """The day or total limit (its rule) that ``job``'s announced epsilon would pass on top of
        ``spent(other_than=, since=)``, what the owner spent on the other jobs (:meth:`headroom`); None: neither."""
        room = self.headroom(spent, other_than=job.job_id)
        if not _fits(job.epsilon, room.day, self.max_epsilon_per_day):
            return "epsilon_per_day"
        if not _fits(job.epsilon, room.total, self.max_epsilon_total):
            return "epsilon_total"
        return None


@dataclass(frozen=True)
class Headroom:
    """The epsilon a job may still ask of an owner under each epsilon limit of its policy
    (:meth:`OwnerPolicy.headroom`; infinity: no such limit). ``day`` grows again as releases pass 24 hours."""

    per_job: float
    day: float
    total: float

    @property
    def epsilon(self) -> float:
        """The most a new job may announce and not be declined by these limits (never below 0)."""
        return max(0.0, min(self.per_job, self.day, self.total))


def exceeds_announcement(
    job: JobInfo, ledger: Ledger, owner_id: str, debits: Sequence[Debit], *, holdings: Holdings | None = None
) -> bool:
    """Whether ``debits`` (the batch's pending ones and the release's own) would take the owner's
    spending in ``job`` past the epsilon or delta the job announced (rule ``announced``): the owner id's own
    releases, or, with ``holdings``, those that a row held before by these (id, run) pairs can have spent on the
    job (:func:`rows_kept_out`)."""
    if holdings is None:
        spent = ledger.spent_on(owner_id, job=job.job_id)
    else:
        spent = ledger.spent_by_holdings(owner_id, holdings, job=job.job_id)  # at least what such a row spent
    asked = Budget(math.fsum(d.epsilon for d in debits), math.fsum(d.delta for d in debits))
    return not (_within(spent.epsilon + asked.epsilon, job.epsilon) and _within(spent.delta + asked.delta, job.delta))


def rows_kept_out(
    policy: OwnerPolicy, job: JobInfo, ledger: Ledger, owner_id: str, debits: Sequence[Debit]
) -> frozenset[int]:
    """The positions of the owner's rows that a release the policy accepts for the owner's id
    (:meth:`OwnerPolicy.declines`, :func:`exceeds_announcement`) may not read: those it would take past the
    job's announcement or the policy's day or total limit, counting what each row can have spent within the
    limit's window: the releases of the (id, run) pairs that held it, and the owner's own in this run
    (module docstring; ``Ledger.spent_by_holdings``; ``Debit.rows_out``). Rows are judged in groups of the same
    holdings, each by its own."""
    out: list[int] = []
    groups = ledger.row_holder_groups(owner_id)  # one lookup per task
    # One check per group (the rows nobody held before too, and an owner of no rows as if it had some): no early
    # exit, so an answer's time tells no more than how many distinct groups of holdings the rows have (one when all
    # have the same, none or some).
    for holdings, positions in (groups or {(): ()}).items():
        announced = exceeds_announcement(job, ledger, owner_id, debits, holdings=holdings)
        limit = policy.over_limit(job, lambda held=holdings, **which: ledger.spent_by_holdings(owner_id, held, **which))
        if announced or limit is not None:
            out.extend(positions)
    return frozenset(out)


#: What a node answers by while its policy file cannot be read: every job declined, by a rule of its own (walkthrough
#: 6, W6-8: rule ``task`` sent the owner and the data user to look at a ``tasks`` list that allowed the job).
DECLINE_EVERY_JOB = OwnerPolicy(tasks=(), unreadable=True)


class PolicyFile:
    """The policy file a node was started with (``--policy``), read again when it changes (walkthrough 5: an owner
    who removed a data user from the file went on releasing to them until the daemon restarted, and nothing said
    so). :meth:`current` is called when the node takes a new job's tasks, before any of them is judged: a ``stat``,
    and a read only if the file changed. A file that can no longer be read declines every job until it can: an
    edit meant to withdraw consent must not fall back to a laxer policy. Only the owner's log says why; the
    coordinator sees the refusals (code ``policy``), as for any declined job."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._state = file_state(self.path)
        self.policy = OwnerPolicy.read(self.path)

    def current(self) -> OwnerPolicy:
        now = file_state(self.path)
        if now == self._state:
            return self.policy
        self._state = now
        try:
            self.policy = OwnerPolicy.read(self.path)
        except ConfigError as exc:
            self.policy = DECLINE_EVERY_JOB
            log.error("%s; this node declines every job until the file can be read", exc)
        else:
            log.info("policy file %s changed: read again; it judges the jobs from this one on", self.path)
        return self.policy
