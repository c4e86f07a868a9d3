"""What the owners of a boosting run release, and through which mechanism: built once from the run's
public parameters, shared by the owner steps (:mod:`.owner`) and the coordinator steps (:mod:`.coordinator`).

An owner makes two kinds of release in a run (seed 002 Alg. 2):

* its **share** for a round's base learner, at :attr:`~.params.BoostingParams.share_round_epsilon`: a stump
  share in :attr:`ReleasePlan.share_encoding` (:mod:`privfed.common.learners.stump_encodings`), NCC rows
  through :attr:`ReleasePlan.release_mechanism` and :meth:`ReleasePlan.label_rr` or the joint (label, sign)
  encoding :attr:`ReleasePlan.joint_encoding`, or a perturbed local LR model through
  :attr:`ReleasePlan.release_mechanism`;
* its **evaluation** of a round's learner, at :attr:`~.params.BoostingParams.eval_round_epsilon`: its
  row-clipped weighted (error, weight) pair through :attr:`ReleasePlan.evaluation`, one of the two
  evaluation mechanisms of :mod:`privfed.common.mechanisms` (their privacy arguments are there).

Every mechanism here is built from public parameters only, so an owner builds the ones a task needs before
it reads a row, and a refusal (an ε outside a mechanism's floor and ceiling) never depends on data. At
``epsilon = inf`` every release is exact (no noise, no sampling): the non-private reference.
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from privfed.common.boosting.params import BoostingParams
from privfed.common.errors import ConfigError
from privfed.common.learners.logistic import n_parameters
from privfed.common.learners.ncc import split_label_budget
from privfed.common.learners.ncc_joint import JointLabelEncoding, joint_encoding
from privfed.common.learners.stump import thresholds
from privfed.common.learners.stump_encodings import StumpEncoding, make_stump_encoding
from privfed.common.learners.stump_row_encoding import RowEncoding
from privfed.common.mechanisms import KaryRandomizedResponse, make_mechanism
from privfed.common.mechanisms.base import ErrorPairRelease, Mechanism
from privfed.common.mechanisms.laplace import ErrorPairLaplace
from privfed.common.mechanisms.randomized_response import ErrorPairResponse


class ReleasePlan:
    """The releases of a run with public parameters ``params`` (module docstring); mechanisms built once.

    Building it checks that a stump run's share encoding can be built at the share ε (the encoding's
    oracle, ``n_sampled`` and classes, the mechanisms' ε floor and ceiling); the other mechanisms are built
    when first used (an owner builds them in a task's ``validate``, before any row is read).

    Raises
    ------
    ConfigError
        A stump share encoding that cannot be built.
    """

    def __init__(self, params: BoostingParams) -> None:
        if not isinstance(params, BoostingParams):
            raise ConfigError(f"a release plan needs BoostingParams, got {type(params).__name__}")
        self.params = params
        if params.base == "stump":
            self.share_encoding  # noqa: B018 - builds (validates) the encoding: oracle, n_sampled, classes

    @property
    def thresholds(self) -> np.ndarray:
        """The stumps' public thresholds (d, n_bins - 1): ``split_points``, else equal-width (SPEC §6)."""
        p = self.params
        return thresholds(p.bounds, p.n_bins, p.split_points)

    @property
    def n_attributes(self) -> int:
        """Binary stump attributes: ``d (n_bins - 1)``."""
        return self.params.bounds.d * (self.params.n_bins - 1)

    @cached_property
    def share_encoding(self) -> StumpEncoding:
        """Stumps: the encoding of an owner's share at ``share_round_epsilon``.

        ``stump_encoding`` names it (``"signs"`` for two classes, ``"cells"`` otherwise by default; ``"pair"``
        is the paper's two values per attribute, ``"table"`` the whole table, both through ``mechanism``). At
        ``epsilon = inf`` every encoding is the exact table (no noise, no sampling): the non-private reference.
        """
        p = self.params
        A, K, B = self.n_attributes, p.n_classes, p.weight_bound
        eps = p.share_round_epsilon
        kind = str(p.stump_encoding) if math.isfinite(eps) else "table"
        if kind in ("table", "pair"):
            mech = make_mechanism(p.mechanism, epsilon=eps, d=A * 2 * (K if kind == "table" else 1))
            return make_stump_encoding(kind, n_attributes=A, n_classes=K, weight_bound=B, mechanism=mech)
        return make_stump_encoding(
            kind, n_attributes=A, n_classes=K, weight_bound=B, epsilon=eps, n_sampled=p.n_sampled, oracle=p.oracle
        )

    @property
    def release_dim(self) -> int:
        """Length of one release vector (per owner for stump/LR, per row for NCC; stump: a row encoding's)."""
        p = self.params
        if p.base == "stump":
            enc = self.share_encoding
            return enc.dim if isinstance(enc, RowEncoding) else enc.frequency_oracle.report_width
        if p.base == "ncc":
            return p.bounds.d + 1
        return n_parameters(p.n_classes, p.bounds.d)

    @cached_property
    def release_mechanism(self) -> Mechanism:
        """The ε-LDP row mechanism of an NCC or LR share (ε for the features under NCC's label split).

        A stump share's mechanism is part of its :attr:`share_encoding`."""
        p = self.params
        if p.base == "stump":
            raise ConfigError("a stump share's mechanism is part of its share_encoding")
        eps = (
            split_label_budget(p.share_round_epsilon, p.labels, p.label_fraction)[0]
            if p.base == "ncc"
            else p.share_round_epsilon
        )
        return make_mechanism(p.mechanism, epsilon=eps, d=self.release_dim)

    @cached_property
    def joint_encoding(self) -> JointLabelEncoding | None:
        """NCC with ``labels="joint"`` and finite ε: the rows' (label, sign) encoding at the share ε; else None
        (ε = ∞ releases the exact weighted rows, the non-private reference)."""
        p = self.params
        if p.base != "ncc" or p.labels != "joint":
            return None
        return joint_encoding(p.share_round_epsilon, p.n_classes, p.bounds.d, p.weight_bound)

    def label_rr(self) -> KaryRandomizedResponse | None:
        """NCC with ``labels="rr"`` and finite ε: the labels' randomized response; else None."""
        p = self.params
        eps_l = split_label_budget(p.share_round_epsilon, p.labels, p.label_fraction)[1]
        if p.base != "ncc" or p.labels != "rr" or not math.isfinite(eps_l):
            return None
        return KaryRandomizedResponse(epsilon=eps_l, n_classes=p.n_classes)

    @cached_property
    def evaluation(self) -> ErrorPairRelease:
        """The evaluation release's mechanism at ``eval_round_epsilon`` (``eval_mechanism``: Laplace or rr)."""
        p = self.params
        mechanism: type[ErrorPairRelease] = ErrorPairResponse if p.eval_mechanism == "rr" else ErrorPairLaplace
        return mechanism(epsilon=p.eval_round_epsilon, row_bound=p.eval_row_bound, max_rows=p.max_owner_rows)

    @property
    def eval_noise_scale(self) -> float:
        """The evaluation noise as a Laplace scale per coordinate: ``2 b / eval_round_epsilon``, or for ``"rr"``
        the Laplace scale of the same worst-case variance; ``sqrt(2 n)`` times it is the noise standard
        deviation of a sum over n owners either way."""
        return self.evaluation.noise_scale

    @property
    def contribution_bound(self) -> float:
        """Public ``M``: every coordinate of a noisy evaluation release is in ``[-M, M]`` (sizes the secure sum)."""
        return self.evaluation.bound
