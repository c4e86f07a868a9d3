"""Two-sided geometric mechanism for counts (issue 9, contract 7: row counts are released noised).

A FedDPDR owner weights its subspace and its SVM by its row count ``n_i`` (seed 004 §4.1,
``w_i = n_i / sum n``). The exact count is private (an owner of one row is told apart from an
owner of two), so it is released through this mechanism at a small share of the PCA phase's ε and
debited like any release.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.base import check_epsilon
from privfed.common.validation import check_int, check_int_array, check_rng

#: The noise of one count must fit an int64 with a wide margin: its scale is about
#: ``sensitivity / epsilon``, so epsilon below this is refused (the output would be meaningless and
#: numpy's geometric sampler loses its exactness far out in the tail).
MIN_EPSILON = 1e-9


@dataclass(frozen=True, kw_only=True)
class GeometricMechanism:
    """Two-sided geometric mechanism of Ghosh, Roughgarden and Sundararajan (STOC 2009, §2).

    ``n* = n + Z`` with ``P[Z = z] = (1 - a)/(1 + a) a^|z|``, ``a = exp(-epsilon / sensitivity)``:
    the discrete Laplace distribution, ``epsilon``-DP for integer queries of the given
    sensitivity (a row count has sensitivity 1 under add/remove of a row). Unbiased;
    ``Var = 2a / (1 - a)^2``. Outputs are integers and may be zero or negative; a consumer that
    needs a positive weight clips (post-processing).

    Parameters
    ----------
    epsilon : float
        Finite, ``>= MIN_EPSILON`` (``1e-9``).
    sensitivity : int, default 1

    Notes
    -----
    Sampler: ``Z = G1 - G2`` with ``G1, G2`` i.i.d. geometric on ``{1, 2, ...}`` with success
    probability ``1 - a`` (numpy's ``Generator.geometric``); their difference has exactly the
    two-sided geometric law. Integer outputs have no least-significant-bit channel of the kind
    Mironov found in floating-point Laplace samplers (SPEC §12); the sampler's own inversion is
    in floating point, which perturbs the tail probabilities by about ``2^-53`` relative.

    References
    ----------
    .. [GRS09] A. Ghosh, T. Roughgarden, M. Sundararajan, "Universally utility-maximizing
       privacy mechanisms", STOC 2009.
    """

    epsilon: float
    sensitivity: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "sensitivity", check_int(self.sensitivity, name="sensitivity", minimum=1))
        if self.epsilon < MIN_EPSILON:
            raise ConfigError(
                f"GeometricMechanism epsilon={self.epsilon!r} is below {MIN_EPSILON:g}: the noise "
                "of a count would be astronomically large; choose a larger epsilon"
            )

    @property
    def alpha(self) -> float:
        """``a = exp(-epsilon / sensitivity)``."""
        return math.exp(-self.epsilon / self.sensitivity)

    def privatize(self, counts: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """``counts + Z`` elementwise, as int64.

        Raises
        ------
        TypeError
            ``counts`` is not an integer array, or ``rng`` is not a Generator.
        """
        check_rng(rng)
        arr = check_int_array(counts, name="counts")
        p = -math.expm1(-self.epsilon / self.sensitivity)  # 1 - a, exact for small epsilon
        noise = rng.geometric(p, size=arr.shape).astype(np.int64) - rng.geometric(p, size=arr.shape).astype(np.int64)
        return arr.astype(np.int64) + noise

    def variance(self, counts: ArrayLike | None = None) -> float:
        """``2a / (1 - a)^2``, the same for every count."""
        a = self.alpha
        return 2.0 * a / math.expm1(-self.epsilon / self.sensitivity) ** 2

    def bias(self, counts: ArrayLike | None = None) -> float:
        """0: the noise is symmetric."""
        return 0.0

    @property
    def output_bounds(self) -> tuple[float, float]:
        """Unbounded: ``(-inf, inf)``."""
        return (-math.inf, math.inf)
