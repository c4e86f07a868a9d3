"""Algorithm 4 of Wang et al. (ICDE 2019, §IV; SPEC §3.2): a whole row of ``[-1, 1]^d`` at ε.

Each row reports ``k`` uniformly drawn attributes through the one-dimensional Piecewise or Hybrid
Mechanism (:mod:`privfed.common.mechanisms.piecewise`) at ``ε / k``, scaled by ``d / k``; the other
coordinates report 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.base import BLOCK_VALUES, Mechanism
from privfed.common.mechanisms.piecewise import (
    hm_alpha,
    hm_bound,
    hm_variance,
    pm_bias_bound,
    pm_from_uniform,
    pm_grid,
    pm_variance,
    sample_hm,
)
from privfed.common.mechanisms.snapping import OutputGrid, check_epsilon_range, full_uniform
from privfed.common.validation import check_int

BASES = ("pm", "hm")


def sample_subsets(m: int, d: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` independent uniform ``k``-subsets of ``range(d)``, as an (m, k) index array.

    Floyd's algorithm for small ``k`` (``k`` draws per row, O(k^2) checks); for ``k > 16``
    the ``k`` smallest of ``d`` uniform keys. Both are exactly uniform over k-subsets.
    """
    if k > 16:
        keys = rng.random((m, d))
        return np.argpartition(keys, k - 1, axis=1)[:, :k]
    chosen = np.empty((m, k), dtype=np.intp)
    for i, j in enumerate(range(d - k, d)):
        r = rng.integers(0, j + 1, size=m)
        if i:
            r = np.where((chosen[:, :i] == r[:, None]).any(axis=1), j, r)
        chosen[:, i] = r
    return chosen


@dataclass(frozen=True, kw_only=True)
class PiecewiseMultidim(Mechanism):
    """Algorithm 4 of Wang et al. (ICDE 2019, §IV; SPEC §3.2): ε-LDP for a whole row of ``[-1, 1]^d``.

    ``k = max(1, min(d, floor(eps / 2.5)))`` (the paper's rule, which minimises the worst-case variance,
    at ``|t_j| = 1``), or ``attributes`` if given. Each row draws ``k`` distinct coordinates
    uniformly, independently of the data; each drawn ``j`` reports
    ``(d/k) * PM(t_j, eps/k)`` (or HM), the others report 0. Unbiased with
    ``V_j(t) = (d/k) V_{eps/k}(t_j) + (d/k - 1) t_j^2``; ε-LDP by composition over the ``k``
    attributes. (A bug seen in public code passes ``eps`` instead of ``eps/k`` to each
    attribute, which spends ``k * eps``.)

    Parameters
    ----------
    epsilon : float
        Budget for a whole row, finite and > 0.
    d : int
        Coordinates per row.
    base : {"pm", "hm"}, default "pm"
        One-dimensional mechanism for the drawn attributes: PM (Algorithm 2) or HM.
    attributes : int >= 1 or None
        ``k`` fixed (at most ``d``); None: the paper's rule. ``epsilon / k`` must not fall below the public floor
        (SPEC §12: the float argument's excess is per attribute). Any ``k`` is ε-LDP (composition over the ``k``
        attributes at ε/k each); a smaller ``k`` has less variance for inputs of small ``|t_j|``, whose
        sampling term ``(d/k - 1) t_j^2`` is small (LDP gradient descent, :mod:`privfed.common.learners.ldp_gd`).

    Notes
    -----
    Randomness per row: ``k`` integers for the subset (:func:`sample_subsets`) and ``k``
    full-precision uniforms (PM) or ``3k`` uniforms (HM). Non-zero reports are ``(d/k) PM`` on the
    grid of :func:`pm_grid` at ``(eps/k, d/k)``, rounded *after* scaling (SPEC §12; reachability,
    privacy and bias as in :class:`PiecewiseMechanism`, in units of ``d/k``); the zeros are exact.

    References
    ----------
    .. [W19] N. Wang et al., "Collecting and analyzing multidimensional data with local
       differential privacy", ICDE 2019, Algorithms 2 and 4.
    """

    base: str = "pm"
    attributes: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.attributes is not None:
            check_int(self.attributes, name="attributes", minimum=1)
        if not isinstance(self.base, str):
            raise TypeError(f"base must be a str, one of {BASES}, got {self.base!r}")
        if self.base not in BASES:
            raise ConfigError(f"base must be one of {BASES}, got {self.base!r}")
        check_epsilon_range(self.attribute_epsilon, name="epsilon / k", what="one attribute of Algorithm 4")

    @property
    def k(self) -> int:
        """Number of attributes each row reports."""
        if self.attributes is not None:
            return min(self.d, self.attributes)
        return max(1, min(self.d, math.floor(self.epsilon / 2.5)))

    @property
    def attribute_epsilon(self) -> float:
        """Budget of each reported attribute, ``epsilon / k``."""
        return self.epsilon / self.k

    @property
    def scale(self) -> float:
        return self.d / self.k

    @cached_property
    def output_grid(self) -> OutputGrid:
        """The public grid and clamp of the non-zero PM reports (:func:`pm_grid` at ``(eps/k, d/k)``)."""
        return pm_grid(self.attribute_epsilon, self.scale)

    def _base_sample(self, t: np.ndarray, rng: np.random.Generator, out: np.ndarray) -> None:
        if self.base == "pm":
            u, sign = full_uniform(rng, out.shape, work=out)
            pm_from_uniform(t, u, sign, self.attribute_epsilon, self.output_grid, self.scale, out=out)
        else:
            sample_hm(t, self.attribute_epsilon, rng, out, self.scale)

    def _new_output(self, n: int) -> np.ndarray:
        # Zeroed pages from the allocator; the blocks only write the k reported values.
        return np.zeros((n, self.d), dtype=np.float64)

    def _block_rows(self) -> int:
        # Only k values per row are sampled, so blocks can hold more rows than for the other
        # mechanisms (less per-block overhead) while the (rows, d) slice of t that is checked
        # stays in cache (2 MB).
        return max(1, (4 * BLOCK_VALUES) // self.d)

    def _sample_block(self, t: np.ndarray, rng: np.random.Generator, out: np.ndarray) -> None:
        m, d = out.shape
        k = self.k
        if k == d:
            self._base_sample(t, rng, out)
            return
        flat = sample_subsets(m, d, k, rng)
        flat += (np.arange(m, dtype=np.intp) * d)[:, None]  # index into the flattened block
        values = np.empty((m, k), dtype=np.float64)
        t = t if t.flags.c_contiguous else np.ascontiguousarray(t)
        self._base_sample(np.take(t.reshape(-1), flat), rng, values)
        np.put(out.reshape(-1), flat, values)  # the other coordinates stay 0

    @property
    def bias_bound(self) -> float:
        """Bound on ``|E[t*_j] - t_j|``: the scaled PM branch's (:func:`pm_bias_bound`); the zeros are exact."""
        if self.base == "hm" and hm_alpha(self.attribute_epsilon) == 0.0:
            return 0.0
        return pm_bias_bound(self.attribute_epsilon, self.scale)

    def _variance(self, t: np.ndarray) -> np.ndarray:
        base = pm_variance(t, self.attribute_epsilon) if self.base == "pm" else hm_variance(t, self.attribute_epsilon)
        return self.scale * base + (self.scale - 1.0) * t * t

    @property
    def output_bounds(self) -> tuple[float, float]:
        if self.base == "pm":
            c = self.output_grid.bound
        else:
            c = hm_bound(self.attribute_epsilon, self.scale)
        return (-c, c)
