"""``labels="joint"`` NCC shares: one (label, sign) report per row at the whole ε (issue 12, issue 22; seed 002 §3.5.1).

:class:`JointLabelEncoding` maps an owner's rows and SAMME weights into the joint (label, sign)
randomized response of :class:`~privfed.common.mechanisms.label_sign.LabelSignResponse`, carries the
reports as :class:`~privfed.common.learners.stump_sampled_encoding.SampledReports` and turns the
coordinator's class sums into centroids; :func:`joint_encoding` is the one rule for when it applies.
The other label schemes and the row shares are :mod:`privfed.common.learners.ncc`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.ncc import check_labels, check_row_epsilon, scaled_weights
from privfed.common.learners.ncc_model import centroids_from_sums
from privfed.common.learners.stump_sampled_encoding import SampledReports
from privfed.common.mechanisms.frequency import DirectEncoding
from privfed.common.mechanisms.label_sign import LabelSignResponse
from privfed.common.validation import check_positive


@dataclass(frozen=True, kw_only=True)
class JointLabelEncoding:
    """``labels="joint"``: each row reports one (label, sign) pair by (2K + 1)-ary randomized response at ε.

    Boosted NCC from private labels (issue 12; seed 002 §3.5.1 and Fig. 10 send the label in the
    clear), and ``--task ncc --labels joint`` (issue 22; ``NccShareTask.joint_encoding``, one share per owner; in-process, ``LdpNearestCentroid``). The mechanism, its estimator, closed-form variances and privacy argument are
    :class:`~privfed.common.mechanisms.label_sign.LabelSignResponse`; this class feeds it an owner's rows
    mapped to ``t`` in ``[-1, 1]^d`` by the public bounds (SPEC §4) and SAMME weights scaled to
    ``u = min(w, B) / B`` in ``[0, 1]`` (``B`` the public ``weight_bound``), carries its reports as
    :class:`~privfed.common.learners.stump_sampled_encoding.SampledReports` (the wire's ``BoostShare``), and turns
    the coordinator's class sums into centroids ``S_c / U_c`` (``B`` cancels), mapped back through the
    bounds (:func:`centroids_from_sums`; totals clipped to the ``n`` rows reported). ε-LDP per row;
    parallel composition over an owner's disjoint rows, as every NCC share.

    Design, measured (boosting results in :mod:`privfed.deploy.experiments.boosting_curves`). The weight
    sampling with ⊥ estimates the class weight totals from the labels of *all* reports; the
    proposed first design, stochastic rounding of ``u t_j`` with a weight coordinate (``d + 1``
    candidates, the weight totals from the reports of that coordinate only, a 2K-ary report), has
    totals about ``sqrt(d + 1)`` times noisier: one NCC from 400 ``mnist-box`` training rows (10
    classes, 25 features), test misclassification over 60 draws (a throwaway script), 0.835 ± 0.006
    with ⊥ against 0.896 ± 0.004 at share ε = 3.5, 0.877 ± 0.005 against 0.894 ± 0.004 at 2.1
    (exact centroids 0.268). Shrinking each centroid towards the global mean by its estimated noise
    (James-Stein) measured no better (0.833). More coordinates per row (m at ε/m each) lose at these
    ε: the variance of ``S_cj`` is about ``d / (m (p - q)^2)``, and ``(p - q)^2`` falls faster than
    ``1 / m`` (K = 10, ε = 3.5: ``(p - q)^2`` = 0.37 at m = 1, 0.034 at m = 2); a 3-level rounding of
    ``t_j`` instead of the sign (31 values) would lower the variance by only about 10 % (same formula at a
    mean ``|t_j|`` of 0.6; not built).

    Parameters
    ----------
    epsilon : float
        The row's whole share budget, finite and > 0 (ε = ∞ uses the exact :func:`ncc_share`).
    n_classes : int >= 2
    d : int >= 1
        Features.
    weight_bound : float > 0
        Public bound ``B`` on a row's weight.
    """

    epsilon: float
    n_classes: int
    d: int
    weight_bound: float = 1.0

    #: ``SampledReports.encoding`` of these reports.
    KIND = "ncc-joint"

    def __post_init__(self) -> None:
        object.__setattr__(self, "weight_bound", check_positive(self.weight_bound, name="weight_bound"))
        self.mechanism  # noqa: B018 - validates epsilon, n_classes, d

    @cached_property
    def mechanism(self) -> LabelSignResponse:
        """The joint (label, sign) randomized response of every row."""
        return LabelSignResponse(epsilon=self.epsilon, n_classes=self.n_classes, d=self.d)

    @property
    def oracle(self) -> DirectEncoding:
        """The mechanism's k-RR over the ``2K + 1`` values."""
        return self.mechanism.oracle

    def _unit(
        self, X: ArrayLike, y: ArrayLike, bounds: Bounds, sample_weight: ArrayLike | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows in ``[-1, 1]^d``, their labels and their weights scaled to ``[0, 1]``."""
        if bounds.d != self.d:
            raise ConfigError(f"bounds describe {bounds.d} features, the encoding {self.d}")
        t = bounds.to_unit(np.atleast_2d(np.asarray(X, dtype=np.float64)))
        m = t.shape[0]
        y = check_labels(y, m, self.n_classes)
        u = np.ones(m) if sample_weight is None else scaled_weights(sample_weight, self.weight_bound, m)
        return t, y, u

    def share(
        self,
        X: ArrayLike,
        y: ArrayLike,
        *,
        bounds: Bounds,
        rng: np.random.Generator,
        sample_weight: ArrayLike | None = None,
    ) -> SampledReports:
        """Owner side: one report per row; unweighted rows take part with ``u = 1``.

        Returns
        -------
        SampledReports
            ``coordinates`` (m, 1): each row's ``j``; ``reports`` (m, 1): its k-RR output in ``0..2K``.
        """
        t, labels, u = self._unit(X, y, bounds, sample_weight)
        coordinates, reports = self.mechanism.privatize(t, labels, rng, u)
        return SampledReports(self.KIND, "krr", self.epsilon, coordinates, reports)

    def reports_of(self, coordinates: ArrayLike, reports: ArrayLike) -> SampledReports:
        """Reports received as plain arrays (the wire: ``BoostShare.coordinates`` and ``.reports``).

        Raises
        ------
        ConfigError
            Not (n, 1) integer coordinates in ``0..d-1`` and (n, 1) integer reports in ``0..2K``.
        """
        coords = np.asarray(coordinates, dtype=np.float64)
        values = np.asarray(reports, dtype=np.float64)
        if coords.size == 0 and values.size == 0:  # an owner without rows (the wire drops the empty shape)
            coords, values = coords.reshape(0, 1), values.reshape(0, 1)
        if coords.ndim != 2 or coords.shape[1] != 1 or values.shape != coords.shape:
            raise ConfigError(
                f"joint NCC reports are one coordinate and one report per row, got {coords.shape} and {values.shape}"
            )
        if not (np.all(coords == np.rint(coords)) and np.all(values == np.rint(values))):
            raise ConfigError("joint NCC coordinates and reports must be integers")
        out = SampledReports(self.KIND, "krr", self.epsilon, coords.astype(np.int64), values.astype(np.int64))
        self._check(out)
        return out

    def _check(self, reports: SampledReports) -> None:
        if (reports.encoding, reports.oracle, reports.epsilon) != (self.KIND, "krr", self.epsilon):
            raise ConfigError(
                f"reports of encoding {reports.encoding!r} at epsilon {reports.epsilon!r}, "
                f"expected {self.KIND!r} at {self.epsilon!r}"
            )
        self.mechanism.check_reports(reports.coordinates, reports.reports)

    def class_sums(self, reports: SampledReports | Iterable[SampledReports]) -> tuple[np.ndarray, np.ndarray]:
        """Coordinator side: unbiased ``S`` (K, d) of ``sum u t`` and ``U`` (K,) of ``sum u`` per class
        (:meth:`~privfed.common.mechanisms.label_sign.LabelSignResponse.class_sums`)."""
        reports = reports if isinstance(reports, SampledReports) else SampledReports.concat(reports)
        self._check(reports)
        return self.mechanism.class_sums(reports.coordinates, reports.reports)

    def centroids(self, reports: SampledReports | Iterable[SampledReports], *, bounds: Bounds) -> np.ndarray:
        """Class centroids in data space (K, d): ``S_c / U_c``, totals clipped to the rows reported."""
        return centroids_from_sums(*self.totals(reports), bounds)

    def totals(self, reports: SampledReports | Iterable[SampledReports]) -> tuple[np.ndarray, np.ndarray, float]:
        """:meth:`class_sums` and the cap of every class total, the rows reported (:meth:`centroids`)."""
        reports = reports if isinstance(reports, SampledReports) else SampledReports.concat(reports)
        return (*self.class_sums(reports), float(len(reports)))

    def variance(
        self, X: ArrayLike, y: ArrayLike, *, bounds: Bounds, sample_weight: ArrayLike | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Closed-form variances of :meth:`class_sums` (K, d) and (K,) for the rows ``X, y``."""
        return self.mechanism.variance(*self._unit(X, y, bounds, sample_weight))

    def report_probabilities(self, x: ArrayLike, y: int, *, bounds: Bounds, weight: float | None = None) -> np.ndarray:
        """Exact ``P[coordinate j, report r]`` (d, 2K + 1) of one row: what the ε-LDP argument bounds."""
        t, labels, u = self._unit(np.atleast_2d(x), [y], bounds, None if weight is None else [weight])
        return self.mechanism.report_probabilities(t[0], int(labels[0]), float(u[0]))


def joint_encoding(epsilon: float, n_classes: int, d: int, weight_bound: float = 1.0) -> JointLabelEncoding | None:
    """The ``labels="joint"`` encoding of a share at ``epsilon``, or None at ε = ∞ (no noise: the exact rows
    and labels through :func:`ncc_share`, the non-private reference). One rule for ``--task ncc`` and boosted NCC."""
    if not math.isfinite(check_row_epsilon(epsilon)):
        return None
    return JointLabelEncoding(epsilon=epsilon, n_classes=n_classes, d=d, weight_bound=weight_bound)
