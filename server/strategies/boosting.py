"""Coordinator side of LDP boosting over the federation (seed 002 Alg. 2; SPEC §5, §6, §11).

Per round t: a fresh group of owners (never reused: T × group ≤ N, checked) releases perturbed
shares with their SAMME weights; the coordinator fits the base learner from them; round t's
evaluation group (:func:`~privfed.common.boosting.federated.evaluation_groups`) then puts its noisy,
debited ``(err_sum, w_sum)`` releases into a ring secure sum, so the coordinator learns only the
sums E and W of noisy values; it computes α (SAMME) and publishes (learner, α, E, W) in the next
tasks, from which owners update their weights locally.

Nothing here uses an owner's row count (contract 2): the ring's fixed-point range is the public
``FederatedBoosting.contribution_bound`` (row bound times the public ``max_owner_rows`` plus 40
Laplace scales; every owner clips its noisy pair to it before encoding, which is post-processing). Each ring is opened at the
dispatcher for exactly its members and closed afterwards (contract 5). An owner that refuses
its evaluation (budget, invalid task, already released) or stays silent (node past the node
timeout) is removed and the ring re-run without it under a fresh session; the members that
already released reuse their cached noisy pair, so a re-run costs them nothing. The report
records the ε split, the noise scale and the drops.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field

import numpy as np

from privfed.common.boosting.federated import FederatedBoosting, evaluation_groups, sample_groups
from privfed.common.boosting.wire import at_round, config_to_dict, empty_history, with_round
from privfed.common.errors import RoundFailed
from privfed.common.learners.ncc import NccShare
from privfed.common.learners.samme import BoostedModel, SammeStep
from privfed.common.messages import (
    BoostEvaluateTask,
    BoostShareReply,
    BoostShareTask,
    Refusal,
    RingSpec,
    RingTotal,
    Task,
)
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.ring import new_session_id

log = logging.getLogger("privfed.coordinator")

MAX_RING_ATTEMPTS = 5


def ring_peers_of(ring: tuple, k: int) -> list[str]:
    """:func:`ring_peers` by position (O(1) for members; the leader needs everyone)."""
    if k == 0:
        return list(ring[1:])
    return list(dict.fromkeys((ring[k - 1], ring[(k + 1) % len(ring)], ring[0])))


def _tasks(owner_ids, round_id, spec_for) -> list[Task]:
    return [Task(f"{round_id}-{secrets.token_hex(6)}", o, round_id, spec_for(o)) for o in owner_ids]


@dataclass
class BoostingStrategy:
    booster: FederatedBoosting
    rng: np.random.Generator
    ring_timeout: float | None = None
    rounds: list = field(default_factory=list)  # per round: what the report shows
    dropped: list = field(default_factory=list)  # owners removed from a ring (silent or refusing)
    refused: dict = field(default_factory=dict)  # owner -> refusal code of its evaluation
    evaluators: list = field(default_factory=list)  # per round: the owner ids asked to evaluate

    def privacy(self) -> dict:
        """The run's per-owner ε split and the evaluation noise, for the report."""
        fb = self.booster
        return {
            "epsilon": fb.epsilon,
            "share_epsilon": fb.share_epsilon,
            "eval_fraction": fb.eval_fraction,
            "eval_epsilon": fb.eval_epsilon,
            "eval_groups": fb.eval_groups,
            "eval_round_epsilon": fb.eval_round_epsilon,
            "eval_noise_scale": fb.eval_noise_scale,
            "weight_bound": fb.weight_bound,
            "eval_row_bound": fb.eval_row_bound,
            "max_owner_rows": fb.max_owner_rows,
            "contribution_bound": fb.contribution_bound,
            "labels": fb.labels if fb.base == "ncc" else "in perturbed tables",
        }

    def _releases(self, replies: list[BoostShareReply]):
        if self.booster.base == "ncc":
            return NccShare.concat([NccShare(reports=r.reports, labels=r.labels) for r in replies])
        return np.concatenate([r.reports for r in replies])

    def _ring_sum(self, ring, learner, config, history, transport, round_no) -> tuple[float, float]:
        """E and W (sums of noisy releases) over every owner still in the ring, re-forming it after a drop."""
        max_abs = self.booster.contribution_bound  # public: row bound x max rows + noise headroom, never row counts
        certificates = transport.certificates()
        timeout = self.ring_timeout or 30.0 + 0.01 * len(ring)
        learner_dict = learner.to_dict()
        for attempt in range(1, MAX_RING_ATTEMPTS + 1):
            if len(ring) < 2:
                raise RoundFailed(f"round {round_no}: fewer than 2 owners left to evaluate; nothing to sum")
            session = new_session_id()
            fp = FixedPoint.choose(n_parties=len(ring), max_abs=max_abs)
            ring_tuple, sent_to = tuple(ring), set()
            index = {o: i for i, o in enumerate(ring)}

            def spec(owner_id):
                # The ring order and the certificates go once per node and session (the node
                # caches them): per owner they would cost O(N) bytes each, O(N^2) a round.
                node = transport.peer_key(owner_id).node_id
                first = node not in sent_to
                sent_to.add(node)
                peers = tuple(transport.peer_key(p) for p in ring_peers_of(ring_tuple, index[owner_id]))
                return BoostEvaluateTask(
                    config=config,
                    history=history,
                    learner=learner_dict,
                    ring=RingSpec(
                        session,
                        ring_tuple if first else (),
                        fp.frac_bits,
                        fp.n_parties,
                        max_abs,
                        peers,
                        certificates if first else {},
                    ),
                )

            t0 = time.perf_counter()
            transport.open_ring(session, ring_tuple)
            try:
                # Members first: each answers at once with a join or a refusal, and nothing moves
                # until the leader starts, so a refusing member is dropped before any hop is sent.
                results = transport(_tasks(ring[1:], f"ring{round_no}", spec), timeout=timeout)
                refusing = {r.owner_id: r.payload.code for r in results if isinstance(r.payload, Refusal)}
                joined = {r.owner_id for r in results} - set(refusing)
                if not refusing and joined == set(ring[1:]):
                    results = transport(_tasks(ring[:1], f"ring{round_no}", spec), timeout=timeout)
                    refusing = {r.owner_id: r.payload.code for r in results if isinstance(r.payload, Refusal)}
                    joined.add(ring[0])  # the leader answers only with the total, or a refusal
            finally:
                transport.close_ring(session)
            totals = [
                r.payload for r in results if isinstance(r.payload, RingTotal) and r.payload.session_id == session
            ]
            if totals:
                self.rounds[-1].update(ring_size=len(ring), ring_s=time.perf_counter() - t0, ring_attempts=attempt)
                return float(totals[0].values[0]), float(totals[0].values[1])
            self.refused.update(refusing)
            gone = sorted(
                ((set(ring) - joined) & transport.silent_owners())
                | set(refusing)
                | (set(ring[1:]) - joined - set(refusing))
            )
            if not gone:
                gone = sorted(set(ring) & transport.silent_owners())
            if not gone:
                raise RoundFailed(
                    f"ring {session} did not close within {timeout:.0f} s and no party is known to be gone"
                )
            log.warning(
                "ring %s: %d party(ies) dropped (%d refused; %s...); re-running without them",
                session,
                len(gone),
                len(refusing),
                gone[:3],
            )
            self.dropped += gone
            ring = [o for o in ring if o not in set(gone)]
        raise RoundFailed(f"the ring secure sum failed {MAX_RING_ATTEMPTS} times")

    def run(self, owner_ids, transport):
        fb = self.booster
        n = len(owner_ids)
        group_size = fb.group_size or n // fb.n_rounds
        groups = sample_groups(n, fb.n_rounds, group_size, self.rng)
        evaluators = evaluation_groups(groups, n, fb.eval_groups, self.rng)
        self.evaluators = [[owner_ids[i] for i in e] for e in evaluators]
        run_id = f"boost-{secrets.token_hex(4)}"
        config = config_to_dict(fb, run_id)
        history = empty_history()
        learners, alphas, published = [], [], []
        for t, group in enumerate(groups, start=1):
            t0 = time.perf_counter()
            sent = at_round(history, t - 1)
            replies = [
                r.payload
                for r in transport(
                    _tasks([owner_ids[i] for i in group], run_id, lambda _: BoostShareTask(config, sent))
                )
                if isinstance(r.payload, BoostShareReply)
            ]
            if not replies:
                raise RoundFailed(f"round {t}: no owner of the group released a share")
            learner = fb.coordinator_select(self._releases(replies))
            self.rounds.append(
                {
                    "round": t,
                    "group": len(group),
                    "released": len(replies),
                    "share_s": time.perf_counter() - t0,
                    "share_epsilon": fb.share_epsilon,
                    "eval_epsilon": fb.eval_round_epsilon,
                    "eval_noise_scale": fb.eval_noise_scale,
                }
            )
            gone = set(self.dropped) | transport.silent_owners()
            ring = [owner_ids[i] for i in evaluators[t - 1] if owner_ids[i] not in gone]
            err, wsum = self._ring_sum(ring, learner, config, sent, transport, t)
            err = fb.floor_error_total(err, self.rounds[-1]["ring_size"])
            decision = fb.coordinator_decide(err, wsum, n_kept=len(alphas))
            published.append((self.rounds[-1]["ring_size"], err, wsum))
            self.rounds[-1].update(
                err_total=err,
                weight_total=wsum,
                error=err / wsum if wsum > 0 else None,
                alpha=None if decision is None else decision.alpha,
                step="skip" if decision is None else decision.step.value,
            )
            if decision is None:
                continue
            if decision.step is SammeStep.DISCARD_AND_STOP:
                break
            learners.append(learner)
            alphas.append(decision.alpha)
            history = with_round(history, learner, decision.alpha, err, wsum)
            if decision.step is SammeStep.KEEP_AND_STOP:
                break
        if not learners:
            raise RoundFailed(f"nothing to boost: {fb.nothing_to_boost(published)}")
        return BoostedModel(learners, alphas, np.arange(fb.n_classes))
