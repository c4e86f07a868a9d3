"""One federated boosting run: LDP base learners from fresh owner groups, SAMME sums over all owners.

Seed paper 002 (Wang & Chang, "Privacy-Preserving Boosting in the Local Setting"), Alg. 2;
SAMME (SPEC §5), stumps from cross tables (SPEC §6), ring secure sum (SPEC §11). Every step is a
pure function of one party's data, so the networked path (owner core, coordinator strategy)
and the in-process driver :meth:`FederatedBoosting.fit` call the same code:

* owner, in the round(s) of its share group (once per run by default): :meth:`FederatedBoosting.owner_release`
  (perturbed stump tables, weighted NCC rows or a perturbed local LR model, all with the SAMME
  weights the owner holds);
* coordinator: :meth:`FederatedBoosting.coordinator_select` (aggregate the group's releases,
  pick the base learner) and :meth:`FederatedBoosting.coordinator_decide` (SAMME's weight and stop
  rules from the secure-summed totals, :func:`~privfed.common.learners.samme.samme_decide`);
* every owner, every round: :func:`owner_local_error` -> ``(err_sum, w_sum)``, summed over all
  owners by :func:`secure_total`, then :func:`owner_update_weights`.

Evaluation releases (issue 9, item 1; contract 4). An owner's ``(err_sum, w_sum)`` of a round
is a *release*, not ring-internal work: the ring (SPEC §11.2) hides individual values from an
honest-but-curious relay only, and a coordinator that chooses ring membership (two-party rings of
honest owners, then ``(ab + ac - bc) / 2``) or the learner (a stump at a chosen threshold) reads
single owners' values off the totals. So each owner, in its own process, (1) clips every row's
SAMME weight to the public *row* bound ``b = eval_row_bound`` and sums
``e = sum_r min(w_r, b) miss_r``, ``w = sum_r min(w_r, b)`` (:func:`owner_local_error` with
``row_bound``); (2) adds Laplace noise ``Lap(2 b / epsilon)`` to each coordinate (SPEC §1,
scale ``4 / epsilon`` in units of ``b / 2``; Dwork, McSherry, Nissim, Smith TCC 2006), released
float-safely on its grid (SPEC §12, :mod:`privfed.common.mechanisms.laplace`); (3) clips the noisy
pair to the public range ``[-M, M]``, ``M = b (max_owner_rows + 80 / epsilon)`` (the largest
possible pair plus 40 noise scales, where the release's own clamp sits, so the clip binds only for an
owner holding more than ``max_owner_rows`` rows -- biased, never less private: it is
post-processing); and the networked owner debits its ledger before the ring's first envelope
leaves (``privfed.owner.core``).

Sensitivity argument: row-level DP, the unit the rest of privfed uses for multi-row owners (NCC
perturbs every row at ε, so parallel composition over rows, seed 002 §3.5.1; FedDPDR is
add/remove-one-row DP, SPEC §7-8). A row's SAMME weight is a function of that row alone and of
the history the coordinator sends (kept learners, their α, the published totals E, W of earlier
rounds, themselves post-processing of releases already debited;
:func:`privfed.common.boosting.wire.owner_weights`), so after the clip each row adds a pair
``(u miss, u)`` with ``0 <= u <= b`` to the owner's sums, whatever its features and label and
whatever history and learner the coordinator names. Adding, removing or replacing one row therefore moves each
coordinate by at most ``b``: L1 sensitivity ``2 b``, and ``Lap(2 b / epsilon)`` per coordinate
makes one release ``epsilon``-DP for every row of the owner, independent of how many rows it holds.
For a one-row owner (the paper's setting, seed 002 §2) the neighbouring data sets are all of its
possible data: the release is then ``epsilon``-LDP for the owner, exactly the owner-level
guarantee with owner bound ``B = b``. (The earlier owner-level calibration, ``B`` of the order
of the owner's row count, buried the signal of owners with many rows: noise ``2 B / epsilon``
against the group's total weight, e.g. 40 owners x 200 rows, ε = 2: noise std ~4000 against
W ~ 800.) Because the guarantee is local, nothing depends on who else is in the ring or how many
rings the coordinator forms: a re-formed ring for the same (run, round) gets the *same* noisy pair
(cached at the owner, no second debit), and a fresh (run, round) is a fresh debit. Ring membership
does not matter for privacy; the totals the coordinator learns are post-processing of the owners'
releases.

What is public: ``b``, ``epsilon`` and ``max_owner_rows`` are configuration of the run (sent in
every task, checked by the owner). The Laplace noise does not depend on ``max_owner_rows``;
it chooses the evaluation mechanism (below) and sizes the public clip range ``M`` and with it
the ring's fixed-point encoding (SPEC §11.1): the default ``10^6`` rows leaves ``>= 24``
fractional bits for rings of up to ``10^5`` owners (rounding error below ``10^-2`` weight units).
Row counts are never public (contract 2).

Evaluation mechanisms (issue 12 item 2). ``eval_mechanism="laplace"`` is the release above;
``"rr"`` (:func:`rr_contributions`) draws one *category* from the same clipped sums -- "missed" with
probability ``e / B``, "hit" with ``(w - e) / B``, "nothing" otherwise, ``B = b max_owner_rows``
(a row picked in proportion to its clipped weight, as the ``"signs"`` share picks its row) --
reports it by 3-ary randomized response at the round's evaluation ε and releases the unbiased
pair that report stands for. The category is a randomised function of the owner's data and of
public history, and k-RR is ε-LDP over all three values, so the release is ε-LDP for the owner's
whole data set (owner level, stronger than the Laplace release's row level); its four possible
values are fixed numbers of the integer report. Its per-owner standard deviation,
``B / (2 (p - q))`` at worst, beats Laplace's ``sqrt(2) 2 b / ε`` for one-row owners (0.93 against
1.89 at ε_e = 1.5) but grows with ``max_owner_rows``, so the default
(:func:`default_eval_mechanism`) compares the two on the public configuration: ``"rr"`` for
owners of one row (``simulate`` and ``bdt-error`` know the rows per owner; a coordinator takes
``--max-owner-rows`` or ``--rows-per-owner``), Laplace for three rows or more and whenever the rows
are unknown.

Budget split. A run's ``epsilon`` per owner is ``share_epsilon + eval_epsilon`` with
``eval_epsilon = eval_fraction * epsilon`` (default :data:`EVAL_FRACTION` = 0.4, measured below):
the shares spend ``(1 - eval_fraction) epsilon``, the evaluations ``eval_epsilon`` (basic
composition). ``budget_split="owners"`` splits the owners instead: a fraction ``eval_fraction`` of
them only evaluates and the others only share, each at the whole ε (one release per owner and run;
an owner node refuses the other role of the run, ``privfed.owner.kinds.boosting.check_one_role``).
``eval_groups="disjoint"`` (default): the owners are split into T evaluation groups
(:func:`evaluation_groups`; round t's group is disjoint from round t's share group, so a learner is
never scored on the rows it was fitted on) and each owner evaluates in one round at the whole
``eval_epsilon``; ``"all"``: every owner evaluates every round at ``eval_epsilon / T``, which leaves
``sqrt(T)`` more relative noise in ``E / W`` (each owner in k of T rounds at ``eval_epsilon / k``:
groups of ``k N / T``, relative noise ``~ sqrt(k T / N)``, smallest at k = 1; measured 0.06 against
0.22 for the std of one learner's ``E / W`` at ε = 5). SAMME only needs the ratio ``E / W``: owners
renormalise by ``1 + (E / W)(e^alpha - 1)``, so noisy totals of a sub-population serve.

Rounds and groups (§3.4.1; issue 12 item 2). ``share_groups="disjoint"`` (default): round t's
share group is drawn uniformly from the owners that have not shared yet (:func:`sample_groups`),
so an owner releases one share per run at the whole ``share_epsilon`` (``T * group <= N``);
``"all"``: every owner releases a share in every round at ``share_epsilon / T``
(:attr:`FederatedBoosting.share_round_epsilon`; sequential composition, each share debited,
an owner refusing past T shares of a run). At these ε a k-RR report's signal falls about like ε
while its noise stays, so a share sum's signal-to-noise ratio is about ``sqrt(n) eps``:
``sqrt(N / T) eps`` for fresh groups against ``sqrt(N) eps / T`` for every owner at ε/T, ``sqrt(T)``
better for fresh groups (stump top-3 hit rate 0.53 against 0.32 at share ε 3.5, T = 10). On the
networked path an owner refuses a share or evaluation beyond the run's allowance *of the same run
id*; another run id gets fresh releases, each debited: the ledger bounds the total over all runs,
nothing bounds the number of runs (issue 9, item 9).

Stump shares (issue 12). An owner's stump share is one report in :attr:`FederatedBoosting.share_encoding`
(:mod:`privfed.common.learners.stump_encodings`): by default ``"signs"`` for two classes (each owner
samples m signed coordinates and reports their sign pattern by k-RR at the share ε), the paper's
``"pair"`` and the dense ``"table"`` as options; the same code runs in
:meth:`FederatedBoosting.group_release` (in-process) and :meth:`FederatedBoosting.owner_release`
(the owner node). Bounds: the share weight bound (an owner's total SAMME weight, default
:func:`default_weight_bound`, ``ceil(rows)``) and the evaluation row bound ``b`` (default
:data:`EVAL_ROW_BOUND` = 1) both clip the mean-1 weights; the noise grows linearly with each, and
the noise wins: one-row owners at ε = 5, 20 runs, share bound / row bound 1 / 1: 0.333, 1 / 2: 0.355,
2 / 1: 0.352, 2 / 2: 0.366, 3 / 1: 0.375 (s.e. 0.004-0.009); two-row owners at ε = 4 (10 runs):
share bound 2: 0.355, 3: 0.363, 4: 0.375. At ε = ∞ the clips cost 0.005 (0.325 against 0.320).
``n_bins`` 4 (60 candidates for 61 sampled coordinates) gave 0.358 against 0.343 for ``n_bins`` 2 at
ε = 4 (10 runs), although its non-private error is lower (0.294 against 0.316): the share's
sampled coordinates cover three times more candidates.

Measured (issue 12 item 2). Synthetic set, 10^4 one-row owners, T = 10, test misclassification
after round 10, mean ± standard error over 20 runs, ``privfed experiment bdt-error --datasets
synthetic --runs 20 --epsilon 1,3,5 [--share-groups G] [--eval-mechanism M] [--eval-fraction f]``;
non-private 0.320 ± 0.003 (ε = ∞ with the clips 0.325); in brackets the learners kept of 10:

=================================================  ==============  ==============  ==============
design (shares, evaluation, eval fraction)         ε = 1           ε = 3           ε = 5
=================================================  ==============  ==============  ==============
fresh groups, Laplace, 0.3 (the previous default)  0.433 ± 0.012   0.366 ± 0.006   0.351 ± 0.004
every owner at ε/T, Laplace, 0.3                   0.464 ± 0.015   0.402 ± 0.010   0.363 ± 0.006
every owner at ε/T, rr, 0.3                        0.427 ± 0.010   0.367 ± 0.007   0.352 ± 0.005
fresh groups, rr, 0.2                              0.401 ± 0.012   0.350 ± 0.004   0.334 ± 0.003
fresh groups, rr, 0.3                              0.411 ± 0.008   0.349 ± 0.005   0.336 ± 0.002
**fresh groups, rr, 0.4 (default)**                0.376 ± 0.008   0.345 ± 0.005   0.336 ± 0.003
the default again, 40 runs                         0.379 ± 0.005   0.348 ± 0.003   0.337 ± 0.003
fresh groups, rr, 0.5 (40 runs)                    0.390 ± 0.007   0.351 ± 0.004   0.339 ± 0.003
owners split (``--budget-split owners``), rr, 0.3  0.383 ± 0.007   0.342 ± 0.004   0.332 ± 0.003
owners split, rr, 0.5                              0.390 ± 0.009   0.344 ± 0.004   0.337 ± 0.003
=================================================  ==============  ==============  ==============

The owners split is within a standard error or two of the default (paired gaps at ε = 5: 0.011 ±
0.005 against 0.016 ± 0.003), so the default stays; it is the simpler privacy story (one release
per owner and run) and an option. The clips are data-dependent: on the data set of ``--seed 1``
(easier, non-private 0.138 ± 0.002, 20 runs) the default reaches 0.166 ± 0.002 at ε = 5, a gap of
0.027, all of it the clip (ε = ∞ with the clips: 0.164); bounds 1.5 / 1.5 give gaps 0.023 (seed 0)
and 0.020 (seed 1, 10 runs), 2 / 2 give 0.033 and 0.018, bounds growing by 0.05 or 0.1 per round
0.018 / 0.025 and 0.023 / 0.020: no fixed bound is within 0.02 on both; 1 / 1 is best on the
reference set. The default on the ``--seed 1`` set at ε = 1 / 3 / 5 (20 runs): 0.227 ± 0.015 /
0.167 ± 0.003 / 0.166 ± 0.003. An rr row bound of 1.5 with share bound 1 (``--eval-row-bound
1.5``) narrows the ε = 5 gaps (seed 0: 0.014 ± 0.003 and 0.021 ± 0.004 in two 40-run sets; seed 1:
0.022 and 0.021 ± 0.003) but costs at ε = 1 (0.423 ± 0.008 against 0.379 ± 0.005, seed 0; the rr
noise grows with b): not adopted.

(kept learners at ε = 5: 7.4 with Laplace, 8.7 with rr.) At ε = 5 the default is 0.015 ± 0.004
above non-private (paired over the runs); with the runs' other noise seeds of a script driving
:meth:`FederatedBoosting.fit` (40 runs, paired gaps) 0.014 ± 0.003 at ε = 5 and 0.023 ± 0.003 at ε = 3.
Where the rest goes (ε = 5, Laplace evaluations, 20 runs, a part made exact by ε x 1000):
exact shares with noisy evaluations 0.332, noisy shares with exact evaluations 0.327, both exact
0.320: the evaluation noise is the larger part. Measured and not adopted (same script, 20-40
runs): SAMME shrinkage ν = 0.7 / 0.5 / 0.3 (0.339 / 0.338 / 0.343 at ε = 5, worse also without noise)
and α caps (no effect); weights kept
<= 1 without renormalising (MadaBoost-like: exact at ε = ∞, 0.322, but 0.397 at ε = 5, the signal
shrinks with the weights) and partial renormalisation (monotonically worse); ``n_sampled`` 2 / 5 / 6
against the variance-optimal 3 (0.337 / 0.334 / 0.347 against 0.330); the evaluation group scoring
the share's top-2 stumps by one 5-ary k-RR report and choosing by it (gap 0.010 ± 0.003 against
0.014 ± 0.003 at ε = 5, 0.021 against 0.023 at ε = 3: within noise, for a learner list on the wire);
owners that either share or evaluate, each at the whole ε (groups of 500 + 500 per round: 0.329 /
0.340 / 0.372 at ε = 5 / 3 / 1 against 0.330 / 0.345 / 0.416 -- a gain at ε = 1 only, not built).
Not measured: an error estimate from the round's own share (its selection bias needs a correction;
its closed-form noise, std ~0.065 in ``E / W`` at share ε 3 for 1000 owners, is above the rr
evaluation's ~0.04).

Networked against in-process (issue 12 item 2). ``privfed simulate --task bdt --owners 10000
--processes 4 --rounds 10 --epsilon 4 --n-samples 12500 --n-bins 2`` (gRPC, one row per owner, the
defaults above: rr evaluations, share bound 1, eval fraction 0.4; every owner's ledger at exactly
ε = 4) gave test misclassification 0.330 (accuracy 0.670; one run, 10 rounds, round 1 skipped);
``privfed experiment bdt-error --datasets synthetic --epsilon 4 --runs 5`` on the same split
(``federation_split`` of seed 0 is run 0's) 0.344 ± 0.006; with ``--seed 1`` 0.174 networked
against 0.165 ± 0.005. Before (``--n-bins 4``, share bound 2 x rows, Laplace evaluations at
fraction 0.3) the networked run skipped rounds with estimated error > 0.5: 60 candidates for the
share's few sampled coordinates and a doubled share noise. The same three causes with two rows
per owner (``bdt-error --owners 20000 --rows-per-owner 2 --epsilon 4 --runs 5``): 0.358 ± 0.011
(6.4 learners kept) with ``--n-bins 4 --weight-bound 4 --eval-mechanism laplace --eval-fraction
0.3``, 0.290 ± 0.013 (9.8 kept) with the defaults.

Thresholds (issue 22). The measurements above are on the synthetic set, whose ±10 bounds sit symmetric
around centred Gaussian clusters, so the midpoint (``n_bins`` 2) is its natural split. On real tables the
values sit where the documented range does not say. Re-selected on validation splits (other seeds than
the reported ones, their training rows only; ``privfed experiment tabular --validate --learners bdt``; score =
fraction of the majority-to-AdaBoost gap closed, mean over ε 1, 3, 5, 8 and the data sets, one row per
owner): on the six real tables (20 splits) equal-width ``n_bins`` 3 (cuts at a third and two thirds of the
range) 0.42, ``n_bins`` 2 0.32, ``n_bins`` 4 0.29, thresholds at LDP quantiles from 10-20 % of the owners
(:mod:`privfed.common.learners.split_points`, ``split_points``), with or without the midpoints, 0.28-0.32 (the
owners they take from boosting and their noise cost more than the better cuts gain at 120-5093 owners); with
the synthetic set as a seventh (10 splits) 0.41 / 0.39 / 0.33 and 0.31-0.35. So ``n_bins`` defaults to 3
(:data:`N_BINS`). It is a trade, not a free gain: per data set 3 wins on breast cancer, iris, fair and star98
at ε >= 5 and loses on anes96 at ε <= 3 (symmetric 0..6 and 1..7 scales, whose midpoint is the natural cut)
and on the synthetic set (``bdt-error --datasets synthetic --runs 10``, error after 10 rounds at ε = 1 / 3 /
5: 0.378 / 0.344 / 0.340 with 2, 0.471 / 0.430 / 0.402 with 3); ``--n-bins 2`` reproduces the paper's set.
The weight bounds and the evaluation fraction were re-selected the same way and stay: share bound 1 beat 2
in every setting; eval fraction 0.4 with row bound 1 scored best at ``n_bins`` 3 (0.44, against 0.42 for 0.5
and 0.38 for 0.3), though their order changed between runs at other thresholds.

Weights. Owners start with weight 1 per row (mean-1 weights, so ``weight_bound`` and
``eval_row_bound`` are in rows).
The normaliser of the update, ``sum_i w_i exp(alpha miss_i) / sum_i w_i = 1 + (E / W)(e^alpha - 1)``,
follows from the published (noisy) totals ``E``, ``W`` the ring produced, so the paper's second
secure sum for it (Alg. 2 line 18) is not needed; with exact totals over all owners ``sum w``
stays the row count (with the row clip, ``E / W`` is that of the clipped weights, a small bias of
the normaliser only). SAMME is invariant to the scale of the weights; the scale only matters for
the bounds.

Secure sum. ``secure_sum="ring"`` runs :func:`~privfed.common.secagg.ring.run_ring_in_process` (the
networked state machines, AES-GCM hops) on the fixed-point values; ``"plain"`` adds the same
per-owner values in float64. Both sum the owners' *noisy* evaluation releases (above), so a
measured utility is the deployed one. The ring is exact in Z_2^64, so the two differ only by the
fixed-point rounding, at most ``N 2^(-f-1)`` (SPEC §11.1; tested): ``"plain"`` keeps runs with
10^4 owners fast.

Drivers. This module holds the steps; the round loop that calls them is written once,
:func:`privfed.common.boosting.loop.run_rounds`, used by the networked strategy
(``privfed.server.strategies.boosting``) and by :meth:`FederatedBoosting.fit`, which simulates
every owner in this process, vectorised over owners by default
(:mod:`privfed.common.boosting.simulation`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, PrivfedError
from privfed.common.learners.logistic import LinearModel, fit_local_logistic, lr_aggregate, lr_share, n_parameters
from privfed.common.learners.ncc import (
    LABEL_FRACTION,
    JointLabelEncoding,
    NccShare,
    NearestCentroidModel,
    ncc_centroids,
    ncc_share,
    split_label_budget,
)
from privfed.common.learners.samme import SammeDecision, SammeStep, max_alpha, samme_decide
from privfed.common.learners.stump import Stump, binarize, check_split_points, select_stump, thresholds
from privfed.common.learners.stump_encodings import (
    STUMP_ENCODINGS,
    RowEncoding,
    SampledReports,
    StumpEncoding,
    default_encoding,
    encoding_shares,
    make_stump_encoding,
)
from privfed.common.mechanisms import MECHANISMS, KaryRandomizedResponse, make_mechanism
from privfed.common.mechanisms.base import Mechanism
from privfed.common.mechanisms.frequency import ORACLES
from privfed.common.mechanisms.laplace import TAIL_SCALES, laplace_from_uniform, laplace_grid
from privfed.common.mechanisms.snapping import check_epsilon_range, full_uniform
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.ring import run_ring_in_process
from privfed.common.validation import check_choice, check_fraction, check_int, check_positive

if TYPE_CHECKING:
    from privfed.common.boosting.loop import BoostingRun

#: The base learners a boosting run can hold (``base``: stump, ncc, lr).
Learner = Stump | NearestCentroidModel | LinearModel
#: What owners release for the base learner: stump shares (vectors, or sampled reports), NCC rows, LR models.
Release = np.ndarray | SampledReports | NccShare

BASE_LEARNERS = ("stump", "ncc", "lr")
SECURE_SUMS = ("plain", "ring")
ON_REJECT = ("skip", "stop")
EVAL_GROUPS = ("disjoint", "all")
#: Who releases a share in a round (module docstring, "Rounds"): a fresh group of N/T owners at the
#: whole share ε, or every owner in every round at 1/T of it.
SHARE_GROUPS = ("disjoint", "all")
#: How an owner's ε is split (module docstring, "Budget split"): between its share and its
#: evaluation, or between owners (each either shares or evaluates, at the whole ε).
BUDGET_SPLITS = ("epsilon", "owners")
#: The evaluation release's mechanism (module docstring, "Evaluation mechanisms"): Laplace on the
#: row-clipped pair (row-level DP), or randomized response on one sampled category (owner-level LDP).
EVAL_MECHANISMS = ("laplace", "rr")
#: The noisy evaluation pair is clipped to its largest possible value plus this many Laplace scales
#: (module docstring): the float-safe Laplace release's own clamp (SPEC §12).
NOISE_HEADROOM = TAIL_SCALES
#: Default public per-row bound ``b`` on a row's SAMME weight in an evaluation release (module
#: docstring, "Choice of b"; measured in ``privfed experiment bdt-error``).
EVAL_ROW_BOUND = 1.0
#: Default share of an owner's ε for its evaluation release(s) (module docstring, "Measured").
EVAL_FRACTION = 0.4
#: Default stump thresholds per attribute + 1 (``--n-bins``): 3, the cuts at a third and two thirds of each
#: feature's public range (issue 22; module docstring, "Thresholds"). It was 2, the midpoint.
N_BINS = 3
#: Default public bound on the rows an owner holds: sizes the clip range of a noisy evaluation pair
#: (and the ring's fixed-point range) only, never the noise.
MAX_OWNER_ROWS = 10**6


def sample_groups(n_owners: int, n_rounds: int, group_size: int, rng: np.random.Generator) -> np.ndarray:
    """Disjoint uniform groups of owners, one per round (seed 002 §3.4.1, Alg. 2 lines 9-10).

    Returns
    -------
    ndarray (n_rounds, group_size) of owner indices; no owner appears twice.

    Raises
    ------
    ConfigError
        ``n_rounds * group_size > n_owners``: some owner would release twice.
    """
    n_owners, n_rounds = (
        check_int(n_owners, name="n_owners", minimum=1),
        check_int(n_rounds, name="n_rounds", minimum=1),
    )
    group_size = check_int(group_size, name="group_size", minimum=1)
    if n_rounds * group_size > n_owners:
        raise ConfigError(
            f"n_rounds * group_size = {n_rounds} * {group_size} = {n_rounds * group_size} exceeds "
            f"the {n_owners} owners: an owner would release twice; use group_size <= "
            f"{n_owners // n_rounds} or fewer rounds"
        )
    return rng.permutation(n_owners)[: n_rounds * group_size].reshape(n_rounds, group_size)


def evaluation_groups(
    groups: np.ndarray, n_owners: int, how: str, rng: np.random.Generator, *, sharers_evaluate: bool = True
) -> list[np.ndarray]:
    """The owners whose noisy ``(err_sum, w_sum)`` enter round t's secure sum, one array per round.

    ``"all"``: every owner every round. ``"disjoint"``: the owners (share groups in round order,
    then the owners in no share group, shuffled) are rotated by one share group and split into
    T near-equal parts, so round t's evaluators are disjoint from round t's share group when
    T >= 2 (the learner is not scored on the rows it was fitted on) and every owner evaluates
    exactly once. When the share groups overlap (``share_groups="all"``: everyone shares every
    round) no evaluation group can avoid them: a uniform split of the owners into T parts.
    ``sharers_evaluate=False`` (``budget_split="owners"``): only the owners in no share group
    evaluate, every round (``"all"``) or split into T parts.
    """
    groups = np.atleast_2d(np.asarray(groups, dtype=np.int64))
    n_rounds = groups.shape[0]
    check_choice(how, name="eval_groups", allowed=EVAL_GROUPS)
    if not sharers_evaluate:
        rest = np.setdiff1d(np.arange(n_owners), groups.ravel())
        if how == "all":
            return [rest] * n_rounds
        return [np.sort(g) for g in np.array_split(rng.permutation(rest), n_rounds)]
    if how == "all":
        return [np.arange(n_owners)] * n_rounds
    if np.unique(groups).size < groups.size:
        return [np.sort(g) for g in np.array_split(rng.permutation(n_owners), n_rounds)]
    rest = np.setdiff1d(np.arange(n_owners), groups.ravel())
    order = np.concatenate([groups.ravel(), rng.permutation(rest)])
    return [np.sort(g) for g in np.array_split(np.roll(order, -groups.shape[1]), n_rounds)]


def contribution_bound(row_bound: float, epsilon: float, max_rows: int = MAX_OWNER_ROWS) -> float:
    """Public bound ``M`` on each coordinate of a noisy evaluation release (module docstring).

    ``b * max_rows`` bounds the exact pair of an owner holding at most ``max_rows`` rows; the
    noise adds :data:`NOISE_HEADROOM` Laplace scales ``2 b / epsilon``: ``M = b (max_rows + 80 / epsilon)``.
    """
    exact = float(row_bound) * float(max_rows)
    return exact if math.isinf(epsilon) else exact + NOISE_HEADROOM * evaluation_noise_scale(row_bound, epsilon)


def evaluation_noise_scale(row_bound: float, epsilon: float) -> float:
    """Laplace scale per coordinate of an evaluation release, in weight units: ``2 b / epsilon``.

    ``b`` is the per-row weight bound: one row moves each coordinate by at most ``b``, so the
    L1 sensitivity of the pair is ``2 b`` (module docstring, "Sensitivity argument").
    """
    return 0.0 if math.isinf(epsilon) else 2.0 * float(row_bound) / float(epsilon)


def clip_contributions(sums: Any) -> np.ndarray:
    """Each owner's ``(err_sum, w_sum)`` made well-formed: ``w_sum >= 0``, ``err_sum`` in ``[0, w_sum]``.

    The row clip that bounds the sensitivity happens before the sums (:func:`owner_local_error`
    with ``row_bound``); this only guards the pair's shape and finiteness.
    """
    sums = np.atleast_2d(np.asarray(sums, dtype=np.float64)).copy()
    if sums.shape[1] != 2:
        raise ConfigError(f"evaluation sums must have shape (n, 2), got {sums.shape}")
    if not np.all(np.isfinite(sums)):
        raise ConfigError("evaluation sums must be finite")
    w = np.maximum(sums[:, 1], 0.0)
    return np.stack([np.clip(sums[:, 0], 0.0, w), w], axis=1)


def noisy_contributions(
    sums: Any, *, row_bound: float, epsilon: float, max_rows: int = MAX_OWNER_ROWS, rng: np.random.Generator
) -> np.ndarray:
    """Each owner's evaluation release: its row-clipped ``(err_sum, w_sum)`` + Laplace, clipped to ``[-M, M]``.

    ``epsilon``-DP for every row of the owner, ``epsilon``-LDP for a one-row owner (module
    docstring, "Sensitivity argument"): noise ``Lap(2 b / epsilon)`` per coordinate, variance
    ``8 b^2 / epsilon^2`` (SPEC §1), in units of ``b / 2`` (scale ``4 / epsilon``) released by the
    float-safe Laplace sampler of :mod:`privfed.common.mechanisms.laplace` on the public grid
    :func:`~privfed.common.mechanisms.laplace.laplace_grid` of inputs up to ``2 max_rows`` (SPEC §12:
    full-precision uniform, grid ``2^-12`` of the scale, clamp 40 scales out); then clipped to
    ``M = contribution_bound(b, epsilon, max_rows)``. ``epsilon = inf``: the pairs, no noise. ε must
    lie in ``[EPSILON_FLOOR, EPSILON_CEILING]`` (:class:`~privfed.common.errors.EpsilonOutOfRange`).
    For an owner of one row every output on the grid is reachable from every input; for larger
    owners, neighbouring inputs (one row apart) reach the same outputs except beyond 700 noise
    scales (probability below ``e^-700``, counted as δ).

    Parameters
    ----------
    sums : array (n, 2)
        Per owner ``(sum_r min(w_r, b) 1[miss_r], sum_r min(w_r, b))`` (:func:`owner_local_error`
        with ``row_bound=b``).
    row_bound : float
        Public per-row weight bound ``b``.
    epsilon : float
        The release's ε (this round's share of the evaluation budget).
    max_rows : int
        Public bound on an owner's rows: sizes the clip range only.
    rng : numpy.random.Generator
        The owner's noise stream (cryptographic in deployment, SPEC §13).

    Returns
    -------
    ndarray (n, 2)
    """
    pairs = clip_contributions(sums)
    bound = contribution_bound(row_bound, epsilon, max_rows)
    if math.isinf(epsilon):
        return np.clip(pairs, -bound, bound)
    if not (math.isfinite(bound) and math.isfinite(evaluation_noise_scale(row_bound, epsilon) * 40.0)):
        raise ConfigError(
            f"epsilon={epsilon!r} with eval_row_bound={row_bound!r} gives a non-finite noise scale; "
            "use a larger epsilon"
        )
    check_epsilon_range(epsilon, what="an evaluation release")
    half = float(row_bound) / 2.0
    scale = 4.0 / epsilon  # Lap(2b/eps) in units of b/2 (SPEC §1), float-safe on its grid (SPEC §12)
    u, signed_scale = full_uniform(rng, pairs.shape, scale)
    noisy = laplace_from_uniform(pairs / half, u, signed_scale, grid=laplace_grid(scale, 2.0 * max_rows))
    return np.clip(noisy * half, -bound, bound)


def owner_weight_bound(row_bound: float, max_rows: int) -> float:
    """``B = b * max_rows``: the public bound on the clipped weight an owner's evaluation pair can hold."""
    return float(row_bound) * float(max_rows)


