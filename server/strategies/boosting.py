"""Coordinator side of LDP boosting over the federation (seed 002 Alg. 2; SPEC §5, §6, §11).

Per round t: a fresh group of owners (never reused: T × group ≤ N, checked) releases perturbed
shares with their SAMME weights; the coordinator fits the base learner from them; round t's
evaluation group (:func:`~privfed.common.boosting.coordinator.evaluation_groups`) then puts its noisy,
debited ``(err_sum, w_sum)`` releases into a ring secure sum, so the coordinator learns only the
sums E and W of noisy values; it computes α (SAMME) and publishes (learner, α, E, W) in the next
tasks, from which owners update their weights locally.

Nothing here uses an owner's row count (contract 2): the ring's fixed-point range is the public
``ReleasePlan.contribution_bound`` (row bound times the public ``max_owner_rows`` plus 40
Laplace scales; every owner clips its noisy pair to it before encoding, which is post-processing). Each ring is opened at the
relay for exactly its members and closed afterwards (contract 5). An owner that refuses
its evaluation (budget, invalid task, already released) or stays silent (node past the node
timeout) is removed and the ring re-run without it under a fresh session; the members that
already released reuse their cached noisy pair, so a re-run costs them nothing. The report
records the ε split, the noise scale and the drops.

The round loop is :func:`privfed.common.boosting.loop.run_rounds`, the same one the in-process
simulation (:func:`privfed.common.boosting.simulation.simulate`) runs; this module supplies its steps over a
:class:`~privfed.server.strategies.base.Transport`: share tasks for a group, the ring secure sum
(:meth:`Transport.secure_sum`, which drops refusing or silent owners and re-forms the ring), and
the published history.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from privfed.common.boosting.coordinator import CoordinatorSteps, concat_releases
from privfed.common.boosting.loop import (
    NOT_EVALUATED,
    Evaluation,
    RoundRecord,
    plan_rounds,
    run_rounds,
    share_group_size,
)
from privfed.common.boosting.owner import Release
from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.releases import ReleasePlan
from privfed.common.boosting.wire import at_round, config_to_dict, empty_history, with_round
from privfed.common.errors import ConfigError, RoundFailed, TooFewParties
from privfed.common.learners.samme import BoostedModel
from privfed.common.secagg import secure_sum_for
from privfed.common.secagg.masking import MIN_MEMBERS
from privfed.common.tasks import BoostEvaluateTask, BoostShareTask, Result, share_reply_type
from privfed.proto import serde
from privfed.server.journal import Journal, fingerprint
from privfed.server.strategies.base import Transport, new_tasks, refusal_codes
from privfed.server.strategies.result import BoostDecision, PrivacySplit, RoundReport, StrategyResult, SumRecord

log = logging.getLogger("privfed.coordinator")


@dataclass
class BoostingStrategy:
    """Federated SAMME over a transport (module docstring).

    Parameters
    ----------
    params : BoostingParams
        The run's public configuration.
    rng : numpy.random.Generator
        Draws the share and evaluation groups (public).
    ring_timeout : float or None
        Seconds per secure-sum attempt (default :func:`~privfed.common.secagg.transitions.attempt_timeout`).
    secure_sum : {"ring", "secagg", "auto"} or None
        The evaluations' secure sum (``--secure-sum``); None: the transport's default.
    journal : Journal or None
        Checkpoints every round there (:mod:`privfed.server.journal`); with ``resume``, a job the
        journal holds is continued from its last checkpoint.
    seed : int
        The group sampler's seed: part of the job's fingerprint in the journal.
    """

    params: BoostingParams
    rng: np.random.Generator
    ring_timeout: float | None = None
    secure_sum: str | None = None
    journal: Journal | None = None
    resume: bool = False
    seed: int = 0
    coordinator: CoordinatorSteps = field(init=False, repr=False)  # the releases and the round's rules

    def __post_init__(self) -> None:
        self.coordinator = CoordinatorSteps(ReleasePlan(self.params))

    def privacy(self) -> PrivacySplit:
        """Per owner: its share release(s) and its evaluation release(s), as the tasks debit them, and
        the evaluation noise. ε in all is the run's ε: the split gives each owner share and evaluation
        parts that add up to it (or, ``budget_split="owners"``, one of them at the whole ε)."""
        fb, plan = self.params, self.coordinator.plan
        config = config_to_dict(fb, "-")
        evaluations = fb.n_rounds if fb.eval_groups == "all" else 1
        return PrivacySplit.from_entries(
            [
                (BoostShareTask(config, empty_history()).ledger_entries(), fb.shares_per_owner),
                ([(fb.eval_round_epsilon, 0.0, "boost-eval")], evaluations),  # BoostEvaluateTask.ledger_entries
            ],
            epsilon=fb.epsilon,
            delta=0.0,
            parameters={
                "budget_split": fb.budget_split,
                "share_epsilon": fb.share_epsilon,
                "eval_fraction": fb.eval_fraction,
                "eval_epsilon": fb.eval_epsilon,
                "eval_groups": fb.eval_groups,
                "eval_mechanism": str(fb.eval_mechanism),
                "eval_noise_scale": plan.eval_noise_scale,
                "weight_bound": fb.weight_bound,
                "eval_row_bound": fb.eval_row_bound,
                "max_owner_rows": fb.max_owner_rows,
                "contribution_bound": plan.contribution_bound,
                "labels": fb.labels if fb.base == "ncc" else "in perturbed tables",
            },
        )

    def check_feasible(self, n_owners: int) -> None:
        """Raise :class:`ConfigError`, in the flags' terms, unless ``n_owners`` owners can run this job:
        every round's share group fresh (rounds × group size ≤ owners) and every round's evaluation
        secure sum large enough for its protocol. Called before any owner is asked for anything
        (issue 23, item 2). The fix it names is the most rounds that would run (walkthrough 6, W6-13: it
        suggested a number its own sum did not give)."""
        fb = self.params
        problem = self._problem(fb, n_owners)
        if problem is None:
            return

        def with_rounds(r: int) -> str | None:
            return self._problem(replace(fb, n_rounds=r), n_owners)

        fixes = []
        most = _most_rounds(fb.n_rounds - 1, with_rounds)
        if most is not None:
            fixes.append(f"--rounds {most} or fewer")
            beyond = with_rounds(most + 1)
            summing = "each round's error"  # the evaluators' limit, not the share groups'
            if beyond is not None and beyond.startswith(summing) != problem.startswith(summing):  # it binds first
                fixes[0] += f" ({most + 1} rounds: {beyond})"
        if fb.group_size and n_owners // fb.n_rounds:
            fixes.append(f"--group-size {n_owners // fb.n_rounds} or smaller")
        if fb.share_groups != "all":
            fixes.append("--share-groups all")
        raise ConfigError(
            f"--task bdt cannot run with {n_owners} owners: {problem}; use {''.join(f + ', ' for f in fixes)}"
            f"{'or ' if fixes else ''}more owners"
        )

    def _problem(self, fb: BoostingParams, n_owners: int) -> str | None:
        """Why ``n_owners`` owners cannot run boosting by ``fb`` (None: they can)."""
        try:  # a throwaway generator: the job's own groups are drawn by run()
            _, evaluators = plan_rounds(fb, n_owners, np.random.Generator(np.random.PCG64(0)))
        except ConfigError:
            group = share_group_size(fb, n_owners)
            return (
                f"each of its {fb.n_rounds} rounds asks a fresh group of {group} owner(s) to share (an owner shares "
                f"once), {fb.n_rounds * group} owners in all"
            )
        smallest = min((len(e) for e in evaluators), default=0)
        need = MIN_MEMBERS if secure_sum_for(self.secure_sum or "auto", smallest) == "secagg" else 2
        if smallest < need:
            return (
                f"each round's error is summed securely over at least {need} owners, but {n_owners} owners over "
                f"{fb.n_rounds} rounds leave {smallest} to evaluate in a round"
            )
        return None

    def run(self, owner_ids: list[str], transport: Transport) -> StrategyResult[BoostedModel]:
        try:
            return self._run(owner_ids, transport)
        finally:  # closed when the job ends, not when the strategy is collected (a long-lived service)
            if self.journal is not None:
                self.journal.close()

    def _run(self, owner_ids: list[str], transport: Transport) -> StrategyResult[BoostedModel]:
        groups, evaluators = plan_rounds(self.params, len(owner_ids), self.rng)
        evaluator_ids = [tuple(owner_ids[i] for i in e) for e in evaluators]
        run_id = f"boost-{secrets.token_hex(4)}"
        if self.journal is not None:
            public = serde.boost_config_to_proto(config_to_dict(self.params, "-")).SerializeToString()
            run_id = self.journal.begin(
                fingerprint=fingerprint(public, str(self.seed)),
                owner_ids=list(owner_ids),
                run_id=run_id,
                resume=self.resume,
            )
        steps = _FederationSteps(self, list(owner_ids), transport, run_id, evaluator_ids)
        transport.prepare_secure_sums(  # the evaluation groups are public: key them now
            evaluator_ids,
            max_abs=self.coordinator.plan.contribution_bound,
            timeout=self.ring_timeout,
            protocol=self.secure_sum,
        )
        checkpoints = None if self.journal is None else _Checkpoints(self.journal, steps)
        model = run_rounds(self.coordinator, steps, groups, evaluators, checkpoints).model
        if self.journal is not None:
            self.journal.finish()
        return StrategyResult(
            model,
            self.privacy(),
            tuple(steps.rounds),
            dropped=tuple(steps.dropped),
            rejected=steps.rejected,
            refused=steps.refused,
        )


@dataclass
class _Progress:
    """What a round has done so far, until the coordinator decides it (:meth:`_FederationSteps.decided`)."""

    released: int | None = None
    seconds: float | None = None
    secure_sum: SumRecord | None = None
    from_journal: list[str] = field(default_factory=list)  # its steps taken from the journal


class _Checkpoints:
    """The :class:`~privfed.common.boosting.loop.RoundJournal` of a journaled run: the strategy's journal, each
    checkpoint kept with its step's account (:meth:`_FederationSteps.account`) and, when a resumed run takes the
    step from the journal, that account booked again (:meth:`_FederationSteps.replay`): the report of a resumed
    job counts the owners of the rounds it did not ask again (a walkthrough's said 64 answered of 80)."""

    def __init__(self, journal: Journal, steps: _FederationSteps) -> None:
        self.journal, self.steps = journal, steps

    def learner(self, round_no: int) -> Any | None:
        learner = self.journal.learner(round_no)
        if learner is not None:
            self.steps.replay(round_no, "learner", self.journal.account(round_no, "learner"))
        return learner

    def record_learner(self, round_no: int, learner: Any) -> None:
        self.journal.record_learner(round_no, learner, self.steps.account(round_no, "learner"))

    def evaluation(self, round_no: int) -> Evaluation | None:
        evaluation = self.journal.evaluation(round_no)
        if evaluation is not None:
            self.steps.replay(round_no, "sum", self.journal.account(round_no, "sum"))
        return evaluation

    def record_evaluation(self, round_no: int, evaluation: Evaluation) -> None:
        self.journal.record_evaluation(round_no, evaluation, self.steps.account(round_no, "sum"))


class _FederationSteps:
    """The owner steps of :func:`run_rounds` as tasks over a transport; the public history grows
    with every kept round and goes with every task (``privfed.common.boosting.wire``). Keeps the
    run's record: its rounds, drops, rejections and refusals."""

    def __init__(
        self,
        strategy: BoostingStrategy,
        owner_ids: list[str],
        transport: Transport,
        run_id: str,
        evaluators: list[tuple[str, ...]],
    ):
        self.strategy, self.owner_ids, self.transport, self.run_id = strategy, owner_ids, transport, run_id
        self.evaluators = evaluators
        self.config = config_to_dict(strategy.params, run_id)
        self.history = empty_history()
        self.rounds: list[RoundReport] = []
        self.dropped: list[str] = []  # owners removed from a secure sum (silent or refusing)
        self.rejected: dict[str, str] = {}  # owner -> why its share was discarded
        self.refused: dict[str, str] = {}  # owner -> refusal code
        self._progress: dict[int, _Progress] = {}
        self._share_codes: dict[int, tuple[dict[str, str], dict[str, str]]] = {}  # round -> its refused, rejected

    def release(self, round_no: int, group: np.ndarray) -> Release:
        """The group's shares, each checked (the job's book) and typed by the run's encoding as its
        node's answers come, while the other owners still compute (issue 27: at 10^5 owners the
        checks and decoding were ~1.5 s per round with both nodes idle, after the last answer)."""
        coordinator, t0 = self.strategy.coordinator, time.perf_counter()
        spec = BoostShareTask(self.config, at_round(self.history, round_no))
        reply_type = share_reply_type(coordinator.plan)
        shares: list[Release] = []
        replied: set[str] = set()
        refused, rejected = self._share_codes.setdefault(round_no, ({}, {}))

        def fold(results: list[Result]) -> None:
            codes = refusal_codes(results)
            refused.update(codes)
            self.refused.update(codes)
            for r in results:
                if not isinstance(r.payload, reply_type) or r.owner_id in replied:
                    continue
                replied.add(r.owner_id)
                try:  # typed by the run's config and checked by its contract; one that fails is dropped alone
                    shares.append(r.payload.release(coordinator))
                except ConfigError as exc:
                    log.warning(
                        "round %d: a share that does not fit the run's encoding was dropped: %s", round_no + 1, exc
                    )
                    rejected[r.owner_id] = self.rejected[r.owner_id] = f"share_encoding: {exc}"

        step = f"shares of round {round_no + 1} of {self.strategy.params.n_rounds}"
        self.transport.fold_tasks(new_tasks([self.owner_ids[i] for i in group], self.run_id, spec, step=step), fold)
        if not replied:
            raise RoundFailed(f"round {round_no + 1}: no owner of the group released a share")
        progress = self._progress.setdefault(round_no, _Progress())
        progress.released, progress.seconds = len(shares), time.perf_counter() - t0
        if not shares:
            raise RoundFailed(f"round {round_no + 1}: no owner of the group released a well-formed share")
        return concat_releases(shares)

    def evaluate(self, round_no: int, evaluators: np.ndarray, learner: Any) -> Evaluation:
        strategy = self.strategy
        gone = set(self.dropped) | self.transport.silent_owners()
        ring = [o for o in self.evaluators[round_no] if o not in gone]
        if len(ring) < 2:
            return self._not_evaluated(round_no, len(ring))
        sent = at_round(self.history, round_no)
        try:
            outcome = self.transport.secure_sum(
                ring,
                lambda ring_spec: BoostEvaluateTask(self.config, sent, learner, ring_spec),
                max_abs=strategy.coordinator.plan.contribution_bound,  # public: row bound x max rows + noise headroom
                round_id=f"ring{round_no + 1}",
                timeout=strategy.ring_timeout,
                protocol=strategy.secure_sum,
            )
        except TooFewParties as exc:  # its evaluators fell silent or refused while it ran
            self.dropped += exc.dropped
            return self._not_evaluated(round_no, len(ring) - len(exc.dropped))
        self._summed(round_no, outcome.record)
        return Evaluation(float(outcome.totals[0]), float(outcome.totals[1]), len(outcome.record.summed))

    def _not_evaluated(self, round_no: int, left: int) -> Evaluation:
        """A round fewer than two of whose evaluators are left (walkthrough 6, W6-4: a node that left took the others,
        and the job failed there after every owner had paid for the rounds before): a sum of one is that owner's
        release, so none is made; the round's learner is skipped and the run goes on."""
        log.warning(
            "round %d: %d of its %d evaluator(s) left (the others' nodes left, fell silent or refused): its learner "
            "is skipped, unevaluated",
            round_no + 1,
            max(left, 0),
            len(self.evaluators[round_no]),
        )
        return NOT_EVALUATED

    def _summed(self, round_no: int, record: SumRecord) -> None:
        """Round ``round_no``'s secure sum ended as ``record`` (now, or in the run a resumed one continues)."""
        self.dropped += record.dropped
        self.refused.update(record.refused)
        self._progress.setdefault(round_no, _Progress()).secure_sum = record

    def account(self, round_no: int, step: str) -> dict[str, Any]:
        """What round ``round_no``'s ``step`` (``"learner"``: its shares; ``"sum"``: its evaluation) did, as JSON, for
        its checkpoint in the journal: the round's record of it, and what the job's book booked of its owners."""
        progress = self._progress.get(round_no, _Progress())
        if step == "learner":
            refused, rejected = self._share_codes.pop(round_no, ({}, {}))
            mine: dict[str, Any] = {"released": progress.released, "refused": refused, "rejected": rejected}
        else:
            mine = {"secure_sum": None if progress.secure_sum is None else progress.secure_sum.to_json()}
        return mine | {"book": self.transport.account()}

    def replay(self, round_no: int, step: str, account: dict[str, Any]) -> None:
        """Round ``round_no``'s ``step`` is taken from the journal: what it did (:meth:`account`) counts as if it
        had run now (empty ``account``, a journal of older code: nothing to count)."""
        progress = self._progress.setdefault(round_no, _Progress())
        progress.from_journal.append("learner" if step == "learner" else "sums")
        if step == "learner":
            progress.released = account.get("released")
            self.refused.update(account.get("refused", {}))
            self.rejected.update(account.get("rejected", {}))
        elif account.get("secure_sum") is not None:
            self._summed(round_no, SumRecord.from_json(account["secure_sum"]))
        self.transport.replay(account.get("book", {}))

    def decided(self, record: RoundRecord) -> None:
        """The round's report: what it ran, what it took from the journal, what was decided."""
        progress = self._progress.pop(record.round, _Progress())
        from_journal = " and ".join(progress.from_journal) or None
        step = {"stop": "discard_and_stop"}.get(record.step, record.step)
        self.rounds.append(
            RoundReport(
                round=record.round + 1,
                phase="share",
                asked=record.group_size,
                released=progress.released,
                seconds=progress.seconds,
                evaluators=self.evaluators[record.round],
                secure_sum=progress.secure_sum,
                decision=BoostDecision(record.err_total, record.weight_total, record.alpha, step),
                from_journal=from_journal,
            )
        )
        self.transport.progressed(record.round + 1, len(self.evaluators))  # a round the journal held counts too

    def keep(self, round_no: int, learner: Any, alpha: float, err_total: float, weight_total: float) -> None:
        self.history = with_round(self.history, learner, alpha, err_total, weight_total)


def _most_rounds(upper: int, problem: Callable[[int], str | None]) -> int | None:
    """The largest number of rounds in 1..``upper`` for which ``problem`` is None (None: not even one), by
    bisection: a plan that runs with some rounds runs with fewer."""
    lo, hi = 0, upper  # 0 stands for none
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if problem(mid) is None:
            lo = mid
        else:
            hi = mid - 1
    return lo or None
