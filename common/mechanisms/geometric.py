"""Two-sided geometric (discrete Laplace) mechanism for counts, with an exact integer sampler
(issue 9, contract 7: row counts are released noised; issue 20: float-safe noise).

A FedDPDR owner weights its subspace and its SVM by its row count ``n_i`` (seed 004 §4.1,
``w_i = n_i / sum n``). The exact count is private (an owner of one row is told apart from an
owner of two), so it is released through this mechanism (:func:`noisy_count`) at a small share of the
PCA phase's ε and debited like any release (``privfed.owner.kinds.feddpdr``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.mechanisms.base import check_epsilon
from privfed.common.validation import check_int, check_int_array, check_rng

#: Significant bits kept of ε: the sampler uses ``epsilon`` rounded *down* to ``s 2^-k`` with
#: ``s < 2^EPSILON_BITS``, a rational it can draw with exactly (relative change below ``2^-19``,
#: never less private).
EPSILON_BITS = 20
#: Largest sensitivity: keeps every integer of the sampler below ``2^63`` with a margin of ``2^16``
#: noise scales.
MAX_SENSITIVITY = 1024
#: Public clamp of a released count: ``[-COUNT_LIMIT, COUNT_LIMIT]`` (the noise reaches it from every
#: input; an int64 on the wire).
COUNT_LIMIT = 2**62


def dyadic_rate(epsilon: float, sensitivity: int) -> tuple[int, int]:
    """``(s, t)`` with ``s / t <= epsilon / sensitivity``: ε rounded down to :data:`EPSILON_BITS` bits."""
    mantissa, exponent = math.frexp(epsilon)  # epsilon = mantissa 2^exponent, mantissa in [1/2, 1)
    s = math.floor(math.ldexp(mantissa, EPSILON_BITS))
    return s, sensitivity * 2 ** (EPSILON_BITS - exponent)


#: Steps of a Bernoulli(exp(-num/den)) draw taken whatever it draws (:func:`discrete_laplace`, "Timing"): the ``A_k``
#: of k = 1..K at once, the first failure read off them. All K succeed with probability at most ``1/K!``
#: (``1/20! < 2^-61``); only then does the draw go on, step by step.
BERNOULLI_STEPS = 20
#: Bernoulli(e^-1) trials of a draw's ``V`` taken at once ("Timing"): ``V >= 40`` has probability ``e^-40 < 2^-57``;
#: only then does it go on, trial by trial.
GEOMETRIC_STEPS = 40
#: Values drawn together at most (memory: a few hundred bytes each).
BLOCK = 4096
_STEPS = np.arange(1, BERNOULLI_STEPS + 1, dtype=np.int64)
#: ``K!`` and ``K!/j!`` for j = 1..K (K = :data:`BERNOULLI_STEPS`; ``20! < 2^63``): a uniform ``R`` on ``{0..K!-1}`` is
#: below ``K!/j!`` with probability ``1/j!`` exactly (:func:`_bernoulli_inv_e`).
_FACTORIAL = math.factorial(BERNOULLI_STEPS)
_LEADS = np.array([_FACTORIAL // math.factorial(j) for j in range(1, BERNOULLI_STEPS + 1)], dtype=np.int64)


def _odd_first_failure(k: np.ndarray, num: np.ndarray, den: int, rng: np.random.Generator) -> np.ndarray:
    """Whether the first failure of ``A_k ~ Bernoulli(num/(den k))`` is at an odd k, given ``k`` (flat): 1 + the
    leading successes among the first :data:`BERNOULLI_STEPS`, ``K + 1`` if all of them succeeded, whose draws go
    on step by step (probability at most ``1/K!``)."""
    active = np.flatnonzero(k > BERNOULLI_STEPS)
    while active.size:
        success = rng.integers(0, den * k[active]) < num[active]
        k[active[success]] += 1
        active = active[success]
    return k % 2 == 1


def _bernoulli_exp(num: np.ndarray, den: int, rng: np.random.Generator) -> np.ndarray:
    """Exact ``Bernoulli(exp(-num/den))`` for integers ``0 <= num <= den`` (Canonne, Kamath, Steinke
    2020, Algorithm 1): ``A_k ~ Bernoulli(gamma/k)`` for k = 1, 2, ... until one fails; the result
    is 1 iff the first failure has odd k (``P = sum_k (-gamma)^k / k! = e^-gamma``). The first
    :data:`BERNOULLI_STEPS` are drawn at once, whatever they hold (:func:`discrete_laplace`, "Timing")."""
    flat = num.ravel()
    success = rng.integers(0, den * _STEPS, size=(flat.size, BERNOULLI_STEPS)) < flat[:, None]
    k = 1 + np.cumprod(success, axis=-1).sum(axis=-1)
    return _odd_first_failure(k, flat, den, rng).reshape(num.shape)


def _bernoulli_inv_e(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Exact ``Bernoulli(e^-1)``: :func:`_bernoulli_exp` at ``gamma = 1``, whose ``A_k ~ Bernoulli(1/k)`` succeed
    ``j`` times in a row with probability ``1/j!``: their leading successes are ``#{j : R < K!/j!}`` for one
    uniform ``R`` on ``{0..K!-1}`` (one integer instead of K, the same law)."""
    r = rng.integers(0, _FACTORIAL, size=math.prod(shape))
    k = np.ones(r.size, dtype=np.int64)
    for lead in _LEADS:  # every threshold for every value: the same work whatever R is
        k += r < lead
    return _odd_first_failure(k, np.ones(k.size, dtype=np.int64), 1, rng).reshape(shape)