def rr_evaluation_oracle(epsilon: float) -> KaryRandomizedResponse:
    """The 3-ary randomized response of an ``"rr"`` evaluation release: categories miss, hit, nothing."""
    return KaryRandomizedResponse(epsilon=epsilon, n_classes=3)


def rr_noise_std(row_bound: float, epsilon: float, max_rows: int) -> float:
    """Largest standard deviation of one coordinate of an ``"rr"`` evaluation release: ``B / (2 (p - q))``.

    A coordinate is ``B (1[report in S] - |S| q) / (p - q)``, the indicator Bernoulli with some ``P``,
    so its variance is ``B^2 P (1 - P) / (p - q)^2 <= B^2 / (4 (p - q)^2)`` (sampling included).
    """
    if math.isinf(epsilon):
        return 0.0
    rr = rr_evaluation_oracle(epsilon)
    return owner_weight_bound(row_bound, max_rows) / (2.0 * (rr.p - rr.q))


def rr_contributions(
    sums: Any, *, row_bound: float, epsilon: float, max_rows: int = MAX_OWNER_ROWS, rng: np.random.Generator
) -> np.ndarray:
    """Each owner's ``"rr"`` evaluation release: an unbiased ``(err_sum, w_sum)`` from one randomized category.

    Wang & Chang's evaluation step (seed 002 Alg. 2 lines 11-12) with the pair replaced by k-ary
    randomized response (Warner 1965; Kairouz, Bonawitz, Ramage, ICML 2016) on a *sampled category*,
    the weight-proportional sampling of the ``"signs"`` share (:mod:`privfed.common.learners.stump_encodings`):
    with ``(e, w)`` the owner's row-clipped sums (scaled down to ``w <= B`` if it holds more than
    ``max_rows`` rows: biased, never less private) and ``B = b max_rows``, the owner draws
    ``c = miss`` with probability ``e / B``, ``hit`` with ``(w - e) / B``, else ``nothing``
    (that is a row picked with probability ``min(w_r, b) / B``, and whether the learner misses it),
    reports ``c`` by 3-ary k-RR at ``epsilon`` (``p = e^ε / (e^ε + 2)``, ``q = 1 / (e^ε + 2)``) and
    releases ``B (1[r = miss] - q) / (p - q)`` and ``B (1[r in {miss, hit}] - 2 q) / (p - q)``, whose
    expectations are ``e`` and ``w``.

    Privacy: the category is a randomised function of the owner's data set (rows, labels, weights)
    and of public history; k-RR is ε-LDP over all three categories, and the released pair is a
    function of the report alone. So the release is ε-LDP for the owner's whole data set -- owner
    level, stronger than the row-level guarantee of :func:`noisy_contributions`. The values are
    four fixed numbers of the integer report: no floating-point leak (SPEC §12).

    Returns
    -------
    ndarray (n, 2); ``epsilon = inf``: the (scaled) pairs, no sampling.
    """
    pairs = clip_contributions(sums)
    bound = owner_weight_bound(row_bound, max_rows)
    pairs *= np.minimum(1.0, bound / np.maximum(pairs[:, 1], 1e-300))[:, None]
    if math.isinf(epsilon):
        return pairs
    rr = rr_evaluation_oracle(epsilon)
    u = rng.random(pairs.shape[0]) * bound
    category = np.where(u < pairs[:, 0], 0, np.where(u < pairs[:, 1], 1, 2))
    report = rr.privatize(category, rng)
    miss, counted = (report == 0).astype(np.float64), (report <= 1).astype(np.float64)
    return np.stack([miss - rr.q, counted - 2.0 * rr.q], axis=1) * (bound / (rr.p - rr.q))


