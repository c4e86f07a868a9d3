"""``labels="rr"`` NCC shares of a public length: the labels' k-RR with one more output, ⊥ ("no row").

Why. An unweighted ``labels="rr"`` share (:func:`~privfed.common.learners.ncc.ncc_share`) is one report per row,
so its length was the owner's private row count ``n``, outside any ledger (DESIGN "What leaves an owner"). The
joint and the weighted (boosted) shares already carry the public ``work_rows(n, max_owner_rows)`` reports with
weight-0 dummies (:func:`~privfed.common.learners.ncc_padding.public_count_rows`); an unweighted share has no weight that
could zero a dummy out, so here the dummy's *label* does.

The mechanism (k-RR: Warner 1965; Kairouz, Bonawitz, Ramage, ICML 2016). The label goes through k-RR over
``K + 1`` values at the same label ε: classes ``0..K-1`` and ⊥ = ``K``. A real row reports its label through it
(the output may be ⊥ or another class); a dummy reports ⊥ as its input, with the bounds' midpoint as its row
(``t = 0``: its PM/Duchi/Laplace report has mean 0). With ``p = e^ε / (e^ε + K)`` and ``q = 1 / (e^ε + K)``,
``p / q = e^ε``: the label report is ε-LDP over all ``K + 1`` inputs, and a dummy is an ε-LDP report of an
input in the mechanism's domain, so ``n`` against ``n + 1`` real rows (a row replaced by a dummy) is covered by
the row's own ε, as for the joint share.

The estimator. For any per-row quantity ``a_i`` (its report, or 1 for counts) let ``S_v`` be the sum over the
reports whose output is ``v``. Label and row reports are drawn independently, so
``E[S_v] = q A + (p - q) A_v``, where ``A_v`` is the sum of ``E[a_i]`` over the inputs ``v`` and ``A`` over all;
``(K + 1) q + (p - q) = 1`` gives ``E[sum_v S_v] = A``, and ``A_v = (S_v - q S) / (p - q)``
(:meth:`~privfed.common.mechanisms.randomized_response.KaryRandomizedResponse.debias_counts` of the ``K + 1``-ary
k-RR, linear) is unbiased for every ``v``. Dropping ⊥ leaves every class's sum and count unbiased for the real
rows alone, whatever the number of dummies and whatever their rows (:func:`debiased_class_totals`). The cost is
variance (:func:`class_total_variance`): ``p - q`` shrinks from ``(e^ε - 1) / (e^ε + K - 1)`` to
``(e^ε - 1) / (e^ε + K)``, and every dummy adds ``q (1 - q) E[a^2] / (p - q)^2`` to each class.

What the reports still tell of ``n``: the debiased ⊥ count estimates the dummies ``m - n`` (the share is shuffled,
:func:`~privfed.common.learners.ncc_padding.shuffled`, so positions tell nothing), to ``± sqrt(count_variance)`` of the
``K + 1``-ary k-RR: ± 2.0 rows for 40 rows in 64 reports at the label ε 3.2 of ``--task ncc --epsilon 8`` (K = 2),
± 5.5 at 1.6. That is a post-processing of ε-LDP reports, within the per-row ε the ledger debits, as the joint
share's weight totals are; the length itself no longer adds the count exactly.

The rule (:func:`pads`, a function of the task's public ``max_owner_rows`` only, the same at the owner, which
pads, and at the coordinator, which debiases: both read it off the task). ``K + 1`` values whenever a dummy may
be needed: every bound but 1. Under ``max_owner_rows == 1`` (one row per owner: the tabular benchmark, the
simulations, ``LdpNearestCentroid``) an owner of one row never needs one, so the ``K``-ary k-RR is kept (no
utility change); an owner of no rows (a shard left empty) still sends one report there, a dummy with a uniform
label (:func:`~privfed.common.learners.ncc_padding.public_count_rows`): its row's mean 0 leaves the class sums unbiased,
its label adds ``1 / K`` expected to each class count. At ε = ∞ there is no k-RR and no padding (the exact,
non-private reference). ``labels="clear"`` is not padded: a dummy's label would have to be told apart in the
clear, which shows which reports are dummies; it is an explicit owner opt-in that releases the labels anyway.
An owner whose rows cannot afford a padded share (spent under an earlier id) answers its public count of dummies
alone, whatever ``n`` (:class:`~privfed.owner.kinds.shares.NccShareKind`; ``n`` midpoint rows of class 0 among
them told ``n`` by their labels, ``tests/adversary/test_ncc_fallback_row_count.py``), and the coordinator refuses a
padded share of a count no honest owner sends (:meth:`~privfed.common.tasks.shares.NccShareTask.check_public_count`).
"""

