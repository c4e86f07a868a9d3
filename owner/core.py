"""The owner core: the one gate every task passes, free of network I/O (issue 20 item 1; DESIGN
"Release discipline").

``OwnerCore.answer(tasks) -> Answer(results, outbound)`` is everything an owner node does with what
a coordinator sends; the gRPC node (``privfed.owner.node``) and the in-process transport
(``privfed.deploy.inprocess``) only move its input and output. For each task, in order:

1. its kind is looked up in the registry (:mod:`privfed.owner.kinds`); a task id seen before in
   the pass is refused (``duplicate_task``), as is a task for an owner this node does not host;
   a node with a policy (:mod:`privfed.owner.policy`) refuses every task of a job the policy
   declines (``policy``), judged by the job's announcement (:class:`~privfed.common.jobinfo.JobInfo`)
   and the ledger alone. The accept round's task (``join``, sent before a job's first release) is
   answered here, by that same check: an empty acceptance or that refusal, nothing debited;
2. **validate**: the kind sees the task and a ``PublicView`` -- the owner's public configuration,
   the node's policy, the owner's ledger record with the batch's earlier debits, what it released
   before -- and refuses, or accepts a fresh release, or names a release to send again. Then the
   release's ledger entries are checked (``already_released``, ``budget_exceeded``). No row is
   read until here, so **whether a task is refused is a function of public inputs**;
3. **debit**: every accepted release of the batch is committed in ONE ledger transaction (one
   fsync for thousands of owners) *before anything is computed*. Budgets are checked on the owner id's
   own record; a release the owner's rows cannot afford (under any earlier id: re-sharding), or that its
   policy keeps from them, is recorded on the id and answered with the kind's data-independent fallback
   (:class:`~privfed.common.ledger_records.RowsUnused`): no refusal says that a row was spent before;
4. **compute**, in task order (:mod:`privfed.owner.compute`). Compute is total: whatever it raises, or a release that is not
   finite or outside the wire's range, is replaced by the kind's data-independent fallback (the
   same mechanism around a public value). The release leaves whatever happened: once rows have
   been read, nothing is refused any more (issue 20, finding 2). A release that goes through a
   secure sum (the boosting evaluation pair) is handed to its mod (ring or pairwise masks), which
   answers the task and emits envelopes, as a Flower mod wraps a ClientApp's reply; a secure sum's
   protocol messages (step kinds) go to their mod in the same order.

Refusals carry no data (contract 3): a fixed text per code (``REFUSAL_TEXTS``) and at most a detail
built from the task's own fields and the owner's public configuration. The full reason goes to
the local log. A release kept by the owner (a boosting run's share, an evaluation pair) is sent
again when asked again, never recomputed: no new draw, no debit.

Timing and limits: a coordinator sees when each answer arrives and every value it is sent, so the side channels
around this gate (what a release's work depends on, what audits 1-13 closed and what is left, measured) are
recorded in ``docs/owner-limits.md``; the README's "Privacy" section summarises them.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privfed.common.errors import BudgetExceeded, ConfigError, LocalProtocolError, Unopened
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Budget, Debit, Ledger, Recipient, RowsUnused, Standing
from privfed.common.ledger_records import refusal
from privfed.common.secagg.boxes import generate_private_key
from privfed.common.secagg.ring import Outbound
from privfed.common.tasks import POLICY_DECLINED, JoinAccepted, Refusal, Result, Task
from privfed.common.work_rows import check_declared_rows, declared_rows
from privfed.owner.compute import TOGETHER, compute_together, release_from
from privfed.owner.history import applied_digest
from privfed.owner.keys import OwnerKeys
from privfed.owner.kinds import OwnerKind, kind_of
from privfed.owner.kinds.base import (
    JoinKind,
    LedgerView,
    NodeState,
    Policy,
    PublicView,
    Refused,
    SecureSum,
    StepKind,
    TaskKind,
)
from privfed.owner.local import Cached, LocalOwner, PublicConfig, Release
from privfed.owner.policy import OwnerPolicy, exceeds_announcement, rows_kept_out
from privfed.owner.refusals import refusal_for
from privfed.owner.ring import RingMod
from privfed.owner.secagg import SecAggDriver

log = logging.getLogger("privfed.owner")


def policy_rule(rule: str) -> str:
    """A policy refusal's detail: the rule that declines the job, after the code's fixed text ("the owner's policy
    does not allow this release; nothing was released (rule X)"; walkthrough 8, W8-3: "(the job is declined by the
    owner's policy (rule X))" said the same twice, in nested brackets)."""
    return f"rule {rule}"


@dataclass(frozen=True)
class Answer:
    """What answering a batch gives: the results, in task order, and the envelopes to relay."""

    results: list[Result]
    outbound: list[Outbound]


@dataclass
class _Admitted:
    """A task that passed validation: a fresh release (``debits``) or one to send again (``cached``)."""

    task: Task
    kind: TaskKind[Any]
    owner: LocalOwner
    party: object
    debits: list[Debit]
    cached: Cached | None = None
    refused: Result | None = None
    #: The release computed with the batch (``TaskKind.compute_many``), None: compute it alone.
    release: Release | None = None
    #: The owner's rows the release is made without (:class:`~privfed.common.ledger.RowsUnused`), by position.
    rows_out: frozenset[int] = frozenset()


_Planned = Result | _Admitted | tuple[Task, StepKind]
#: At most this many accepted (spec, owner configuration) pairs are kept (:meth:`OwnerCore._validate`).
KEPT_ACCEPTED = 4096


class OwnerCore:
    """The gate of one owner node (module docstring).

    Parameters
    ----------
    owners : iterable of LocalOwner
        The logical owners the node hosts.
    ledger : Ledger
        The node's ledger; every release is debited here before it is computed. Each owner's rows
        are bound to it (``Ledger.bind_rows``): a row's spent budget follows it into any partition.
    keys : OwnerKeys, optional
        The owners' end-to-end keys and the federation CA (default: fresh keys, no CA: in-process).
    allow_clear_labels : bool
        ``privfed owner --allow-clear-labels``.
    sign : callable, optional
        Signs an owner's secure-sum mask key with the node's certificate key.
    owner_policy : OwnerPolicy, optional
        ``privfed owner --policy``: which jobs the node takes part in (None: every job).
    work_rows : int, optional
        ``privfed owner --work-rows``: the row count the node declares public for each of its owners, a power of
        two at least each one's rows. Everything the core does for them works on that many rows
        (:func:`~privfed.common.work_rows.declared_rows`), so no answer's time tells their counts apart. None:
        each count's own power-of-two cell, which the time then shows.
    coordinator : str
        Whom the node's releases go to: the coordinator its session is with, as its channel authenticated it
        (:func:`~privfed.proto.transport.peer_identity`; empty: unknown, an in-process coordinator). Recorded
        with each release in the ledger, with the announced job's data user (:class:`Recipient`), and nowhere
        else: nothing the core answers, refuses or sends depends on it.
    on_debited : callable, optional
        Called after each batch of releases is committed to the ledger, before any of them is computed or sent
        (``privfed owner`` records what its ledger holds beside it: :mod:`privfed.owner.ledger_seen`). Called for
        every committed batch, refused entries or not, so its time depends on no data.
    """

    def __init__(
        self,
        owners: Iterable[LocalOwner],
        ledger: Ledger,
        *,
        keys: OwnerKeys | None = None,
        allow_clear_labels: bool = False,
        sign: Callable[[str, str, bytes], bytes] | None = None,
        owner_policy: OwnerPolicy | None = None,
        work_rows: int | None = None,
        coordinator: str = "",
        on_debited: Callable[[], None] | None = None,
    ) -> None:
        self.owners = {o.owner_id: o for o in owners}
        self.coordinator = coordinator
        self._on_debited = on_debited
        if work_rows is not None:
            check_declared_rows(work_rows, max((o.n_rows for o in self.owners.values()), default=0))
        self.work_rows = work_rows
        self.owner_policy = owner_policy
        self.ledger = ledger
        self.policy = Policy(allow_clear_labels=allow_clear_labels)
        self.node = NodeState()
        self.keys = keys if keys is not None else OwnerKeys({o: generate_private_key() for o in self.owners}, None)
        self.mods: dict[str, SecureSum] = {"ring": RingMod(self.keys), "secagg": SecAggDriver(self.keys, sign=sign)}
        with declared_rows(work_rows):  # pad accounts up to the declared count
            for owner in self.owners.values():
                ledger.bind_rows(owner.owner_id, owner.row_keys)
        ledger.load_row_accounts()  # now, not in the first answer: its time would tell rows spent before
        ledger.load_owner_records()  # and the ids that held them: a policy's first check would read them
        #: (spec, owner configuration) pairs a spec-only kind accepted, by their ids (:meth:`_validate`)
        self._accepted: dict[tuple[int, int], tuple[object, PublicConfig]] = {}

    # ------------------------------------------------------------------ batches
    def chunk_end(self, items: Sequence[Task | Result], start: int) -> int:
        """Where the batch starting at ``items[start]`` ends: a run of tasks of one batch size, at
        most that many (``TaskKind.batch``). A node answers a pull batch by batch and relays each
        batch's envelopes before the next."""
        limit = self._batch(items[start])
        end = start + 1
        while end < len(items) and end - start < limit and self._batch(items[end]) == limit:
            end += 1
        return end

    @staticmethod
    def _batch(item: Task | Result) -> float:
        kind = kind_of(item.spec) if isinstance(item, Task) else None
        return math.inf if kind is None else kind.batch

    def answer(
        self, items: Iterable[Task | Result], *, seen: set[str] | None = None, job: JobInfo | None = None
    ) -> Answer:
        """Answer a batch: a result per task (a refusal, a release, a secure sum's answer; a ring hop
        may have none) in order, and the envelopes to relay. ``items`` may hold results already made
        (a task refused at decoding), passed through. ``seen``: task ids of the pass so far. ``job``:
        the job the coordinator announced with the tasks (its releases are recorded under its id)."""
        with declared_rows(self.work_rows):  # every step below works on the declared count, if there is one
            return self._answer(items, seen=seen, job=job)

    def _answer(self, items: Iterable[Task | Result], *, seen: set[str] | None, job: JobInfo | None) -> Answer:
        seen = set() if seen is None else seen
        pending: dict[str, list[Debit]] = {}
        items = list(items)
        standings = self._standings(items)
        # whom the batch's releases go to: one for the batch, written with each debit and read by nothing else
        recipient = Recipient("" if job is None else job.data_user, self.coordinator)
        plan = [self._admit(item, seen, pending, standings, job, recipient) for item in items]
        fresh = [p for p in plan if isinstance(p, _Admitted) and p.cached is None]
        self._debit(fresh)
        self._log_rows_unused(fresh, job)
        self._compute_together([a for a in fresh if a.refused is None and a.kind.mod(a.task.spec) is None])
        results: list[Result] = []
        outbound: list[Outbound] = []
        for p in plan:
            result, out = self._finish(p)
            if result is not None:
                results.append(result)
            outbound += out
        return Answer(results, outbound)

    # ------------------------------------------------------------------ 1-2: kind, validate, budget
    def _standings(self, items: Sequence[Task | Result]) -> dict[str, Standing]:
        """The ledger record of every hosted owner a release task of the batch is for, read at once
        (``Ledger.standings``); a ledger that cannot be read leaves each check to its own query."""
        owners = [t.owner_id for t in items if isinstance(t, Task) and t.owner_id in self.owners]
        if not owners:
            return {}
        try:
            return self.ledger.standings(owners)
        except (sqlite3.Error, ConfigError, LocalProtocolError) as exc:
            log.error(
                "ledger %s cannot be read for the batch (%s); owners are checked one by one", self.ledger.path, exc
            )
            return {}

    def _view(self, owner: LocalOwner, pending: Sequence[Debit], standing: Standing | None = None) -> PublicView:
        return PublicView(
            owner_id=owner.owner_id,
            config=owner.public,
            policy=self.policy,
            ledger=LedgerView(self.ledger, owner.owner_id, pending, standing),
            node=self.node,
            applied={run: d for run in owner.boost_applied if (d := applied_digest(owner, run)) is not None},
            cached=owner.released,
        )

    def _check_job(self, kind: TaskKind[Any] | JoinKind, job: JobInfo | None, owner_id: str) -> None:
        """Refuse a release the announced job does not send, or one the owner's policy declines: before
        anything else, so a declined job is not looked at. Reads the task's kind, the announcement, the
        policy and the owner's ledger: nothing of its rows. The accept round's answer is this check's
        (:meth:`_join`): the one place where a policy judges a job."""
        if job is not None and job.task not in kind.kind.tasks:
            raise Refused("invalid_task", f"a {kind.name} task is not part of a job announced as {job.task!r}")
        if self.owner_policy is not None:
            rule = self.owner_policy.declines(job, self.ledger, owner_id)
            if rule is not None:
                raise Refused(POLICY_DECLINED, policy_rule(rule))

    def _admit(
        self,
        item: Task | Result,
        seen: set[str],
        pending: dict[str, list[Debit]],
        standings: dict[str, Standing],
        job: JobInfo | None,
        recipient: Recipient,
    ) -> _Planned:
        if isinstance(item, Result):
            return item
        task = item
        kind: OwnerKind | None = kind_of(task.spec)
        if kind is None:
            return refusal_for(task, Refused("invalid_task", f"task kind {type(task.spec).__name__} is not answered"))
        owner = self.owners.get(task.owner_id)
        if owner is None:
            return refusal_for(task, Refused("invalid_task", f"owner {task.owner_id!r} is not hosted by this node"))
        if isinstance(kind, StepKind):
            return task, kind
        if task.task_id in seen:
            return refusal_for(task, Refused("duplicate_task", f"task id {task.task_id!r}"))
        seen.add(task.task_id)
        if isinstance(kind, JoinKind):
            return self._join(task, kind, job)
        queued = pending.setdefault(owner.owner_id, [])
        try:
            self._check_job(kind, job, owner.owner_id)
            spec = task.spec
            if kind.releases_clear_labels(spec) and not self.policy.allow_clear_labels:
                raise Refused(
                    POLICY_DECLINED,
                    "clear labels are released only by an owner started with --allow-clear-labels; ask for "
                    "labels='rr' (or 'joint' for boosted NCC)",
                )
            mod = kind.mod(spec)
            party = self.mods[mod].prepare(owner.owner_id, spec) if mod is not None else None
            view = self._view(owner, queued, standings.get(owner.owner_id))
            cached = self._validate(kind, task, view)
            if cached is not None:
                return _Admitted(task, kind, owner, party, [], cached)
            job_id = "" if job is None else job.job_id
            debits = [dataclasses.replace(d, job=job_id, recipient=recipient) for d in kind.debits(task, spec)]
            if job is not None:
                if self.owner_policy is not None and exceeds_announcement(
                    job, self.ledger, owner.owner_id, [*queued, *debits]
                ):
                    raise Refused(POLICY_DECLINED, policy_rule("announced"))
                if self.owner_policy is not None:  # the id may answer; some rows may not (privfed.owner.policy)
                    out = rows_kept_out(self.owner_policy, job, self.ledger, owner.owner_id, [*queued, *debits])
                    debits = [dataclasses.replace(d, rows_out=out) for d in debits]
            if any(view.ledger.has_release_id(d.release_id) for d in debits):
                raise Refused("already_released", f"task id {task.task_id!r}")
            eps, delta = math.fsum(d.epsilon for d in debits), math.fsum(d.delta for d in debits)
            try:
                view.ledger.check(eps, delta)
            except BudgetExceeded as exc:  # logged once, with this cause, by refusal_for
                raise Refused("budget_exceeded", f"request epsilon={eps:g}, delta={delta:g}") from exc
        except Exception as exc:  # noqa: BLE001 - refused alone; nothing a task does may take the node down
            return refusal_for(task, exc)
        queued.extend(debits)
        return _Admitted(task, kind, owner, party, debits)

    def _join(self, task: Task, kind: JoinKind, job: JobInfo | None) -> Result:
        """The accept round's answer (:mod:`privfed.common.tasks.join`): an empty acceptance, the refusal
        :meth:`_check_job` gives every task of a job the policy declines, or ``budget_exceeded`` for an owner id
        whose budget cannot pay what the job announces (:meth:`_check_affords`). Nothing is validated, debited
        or read of the rows; a node without a policy takes part in every job it is asked into that it can pay."""
        try:
            self._check_job(kind, job, task.owner_id)
            if job is not None:
                self._check_affords(job, task.owner_id)
        except Exception as exc:  # noqa: BLE001 - refused alone, as any task (a ledger that cannot be read: internal)
            return refusal_for(task, exc)
        return Result(task.task_id, task.owner_id, JoinAccepted())

    def _check_affords(self, job: JobInfo, owner_id: str) -> None:
        """Refuse (``budget_exceeded``) a job whose announced (ε, δ) the owner id's budget cannot pay on top of
        what it spent on other jobs (walkthrough 6, W6-12: such owners were planned in and refused at their
        release, and a boosting job failed at round 5 after the others had paid four rounds). The id's own record
        only, as the release's refusal (:class:`~privfed.common.ledger.RowsUnused`): rows whose budget is spent
        are answered from the fallback, never refused, so this says nothing of them. A job resumed with the id's
        releases for it already made counts them as part of the job (``other_than``)."""
        request = Budget(job.epsilon, job.delta)
        spent = self.ledger.spent_on(owner_id, other_than=job.job_id)
        if refusal(owner_id, request, spent, self.ledger.budget(owner_id), "") is not None:
            raise Refused("budget_exceeded", f"the job announces epsilon={job.epsilon:g}, delta={job.delta:g}")

    def _validate(self, kind: TaskKind[Any], task: Task, view: PublicView) -> Cached | None:
        """``kind.validate``; a spec-only kind (``TaskKind.spec_only``) accepts a spec object for an
        owner configuration once, and is asked again for any other spec object (a changed spec is
        another message, decoded anew) or configuration. A refusal is never kept: it is raised
        again each time."""
        if not kind.spec_only:
            return kind.validate(task, task.spec, view)
        key = (id(task.spec), id(view.config))
        accepted = self._accepted.get(key)
        if accepted is not None and accepted[0] is task.spec and accepted[1] is view.config:
            return None
        cached = kind.validate(task, task.spec, view)
        if cached is None:
            if len(self._accepted) >= KEPT_ACCEPTED:
                self._accepted.clear()
            self._accepted[key] = (task.spec, view.config)  # kept alive: their ids are not reused meanwhile
        return cached

    # ------------------------------------------------------------------ 3: debit
    def _debit(self, fresh: list[_Admitted]) -> None:
        """Commit every fresh release's entries in one transaction; a release whose entry is refused
        (it was checked with the batch's earlier entries, so only a concurrent writer could) is not made."""
        entries = [d for a in fresh for d in a.debits]
        if not entries:
            return
        try:
            outcomes = self.ledger.debit_many(entries)
        except (sqlite3.Error, ConfigError) as exc:  # rolled back: nothing recorded, nothing computed
            log.error("ledger %s cannot record debits (%s): refusing %d task(s)", self.ledger.path, exc, len(fresh))
            for a in fresh:
                a.refused = Result(a.task.task_id, a.task.owner_id, Refusal.of("internal"))
            return
        if self._on_debited is not None:
            self._on_debited()
        i = 0
        for a in fresh:
            mine = outcomes[i : i + len(a.debits)]
            i += len(a.debits)
            error = next((o for o in mine if isinstance(o, BudgetExceeded | LocalProtocolError)), None)
            if error is not None:
                a.refused = refusal_for(a.task, error)
            else:
                a.rows_out = frozenset(i for o in mine if isinstance(o, RowsUnused) for i in o.rows)

    def _log_rows_unused(self, fresh: list[_Admitted], job: JobInfo | None) -> None:
        """One line in the owner's own log per batch of debited releases (walkthrough 4, M3: a DEBUG line per
        release only), counting those its rows could not all afford (or its policy kept out): answered from the
        kind's data-independent fallback (no row left), or from the other rows. The coordinator sees nothing of
        this: the release discipline's fallback exists to hide it, and the ledger lists them as releases. So the
        line is written for every batch, the same call whatever the counts ("Timing" in
        ``docs/owner-limits.md``: a line written only when rows are spent would take the time to write it only
        then); a WARNING when some are, an INFO line otherwise (both enabled: ``privfed owner`` logs at INFO)."""
        debited = [a for a in fresh if a.refused is None]
        if not debited:
            return
        unused = [len(a.rows_out) >= a.owner.n_rows for a in debited if a.rows_out and a.owner.n_rows > 0]
        fallback, partial = sum(unused), len(unused) - sum(unused)
        why = "their rows' budget is spent (under these or earlier owner ids: the budget follows the rows)"
        if self.owner_policy is not None:
            why += " or the policy keeps the rows out"
        log.log(
            logging.WARNING if unused else logging.INFO,
            "%s%d of %d release(s) answered from the data-independent fallback, %d more from only some of their rows%s",
            "" if job is None else f"job {job.job_id}: ",
            fallback,
            len(debited),
            partial,
            f": {why}; each is debited on its owner id and listed by `privfed ledger show` as a release, but it "
            "carries nothing of those rows"
            if unused
            else "",
        )

    # ------------------------------------------------------------------ 4: compute, mods
    def _finish(self, p: _Planned) -> tuple[Result | None, list[Outbound]]:
        if isinstance(p, Result):
            return p, []
        if isinstance(p, tuple):
            task, step = p
            try:
                return self.mods[step.mod].step(task)
            except Exception as exc:  # noqa: BLE001 - a peer's message never ends the node
                return refusal_for(task, exc, detail=False), []
        if p.refused is not None:
            return p.refused, []
        task, kind, spec = p.task, p.kind, p.task.spec
        try:
            if p.cached is not None:
                release = p.cached.payload
            else:
                if p.release is not None:
                    release = p.release
                else:  # without the rows that cannot afford it; none left: its fallback (computed alike: "Timing")
                    release = release_from(kind, task, p.owner, p.rows_out)
                kind.released(task, spec, release, p.owner, self.node)
            mod = kind.mod(spec)
            if mod is None:
                if isinstance(release, np.ndarray):
                    raise ConfigError(f"task kind {kind.name} answers with a message, not an array")
                return Result(task.task_id, task.owner_id, release), []
            payload, out = self.mods[mod].start(task, p.party, kind.mod_input(spec, release))
            return (None if payload is None else Result(task.task_id, task.owner_id, payload)), out
        except Unopened as exc:  # a neighbour's sealed shares did not open: it is named, not this owner (A33-2)
            log.warning("task %s for %s: %s; refused naming %s (debited)", task.task_id, task.owner_id, exc, exc.sender)
            return Result(task.task_id, task.owner_id, Refusal.of("unopened", exc.sender, accused=exc.sender)), []
        except Exception as exc:  # noqa: BLE001 - a bug after the debit: refused, the debit stays on record
            log.exception("task %s for %s failed after its debit: %s", task.task_id, task.owner_id, exc)
            return Result(task.task_id, task.owner_id, Refusal.of("internal")), []

    @staticmethod
    def _compute_together(debited: list[_Admitted]) -> None:
        """Each kind's debited releases of the batch together (:func:`~privfed.owner.compute.compute_together`),
        in pieces of at most :data:`~privfed.owner.compute.TOGETHER`; the others are computed alone in
        :meth:`_finish`."""
        by_kind: dict[str, list[_Admitted]] = {}
        for a in debited:
            by_kind.setdefault(a.kind.name, []).append(a)
        for group in by_kind.values():
            for i in range(0, len(group), TOGETHER):
                piece = group[i : i + TOGETHER]
                releases = compute_together(
                    piece[0].kind, [a.task for a in piece], [a.owner for a in piece], [a.rows_out for a in piece]
                )
                for a, release in zip(piece, releases, strict=True):
                    a.release = release


def handle_batch(
    tasks: Sequence[Task], owners: dict[str, LocalOwner], ledger: Ledger, *, allow_clear_labels: bool = False
) -> list[Result]:
    """Answer release tasks with a one-off core over ``owners`` (scripts and tests; a node keeps one
    :class:`OwnerCore`). The owners keep what they released, so a later call can send it again."""
    return OwnerCore(owners.values(), ledger, allow_clear_labels=allow_clear_labels).answer(tasks).results