def concat_releases(releases: list[Release]) -> Release:
    """Several owners' releases of one run as one (stacked vectors, or concatenated NCC shares or sampled reports)."""
    ncc = [r for r in releases if isinstance(r, NccShare)]
    sampled = [r for r in releases if isinstance(r, SampledReports)]
    if ncc or sampled:
        return NccShare.concat(ncc) if ncc else SampledReports.concat(sampled)
    return np.concatenate([np.atleast_2d(r) for r in releases if isinstance(r, np.ndarray)])


def _misses(model: Learner, X: Any, y: Any) -> np.ndarray:
    return np.asarray(model.predict(np.atleast_2d(np.asarray(X, dtype=np.float64)))) != np.asarray(y)


def owner_local_error(model: Learner, X: Any, y: Any, w: Any, *, row_bound: float = math.inf) -> tuple[float, float]:
    """Owner side, every round (Alg. 2 lines 11-12): ``(sum_i u_i 1[model(x_i) != y_i], sum_i u_i)``.

    ``u_i = min(w_i, row_bound)``: an evaluation release clips every row's weight to the public
    ``b`` first, which bounds what one row can change (module docstring); the default is no clip.
    """
    w = np.minimum(np.asarray(w, dtype=np.float64), row_bound)
    if w.shape[0] == 0:
        return 0.0, 0.0
    return float(np.dot(w, _misses(model, X, y))), float(w.sum())