def _successes_before_failure(m: int, rng: np.random.Generator) -> np.ndarray:
    """``V`` for ``m`` draws: Bernoulli(e^-1) successes before the first failure, :data:`GEOMETRIC_STEPS` trials
    drawn for each at once (:func:`discrete_laplace`, "Timing")."""
    v = np.cumprod(_bernoulli_inv_e((m, GEOMETRIC_STEPS), rng), axis=-1).sum(axis=-1)
    going = np.flatnonzero(v == GEOMETRIC_STEPS)
    while going.size:  # every trial succeeded (probability < 2^-57): on trial by trial
        success = _bernoulli_inv_e((going.size,), rng)
        v[going[success]] += 1
        going = going[success]
    return v


def _draw(m: int, s: int, t: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` values of :func:`discrete_laplace`: rounds of ``m`` trials each, every trial drawing all its parts."""
    out = np.empty(m, dtype=np.int64)
    pending = np.arange(m)
    while pending.size:  # how many rounds is independent of the values kept (rejection sampling)
        n = pending.size
        u = rng.integers(0, t, size=n)
        keep = _bernoulli_exp(u, t, rng)
        v = _successes_before_failure(n, rng)  # for every trial, kept or not: the same work
        y = (u + t * v) // s
        negative = rng.integers(0, 2, size=n, dtype=np.int64) == 1
        done = keep & ~(negative & (y == 0))
        out[pending[done]] = np.where(negative, -y, y)[done]
        pending = pending[~done]
    return out


def discrete_laplace(
    shape: tuple[int, ...], *, epsilon: float, sensitivity: int, rng: np.random.Generator
) -> np.ndarray:
    """``Z`` with ``P[Z = z] proportional to exp(-eps' |z| / sensitivity)``, exactly, as int64.

    Canonne, Kamath, Steinke (NeurIPS 2020), Algorithm 2 with ``eps' / sensitivity = s / t``
    (:func:`dyadic_rate`): ``U`` uniform on ``{0..t-1}`` kept with probability ``e^(-U/t)``,
    ``V`` the number of successes of ``Bernoulli(e^-1)`` before a failure, ``X = U + t V`` (geometric
    with ratio ``e^(-1/t)``), ``Y = floor(X / s)`` (geometric with ratio ``e^(-s/t)``), a random sign,
    and ``(-, 0)`` rejected so that 0 is not counted twice. Only integer comparisons of uniform
    integers (numpy's bounded integers are exact): no floating point touches the noise. Vectorised,
    in blocks of :data:`BLOCK` values.

    Timing. The algorithm as written loops ``V + 1`` times for ``V`` and its Bernoulli draws until a
    failure, so its time follows ``|Z|``: ~60 us per ``1/eps`` of ``|Z|`` (``V``), which with the released
    ``n + Z`` narrows ``n`` past what ε allows (Jin, McMurtry, Rubinstein, Ohrimenko, "Are we there yet?
    Timing and floating-point attacks on differential privacy systems", IEEE S&P 2022). So every trial draws
    :data:`GEOMETRIC_STEPS` Bernoulli(e^-1) trials of :data:`BERNOULLI_STEPS` steps each, whatever they hold;
    the work of a draw depends on its value only in an event of probability below ``2^-56``, and the number
    of rejection rounds is independent of the value kept (audit 10, ``tests/adversary/test_timing_count_noise.py``).
    """
    s, t = dyadic_rate(epsilon, sensitivity)
    size = math.prod(shape)
    out = np.empty(size, dtype=np.int64)
    for start in range(0, size, BLOCK):
        end = min(start + BLOCK, size)
        out[start:end] = _draw(end - start, s, t, rng)
    return out.reshape(shape)


@dataclass(frozen=True, kw_only=True)
class GeometricMechanism:
    """Two-sided geometric mechanism of Ghosh, Roughgarden and Sundararajan (STOC 2009, §2).

    ``n* = clamp(n + Z)`` with ``P[Z = z] = (1 - a)/(1 + a) a^|z|``, ``a = exp(-eps' / sensitivity)``:
    the discrete Laplace distribution, ``eps'``-DP for integer queries of the given sensitivity (a
    row count has sensitivity 1 under add/remove of a row), ``eps' <= epsilon`` the budget rounded
    down to 20 significant bits (:func:`dyadic_rate`). Unbiased; ``Var = 2a / (1 - a)^2``. Outputs
    are integers and may be zero or negative; a consumer that needs a positive weight clips
    (post-processing).

    Parameters
    ----------
    epsilon : float
        In ``[EPSILON_FLOOR, EPSILON_CEILING] = [1e-5, 30]``.
    sensitivity : int, default 1
        At most :data:`MAX_SENSITIVITY`.

    Notes
    -----
    Float-safe by construction (SPEC §12): ``Z`` comes from the exact integer sampler of Canonne,
    Kamath and Steinke (:func:`discrete_laplace`), so every integer has its exact probability and
    the set of reachable outputs is every integer in the public clamp ``[-2^62, 2^62]`` whatever
    the count. (numpy's ``Generator.geometric`` inverts a 53-bit uniform in floating point; its far
    tail skips integers, and which ones depends on the count.) The sampler's integers stay below
    ``2^63`` unless ``V`` exceeds ``2^16``, an event of probability ``e^-65536``.

    References
    ----------
    .. [GRS09] A. Ghosh, T. Roughgarden, M. Sundararajan, "Universally utility-maximizing
       privacy mechanisms", STOC 2009.
    .. [CKS20] C. L. Canonne, G. Kamath, T. Steinke, "The discrete Gaussian for differential
       privacy", NeurIPS 2020 (Algorithms 1 and 2).
    """

    epsilon: float
    sensitivity: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(
            self, "sensitivity", check_int(self.sensitivity, name="sensitivity", minimum=1, maximum=MAX_SENSITIVITY)
        )

    @property
    def effective_epsilon(self) -> float:
        """``eps'``: ``epsilon`` rounded down to the rational the sampler draws with."""
        s, t = dyadic_rate(self.epsilon, self.sensitivity)
        return self.sensitivity * s / t

    @property
    def alpha(self) -> float:
        """``a = exp(-eps' / sensitivity)``."""
        return math.exp(-self.effective_epsilon / self.sensitivity)

    def privatize(self, counts: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """``clamp(counts + Z)`` elementwise, as int64.

        Raises
        ------
        TypeError
            ``counts`` is not an integer array, or ``rng`` is not a Generator.
        """
        check_rng(rng)
        arr = np.clip(check_int_array(counts, name="counts").astype(np.int64), -COUNT_LIMIT, COUNT_LIMIT)
        noise = discrete_laplace(arr.shape, epsilon=self.epsilon, sensitivity=self.sensitivity, rng=rng)
        return np.clip(arr + noise, -COUNT_LIMIT, COUNT_LIMIT)

    def variance(self, counts: ArrayLike | None = None) -> float:
        """``2a / (1 - a)^2``, the same for every count."""
        rate = self.effective_epsilon / self.sensitivity
        return 2.0 * math.exp(-rate) / math.expm1(-rate) ** 2

    def bias(self, counts: ArrayLike | None = None) -> float:
        """0: the noise is symmetric (the clamp at ``2^62`` never binds for a count)."""
        return 0.0

    @property
    def output_bounds(self) -> tuple[float, float]:
        """The public clamp ``(-2^62, 2^62)``."""
        return (-float(COUNT_LIMIT), float(COUNT_LIMIT))


def noisy_count(n: int, *, epsilon: float, rng: np.random.Generator) -> int:
    """An owner's row count ``n`` released by :class:`GeometricMechanism` at ``epsilon`` (sensitivity 1: adding
    or removing a row moves it by one), an integer in the public clamp; ``epsilon = inf``: the exact count
    (the non-private reference)."""
    if math.isinf(epsilon):
        return int(n)
    return int(GeometricMechanism(epsilon=epsilon).privatize(np.int64(n), rng))
