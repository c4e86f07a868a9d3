"""k-ary randomized response for class labels."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.base import check_epsilon
from privfed.common.validation import check_int, check_int_array, check_real_array, check_rng


@dataclass(frozen=True, kw_only=True)
class KaryRandomizedResponse:
    """k-ary randomized response (k-RR) on labels ``0..K-1``.

    Report the true label with probability ``p = e^eps / (e^eps + K - 1)``, otherwise a label
    drawn uniformly from the other ``K - 1``; each of those has probability
    ``q = 1 / (e^eps + K - 1)``. ``p / q = e^eps``, so it is ε-LDP. Report counts ``c`` are
    debiased by ``N_k = (c_k - N q) / (p - q)`` with ``N = sum_k c_k``.

    Parameters
    ----------
    epsilon : float
        Budget for one label, finite and > 0.
    n_classes : int
        ``K >= 2``.

    Notes
    -----
    Two draws per label (a uniform for keep/replace, an integer for the replacement). The
    outputs are integers, so there is no floating-point leak (SPEC §12).

    References
    ----------
    .. [W65] S. L. Warner, "Randomized response: a survey technique for eliminating evasive
       answer bias", JASA 1965.
    .. [KBR16] P. Kairouz, K. Bonawitz, D. Ramage, "Discrete distribution estimation under
       local privacy", ICML 2016.
    """

    epsilon: float
    n_classes: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "n_classes", check_int(self.n_classes, name="n_classes", minimum=2))

    @property
    def p(self) -> float:
        """``P[report = true label] = e^eps / (e^eps + K - 1)``."""
        return 1.0 / (1.0 + (self.n_classes - 1) * math.exp(-self.epsilon))

    @property
    def q(self) -> float:
        """``P[report = j]`` for each ``j`` other than the true label, ``1 / (e^eps + K - 1)``."""
        return (1.0 - self.p) / (self.n_classes - 1)

    def privatize(self, labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Randomize every label independently.

        Parameters
        ----------
        labels : int array of any shape, values in ``0..K-1``
        rng : numpy.random.Generator

        Returns
        -------
        int64 array of the same shape.
        """
        check_rng(rng)
        y = check_int_array(labels, name="labels", fix=f"encode classes as integers 0..{self.n_classes - 1} first")
        y = y.astype(np.int64, copy=False)
        if y.size and (y.min() < 0 or y.max() >= self.n_classes):
            raise ConfigError(f"labels must lie in 0..{self.n_classes - 1}, got values in [{y.min()}, {y.max()}]")
        keep = rng.random(y.shape) < self.p
        other = rng.integers(0, self.n_classes - 1, size=y.shape, dtype=np.int64)
        other += other >= y  # uniform over the K - 1 labels != y
        return np.where(keep, y, other)

    def _counts(self, counts: ArrayLike) -> np.ndarray:
        c = np.asarray(check_real_array(counts, name="counts"), dtype=np.float64)
        if c.ndim == 0 or c.shape[-1] != self.n_classes:
            raise ConfigError(f"counts must have shape (..., {self.n_classes}), one count per class, got {c.shape}")
        if not np.all(np.isfinite(c)):
            raise ConfigError("counts must be finite")
        return c

    def debias_counts(self, counts: np.ndarray) -> np.ndarray:
        """Unbiased estimates of the true per-class counts from counts of reported labels.

        Parameters
        ----------
        counts : array of shape (K,) or (..., K)
            How many reports carried each label (or any per-reported-label sums: the map is
            linear).

        Returns
        -------
        float64 array of the same shape; entries may be negative (post-processing may clip).
        """
        c = self._counts(counts)
        total = c.sum(axis=-1, keepdims=True)
        return (c - total * self.q) / (self.p - self.q)

    def count_variance(self, true_counts: np.ndarray) -> np.ndarray:
        """``Var`` of :meth:`debias_counts` per class given the true counts ``N_k``.

        ``c_k`` is a sum of independent Bernoullis (``p`` for rows of class k, ``q`` for the
        others), so ``Var = (N_k p(1-p) + (N - N_k) q(1-q)) / (p - q)^2``.
        """
        n_k = self._counts(true_counts)
        total = n_k.sum(axis=-1, keepdims=True)
        p, q = self.p, self.q
        return (n_k * p * (1.0 - p) + (total - n_k) * q * (1.0 - q)) / (p - q) ** 2