#: Public bounds an owner's SAMME row weights saturate at (issue 20, "Totality"): whatever history a
#: coordinator sends, every weight is a finite positive number, so every sum over at most
#: :data:`MAX_OWNER_ROWS` rows is finite and no computation on the rows can fail. An honest run's
#: mean-1 weights stay far inside (a row missed by 16 learners of error 1e-7 weighs ~2^370).
WEIGHT_MIN, WEIGHT_MAX = 2.0**-512, 2.0**512


def owner_update_weights(
    model: Learner, alpha: float, X: Any, y: Any, w: Any, *, err_total: float, weight_total: float
) -> np.ndarray:
    """Owner side: SAMME update ``w_i exp(alpha 1[miss_i])``, renormalised to keep ``sum w = weight_total``.

    ``err_total`` and ``weight_total`` are this round's secure sums ``E`` and ``W``; the
    normaliser ``(W - E + E e^alpha) / W = 1 + r (e^alpha - 1)``, ``r = E / W`` (clipped to [0, 1]),
    is taken in the log domain (``log(1 - r + r e^alpha)``) and the weights saturate at
    :data:`WEIGHT_MIN`, :data:`WEIGHT_MAX`: for any finite history the result is finite and positive
    (a hostile ``alpha = 709`` used to overflow a missed row's weight to inf, and the share code then
    refused the task, a noiseless bit about the row; issue 20, finding 2).
    """
    w = np.asarray(w, dtype=np.float64)
    if w.shape[0] == 0:
        return w.copy()
    alpha = float(alpha)
    r = min(max(float(err_total) / float(weight_total), 0.0), 1.0)
    log_scale = float(
        np.logaddexp(math.log1p(-r) if r < 1.0 else -math.inf, alpha + math.log(r) if r > 0.0 else -math.inf)
    )
    with np.errstate(over="ignore", under="ignore"):
        new = w * np.exp(alpha * _misses(model, X, y) - log_scale)
    return np.clip(new, WEIGHT_MIN, WEIGHT_MAX)


