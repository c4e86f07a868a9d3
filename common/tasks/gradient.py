"""Task kind of LDP gradient descent for logistic regression (issue 22 item 4; Wang et al. ICDE 2019 §V).

The coordinator sends the current public iterate θ_t to one group of owners (each owner is in one group
per run); each answers with its mean logistic-loss gradient at θ_t, perturbed once by an ε-LDP mechanism
on ``[-1, 1]^p`` (:func:`privfed.common.learners.ldp_gd.gradient_shares`). An owner releases at most one
gradient per run: its ledger entry's release id is the run's (:func:`gradient_release_id`, the task's
round id), and a ledger holds a release id once per owner, so a second request in the same run is
refused (``already_released``) and a request in a new run is debited again.

What one owner can move (the contract): one report of the task's width, each value a possible output of
the task's mechanism, so the group's mean moves by at most ``2 * max_abs_output / r`` per coordinate
for ``r`` reports, as one honest owner's extreme draw could.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.learners.ldp_gd import GD_MECHANISMS, gd_mechanism, n_outputs
from privfed.common.tasks.base import Kind, LedgerEntries, Payload
from privfed.common.tasks.contract import PublicLimits, check_matrix, check_reports, reply_of
from privfed.common.validation import check_choice

#: Ledger purpose of a gradient report.
GRADIENT_PURPOSE = "lr-gradient"


def gradient_release_id(round_id: str) -> str:
    """The ledger release id of an owner's one gradient in the run ``round_id`` (module docstring)."""
    return f"{GRADIENT_PURPOSE}:{round_id}"


@dataclass(frozen=True, eq=False)
class LrGradientTask:
    """Release one perturbed logistic-loss gradient at the public iterate ``theta`` (module docstring).

    ``theta`` is (K', d + 1) in the unit space of ``bounds`` (K' = 1 for two classes, K otherwise), inside
    the public box ``|θ_j| <= param_bound``; ``mechanism`` one of :data:`~privfed.common.learners.ldp_gd.GD_MECHANISMS`.
    """

    mechanism: str
    epsilon: float
    theta: np.ndarray
    param_bound: float
    n_classes: int
    bounds: Bounds

    def __post_init__(self) -> None:
        check_choice(self.mechanism, name="mechanism", allowed=GD_MECHANISMS)

    @property
    def p(self) -> int:
        """Coordinates of a report: ``K'(d + 1)``."""
        return n_outputs(self.n_classes) * (self.bounds.d + 1)

    def ledger_entries(self) -> LedgerEntries:
        return [(self.epsilon, 0.0, GRADIENT_PURPOSE)]


@dataclass(frozen=True)
class LrGradientReply:
    reports: np.ndarray  # (1, p): the perturbed gradient, flattened (K', d + 1)


def check_gradient_reply(spec: LrGradientTask, payload: Payload, limits: PublicLimits) -> None:
    reply = reply_of(payload, LrGradientReply)
    reports = check_matrix(reply.reports, "gradient", (1, spec.p))
    check_reports(reports, gd_mechanism(spec.mechanism, epsilon=spec.epsilon, p=spec.p))


LR_GRADIENT = Kind(
    "lr_gradient", LrGradientTask, (LrGradientReply,), check_gradient_reply, contribution=True, tasks=("lr",)
)
