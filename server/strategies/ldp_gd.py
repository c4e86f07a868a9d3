"""Logistic regression by LDP gradient descent over the federation (issue 22 item 4; Wang et al. ICDE 2019 §V).

The coordinator's side of :mod:`privfed.common.learners.ldp_gd`: the owners are split into T disjoint
public groups (:meth:`LdpGradientDescent.plan`, from the job's public seed), iteration t sends the public
iterate θ_t to group t as :class:`~privfed.common.tasks.LrGradientTask` s, and the perturbed gradients
that come back are folded by :meth:`LdpGradientDescent.step` (mean, step, clip to the public box); the
served model is the Polyak average of the iterates (:meth:`LdpGradientDescent.model`), a
:class:`~privfed.common.learners.logistic.LinearModel` like ``--solver local``'s. The loop is
:meth:`LdpGradientDescent.descend`, the one the in-process :meth:`LdpGradientDescent.fit` runs.

Every task of a run carries the run's id as its round id: an owner's ledger holds one gradient per run
(:func:`~privfed.common.tasks.gradient_release_id`), so each owner is asked once and spends ε once.
Owners on silent nodes (and owners the job rejected) are not asked; they and the owners that never
answer are the result's ``dropped``. A group none of whose owners answers leaves θ where it was.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.learners.ldp_gd import GD_MECHANISMS, GD_PARAM_BOUND, LdpGradientDescent
from privfed.common.learners.logistic import LinearModel
from privfed.common.tasks import LrGradientReply, LrGradientTask
from privfed.common.validation import check_choice
from privfed.server.strategies.base import Transport, new_tasks, refusal_codes, shares_of
from privfed.server.strategies.result import Parameter, PrivacySplit, RoundReport, StrategyResult


@dataclass
class LdpGdStrategy:
    """``--task lr --solver gd`` (module docstring). ``seed`` draws the public groups."""

    mechanism: str
    epsilon: float
    n_classes: int
    bounds: Bounds
    param_bound: float = GD_PARAM_BOUND
    seed: int = 0
    gd: LdpGradientDescent = field(init=False)

    def __post_init__(self) -> None:
        check_choice(self.mechanism, name="mechanism", allowed=GD_MECHANISMS)
        self.gd = LdpGradientDescent(
            epsilon=self.epsilon, n_classes=self.n_classes, bounds=self.bounds, mechanism=self.mechanism,
            param_bound=self.param_bound,
        )  # fmt: skip

    def spec(self, theta: np.ndarray) -> LrGradientTask:
        return LrGradientTask(
            mechanism=self.mechanism, epsilon=self.epsilon, theta=theta, param_bound=self.param_bound,
            n_classes=self.n_classes, bounds=self.bounds,
        )  # fmt: skip

    def privacy(self) -> PrivacySplit:
        """One gradient per owner (each owner is in one group)."""
        gd = self.gd
        parameters: dict[str, Parameter] = {
            "solver": "gd",
            "learning_rate": gd.step_size(),
            "l2": gd.l2,
            "min_group": gd.min_group,
        }
        return PrivacySplit.from_entries([(self.spec(gd.initial()).ledger_entries(), 1)], parameters=parameters)

    def check_feasible(self, n_owners: int) -> None:
        """Any number of owners: T is at most the owners (one group of one owner at least)."""

    def run(self, owner_ids: list[str], transport: Transport) -> StrategyResult[LinearModel]:
        run_id = f"gd-{secrets.token_hex(6)}"
        rounds: list[RoundReport] = []
        refused: dict[str, str] = {}
        dropped: list[str] = []  # owners of a group that gave no answer (a silent node, a rejected owner)
        planned = self.gd.iterations(len(owner_ids))  # the gradient steps: one per group of descend()'s plan

        def gradients(t: int, theta: np.ndarray, group: np.ndarray) -> np.ndarray:
            t0 = time.perf_counter()
            gone = transport.silent_owners()
            asked = [owner_ids[i] for i in group if owner_ids[i] not in gone]
            results = (
                transport.run_tasks(
                    new_tasks(asked, run_id, self.spec(theta), step=f"gradient step {t + 1} of {planned}")
                )
                if asked
                else []
            )
            refused.update(refusal_codes(results))
            answered = {r.owner_id for r in results}
            dropped.extend(owner_ids[i] for i in group if owner_ids[i] not in answered)
            replies = shares_of(results, LrGradientReply)
            rounds.append(RoundReport(t + 1, "gradient", len(asked), len(replies), time.perf_counter() - t0))
            transport.progressed(t + 1, planned)
            if not replies:
                return np.zeros((0, self.gd.p))
            return np.concatenate([r.reports.reshape(1, -1) for r in replies])

        groups_rng = np.random.Generator(np.random.PCG64(self.seed))  # public: group sampling needs no secrecy
        model = self.gd.descend(len(owner_ids), gradients, groups_rng)
        return StrategyResult(model, self.privacy(), tuple(rounds), dropped=tuple(dropped), refused=refused)
