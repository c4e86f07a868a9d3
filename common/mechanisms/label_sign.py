"""Joint (label, sign) randomized response: one report per row carries its label, one feature's sign and
its weight, at one ε (issue 12; the ``labels="joint"`` share of boosted and of plain nearest centroid,
:class:`privfed.common.learners.ncc_joint.JointLabelEncoding`).

Per row, with the row in ``t`` in ``[-1, 1]^d`` (mapped by the public bounds, SPEC §4), its label ``y``
in ``0..K-1`` and a participation weight ``u`` in ``[0, 1]`` (a SAMME weight over its public bound):

1. draw a coordinate ``j`` uniformly from ``0..d-1`` (always, whatever the row; it is sent in the clear
   with the report);
2. with probability ``u`` the row *takes part*: its value is the pair ``(y, s)`` with the sign ``s = +1``
   with probability ``(1 + t_j) / 2`` (stochastic rounding, ``E[s] = t_j``), encoded ``2 y + [s = +1]``;
   otherwise its value is ``⊥ = 2K`` (the weight sampling of
   :class:`~privfed.common.learners.stump_sampled_encoding.SampledEncoding`);
3. report the value by k-ary randomized response over the ``D = 2K + 1`` values (Warner 1965; Kairouz,
   Bonawitz, Ramage, ICML 2016; :class:`~.frequency.DirectEncoding`): the value itself with
   ``p = e^ε / (e^ε + D - 1)``, each other value with ``q = 1 / (e^ε + D - 1)``.

Estimator (:meth:`LabelSignResponse.class_sums`), over ``n`` reports. For class c let ``L_c`` count the
reports with label c (either sign) and ``Z_cj = #(c, +) - #(c, -)`` over the reports with coordinate j.
A row of class y reports label c with probability ``2q + u (p - q) [y = c]`` and, given coordinate j,
``E[(c, +) - (c, -)] = (p - q) u t_j [y = c]`` (the q terms cancel; a ⊥ row adds ``q - q = 0``). So
([WBLJ17] eq. 1 for the counts)

* ``U_c = (L_c - 2 q n) / (p - q)`` is unbiased for ``sum_{y_r = c} u_r``, from *all* reports;
* ``S_cj = d Z_cj / (p - q)`` is unbiased for ``sum_{y_r = c} u_r t_rj``.

Closed-form variances (:meth:`~LabelSignResponse.variance`):
``Var S_cj = sum_r d (2q + u_r (p - q) [y_r = c]) / (p - q)^2 - (u_r t_rj [y_r = c])^2``,
``Var U_c = sum_r pi_rc (1 - pi_rc) / (p - q)^2`` with ``pi_rc = 2q + u_r (p - q) [y_r = c]``.

Privacy (ε-LDP per row; parallel composition over an owner's disjoint rows). The coordinate ``j`` is
drawn independently of the row. Given ``j``, the report is k-RR of a value whose distribution depends on
the row (participation and rounding coins); k-RR is ε-LDP over its whole domain (``p / q = e^ε``,
[KBR16] eq. 1), and a mixture of output distributions each within ``e^ε`` of any other is again within
``e^ε``: for any two rows ``x, x'`` (features, label, weight) and any output ``(j, r)``,
``P[j, r | x] = P[j] sum_v P[v | x, j] P[r | v] <= P[j] e^ε min_v' P[r | v'] <= e^ε P[j, r | x']``
(:meth:`~LabelSignResponse.report_probabilities` computes these exactly; tested).

Floating point (SPEC §12): only the integer report and ``j`` leave the row; their probabilities are
those of exact comparisons of 53-bit uniforms (ε within the public floor and ceiling), so no
floating-point leak.

References
----------
.. [KBR16] P. Kairouz, K. Bonawitz, D. Ramage, "Discrete distribution estimation under local
   privacy", ICML 2016.
.. [WBLJ17] T. Wang, J. Blocki, N. Li, S. Jha, "Locally differentially private protocols for
   frequency estimation", USENIX Security 2017.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.base import check_unit_values
from privfed.common.mechanisms.frequency import DirectEncoding
from privfed.common.validation import check_int, check_rng


@dataclass(frozen=True, kw_only=True)
class LabelSignResponse:
    """The joint (label, sign) randomized response of the module docstring.

    Parameters
    ----------
    epsilon : float
        The row's budget, in ``[EPSILON_FLOOR, EPSILON_CEILING]``.
    n_classes : int >= 2
    d : int >= 1
        Features.
    """

    epsilon: float
    n_classes: int
    d: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_classes", check_int(self.n_classes, name="n_classes", minimum=2))
        object.__setattr__(self, "d", check_int(self.d, name="d", minimum=1))
        self.oracle  # noqa: B018 - validates epsilon (finite, within the floor and ceiling)

    @cached_property
    def oracle(self) -> DirectEncoding:
        """k-RR over the ``2K + 1`` values ``2 y + [s = +1]`` and ``⊥ = 2K``."""
        return DirectEncoding(epsilon=self.epsilon, domain=2 * self.n_classes + 1)

    @property
    def output_bounds(self) -> tuple[float, float]:
        """Reports are integers in ``[0, 2K]`` (coordinates in ``[0, d - 1]``)."""
        return (0.0, float(2 * self.n_classes))

    def _rows(
        self, t: ArrayLike, labels: ArrayLike, weights: ArrayLike | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t = check_unit_values(np.atleast_2d(np.asarray(t, dtype=np.float64)))
        if t.ndim != 2 or t.shape[1] != self.d:
            raise ConfigError(f"rows must have shape (n, {self.d}), got {t.shape}")
        m = t.shape[0]
        y = np.asarray(labels)
        if y.shape != (m,) or (m and not np.issubdtype(y.dtype, np.integer)):
            raise ConfigError(f"need one integer label per row ({m}), got shape {y.shape}")
        y = y.astype(np.int64)
        if m and (y.min() < 0 or y.max() >= self.n_classes):
            raise ConfigError(f"labels must lie in 0..{self.n_classes - 1}")
        u = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64)
        if u.shape != (m,) or not np.all((u >= 0.0) & (u <= 1.0)):
            raise ConfigError(f"weights must be ({m},) numbers in [0, 1]")
        return t, y, u

    def privatize(
        self, t: ArrayLike, labels: ArrayLike, rng: np.random.Generator, weights: ArrayLike | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """One report per row: ``(coordinates (m, 1) in 0..d-1, reports (m, 1) in 0..2K)``, both int64 (the
        form :meth:`class_sums` takes).

        ``t`` (m, d) in ``[-1, 1]``, ``labels`` (m,) in ``0..K-1``, ``weights`` (m,) in ``[0, 1]`` (default 1).
        """
        check_rng(rng)
        t, y, u = self._rows(t, labels, weights)
        m = t.shape[0]
        j = np.asarray(rng.integers(0, self.d, size=m), dtype=np.int64)
        takes_part = rng.random(m) < u
        plus = rng.random(m) < (1.0 + t[np.arange(m), j]) / 2.0
        values = np.where(takes_part, 2 * y + plus, 2 * self.n_classes)
        reports = self.oracle.privatize(values, rng) if m else np.zeros((0, 1), dtype=np.int64)
        return j[:, None], reports

    def check_reports(self, coordinates: ArrayLike, reports: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``(j (n,), r (n,))`` of reports (n, 1) and their coordinates (n, 1); ConfigError outside the support."""
        j = np.asarray(coordinates, dtype=np.int64)
        if j.ndim != 2 or j.shape[1] != 1 or (j.size and (j.min() < 0 or j.max() >= self.d)):
            raise ConfigError(f"joint NCC coordinates must be one per row in 0..{self.d - 1}")
        self.oracle.supports(reports)  # refuses reports outside 0..2K
        return j[:, 0], np.asarray(reports, dtype=np.int64)[:, 0]

    def class_sums(self, coordinates: ArrayLike, reports: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Unbiased ``S`` (K, d) of ``sum u t`` and ``U`` (K,) of ``sum u`` per class (module docstring)."""
        j, r = self.check_reports(coordinates, reports)
        K, p, q = self.n_classes, self.oracle.p, self.oracle.q
        labelled = r < 2 * K
        label, sign = r[labelled] // 2, 2.0 * (r[labelled] % 2) - 1.0
        z = np.zeros((K, self.d))
        np.add.at(z, (label, j[labelled]), sign)
        counts = np.bincount(label, minlength=K).astype(np.float64)
        return z * (self.d / (p - q)), (counts - 2.0 * q * r.shape[0]) / (p - q)

    def variance(
        self, t: ArrayLike, labels: ArrayLike, weights: ArrayLike | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Closed-form variances of :meth:`class_sums` (K, d) and (K,) over the reports of these rows."""
        t, y, u = self._rows(t, labels, weights)
        onehot = np.eye(self.n_classes)[y]
        p, q = self.oracle.p, self.oracle.q
        pi = 2.0 * q + (p - q) * u[:, None] * onehot  # (n, K): P[label c reported]
        mean = (u[:, None] * onehot)[:, :, None] * t[:, None, :]  # (n, K, d): u t [y = c]
        var_sums = (self.d * pi.sum(axis=0) / (p - q) ** 2)[:, None] - (mean**2).sum(axis=0)
        return var_sums, (pi * (1.0 - pi)).sum(axis=0) / (p - q) ** 2

    def bias(self, t: ArrayLike, labels: ArrayLike, weights: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Zeros of :meth:`class_sums`' shapes: both estimates are unbiased (module docstring)."""
        self._rows(t, labels, weights)
        return np.zeros((self.n_classes, self.d)), np.zeros(self.n_classes)

    def report_probabilities(self, t: ArrayLike, label: int, weight: float = 1.0) -> np.ndarray:
        """Exact ``P[coordinate j, report r]`` (d, 2K + 1) of one row: what the ε-LDP argument bounds."""
        t_row, y, u = self._rows(np.reshape(t, (1, -1)), [label], [weight])
        K, p, q = self.n_classes, self.oracle.p, self.oracle.q
        value = np.zeros((self.d, 2 * K + 1))  # P[value | j]
        value[:, 2 * y[0] + 1] = u[0] * (1.0 + t_row[0]) / 2.0
        value[:, 2 * y[0]] = u[0] * (1.0 - t_row[0]) / 2.0
        value[:, 2 * K] = 1.0 - u[0]
        return (q + (p - q) * value) / self.d  # k-RR: P[r | v] = q + (p - q) [r = v]
