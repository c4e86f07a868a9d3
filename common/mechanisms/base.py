"""Shared parts of the LDP mechanisms: the interface, validation and snapping (the factory is :mod:`.factory`).

Every mechanism maps rows ``t`` in ``[-1, 1]^d`` (already mapped by
:meth:`privfed.common.bounds.Bounds.to_unit`, SPEC §4) to unbiased reports ``t*``; the
aggregator's estimate of the mean is the plain column mean of the reports (SPEC §0).

Floating point (SPEC §12, Mironov CCS 2012). Textbook floating-point samplers of continuous
noise reach a sparse, input-dependent set of doubles, which an observer can use to tell inputs
apart. Every mechanism accepts ε only in ``[EPSILON_FLOOR, EPSILON_CEILING]``
(:func:`check_epsilon`); continuous outputs (Laplace, Piecewise) are drawn from full-precision
uniforms, rounded to a power-of-two grid that grows with the noise scale and clamped to a public
range (:mod:`.snapping`), so the set of reachable reports does not depend on the input. Each
mechanism's docstring states its grid, clamp and bias bound; the ``bias`` methods report the exact
mechanism's zero.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.snapping import WIRE_GRID_BITS, check_epsilon_range
from privfed.common.validation import check_int, check_positive, check_real, check_real_array, check_rng

MECHANISMS = ("pm", "hm", "duchi", "laplace")

SNAP_BITS = WIRE_GRID_BITS
SNAP_STEP = 2.0**-SNAP_BITS  #: spacing of the wire's grid; every continuous report is a multiple of it (SPEC §12)

#: Largest magnitude a report may reach: reports travel as int64 indices on the ``2**-20`` grid
#: (``proto/serde.py``), which hold ``|value| < 2**42`` with room to spare. A mechanism whose
#: outputs could go beyond it (a tiny ``epsilon``: PM's ``C = coth(eps/4)`` or Laplace's scale
#: ``2d/eps`` grow like ``1/eps``) is refused when it is built, before anything is computed or
#: debited (issue 9, item 7: ``epsilon=1e-300`` used to pass, be debited, then fail to encode).
REPORT_LIMIT = 2.0**42

#: Tolerance for inputs just outside [-1, 1] (rounding in Bounds.to_unit); they are clipped.
UNIT_TOLERANCE = 1e-12

#: Rows are sampled in blocks of about this many values, so temporaries stay in cache and
#: peak memory stays at the size of the output. The block size is fixed, so a seeded
#: generator gives the same reports on every run. (Block-sized temporaries can cost page faults
#: when the C allocator maps each afresh, so the samplers work in place where they can.)
BLOCK_VALUES = 1 << 16


def snap(x: np.ndarray) -> np.ndarray:
    """Round ``x`` in place to the nearest multiple of the wire's ``2**-20`` and return it.

    Multiplying by a power of two is exact, so the result is exactly ``rint(x * 2**20) / 2**20``.
    """
    x *= 2.0**SNAP_BITS
    np.rint(x, out=x)
    x *= SNAP_STEP
    return x


def check_epsilon(epsilon: object, *, name: str = "epsilon") -> float:
    """A mechanism's privacy budget: a real number in ``[EPSILON_FLOOR, EPSILON_CEILING]``, as ``float``.

    ``math.inf`` is refused with a pointer to :func:`make_mechanism`, which builds the
    :class:`IdentityMechanism` for a non-private run.

    Raises
    ------
    ConfigTypeError
        ``epsilon`` is not a real number (``bool`` and strings included); also a ``TypeError``.
    ConfigError
        ``epsilon`` is not > 0, is NaN, or is infinite.
    EpsilonOutOfRange
        ``epsilon`` is outside the public floor and ceiling (:mod:`.snapping`), a ``ConfigError``.
    """
    value = check_positive(epsilon, name=name, allow_inf=True, fix="choose a positive privacy budget such as 1.0")
    if math.isinf(value):
        raise ConfigError(
            f"{name} must be finite, got {epsilon!r}; for a non-private run use "
            "make_mechanism(name, epsilon=math.inf, d=d), which returns the IdentityMechanism"
        )
    return check_epsilon_range(value, name=name)


def _unit_float64(arr: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(arr, dtype=np.float64)
    if arr.size == 0:
        return arr
    lo, hi = arr.min(), arr.max()  # NaN propagates into both
    if not (lo >= -1.0 - UNIT_TOLERANCE and hi <= 1.0 + UNIT_TOLERANCE):
        raise ConfigError(
            f"{name} must lie in [-1, 1] (NaN and inf are not allowed), got values in [{lo}, {hi}]; "
            "map data with privfed.common.bounds.Bounds.to_unit, which clips to the public bounds"
        )
    if lo < -1.0 or hi > 1.0:
        arr = np.clip(arr, -1.0, 1.0)
    return arr


def check_unit_values(t: object, *, name: str = "t") -> np.ndarray:
    """``t`` as a float64 array with every value in ``[-1, 1]``.

    Values within :data:`UNIT_TOLERANCE` outside are clipped; anything further out, NaN or
    infinite raises :class:`ConfigError`. Non-numeric (or boolean) input raises ``TypeError``.
    """
    return _unit_float64(check_real_array(t, name=name), name)


@dataclass(frozen=True, kw_only=True)
class Mechanism(ABC):
    """An ε-LDP mechanism on rows of ``[-1, 1]^d`` with unbiased reports.

    Parameters
    ----------
    epsilon : float
        Privacy budget, finite and > 0. What it covers (a whole row, or each coordinate) is
        stated by each subclass.
    d : int
        Number of coordinates per row, >= 1.

    Notes
    -----
    Subclasses implement ``_sample_block`` for one block of rows; :meth:`privatize` validates
    once and walks the rows in blocks of about :data:`BLOCK_VALUES` values.
    """

    epsilon: float
    d: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "d", check_int(self.d, name="d", minimum=1))
        self._check_output_range()

    @property
    def max_abs_output(self) -> float:
        """Largest ``|report|`` the sampler can produce (``inf`` if its constants overflow)."""
        return max(abs(b) for b in self.output_bounds)

    def _check_output_range(self) -> None:
        """Raise :class:`ConfigError` unless every report is finite and below :data:`REPORT_LIMIT`."""
        try:
            bound = float(self.max_abs_output)
        except (ZeroDivisionError, OverflowError):
            bound = math.inf
        if not bound < REPORT_LIMIT:  # NaN and inf included
            raise ConfigError(
                f"{type(self).__name__} with epsilon={self.epsilon!r}, d={self.d}: reports could reach "
                f"{bound:.3g} in magnitude, beyond 2^42, the largest a report can carry (and "
                "float64 noise that large is no longer a usable release); the output range grows like "
                "1/epsilon, so choose a larger epsilon"
            )

    def _rows(self, t: ArrayLike) -> np.ndarray:
        """``t`` as an (n, d) real array; values are checked block by block in :meth:`privatize`."""
        arr = check_real_array(t, name="t")
        if arr.ndim != 2 or arr.shape[1] != self.d:
            raise ConfigError(
                f"t must have shape (n, {self.d}) (one row per report), got shape {arr.shape}; "
                f"reshape a single row with t.reshape(1, {self.d})"
            )
        return arr

    def privatize(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Perturb every row of ``t`` once.

        Parameters
        ----------
        t : ndarray of shape (n, d)
            Rows in ``[-1, 1]`` (values up to ``1e-12`` outside are clipped).
        rng : numpy.random.Generator
            Source of randomness: seeded PCG64 for tests, a cryptographic stream for releases.

        Returns
        -------
        ndarray of shape (n, d), float64
            Unbiased reports ``t*`` with ``E[t* | t] = t``.

        Raises
        ------
        TypeError
            ``rng`` is not a Generator, or ``t`` is not real-valued.
        ConfigError
            ``t`` has the wrong shape or values outside ``[-1, 1]``.
        """
        check_rng(rng)
        rows = self._rows(t)
        n = rows.shape[0]
        out = self._new_output(n)
        step = self._block_rows()
        for start in range(0, n, step):
            stop = min(n, start + step)
            # Checked per block: the values are then still in cache for the sampler.
            self._sample_block(_unit_float64(rows[start:stop], "t"), rng, out[start:stop])
        return out

    def _new_output(self, n: int) -> np.ndarray:
        """The (n, d) float64 array the blocks are written into."""
        return np.empty((n, self.d), dtype=np.float64)

    def _block_rows(self) -> int:
        """Rows per block: about :data:`BLOCK_VALUES` sampled values."""
        return max(1, BLOCK_VALUES // self.d)

    @abstractmethod
    def _sample_block(self, t: np.ndarray, rng: np.random.Generator, out: np.ndarray) -> None:
        """Write the reports of the rows ``t`` (shape (m, d)) into ``out`` (C-contiguous, same shape)."""

    def variance(self, t: ArrayLike) -> np.ndarray:
        """Per-coordinate ``Var[t*_j | t]``, same shape as ``t``.

        In every mechanism here it depends on ``t_j`` alone, so any shape of values in
        ``[-1, 1]`` is accepted (e.g. a scalar, a row of length ``d`` or an (n, d) array).
        """
        return self._variance(check_unit_values(t))

    @abstractmethod
    def _variance(self, t: np.ndarray) -> np.ndarray:
        """Closed-form variance for validated values ``t``."""

    def bias(self, t: ArrayLike) -> np.ndarray:
        """``E[t* | t] - t``: zero, the exact mechanisms are unbiased. The float-safe releases of the
        continuous mechanisms are unbiased up to their ``bias_bound`` (rounding to the grid, SPEC §12)."""
        return np.zeros_like(check_unit_values(t))

    @property
    @abstractmethod
    def output_bounds(self) -> tuple[float, float]:
        """Range ``(low, high)`` of each report coordinate (``±inf`` if unbounded)."""


@dataclass(frozen=True, kw_only=True)
class IdentityMechanism(Mechanism):
    """No perturbation: the bypass for non-private runs (``epsilon = inf``).

    ``privatize`` returns a float64 copy of ``t``; the variance is zero. Built by
    :func:`make_mechanism` when ``epsilon`` is ``math.inf``; it gives no privacy at all.
    """

    epsilon: float = math.inf

    def __post_init__(self) -> None:
        if check_real(self.epsilon, name="epsilon") != math.inf:
            raise ConfigError(
                f"IdentityMechanism is only for epsilon = inf, got {self.epsilon!r}; "
                "use make_mechanism(name, epsilon=..., d=...) for a private mechanism"
            )
        object.__setattr__(self, "epsilon", math.inf)
        object.__setattr__(self, "d", check_int(self.d, name="d", minimum=1))

    def privatize(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        check_rng(rng)
        return np.array(_unit_float64(self._rows(t), "t"), dtype=np.float64, copy=True)

    def _sample_block(
        self, t: np.ndarray, rng: np.random.Generator, out: np.ndarray
    ) -> None:  # pragma: no cover - privatize is overridden
        out[...] = t

    def _variance(self, t: np.ndarray) -> np.ndarray:
        return np.zeros_like(t)

    @property
    def output_bounds(self) -> tuple[float, float]:
        return (-1.0, 1.0)


def clip_error_pairs(sums: ArrayLike) -> np.ndarray:
    """Weighted ``(error, weight)`` pairs made well-formed: ``w >= 0``, ``e`` in ``[0, w]``, as a new (n, 2) array.

    The input of the boosting evaluation releases (:class:`~.laplace.ErrorPairLaplace`,
    :class:`~.randomized_response.ErrorPairResponse`); the clip of each row's weight that bounds their
    sensitivity happens before the sums (``privfed.common.boosting.owner``); this only guards the pair's shape
    and finiteness.
    """
    pairs = np.atleast_2d(np.asarray(sums, dtype=np.float64)).copy()
    if pairs.shape[1] != 2:
        raise ConfigError(f"evaluation sums must have shape (n, 2), got {pairs.shape}")
    if not np.all(np.isfinite(pairs)):
        raise ConfigError("evaluation sums must be finite")
    w = np.maximum(pairs[:, 1], 0.0)
    return np.stack([np.clip(pairs[:, 0], 0.0, w), w], axis=1)


@dataclass(frozen=True, kw_only=True)
class ErrorPairRelease(ABC):
    """What the boosting evaluation releases share (:class:`~.laplace.ErrorPairLaplace`,
    :class:`~.randomized_response.ErrorPairResponse`): an owner's row-clipped weighted (error, weight) pairs
    (n, 2) in, one noisy pair per owner out, from public ``epsilon`` (``inf``: exact, the non-private
    reference), row bound ``b`` and bound on the rows an owner holds.

    Subclasses check their own finite ε (:meth:`_check_finite`, after the common checks here) and give the
    sampler, the closed forms, the public bound ``M`` of every output coordinate and the noise as a Laplace
    scale (``sqrt(2 n)`` times it is the noise standard deviation of a sum over n owners).
    """

    epsilon: float
    row_bound: float
    max_rows: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive(self.epsilon, name="epsilon", allow_inf=True))
        object.__setattr__(self, "row_bound", check_positive(self.row_bound, name="eval_row_bound"))
        object.__setattr__(self, "max_rows", check_int(self.max_rows, name="max_owner_rows", minimum=1))
        if math.isfinite(self.epsilon):
            self._check_finite()

    @abstractmethod
    def _check_finite(self) -> None:
        """Raise :class:`ConfigError` unless the release can be drawn at this finite ε (public parameters only)."""

    @property
    @abstractmethod
    def bound(self) -> float:
        """``M``: every output coordinate lies in ``[-M, M]``."""

    @property
    @abstractmethod
    def noise_scale(self) -> float:
        """The noise per coordinate as a Laplace scale (0 at ``epsilon = inf``)."""

    @property
    def output_bounds(self) -> tuple[float, float]:
        return (-self.bound, self.bound)

    @abstractmethod
    def privatize(self, sums: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """Each owner's release (n, 2) of its row-clipped ``(e, w)`` (n, 2)."""

    @abstractmethod
    def variance(self, sums: ArrayLike) -> np.ndarray:
        """Closed-form variance of each coordinate of each release, shape of the pairs."""

    @abstractmethod
    def bias(self, sums: ArrayLike) -> np.ndarray:
        """Closed-form ``E[release] - pair``, shape of the pairs."""


def estimate_mean(reports: np.ndarray) -> np.ndarray:
    """The aggregator's unbiased estimate of the mean row in t-space: the column mean (SPEC §0).

    Parameters
    ----------
    reports : ndarray of shape (n, d), n >= 1
        Reports from :meth:`Mechanism.privatize` (from any number of owners, concatenated).

    Returns
    -------
    ndarray of shape (d,)
        ``MSE = (1/n^2) sum_i V(t_i)`` per coordinate.
    """
    arr = np.asarray(check_real_array(reports, name="reports"), dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ConfigError(f"reports must have shape (n >= 1, d), got {arr.shape}")
    mean = arr.mean(axis=0)
    if not np.all(np.isfinite(mean)):
        raise ConfigError("reports contain NaN or infinite values; they cannot come from a mechanism here")
    return mean
