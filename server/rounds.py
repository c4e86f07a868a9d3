"""What a job learns about its owners, batch by batch: who answered, refused, broke a reply's
contract or fell silent, what each was debited for, and whether the job still has its quorum.

:class:`JobBook.record` turns one batch's :class:`~privfed.server.dispatcher.RunOutcome` into the
results a strategy may use: every reply is checked against its task's contract
(:mod:`privfed.server.contracts`) first, and an owner whose reply breaks it, whose reply could not
be decoded, or whose live node never answered a share task, is rejected: named in the report's
``rejected_owners`` with a reason code and asked for nothing more (issue 23, item 1).
:meth:`JobBook.check_quorum` ends the job with :class:`QuorumLost` once fewer than ``quorum``
owners are still taking part, before a later batch spends anyone's budget (item 2).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from privfed.common.errors import QuorumLost
from privfed.common.identity import node_of
from privfed.common.tasks import POLICY_DECLINED, Refusal, Result, Task, kind_of, refusal_parts, total_budget
from privfed.common.tasks.join import JoinTask
from privfed.server.contracts import ContractViolation, PublicLimits, Rejection, check_reply
from privfed.server.dispatcher import Answer, RunOutcome
from privfed.server.report import refusal_summary

log = logging.getLogger("privfed.coordinator")


def rejection_summary(rejected: dict[str, str], n_owners: int) -> str:
    """One line: how many owners were rejected and why, most frequent code first (empty if none)."""
    if not rejected:
        return ""
    codes = Counter(line.partition(":")[0] for line in rejected.values())
    parts = ", ".join(f"{n} {code}" for code, n in sorted(codes.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{len(rejected)}/{n_owners} owners rejected for replies that broke their task's contract: {parts}"


#: Refusal codes an owner may give after its release was debited (audit 36, A36-2): a secure sum's ``unopened`` (the
#: pairwise-mask machine opens the neighbours' shares once the release is computed: A33-2), and ``internal`` (a
#: failure after the debit, or a ledger that could not record it: the coordinator cannot tell them apart). The
#: release stays named in ``epsilon_unanswered_by_owner`` ("may have spent") until an answer from the owner's record
#: counts it.
REFUSED_AFTER_DEBIT = frozenset({"unopened", "internal"})


def _release_key(task: Task) -> tuple[str, str]:
    """One release of one owner: a re-formed ring asks again under the same release id (a task without one is
    asked once: its id is unique)."""
    return task.owner_id, getattr(task.spec, "release_id", None) or task.task_id


#: Relative slack when a resumed run's totals are compared with the interrupted run's (sums of the same floats in
#: another order).
CARRY_TOLERANCE = 1e-9


#: What a resumed job carries of its earlier runs: owner -> {release key: ε} (:meth:`JobBook.carry`), with three keys
#: that name no one release:
#: :data:`LUMP`, what a report of older code names by owner only, netted against all this run counts and asks of the
#: owner; :data:`JOURNALED`, what the job's journal holds of the owner's releases (a report lists only the releases
#: its journal does not: :meth:`JobBook.releases_to_report`), netted against what this run replays from the journal;
#: :data:`EARLIER`, what a run left of a LUMP, netted no more (audit 39, A39-1: netted again run after run).
Carried = Mapping[str, Mapping[str, float]]
LUMP, JOURNALED, EARLIER = "", "journaled", "earlier"


def may_have_spent(report: Mapping[str, Any] | None) -> dict[str, float]:
    """Each owner -> what a job's report says it may have spent on the job: counted (``epsilon_by_owner``) and asked
    with no answer come (``epsilon_unanswered_by_owner``); empty for no report."""
    out: dict[str, float] = {}
    for name in ("epsilon_by_owner", "epsilon_unanswered_by_owner"):
        field_ = (report or {}).get(name)
        for owner, epsilon in (field_ if isinstance(field_, dict) else {}).items():
            if isinstance(epsilon, int | float) and math.isfinite(epsilon):
                out[owner] = out.get(owner, 0.0) + float(epsilon)
    return out


def releases_may_have_spent(report: Mapping[str, Any] | None) -> dict[str, dict[str, float]]:
    """Each owner -> {release key: ε} of the releases a job's report says it may have made (``epsilon_by_release``,
    which a report written ahead of its batches holds); a report without it gives each owner's
    :func:`may_have_spent` under :data:`LUMP`. A resumed run carries these by key (audit 38, A38-1: carried per
    owner, a restarted owner's refused share was netted against its next, new share)."""
    keyed = (report or {}).get("epsilon_by_release")
    totals = may_have_spent(report)
    if not isinstance(keyed, dict):
        return {o: {LUMP: e} for o, e in totals.items() if e > 0}
    out: dict[str, dict[str, float]] = {}
    for owner, releases in keyed.items():
        for key, epsilon in (releases if isinstance(releases, dict) else {}).items():
            if isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0:
                out.setdefault(str(owner), {})[str(key)] = float(epsilon)
    for owner, total in totals.items():  # what the report names of the owner beyond its listed releases: journaled
        rest = total - sum(out.get(owner, {}).values())  # (audit 39, A39-3: an older journal's too)
        if rest > CARRY_TOLERANCE * max(total, 1.0):
            mine = out.setdefault(owner, {})
            mine[JOURNALED] = mine.get(JOURNALED, 0.0) + rest
    return out


def carried_fields(carried: Carried) -> dict[str, Any]:
    """A report's owner fields before its run has counted anything: what earlier runs may have had each owner spend,
    named unanswered (by owner) and by release, so a run that ends before its owners are back keeps the account
    (audit 37, A37-3, the service; audit 39, A39-5, ``privfed coordinator --resume``)."""
    if not carried:
        return {}
    totals = {o: float(sum(r.values())) for o, r in carried.items()}
    return {"epsilon_unanswered_by_owner": dict(sorted(totals.items())), "epsilon_by_release": dict(carried)}


def most_spent(carried: Iterable[Carried]) -> dict[str, dict[str, float]]:
    """The most any of several earlier runs' :func:`releases_may_have_spent` names, release by release (each resumed
    run's report carries the runs before it)."""
    out: dict[str, dict[str, float]] = {}
    for one in carried:
        for owner, releases in one.items():
            mine = out.setdefault(owner, {})
            for key, epsilon in releases.items():
                mine[key] = max(mine.get(key, 0.0), float(epsilon))
    return out


def declined_owners(refused: dict[str, str]) -> list[str]:
    """The owners whose policy declined the job (refusal code ``policy``; ``privfed owner --policy``)."""
    return sorted(o for o, line in refused.items() if refusal_parts(line)[0] == POLICY_DECLINED)


@dataclass
class JobBook:
    """The owners of one job and what became of each (module docstring).

    ``limits``: the public configuration the reply contracts need; ``quorum``: the fewest owners
    that must still be taking part after every batch (1: any); ``owner_ids``: the job's owners,
    known once they registered (:meth:`begin`); ``asked``: the owners the job asked for (its ``owners``),
    which may be fewer: a job runs on every owner registered when it starts.
    """

    limits: PublicLimits
    quorum: int = 1
    #: Whether the quorum is checked after a batch that released too, not only before (False: a one-round job's
    #: budgets are all spent by then; :attr:`JobConfig.quorum_after_release
    #: <privfed.server.config.JobConfig.quorum_after_release>`).
    check_after_release: bool = True
    owner_ids: list[str] = field(default_factory=list)
    epsilon_by_owner: dict[str, float] = field(default_factory=dict)  # what the coordinator received shares for
    refused: dict[str, str] = field(default_factory=dict)  # owner -> "code: text" of its refusal
    rejected: dict[str, str] = field(default_factory=dict)  # owner -> "code: detail" of the rejected reply
    lost_nodes: set[str] = field(default_factory=set)
    #: Owners of a resumed job's plan whose node did not come back (:meth:`lose`): asked nothing more.
    gone: set[str] = field(default_factory=set)
    #: Owners whose contribution (a share, a report) the job used: the report's ``answered`` (:meth:`contributed`).
    answered: set[str] = field(default_factory=set)
    #: Owners with any release the job used and debited, an evaluation too: the report's ``took_part``
    #: (walkthrough 9, W9-4: a bdt job's evaluators-only owners paid, yet were counted as owners that did not release).
    took_part: set[str] = field(default_factory=set)
    #: Owners with an answer of the current batch the job uses, not a refusal (:meth:`take`; the batch begins at
    #: :meth:`to_ask`): the quorum after the batch counts them, though their node left once they answered it.
    answered_in_batch: set[str] = field(default_factory=set)
    #: (owner, release) -> its ε, for each release asked whose answer has not come (:meth:`to_ask`, :meth:`take`):
    #: what an owner may have spent beyond :attr:`epsilon_by_owner` (:meth:`unanswered_epsilon`).
    _unanswered: dict[tuple[str, str], float] = field(default_factory=dict)
    #: The releases whose answer came (the keys of :attr:`_unanswered`): asked again, an owner answers from its
    #: record and spends nothing more, so such a release is not named unanswered again (audit 35, A35-4).
    _released: set[tuple[str, str]] = field(default_factory=set)
    #: A resumed job's owners -> {release key: ε} its earlier runs may have had them spend (:meth:`carry`).
    _carried: dict[str, dict[str, float]] = field(default_factory=dict)
    #: (owner, release key) -> ε of each release this run counted that no journal checkpoint holds yet (:meth:`account`
    #: takes them): the report's ``epsilon_by_release``, which a later resumed run carries by key. What a checkpoint
    #: holds a resumed run replays, so neither the report nor this grows with the rounds (audit 39, A39-2).
    _counted_epsilon: dict[tuple[str, str], float] = field(default_factory=dict)
    #: Each owner -> the most its journal's replayed steps booked for it (:meth:`replay`): what nets a :data:`JOURNALED`.
    _replayed: dict[str, float] = field(default_factory=dict)
    #: Called by :meth:`to_ask` when its batch asks for a release not asked before, before the batch goes out, the
    #: release booked as unanswered (:func:`~privfed.server.job.run_federated_job`'s ``write_ahead``).
    on_ask: Callable[[], None] | None = None
    asked: int | None = None
    #: Refusals booked so far (every one, an owner's second too): a round's log line counts its own by difference.
    refusals: int = 0
    _counted: set[tuple[str, str]] = field(default_factory=set)  # (owner, release id): a re-formed ring reuses one
    _booked: set[str] = field(default_factory=set)  # owners booked since the last :meth:`account`
    _new_counted: set[tuple[str, str]] = field(default_factory=set)  # releases counted since then

    def __post_init__(self) -> None:
        self.begin(self.owner_ids)

    def begin(self, owner_ids: list[str], asked: int | None = None) -> None:
        """The job's owners, once registered, and how many it asked for (None: as many)."""
        self.owner_ids = list(owner_ids)
        self.asked = asked
        self.released_asked = False  # whether a batch has asked for more than taking part (to_ask)
        self.epsilon_by_owner = {o: 0.0 for o in self.owner_ids} | self.epsilon_by_owner

    def unanswered_epsilon(self) -> dict[str, float]:
        """Each owner asked for a release whose answer never came (its node was lost, the job stopped, or its answer
        was rejected) -> the ε of those releases: what it may have spent beyond :attr:`epsilon_by_owner`, which
        counts what came (walkthrough 10, W10-3: a job stopped mid-step reported ε 0 for owners whose ledgers had
        debited that step). The owner's ledger holds what it spent."""
        out: dict[str, float] = {}
        for (owner, _), epsilon in self._unanswered.items():
            out[owner] = out.get(owner, 0.0) + epsilon
        for owner, carried in self._still_carried().items():  # what earlier runs had it spend, not counted here
            out[owner] = out.get(owner, 0.0) + sum(carried.values())
        return dict(sorted(out.items()))

    def _still_carried(self) -> dict[str, dict[str, float]]:
        """The carried releases this run neither counted (its answers, its journal's steps replayed, an owner's
        re-sent release: the same key) nor names unanswered itself, by owner and key; a :data:`LUMP` less what this
        run counts and names of its owner (the rule for a report of older code)."""
        out: dict[str, dict[str, float]] = {}
        if not self._carried:
            return out
        asked: dict[str, float] = {}
        for (o, _), e in self._unanswered.items():
            asked[o] = asked.get(o, 0.0) + e
        for owner, releases in self._carried.items():
            left = {
                k: e
                for k, e in releases.items()
                if k not in (LUMP, JOURNALED) and (owner, k) not in self._counted and (owner, k) not in self._unanswered
            }
            lump = releases.get(LUMP, 0.0)
            if lump:
                rest = lump - self.epsilon_by_owner.get(owner, 0.0) - asked.get(owner, 0.0)
                if rest > CARRY_TOLERANCE * max(lump, 1.0):
                    left[EARLIER] = left.get(EARLIER, 0.0) + rest
            journaled = releases.get(JOURNALED, 0.0)
            if journaled:
                rest = journaled - self._replayed.get(owner, 0.0)
                if rest > CARRY_TOLERANCE * max(journaled, 1.0):
                    left[JOURNALED] = rest
            if left:
                out[owner] = left
        return out

    def carry(self, spent_before: Mapping[str, float | Mapping[str, float]]) -> None:
        """A resumed job's owners -> what its earlier runs' reports say each may have spent: {release key: ε}
        (:func:`releases_may_have_spent`), or one number (a :data:`LUMP`). What this run neither counts (its journal's
        steps replayed, its answers, an owner's re-sent release, by key) nor names unanswered is named unanswered
        (walkthrough 14, W14-2: the owners of a node that did not come back had paid in the round the journal had
        not recorded, and were in no field of the finished report); a release this run makes anew never nets an
        earlier one away (audit 38, A38-1)."""
        self._carried = {}
        for owner, spent in spent_before.items():
            releases = {k: float(e) for k, e in spent.items()} if isinstance(spent, Mapping) else {LUMP: float(spent)}
            releases = {k: e for k, e in releases.items() if e > 0}
            if releases:
                self._carried[owner] = releases

    def releases_to_report(self) -> dict[str, dict[str, float]]:
        """Owner -> {release key: ε} of every release the owner may have made in the job that its journal does not
        hold: counted since the last checkpoint, asked with no answer, and carried from earlier runs, not counted
        again (:func:`releases_may_have_spent` reads it back, the journal's part as the rest of the report's total)."""
        out: dict[str, dict[str, float]] = {}
        for (owner, key), epsilon in self._counted_epsilon.items():
            out.setdefault(owner, {})[key] = epsilon
        for (owner, key), epsilon in self._unanswered.items():
            out.setdefault(owner, {})[key] = epsilon
        for owner, releases in self._still_carried().items():
            out.setdefault(owner, {}).update(releases)
        return dict(sorted(out.items()))

    def to_report(self) -> dict[str, Any]:
        """What a report says about the owners, also when the job failed."""
        n = len(self.owner_ids)
        return {
            "epsilon_unanswered_by_owner": self.unanswered_epsilon(),
            "refused": self.refused,
            "declined_owners": declined_owners(self.refused),
            "refusal_summary": refusal_summary(self.refused, n),
            "rejected_owners": self.rejected,
            "rejection_summary": rejection_summary(self.rejected, n),
            "lost_nodes": sorted(self.lost_nodes),
            "epsilon_by_owner": self.epsilon_by_owner,
        } | ({"epsilon_by_release": self.releases_to_report()} if self.on_ask is not None or self._carried else {})

    def account(self) -> dict[str, Any]:
        """What was booked since the last call, as JSON: the values now of the owners booked meanwhile, and the
        releases counted. A boosting job's journal keeps it with each checkpoint, and a resumed job books it again
        (:meth:`replay`) for the steps it takes from the journal instead of asking their owners again: its
        report counts them as the uninterrupted job's does."""
        owners, self._booked = self._booked, set()
        counted, self._new_counted = self._new_counted, set()
        checkpointed = sorted([o, r, self._counted_epsilon.pop((o, r), 0.0)] for o, r in counted)  # the journal's now
        return {
            "epsilon": {o: self.epsilon_by_owner[o] for o in sorted(owners) if o in self.epsilon_by_owner},
            "answered": sorted(owners & self.answered),
            "took_part": sorted(owners & self.took_part),
            "refused": {o: self.refused[o] for o in sorted(owners) if o in self.refused},
            "rejected": {o: self.rejected[o] for o in sorted(owners) if o in self.rejected},
            "counted": checkpointed,
        }

    def replay(self, account: Mapping[str, Any]) -> None:
        """Book again what :meth:`account` returned (in the order it was returned: its values are the latest)."""
        self.epsilon_by_owner.update(account.get("epsilon", {}))
        self.answered.update(account.get("answered", ()))
        # a journal of older code has no took_part: its contributors and the owners it debited took part
        epsilon = account.get("epsilon", {})
        fallback = [*account.get("answered", ()), *(o for o, e in epsilon.items() if e > 0)]
        self.took_part.update(account.get("took_part", fallback))
        self.refused.update(account.get("refused", {}))
        self.rejected.update(account.get("rejected", {}))
        for o, r, *_ in account.get("counted", ()):  # [owner, release, ε]; a journal of older code: no ε
            self._counted.add((o, r))
        for o, e in epsilon.items():  # the owner's total as of this step, which the report's journaled part holds
            self._replayed[o] = max(self._replayed.get(o, 0.0), float(e))

    def to_ask(self, tasks: list[Task], silent_owners: set[str] | None = None) -> list[Task]:
        """The tasks of a batch that go out: none for a rejected owner, nor for one whose node is gone. Before a
        batch that asks for more than taking part, with ``silent_owners`` (the dispatcher's), the quorum is checked:
        the job stops before anyone spends more (:meth:`check_quorum`)."""
        out = [t for t in tasks if t.owner_id not in self.rejected and t.owner_id not in self.gone]
        self.answered_in_batch = set()
        asked = len(self._unanswered)
        if any(not isinstance(t.spec, JoinTask) for t in out):
            self.released_asked = True
            if silent_owners is not None:
                self.check_quorum(silent_owners)
        for t in out:  # asked once the batch goes out, not before its quorum check (audit 35, A35-3)
            if t.spec.ledger_entries() and _release_key(t) not in self._released:
                self._unanswered[_release_key(t)] = total_budget(t.spec)[0]
        if self.on_ask is not None and len(self._unanswered) > asked:
            self.on_ask()
        return out

    def lose(self, owners: Iterable[str]) -> None:
        """Owners a resumed job planned over whose node did not register again (walkthrough 7, W7-10): the job goes
        on without them, as it does without a node lost mid-job, and their nodes are reported lost."""
        self.gone.update(owners)
        self.lost_nodes.update(node_of(o) for o in owners)

    def reject(self, rejection: Rejection) -> None:
        if rejection.owner_id not in self.rejected:
            log.warning(
                "owner %s rejected (task %s): %s; the job goes on without it",
                rejection.owner_id,
                rejection.task_id,
                rejection.line(),
            )
        self.rejected.setdefault(rejection.owner_id, rejection.line())
        self._booked.add(rejection.owner_id)

    def record(self, tasks: list[Task], outcome: RunOutcome, silent_nodes: Iterable[str]) -> list[Result]:
        """The usable results of one batch; everything else is booked (module docstring). With a
        streaming run (:meth:`take` was the dispatcher's sink), only the unanswered are left to book."""
        self.lost_nodes.update(outcome.lost_nodes)
        named = set(outcome.lost) | set(outcome.results) | set(outcome.rejected)
        by_task = {t.task_id: t for t in tasks if t.task_id in named}
        self.take([(by_task[i], r) for i, r in outcome.rejected.items()])
        silent = set(outcome.lost_nodes) | set(silent_nodes)
        for task_id in outcome.lost:  # a live node that never answered a share task: a stalling owner
            task = by_task[task_id]
            if kind_of(task.spec).contribution and node_of(task.owner_id) not in silent:
                self.reject(Rejection(task_id, task.owner_id, "no_answer", f"round {task.round_id}"))
        return self.take([(by_task[i], r) for i, r in outcome.results.items()])

    def take(self, answers: list[Answer]) -> list[Result]:
        """The usable results of answers as they come (the dispatcher's sink): each checked against
        its task's contract, refusals and debits booked, rejections recorded."""
        usable: list[Result] = []
        for task, answer in answers:
            if isinstance(answer, Rejection):
                self.reject(answer)
                continue
            try:
                check_reply(task.spec, answer.payload, self.limits)
            except ContractViolation as exc:
                self.reject(Rejection(answer.task_id, answer.owner_id, exc.code, exc.detail))
                continue
            usable.append(answer)
            if not (isinstance(answer.payload, Refusal) and answer.payload.code in REFUSED_AFTER_DEBIT):
                self._unanswered.pop(_release_key(task), None)  # refused (nothing spent) or released (counted)
            if isinstance(answer.payload, Refusal):
                self.refusals += 1
                self.refused[answer.owner_id] = answer.payload.line()
                self._booked.add(answer.owner_id)
                continue
            self._released.add(_release_key(task))
            self.answered_in_batch.add(answer.owner_id)
            if task.spec.ledger_entries():  # a release
                self._debited(task, answer.owner_id)
        return usable

    def _debited(self, task: Task, owner: str) -> None:
        """Book what ``owner`` spent on ``task``'s release once per release id: a re-formed ring
        asks again under the same one (a task without one is answered once: its id is unique)."""
        release = getattr(task.spec, "release_id", None)
        if release is not None:
            if (owner, release) in self._counted:
                return
            self._counted.add((owner, release))
            self._new_counted.add((owner, release))
        self._counted_epsilon[_release_key(task)] = total_budget(task.spec)[0]
        self.epsilon_by_owner[owner] += total_budget(task.spec)[0]
        self._booked.add(owner)
        self.took_part.add(owner)
        if kind_of(task.spec).contribution:
            self.answered.add(owner)

    def taking_part(self, silent_owners: set[str]) -> int:
        """Owners neither refused, rejected nor on a silent node."""
        gone = set(self.refused) | set(self.rejected) | silent_owners
        return sum(1 for o in self.owner_ids if o not in gone)

    def check_quorum(self, silent_owners: set[str]) -> None:
        """Raise :class:`QuorumLost` when fewer than ``quorum`` owners are still taking part. An owner that answered
        the current batch counts, though its node left since (a job whose nodes stopped once they had answered its
        last round failed, the answers in hand: ``docker compose stop``, owners first); a next batch that releases
        checks again before it goes out (:meth:`to_ask`)."""
        left, n = self.taking_part(silent_owners - self.answered_in_batch), len(self.owner_ids)
        if left < self.quorum:
            # of the owners the job runs on, which are every owner registered, not the number it asked for
            runs_on = (
                "" if self.asked in (None, n) else f" (the job asked for {self.asked}; it runs on all {n} registered)"
            )
            if not self.released_asked:  # the accept round (walkthrough 8, W8-3: "before anyone spends more")
                raise QuorumLost(
                    f"only {left} of {n} owners{runs_on} take part in the job, fewer than the quorum (--min-owners "
                    f"{self.quorum}): it stops in its accept round, before any release (nothing was released or debited)"
                )
            raise QuorumLost(
                f"only {left} of {n} owners{runs_on} are still taking part, fewer than the quorum "
                f"(--min-owners {self.quorum}); the job stops before anyone spends more"
            )

    def why(self) -> str:
        """Why owners did not contribute: refusals, rejections, lost nodes (one line; empty if none)."""
        n = len(self.owner_ids)
        parts = [refusal_summary(self.refused, n), rejection_summary(self.rejected, n)]
        if self.lost_nodes:
            parts.append(f"nodes lost: {', '.join(sorted(self.lost_nodes))}")
        return "; ".join(p for p in parts if p)

    def contributed(self) -> int:
        """Owners whose releases were received and used (evaluations aside)."""
        return len(self.answered - set(self.refused) - set(self.rejected))

    def absent(self, rejected: Mapping[str, str] | None = None) -> dict[str, int]:
        """Why the job's owners that released nothing it used (not in :attr:`took_part`) did not, by what the
        report says of them: ``declined`` (its ``declined_owners``), ``refused`` (other codes of ``refused``),
        ``rejected`` (``rejected_owners``: the book's and the strategy's, ``rejected``), ``lost`` (on a node of
        ``lost_nodes``, a resumed job's that did not come back too), and ``not_released``: none of these (asked
        for no release, or an answer that came too late for it). Only the reasons some owner had."""
        rejected = {**(rejected or {}), **self.rejected}
        why: Counter[str] = Counter()
        for owner in [*self.owner_ids, *sorted(self.gone - set(self.owner_ids))]:
            if owner in self.took_part:
                continue
            if owner in self.refused:
                why["declined" if refusal_parts(self.refused[owner])[0] == POLICY_DECLINED else "refused"] += 1
            elif owner in rejected:
                why["rejected"] += 1
            elif owner in self.gone or node_of(owner) in self.lost_nodes:
                why["lost"] += 1
            else:
                why["not_released"] += 1
        return dict(why)