def secure_total(
    values: Any,
    *,
    method: str = "plain",
    fixed_point: FixedPoint | None = None,
    boxes: Any = None,
    ids: Iterable[str] | None = None,
) -> np.ndarray:
    """Sum per-owner vectors: ``values`` (N, m) -> (m,).

    ``"plain"``: float64 sum. ``"ring"``: :func:`run_ring_in_process` over parties ``ids``
    (default ``"o0"..``) with ``fixed_point`` (required) and optional cached ``boxes``; exact in Z_2^64, so it
    differs from the plain sum by at most ``fixed_point.error_bound`` (SPEC §11.1).
    """
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    if check_choice(method, name="method", allowed=SECURE_SUMS) == "plain":
        return values.sum(axis=0)
    if fixed_point is None:
        raise ConfigError("secure_total(method='ring') needs fixed_point (FixedPoint.choose(n_parties, max_abs))")
    ids = [f"o{i}" for i in range(values.shape[0])] if ids is None else list(ids)
    return run_ring_in_process(dict(zip(ids, values)), fixed_point, boxes)


def default_weight_bound(rows_per_owner: float | None) -> float:
    """The default public share weight bound for owners of ``rows_per_owner`` rows: ``max(1, ceil(rows))``.

    Mean-1 SAMME weights sum to about an owner's row count; a larger bound leaves room for
    reweighting but the share noise grows linearly with it, and the noise wins (measured,
    module docstring "Bounds": one-row owners 0.333 at bound 1 against 0.352 at 2; two-row owners
    0.355 at 2 against 0.375 at 4). None (rows unknown): 1, the one-row setting.
    """
    if rows_per_owner is None:
        return 1.0
    return float(max(1, math.ceil(check_positive(rows_per_owner, name="rows_per_owner"))))


def default_eval_mechanism(row_bound: float, epsilon: float, max_rows: int) -> str:
    """The evaluation mechanism with the smaller worst-case noise per coordinate at this public configuration.

    Laplace's standard deviation ``sqrt(2) 2 b / epsilon`` does not depend on the rows an owner
    holds; randomized response's ``b max_rows / (2 (p - q))`` (:func:`rr_noise_std`) grows with them.
    ``"rr"`` wins for owners of one row at evaluation ε up to about 5.6 (a 4x smaller variance at
    ε = 1.5, the default split of ε = 5), Laplace for owners of three or more rows (two rows: a tie
    near ε = 1.5). ``epsilon = inf``: ``"laplace"`` (both exact). Public configuration only.
    """
    if math.isinf(epsilon):
        return "laplace"
    laplace = math.sqrt(2.0) * evaluation_noise_scale(row_bound, epsilon)
    return "rr" if rr_noise_std(row_bound, epsilon, max_rows) <= laplace else "laplace"


