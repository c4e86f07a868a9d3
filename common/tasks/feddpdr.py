"""Task kinds of FedDPDR-DPML (seed 004 Alg. 1): the DP-PCA subspace with a DP row count, and the
phase-2 classifier on projected rows.

What one owner can move (the contracts): phase 1, an orthonormal (d, k) basis (a projector of norm
1 whatever it holds) weighted by a count no larger than ``max_rows`` plus the count noise's public
tail (:func:`~privfed.common.tasks.contract.count_limit`); phase 2, the task's shape, finite (its
noise has no public range yet).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.feddpdr.choices import ROW_SCALINGS, SVM_MODELS, ledger_entries
from privfed.common.tasks.base import Kind, LedgerEntries, Payload
from privfed.common.tasks.contract import (
    ORTHONORMAL_TOLERANCE,
    ContractViolation,
    PublicLimits,
    check_matrix,
    count_limit,
    reply_of,
)
from privfed.common.validation import check_choice, check_int, check_positive


@dataclass(frozen=True)
class PcaShareTask:
    """Release a DP-PCA subspace (seed 004 Alg. 2; SPEC §7) and a DP row count.

    The count ``n_i`` weights the owner's subspace (and later its SVM) in the aggregate
    ``n_i / sum n``. It is released by the two-sided geometric mechanism at ``count_epsilon``
    (sensitivity 1 under add/remove of a row), a separate ledger entry next to the DP-PCA
    ``(epsilon, delta)``; the coordinator reuses the noisy count for the SVM phase, so it is
    released once per FedDPDR run (issue 9, contract 7). ``count_epsilon = inf`` releases the
    exact count and needs an infinite budget.
    """

    epsilon: float
    delta: float
    k: int
    bounds: Bounds
    count_epsilon: float
    scaling: str  # public row scaling into the unit ball (privfed.common.feddpdr.choices.ROW_SCALINGS)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "count_epsilon", check_positive(self.count_epsilon, name="count_epsilon", allow_inf=True)
        )
        check_choice(self.scaling, name="scaling", allowed=ROW_SCALINGS)

    def ledger_entries(self) -> LedgerEntries:
        return [(self.epsilon, self.delta, "dp-pca"), (self.count_epsilon, 0.0, "dp-count")]


@dataclass(frozen=True)
class PcaShareReply:
    subspace: np.ndarray  # (d, k)
    noisy_count: int  # the row count through the geometric mechanism (may be <= 0)


def check_pca_reply(spec: PcaShareTask, payload: Payload, limits: PublicLimits) -> None:
    reply = reply_of(payload, PcaShareReply)
    U = check_matrix(reply.subspace, "subspace", (spec.bounds.d, spec.k))
    gap = float(np.max(np.abs(U.T @ U - np.eye(spec.k))))
    if gap > ORTHONORMAL_TOLERANCE:
        raise ContractViolation("out_of_range", f"subspace columns are not orthonormal (|UᵀU - I| = {gap:.3g})")
    top = count_limit(limits.max_rows, spec.count_epsilon)
    if not -top <= int(reply.noisy_count) <= top:
        raise ContractViolation(
            "out_of_range", f"row count {int(reply.noisy_count)} beyond ±{top} (the public row bound and count noise)"
        )


PCA_SHARE = Kind("pca_share", PcaShareTask, (PcaShareReply,), check_pca_reply, contribution=True, tasks=("feddpdr",))


@dataclass(frozen=True, eq=False)
class SvmShareTask:
    """Release FedDPDR-DPML's phase-2 classifier on rows projected onto ``subspace`` (seed 004 Alg. 3).

    ``model`` (:data:`privfed.common.feddpdr.choices.SVM_MODELS`, no default: the task names it)
    says what is released and debited (:func:`privfed.common.feddpdr.choices.ledger_entries`): one
    ``(epsilon, delta)`` entry for the one-budget models (``centroid``, ``mc-huber``, ``softmax``), one
    pure-epsilon entry per one-vs-rest problem for ``ovr-huber`` (``delta`` must be 0). ``lam`` is the
    seed's regulariser of ``ovr-huber``; the one-budget objective-perturbation models take theirs from
    epsilon (:func:`privfed.common.feddpdr.multiclass.privacy_split`). ``scaling`` is the public row scaling.
    ``rows`` is ``ovr-huber``'s public row count, where the seed's objective has the owner's own
    (:func:`privfed.common.mechanisms.objective.privacy_adjustment`): the coordinator sends each owner its DP count
    from phase 1 (1 with a public basis, which releases none). Any count >= 1 keeps the release ε-DP; one near the
    owner's keeps the seed's regularisation. The other models ignore it.
    """

    epsilon: float
    lam: float
    n_classes: int
    bounds: Bounds
    subspace: np.ndarray | None  # (d, k) global subspace, None = no reduction (DPML)
    delta: float
    model: str
    scaling: str
    rows: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", check_int(self.rows, name="rows", minimum=1))
        check_choice(self.model, name="model", allowed=SVM_MODELS)
        check_choice(self.scaling, name="scaling", allowed=ROW_SCALINGS)

    def ledger_entries(self) -> LedgerEntries:
        return ledger_entries(self.model, self.epsilon, self.delta, self.n_classes)


@dataclass(frozen=True)
class SvmShareReply:
    coef: np.ndarray  # (K, k + 1): DP coefficients, or DP class sums for model "centroid" (the coordinator sums them)


def check_svm_reply(spec: SvmShareTask, payload: Payload, limits: PublicLimits) -> None:
    reply = reply_of(payload, SvmShareReply)
    k = spec.bounds.d if spec.subspace is None else int(np.asarray(spec.subspace).shape[1])
    check_matrix(reply.coef, "classifier release", (spec.n_classes, k + 1))


SVM_SHARE = Kind("svm_share", SvmShareTask, (SvmShareReply,), check_svm_reply, contribution=True, tasks=("feddpdr",))