from __future__ import annotations

import math

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.mechanisms import KaryRandomizedResponse, Mechanism
from privfed.common.validation import check_int, check_positive


def pads(max_owner_rows: int | None) -> bool:
    """Whether an rr share under the public bound ``max_owner_rows`` carries ⊥ dummies (every bound but 1)."""
    return max_owner_rows != 1


def label_response(epsilon: float, n_classes: int, max_owner_rows: int | None) -> KaryRandomizedResponse | None:
    """The labels' k-RR of an rr share at ``epsilon``: over ``K + 1`` values (⊥ = ``K``) when :func:`pads`, else
    ``K``; None at ε = ∞ (labels sent exactly)."""
    n_classes = check_int(n_classes, name="n_classes", minimum=2)  # before ⊥ is added: K >= 2 classes
    if not math.isfinite(check_positive(epsilon, name="label_epsilon", allow_inf=True)):
        return None
    return KaryRandomizedResponse(epsilon=epsilon, n_classes=n_classes + pads(max_owner_rows))


def dummy_label(label_rr: KaryRandomizedResponse | None, n_classes: int) -> int | None:
    """The input label of a dummy report: ⊥ = ``K`` under a ``K + 1``-ary k-RR, else None (a uniform class)."""
    return n_classes if label_rr is not None and label_rr.n_classes == n_classes + 1 else None


def debiased_class_totals(
    label_rr: KaryRandomizedResponse, sums: np.ndarray, counts: np.ndarray, n_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Unbiased class sums (K, d) and counts (K,) of the real rows from the reports' per-output sums ``sums``
    (V, d) and counts (V,), ``V = label_rr.n_classes`` (``K``, or ``K + 1`` with ⊥ last, dropped here)."""
    if label_rr.n_classes not in (n_classes, n_classes + 1):
        raise ConfigError(f"label_rr has {label_rr.n_classes} values but n_classes={n_classes} (K or K + 1 with ⊥)")
    return label_rr.debias_counts(sums.T).T[:n_classes], label_rr.debias_counts(counts)[:n_classes]


def class_total_variance(
    label_rr: KaryRandomizedResponse,
    mechanism: Mechanism,
    t: np.ndarray,
    inputs: np.ndarray,
    n_classes: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Closed-form variances (K, d) and (K,) of :func:`debiased_class_totals` for reports of rows ``t`` (m, d) in
    the unit space with label inputs ``inputs`` (m,) (dummies: ⊥ and ``t = 0``).

    Each class's estimate is ``sum_i a_i (1[o_i = k] - q) / (p - q)`` over independent reports, with ``a_i`` the
    row's report (``E a = t``, ``E a^2 = Var_M(t) + t^2``) or 1, and ``P[o_i = k]`` = ``p`` for an input ``k``,
    ``q`` otherwise: ``Var = sum_i (E[a_i^2] E[(1[o_i = k] - q)^2] - E[a_i]^2 (P[o_i = k] - q)^2) / (p - q)^2``."""
    p, q = label_rr.p, label_rr.q
    hit = inputs[:, None] == np.arange(n_classes)[None, :]  # (m, K)
    prob = np.where(hit, p, q)
    second = prob * (1 - q) ** 2 + (1 - prob) * q**2  # E[(1[o = k] - q)^2]
    shift = (prob - q) ** 2
    square = mechanism.variance(t) + t**2
    sums = (second.T @ square - shift.T @ t**2) / (p - q) ** 2
    counts = (second - shift).sum(axis=0) / (p - q) ** 2
    return sums, counts