@dataclass(frozen=True, kw_only=True)
class FederatedBoosting:
    """Federated SAMME over LDP base learners (seed 002 Alg. 2; SPEC §5, §6, §11).

    Parameters
    ----------
    base : {"stump", "ncc", "lr"}
        Base learner: decision stump from perturbed weighted cross tables (§3.5.3), nearest
        centroid from perturbed weighted rows (§3.5.1), or logistic regression from perturbed
        local models (§3.5.2).
    epsilon : float > 0 or math.inf
        Each owner's budget for the whole run (``inf``: no noise): ``(1 - eval_fraction) epsilon``
        for its one share, ``eval_fraction * epsilon`` for its evaluation release(s).
    mechanism : {"pm", "duchi", "laplace"}
    n_classes : int >= 2
    bounds : Bounds
        Public feature bounds.
    n_rounds : int >= 1
        T.
    group_size : int or None
        Owners per round; default ``n_owners // n_rounds``.
    n_bins : int >= 2
        Stumps: ``B``, thresholds ``lo + b (hi - lo) / B`` (SPEC §6), or ``split_points``. Default 2.
    split_points : (d, n_bins - 1) thresholds or None
        Stumps: public thresholds chosen before the run, e.g. LDP quantiles from a group of owners
        that takes no other part (:mod:`privfed.common.learners.split_points`); None: equal-width.
    weight_bound : float > 0
        Public bound on an owner's total weight (stump) or a row's weight (NCC), in rows (weights
        have mean 1). Larger weights are scaled down before release (biases the selection,
        never the privacy); the noise grows linearly with it. Shares only: the evaluation
        releases are calibrated to ``eval_row_bound``.
    labels, label_fraction : NCC label scheme (:func:`split_label_budget`) of the share budget;
        default ``"joint"`` (one k-RR report of (label, sign) per row at the whole share ε,
        :class:`~privfed.common.learners.ncc.JointLabelEncoding`, :attr:`joint_encoding`; measured
        better than ``"rr"``, which is at chance on 10-class MNIST); ``"rr"`` (the label by
        randomized response at ``label_fraction`` of ε); the paper's ``"clear"`` only by owner opt-in.
    C, param_bound : LR regularisation and public parameter clip bound.
    secure_sum : {"plain", "ring"}
    on_reject : {"skip", "stop"}
        A learner no better than chance: ``"stop"`` ends the run (scikit-learn; raises in the
        first round), ``"skip"`` (default) drops it and goes on with the next group, which
        releases a different learner -- unlike the centralised case, where the same one would come back.
    vectorised : bool
        Driver only: apply the owner steps to all owners at once (see module docstring).
    eval_fraction : float in (0, 1)
        Share of ``epsilon`` spent on the evaluation releases (module docstring, "Budget split").
    eval_groups : {"disjoint", "all"}
        Who evaluates each round (:func:`evaluation_groups`): each owner once at the whole
        evaluation budget (default, measured better), or every owner every round at ``1/T`` of it.
    eval_row_bound : float > 0
        Public per-row bound ``b`` on a row's SAMME weight in an evaluation release (mean-1
        weights): rows are clipped to it before the sums, and the Laplace scale is
        ``2 b / eval_round_epsilon`` whatever the owner's row count (module docstring,
        "Sensitivity argument"). Default :data:`EVAL_ROW_BOUND`.
    max_owner_rows : int >= 1
        Public bound on the rows an owner holds; sizes only the clip range of a noisy evaluation
        pair and the ring's fixed-point range (:attr:`contribution_bound`), never the noise.
    stump_encoding : {"signs", "cells", "pair", "table"} or None
        Stumps: how an owner encodes its share (:mod:`privfed.common.learners.stump_encodings`,
        :attr:`share_encoding`). None: ``"signs"`` for two classes, ``"cells"`` for more (measured
        best, issue 12); ``"pair"`` is the paper's two values per attribute (seed 002 §3.5.3) and
        ``"table"`` the whole table, both through ``mechanism``.
    oracle : {"krr", "oue", "olh"}
        The frequency oracle of ``"cells"`` (``"signs"`` uses k-RR).
    n_sampled : int or None
        Coordinates each owner samples in ``"signs"``/``"cells"``; None: the variance-optimal number for ε.
    budget_split : {"epsilon", "owners"}
        ``"epsilon"`` (default): every owner shares once at ``(1 - eval_fraction) epsilon`` and
        evaluates at ``eval_fraction * epsilon``; ``"owners"``: a fraction ``eval_fraction`` of the
        owners only evaluates and the others only share, each at the whole ``epsilon`` (an owner
        node refuses the other role in the run; module docstring, "Budget split").
    share_groups : {"disjoint", "all"}
        Who releases a share in a round (module docstring, "Rounds"): a fresh group of
        ``group_size`` owners at the whole share ε, each owner once (default, measured better), or
        every owner in every round at ``share_epsilon / T`` (sequential composition; each debited).
    eval_mechanism : {"laplace", "rr"} or None
        The evaluation release (module docstring, "Evaluation mechanisms"): Laplace on the
        row-clipped pair (:func:`noisy_contributions`) or randomized response on a sampled category
        (:func:`rr_contributions`). None: the one with the smaller worst-case noise standard
        deviation at this public configuration (:func:`default_eval_mechanism`; ``"rr"`` for owners of
        one or two rows).
    """

    base: str = "stump"
    epsilon: float
    mechanism: str = "pm"
    n_classes: int
    bounds: Bounds
    n_rounds: int
    group_size: int | None = None
    n_bins: int = N_BINS
    weight_bound: float = 1.0
    labels: str = "joint"
    label_fraction: float = LABEL_FRACTION
    C: float = 1.0
    param_bound: float = 1.0
    secure_sum: str = "plain"
    on_reject: str = "skip"
    vectorised: bool = True
    eval_fraction: float = EVAL_FRACTION
    eval_groups: str = "disjoint"
    eval_row_bound: float = EVAL_ROW_BOUND
    max_owner_rows: int = MAX_OWNER_ROWS
    stump_encoding: str | None = None
    oracle: str = "krr"
    n_sampled: int | None = None
    share_groups: str = "disjoint"
    eval_mechanism: str | None = None
    budget_split: str = "epsilon"
    split_points: tuple[tuple[float, ...], ...] | None = None

    def __post_init__(self) -> None:
        check_choice(self.base, name="base", allowed=BASE_LEARNERS)
        check_choice(self.mechanism, name="mechanism", allowed=MECHANISMS)
        check_choice(self.secure_sum, name="secure_sum", allowed=SECURE_SUMS)
        check_choice(self.on_reject, name="on_reject", allowed=ON_REJECT)
        check_choice(self.eval_groups, name="eval_groups", allowed=EVAL_GROUPS)
        check_choice(self.share_groups, name="share_groups", allowed=SHARE_GROUPS)
        check_choice(self.budget_split, name="budget_split", allowed=BUDGET_SPLITS)
        if self.budget_split == "owners" and self.share_groups == "all":
            raise ConfigError(
                "budget_split='owners' gives sharing and evaluating to different owners; "
                "share_groups='all' would make every owner share: use share_groups='disjoint'"
            )
        check_fraction(self.eval_fraction, name="eval_fraction")
        check_positive(self.epsilon, name="epsilon", allow_inf=True, fix="math.inf: no noise")
        check_int(self.n_classes, name="n_classes", minimum=2)
        check_int(self.n_rounds, name="n_rounds", minimum=1)
        check_int(self.n_bins, name="n_bins", minimum=2)
        if self.group_size is not None:
            check_int(self.group_size, name="group_size", minimum=1)
        check_int(self.max_owner_rows, name="max_owner_rows", minimum=1)
        for name in ("weight_bound", "C", "param_bound", "eval_row_bound"):
            check_positive(getattr(self, name), name=name)
        if not isinstance(self.bounds, Bounds):
            raise ConfigError(f"bounds must be a Bounds (public configuration), got {type(self.bounds).__name__}")
        split_label_budget(self.share_round_epsilon, self.labels, self.label_fraction)  # validates NCC's label options
        if self.split_points is not None:
            sp = check_split_points(self.split_points, self.bounds, self.n_bins)
            object.__setattr__(self, "split_points", tuple(tuple(float(v) for v in row) for row in sp))
        if self.stump_encoding is None:
            object.__setattr__(self, "stump_encoding", default_encoding(self.n_classes))
        check_choice(self.stump_encoding, name="stump_encoding", allowed=STUMP_ENCODINGS)
        check_choice(self.oracle, name="oracle", allowed=ORACLES)
        if self.n_sampled is not None:
            check_int(self.n_sampled, name="n_sampled", minimum=1)
        if self.eval_mechanism is None:
            object.__setattr__(
                self,
                "eval_mechanism",
                default_eval_mechanism(self.eval_row_bound, self.eval_round_epsilon, self.max_owner_rows),
            )
        check_choice(self.eval_mechanism, name="eval_mechanism", allowed=EVAL_MECHANISMS)
        if self.base == "stump":
            self.share_encoding  # noqa: B018 - builds (validates) the encoding: oracle, n_sampled, classes

    # ------------------------------------------------------------------ shared configuration
    @property
    def share_epsilon(self) -> float:
        """ε of all of an owner's share releases in a run: ``(1 - eval_fraction) epsilon`` (``epsilon``
        under ``budget_split="owners"``)."""
        if self.budget_split == "owners":
            return float(self.epsilon)
        return float(self.epsilon) * (1.0 - float(self.eval_fraction))

    @property
    def shares_per_owner(self) -> int:
        """Share releases an owner makes in a run: 1, or T under ``share_groups="all"``."""
        return self.n_rounds if self.share_groups == "all" else 1

    @property
    def share_round_epsilon(self) -> float:
        """ε of one share release: ``share_epsilon / shares_per_owner`` (the debit of each share)."""
        return self.share_epsilon / self.shares_per_owner

    @property
    def eval_epsilon(self) -> float:
        """ε of all of an owner's evaluation releases in a run: ``eval_fraction * epsilon`` (``epsilon``
        under ``budget_split="owners"``)."""
        if self.budget_split == "owners":
            return float(self.epsilon)
        return float(self.epsilon) * float(self.eval_fraction)

    @property
    def eval_round_epsilon(self) -> float:
        """ε of one evaluation release (whole ``eval_epsilon``, or ``1/T`` of it under ``eval_groups="all"``)."""
        return self.eval_epsilon / (self.n_rounds if self.eval_groups == "all" else 1)

    @property
    def eval_noise_scale(self) -> float:
        """Laplace scale per coordinate of one evaluation release, in weight units: ``2 b / eval_round_epsilon``.

        For ``eval_mechanism="rr"`` the Laplace scale of the same worst-case variance,
        ``rr_noise_std / sqrt(2)``, so ``sqrt(2 n) * eval_noise_scale`` is the noise standard deviation
        of a sum over n owners either way.
        """
        if self.eval_mechanism == "rr":
            return rr_noise_std(self.eval_row_bound, self.eval_round_epsilon, self.max_owner_rows) / math.sqrt(2.0)
        return evaluation_noise_scale(self.eval_row_bound, self.eval_round_epsilon)

    @property
    def contribution_bound(self) -> float:
        """Public ``M``: every coordinate of a noisy evaluation release is in ``[-M, M]``.

        ``"rr"``: ``B (1 - q) / (p - q)`` (``B`` at ε = ∞), the largest value either coordinate takes,
        with ``1e-9`` relative headroom for floating-point rounding (so the ring's clip never binds).
        """
        if self.eval_mechanism == "rr":
            bound = owner_weight_bound(self.eval_row_bound, self.max_owner_rows)
            if math.isinf(self.eval_round_epsilon):
                return bound
            rr = rr_evaluation_oracle(self.eval_round_epsilon)
            return bound * (1.0 - rr.q) / (rr.p - rr.q) * (1.0 + 1e-9)
        return contribution_bound(self.eval_row_bound, self.eval_round_epsilon, self.max_owner_rows)

    def evaluation_sums(self, learner: Learner, X: Any, y: Any, w: Any) -> tuple[float, float]:
        """One owner's row-clipped ``(err_sum, w_sum)`` (:func:`owner_local_error` at ``eval_row_bound``)."""
        return owner_local_error(learner, X, y, w, row_bound=self.eval_row_bound)

    def evaluation_release(self, sums: Any, *, rng: np.random.Generator) -> np.ndarray:
        """The owners' noisy ``(err_sum, w_sum)`` (:func:`noisy_contributions` at this run's bounds and ε).

        ``sums`` must be row-clipped (:meth:`evaluation_sums`).
        """
        release = rr_contributions if self.eval_mechanism == "rr" else noisy_contributions
        return release(
            sums, row_bound=self.eval_row_bound, epsilon=self.eval_round_epsilon, max_rows=self.max_owner_rows, rng=rng
        )

    def nothing_to_boost(self, rounds: Iterable[tuple[int, float, float]]) -> str:
        """One line saying why no round kept a learner, with the numbers and what to change.

        ``rounds``: per round ``(ring size n, E, W)`` as published (noisy sums). Compares the
        noise standard deviation of a ring's total, ``sqrt(2 n) * 2 b / eval_round_epsilon``, with
        the weight totals W: when it is more than a tenth of W the evaluation noise is the cause
        (more owners or rows per ring, a larger ε or eval fraction); otherwise the learners the
        shares selected are themselves no better than chance (larger share groups, a larger ε).
        """
        rounds = [(int(n), float(e), float(w)) for n, e, w in rounds]
        chance = 1.0 - 1.0 / self.n_classes
        ratios = [round(e / w, 3) if w > 0 else None for _, e, w in rounds]
        ring = int(np.median([n for n, _, _ in rounds])) if rounds else 0
        noise_std = math.sqrt(2.0 * max(1, ring)) * self.eval_noise_scale
        w_med = float(np.median([w for _, _, w in rounds])) if rounds else math.nan
        head = (
            f"no base learner was better than chance (error < {chance:.3g}) in any of {len(rounds)} round(s): "
            f"noisy E/W per round {ratios}; evaluation noise: Laplace scale 2b/eps_e = "
            f"2*{self.eval_row_bound:g}/{self.eval_round_epsilon:.3g} = {self.eval_noise_scale:.3g} per owner, "
            f"std ~{noise_std:.3g} for a ring of {ring} owners, against weight totals W ~{w_med:.3g} "
            f"(about the ring's rows)"
        )
        if not w_med > 10.0 * noise_std:
            return (
                f"{head}: the noise drowns the error; use more owners or rows per evaluation ring (more owners "
                f"or fewer rounds), a larger epsilon (now {self.epsilon:g}) or a larger eval fraction "
                f"(now {self.eval_fraction:g})"
            )
        return (
            f"{head}: the noise is small, the selected learners themselves are no better than chance (their "
            f"shares are too noisy); use more owners per share group (more owners or fewer rounds) or a larger "
            f"epsilon (now {self.epsilon:g}, eval fraction {self.eval_fraction:g})"
        )

    def check_learner(self, learner: Any) -> None:
        """Raise :class:`ConfigError` unless ``learner`` is of this run's base kind and shape.

        An owner checks every learner a coordinator names before computing anything with it:
        a stump splits a feature ``< d`` at one of the public thresholds of SPEC §6 and predicts
        classes ``< K``; NCC centroids and LR coefficients have this run's shapes and classes.
        """
        kind = getattr(learner, "kind", None)
        expected_kind = {"stump": Stump.kind, "ncc": NearestCentroidModel.kind, "lr": LinearModel.kind}[self.base]
        if kind != expected_kind:
            raise ConfigError(
                f"learner kind {kind!r} does not match the run's base learner {self.base!r} (kind {expected_kind!r})"
            )
        d, k = self.bounds.d, self.n_classes
        if self.base == "stump":
            if not (0 <= learner.attribute < d and 1 <= learner.threshold_index < self.n_bins):
                raise ConfigError(
                    f"stump (feature {learner.attribute}, threshold {learner.threshold_index}) is "
                    f"outside the run's {d} features and thresholds 1..{self.n_bins - 1}"
                )
            expected = float(self.thresholds[learner.attribute, learner.threshold_index - 1])
            if learner.threshold != expected:
                raise ConfigError(
                    f"stump threshold {learner.threshold!r} is not the public threshold {expected!r} "
                    f"of feature {learner.attribute}, index {learner.threshold_index} (SPEC §6)"
                )
            if not all(0 <= c < k for c in learner.leaves):
                raise ConfigError(f"stump leaves {learner.leaves} are not classes of 0..{k - 1}")
            return
        classes = np.asarray(learner.classes)
        if classes.shape != (k,) or not np.array_equal(classes, np.arange(k)):
            raise ConfigError(f"learner classes {classes.tolist()} are not 0..{k - 1}")
        if self.base == "ncc":
            if np.asarray(learner.centroids).shape != (k, d):
                raise ConfigError(f"NCC centroids of shape {np.asarray(learner.centroids).shape}, expected {(k, d)}")
            return
        if np.asarray(learner.coef_).shape[-1] != d or learner.bounds.to_list() != self.bounds.to_list():
            raise ConfigError("LR model does not match the run's features or bounds")

    def check_samme_round(self, alpha: float, err_total: float, weight_total: float) -> None:
        """Raise :class:`ConfigError` unless a kept round's ``alpha``, ``E`` and ``W`` are ones SAMME
        can publish: ``0 <= alpha <= max_alpha(K)`` (:func:`~privfed.common.learners.samme.max_alpha`,
        a public constant) and ``0 <= E <= W`` (a kept learner's error ``E / W`` is below ``1 - 1/K``)."""
        if not 0.0 <= alpha <= max_alpha(self.n_classes):
            raise ConfigError(
                f"a kept round's alpha={alpha!r} is outside [0, {max_alpha(self.n_classes):.6g}], the weights SAMME "
                f"gives for {self.n_classes} classes"
            )
        if not 0.0 <= err_total <= weight_total:
            raise ConfigError(f"a kept round's totals E={err_total!r}, W={weight_total!r} do not satisfy 0 <= E <= W")

    def check_evaluation(self) -> None:
        """Raise :class:`ConfigError` unless this run's evaluation release can be drawn: its mechanism
        builds at the round's ε (the mechanisms' public floor and ceiling) and its noise scale and
        clip range are finite. Public parameters only; an owner checks it before any row is read."""
        eps = self.eval_round_epsilon
        if not (math.isfinite(self.contribution_bound) and math.isfinite(NOISE_HEADROOM * self.eval_noise_scale)):
            raise ConfigError(
                f"the evaluation release at epsilon={eps!r} with eval_row_bound={self.eval_row_bound!r} has a "
                "non-finite noise scale or range; use a larger epsilon"
            )
        if math.isfinite(eps):
            if self.eval_mechanism == "rr":
                rr_evaluation_oracle(eps)
            else:
                check_epsilon_range(eps, name="evaluation epsilon", what="the Laplace evaluation release")

    @property
    def thresholds(self) -> np.ndarray:
        """The stumps' public thresholds (d, n_bins - 1): ``split_points``, else equal-width (SPEC §6)."""
        return thresholds(self.bounds, self.n_bins, self.split_points)

    @property
    def n_attributes(self) -> int:
        return self.bounds.d * (self.n_bins - 1)

    @cached_property
    def share_encoding(self) -> StumpEncoding:
        """Stumps: the encoding of an owner's share at ``share_round_epsilon``
        (:mod:`privfed.common.learners.stump_encodings`).

        ``stump_encoding`` names it (default :func:`default_encoding`: ``"signs"`` for two classes,
        ``"cells"`` otherwise; ``"pair"`` is the paper's two values per attribute, ``"table"`` the whole
        table, both through ``mechanism``). At ``epsilon = inf`` every encoding is the exact table
        (no noise, no sampling): the non-private reference.
        """
        A, K, B = self.n_attributes, self.n_classes, self.weight_bound
        eps = self.share_round_epsilon
        kind = str(self.stump_encoding) if math.isfinite(eps) else "table"
        if kind in ("table", "pair"):
            mech = make_mechanism(self.mechanism, epsilon=eps, d=A * 2 * (K if kind == "table" else 1))
            return make_stump_encoding(kind, n_attributes=A, n_classes=K, weight_bound=B, mechanism=mech)
        return make_stump_encoding(
            kind, n_attributes=A, n_classes=K, weight_bound=B, epsilon=eps, n_sampled=self.n_sampled,
            oracle=self.oracle,
        )  # fmt: skip

    @property
    def release_dim(self) -> int:
        """Length of one release vector (per owner for stump/LR, per row for NCC; stump: a row encoding's)."""
        if self.base == "stump":
            enc = self.share_encoding
            return enc.dim if isinstance(enc, RowEncoding) else enc.frequency_oracle.report_width
        if self.base == "ncc":
            return self.bounds.d + 1
        return n_parameters(self.n_classes, self.bounds.d)

    @cached_property
    def release_mechanism(self) -> Mechanism:
        """The ε-LDP row mechanism of an NCC or LR release (ε for the features under NCC's label split).

        A stump share's mechanism is part of its :attr:`share_encoding`."""
        if self.base == "stump":
            raise ConfigError("a stump share's mechanism is part of its share_encoding")
        eps = (
            split_label_budget(self.share_round_epsilon, self.labels, self.label_fraction)[0]
            if self.base == "ncc"
            else self.share_round_epsilon
        )
        return make_mechanism(self.mechanism, epsilon=eps, d=self.release_dim)

    @cached_property
    def joint_encoding(self) -> JointLabelEncoding | None:
        """NCC with ``labels="joint"`` and finite ε: the rows' (label, sign) encoding at the share ε; else None
        (ε = ∞ releases the exact weighted rows, the non-private reference)."""
        if self.base != "ncc" or self.labels != "joint" or not math.isfinite(self.share_epsilon):
            return None
        return JointLabelEncoding(
            epsilon=self.share_epsilon, n_classes=self.n_classes, d=self.bounds.d, weight_bound=self.weight_bound
        )

    def label_rr(self) -> KaryRandomizedResponse | None:
        """NCC with ``labels="rr"`` and finite ε: the labels' randomized response; else None."""
        eps_l = split_label_budget(self.share_round_epsilon, self.labels, self.label_fraction)[1]
        if self.base != "ncc" or self.labels != "rr" or not math.isfinite(eps_l):
            return None
        return KaryRandomizedResponse(epsilon=eps_l, n_classes=self.n_classes)

    # ------------------------------------------------------------------ owner side
    def owner_release(self, X: Any, y: Any, w: Any, *, rng: np.random.Generator) -> Release:
        """Owner side, once per run (Alg. 2 lines 6-9): the perturbed share for the base learner.

        Returns a stump share (a row encoding's vector, or :class:`SampledReports` of one row), an
        :class:`NccShare` (:class:`SampledReports` of its rows under ``labels="joint"``), or an LR parameter vector.
        """
        if self.base == "stump":
            n = np.atleast_2d(np.asarray(X)).shape[0]
            out = self._stump_shares(X, y, w, np.zeros(n, dtype=np.int64), 1, rng)
            return out if isinstance(out, SampledReports) else out[0]
        if self.joint_encoding is not None:
            return self.joint_encoding.share(X, y, bounds=self.bounds, rng=rng, sample_weight=w)
        mech = self.release_mechanism
        if self.base == "ncc":
            return ncc_share(
                X,
                y,
                bounds=self.bounds,
                mechanism=mech,
                label_rr=self.label_rr(),
                rng=rng,
                sample_weight=w,
                weight_bound=self.weight_bound,
            )
        return self._lr_release(X, y, w, rng)

    def group_release(
        self, X: Any, y: Any, w: Any, owner_of_row: Any, group: Any, *, rng: np.random.Generator
    ) -> Release:
        """All releases of ``group`` at once; what ``[owner_release(owner) for owner in group]`` gives."""
        if self.base == "stump":
            owner_of_row = np.asarray(owner_of_row, dtype=np.int64)
            group = np.asarray(group, dtype=np.int64)
            pos = np.full(max(int(owner_of_row.max(initial=-1)), int(group.max(initial=-1))) + 1, -1, dtype=np.int64)
            pos[group] = np.arange(group.shape[0])
            rows = np.flatnonzero((owner_of_row >= 0) & (pos[np.maximum(owner_of_row, 0)] >= 0))
            return self._stump_shares(X[rows], y[rows], w[rows], pos[owner_of_row[rows]], group.shape[0], rng)
        if self.base == "ncc":  # row-wise mechanism: one call over the group's rows = one call per owner
            rows = np.flatnonzero(np.isin(owner_of_row, group))
            return self.owner_release(X[rows], y[rows], w[rows], rng=rng)
        return np.stack(
            [self._lr_release(X[owner_of_row == o], y[owner_of_row == o], w[owner_of_row == o], rng) for o in group]
        )

    def _lr_release(self, X: Any, y: Any, w: Any, rng: np.random.Generator) -> np.ndarray:
        """One owner's perturbed local LR model (seed 002 §3.5.2), fitted with its SAMME weights."""
        theta = fit_local_logistic(X, y, bounds=self.bounds, n_classes=self.n_classes, C=self.C, sample_weight=w)
        return lr_share(theta, param_bound=self.param_bound, mechanism=self.release_mechanism, rng=rng)

    def _stump_shares(
        self, X: Any, y: Any, w: Any, owner_of_row: np.ndarray, n_owners: int, rng: np.random.Generator
    ) -> np.ndarray | SampledReports:
        """The stump shares of ``n_owners`` owners (rows ``owner_of_row``) in :attr:`share_encoding`."""
        Xbin = binarize(X, self.bounds, self.n_bins, self.split_points)
        return encoding_shares(self.share_encoding, Xbin, y, w, owner_of_row, n_owners, rng)

    def stump_reports(self, reports: np.ndarray, coordinates: np.ndarray) -> np.ndarray | SampledReports:
        """Stump shares received as arrays (the wire: report rows, and each owner's sampled coordinates, if any)
        in the form :meth:`coordinator_select` takes."""
        enc = self.share_encoding
        if isinstance(enc, RowEncoding):
            reports = np.asarray(reports, dtype=np.float64)
            if np.asarray(coordinates).size or reports.ndim != 2 or reports.shape[1] != enc.dim:
                raise ConfigError(f"a {enc.kind!r} stump share is (n, {enc.dim}) reports and no sampled coordinates")
            return reports
        return enc.reports_of(coordinates, reports)

    def ncc_reports(self, reports: Any, labels: Any, coordinates: Any) -> NccShare | SampledReports:
        """An NCC share received as arrays (the wire: report rows, labels, sampled coordinates) in the form
        :meth:`coordinator_select` takes: :class:`SampledReports` under ``labels="joint"``, else an :class:`NccShare`."""
        if self.joint_encoding is not None:
            if np.asarray(labels).size:
                raise ConfigError("a joint NCC share carries its labels inside the reports, not beside them")
            return self.joint_encoding.reports_of(coordinates, reports)
        if np.asarray(coordinates).size:
            raise ConfigError(f"an NCC share with labels={self.labels!r} has no sampled coordinates")
        return NccShare(reports=reports, labels=labels)

    # ------------------------------------------------------------------ coordinator side
    def coordinator_select(self, releases: Any) -> Learner:
        """Coordinator side (Alg. 2 line 10): aggregate one group's releases into the base learner."""
        if self.base == "stump":
            tables = self.share_encoding.aggregate(releases)
            return select_stump(tables, bounds=self.bounds, n_bins=self.n_bins, split_points=self.split_points)
        if self.base == "ncc":
            if self.joint_encoding is not None:
                return NearestCentroidModel(self.joint_encoding.centroids(releases, bounds=self.bounds))
            return NearestCentroidModel(
                ncc_centroids(releases, n_classes=self.n_classes, bounds=self.bounds, label_rr=self.label_rr())
            )
        return lr_aggregate(
            np.atleast_2d(releases), param_bound=self.param_bound, n_classes=self.n_classes, bounds=self.bounds
        )

    def floor_error_total(self, err_total: float, n_evaluators: int) -> float:
        """The published ``E``: at least one noise standard deviation of the sum when the totals are noisy.

        A noisy ``E <= 0`` would trigger SAMME's "zero error: keep and stop" rule with the huge
        ``alpha`` of ``e0 = 1e-10`` (SPEC §5), a rule meant for exact sums; flooring ``E`` at the
        standard deviation ``sqrt(2 n) * scale`` of its noise (public: ring size and scale) is
        post-processing and keeps ``alpha`` finite. Exact totals (ε = ∞) are unchanged.
        """
        if self.eval_noise_scale == 0.0:
            return err_total
        return max(err_total, math.sqrt(2.0 * max(n_evaluators, 1)) * self.eval_noise_scale)

    def coordinator_decide(self, err_total: float, weight_total: float, n_kept: int) -> SammeDecision | None:
        """SAMME weight and stop rules from the secure sums (SPEC §5); ``None``: skip this round's learner.

        Raises
        ------
        PrivfedError
            ``on_reject="stop"`` and the first learner is no better than chance.
        """
        try:
            decision = samme_decide(err_total, weight_total, self.n_classes, n_kept=n_kept)
        except PrivfedError:
            if self.on_reject == "stop":
                raise
            return None
        if decision.step is SammeStep.DISCARD_AND_STOP and self.on_reject == "skip":
            return None
        return decision

    # ------------------------------------------------------------------ in-process driver
    def fit(self, X: Any, y: Any, *, owners: list[Any] | None = None, rng: np.random.Generator) -> BoostingRun:
        """Run Alg. 2 with every party in this process: the one round loop
        (:func:`~privfed.common.boosting.loop.run_rounds`) over simulated owners
        (:class:`~privfed.common.boosting.simulation.SimulatedOwners`).

        Parameters
        ----------
        X, y : arrays (n, d), (n,) of class indices
        owners : list of index arrays, optional
            Rows of each owner (e.g. :func:`privfed.common.datasets.partition`); default one row each.
        rng : numpy.random.Generator
            Groups and noise (seeded for reproducible simulations).
        """
        from privfed.common.boosting.simulation import simulate  # the loop module imports this one

        return simulate(self, X, y, owners=owners, rng=rng)
