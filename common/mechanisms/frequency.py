"""Frequency oracles: k-RR, OUE and OLH (Wang, Blocki, Li, Jha, USENIX Security 2017).

Each owner holds one value ``v`` of a public domain ``0..D-1`` and releases one report. From a
report the aggregator reads a *support set*: ``support[c] = 1`` when the report supports value
``c``. All three protocols are "pure" (the paper's Definition 3): ``P[support[c] = 1] = p`` when
``c = v`` and ``q`` otherwise, so the count estimate ``(sum_owners support[c] - n q) / (p - q)``
is unbiased (eq. 1) with variance (eq. 2)

``Var = n q (1 - q) / (p - q)^2 + n_c (1 - p - q) / (p - q)``

for ``n`` owners of which ``n_c`` hold ``c``. Estimates of a *set* ``S`` of values (e.g. a
marginal of a joint domain) sum the supports over ``S``; their variance is in
:meth:`FrequencyOracle.set_second_moment`: for k-RR the supports of one report are exclusive,
for OUE and OLH (ideal hashing) independent.

* k-RR, "direct encoding" (§4.1): report ``v`` with ``p = e^eps / (e^eps + D - 1)``, else one of
  the other values; support = the reported value. Best for small ``D`` (``D < 3 e^eps + 2``).
* OUE, optimized unary encoding (§4.3): a D-bit vector, bit ``v`` set with ``p = 1/2``, every
  other bit with ``q = 1 / (e^eps + 1)``; variance ``4 e^eps / (e^eps - 1)^2`` per owner whatever
  ``D``.
* OLH, optimized local hashing (§4.4): hash ``v`` into ``g = round(e^eps) + 1`` buckets with a
  hash the owner draws, then g-ary randomized response on the bucket; support = values hashing to
  the reported bucket, ``p = e^eps / (e^eps + g - 1)``, ``q = 1/g``. Same variance as OUE, but a
  report is four integers. The hash is the polynomial family ``((a_2 c^2 + a_1 c + a_0) mod P) mod g``,
  ``P = 2^31 - 1``: 3-wise independent, which the variance of a *set* of values needs (two
  supports and the reported bucket; the linear, pairwise family correlates the supports of
  consecutive values: measured, +11 % on a set of three). The ``P mod g`` rounding moves ``q`` by
  less than ``g / P``. ε-LDP holds for any hash.

Reports are integers, so there is no floating-point leak (SPEC §12). k-RR reuses the sampler of
:class:`~privfed.common.mechanisms.randomized_response.KaryRandomizedResponse`.

References
----------
.. [WBLJ17] T. Wang, J. Blocki, N. Li, S. Jha, "Locally differentially private protocols for
   frequency estimation", USENIX Security 2017.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.base import check_epsilon
from privfed.common.mechanisms.randomized_response import KaryRandomizedResponse
from privfed.common.validation import check_int, check_rng

ORACLES = ("krr", "oue", "olh")
#: Prime modulus of OLH's hash family ``((a c + b) mod P) mod g``.
HASH_PRIME = 2**31 - 1


@dataclass(frozen=True, kw_only=True)
class FrequencyOracle(ABC):
    """An ε-LDP frequency oracle over the public domain ``0..domain-1`` ([WBLJ17] §3).

    Parameters
    ----------
    epsilon : float
        Budget of one report, finite and > 0.
    domain : int
        ``D >= 2`` values.
    """

    epsilon: float
    domain: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "domain", check_int(self.domain, name="domain", minimum=2))

    @property
    @abstractmethod
    def p(self) -> float:
        """``P[support[v] = 1]`` for the owner's own value ``v``."""

    @property
    @abstractmethod
    def q(self) -> float:
        """``P[support[c] = 1]`` for every other value ``c``."""

    @property
    @abstractmethod
    def report_width(self) -> int:
        """Integers per report."""

    @abstractmethod
    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Reports (n, report_width) of validated values (n,)."""

    @abstractmethod
    def supports(self, reports: Any) -> np.ndarray:
        """Support sets of reports (n, report_width): bool (n, domain)."""

    @property
    def independent_supports(self) -> bool:
        """Whether the support bits of one report are independent (OUE, OLH) or exclusive (k-RR)."""
        return True

    def privatize(self, values: Any, rng: np.random.Generator) -> np.ndarray:
        """One report per value.

        Parameters
        ----------
        values : int array (n,), in ``0..domain-1``
        rng : numpy.random.Generator

        Returns
        -------
        int64 array (n, report_width)
        """
        check_rng(rng)
        v = np.asarray(values)
        if v.ndim != 1 or v.dtype.kind not in "iu":
            raise TypeError(f"values must be a 1-d integer array of domain indices, got {v.dtype} {v.shape}")
        v = v.astype(np.int64, copy=False)
        if v.size and (v.min() < 0 or v.max() >= self.domain):
            raise ConfigError(f"values must lie in 0..{self.domain - 1}, got [{v.min()}, {v.max()}]")
        return self._sample(v, rng)

    def _reports(self, reports: Any) -> np.ndarray:
        r = np.asarray(reports)
        if r.ndim != 2 or r.shape[1] != self.report_width or r.dtype.kind not in "iu":
            raise ConfigError(f"reports must be an integer array (n, {self.report_width}), got {r.dtype} {r.shape}")
        return r.astype(np.int64, copy=False)

    def estimate_counts(self, support_counts: Any, n: int) -> np.ndarray:
        """Unbiased counts ``(s - n q) / (p - q)`` from summed supports of ``n`` reports ([WBLJ17] eq. 1)."""
        s = np.asarray(support_counts, dtype=np.float64)
        return (s - n * self.q) / (self.p - self.q)

    def count_variance(self, true_counts: Any) -> np.ndarray:
        """``Var`` of :meth:`estimate_counts` per value ([WBLJ17] eq. 2): ``n q(1-q)/(p-q)^2 + n_c (1-p-q)/(p-q)``."""
        c = np.asarray(true_counts, dtype=np.float64)
        n = c.sum(axis=-1, keepdims=True)
        p, q = self.p, self.q
        return n * q * (1 - q) / (p - q) ** 2 + c * (1 - p - q) / (p - q)

    def set_second_moment(self, size: int, prob_in: float) -> float:
        """``E[(s - q size)^2]`` for one report, ``s`` its support summed over a set of ``size`` values.

        ``prob_in`` is the probability that the owner's value lies in the set (the owner's value may
        itself be random). Divided by ``(p - q)^2`` it is the second moment of that report's
        unbiased contribution ``(s - q size) / (p - q)`` to the set's count.
        """
        p, q = self.p, self.q
        mean = q * size + (p - q) * prob_in
        if self.independent_supports:
            second = prob_in * (p * (1 - p) + (size - 1) * q * (1 - q) + (q * size + p - q) ** 2) + (1 - prob_in) * (
                size * q * (1 - q) + (q * size) ** 2
            )
        else:  # exclusive supports: s is one Bernoulli
            second = mean
        return second - 2 * q * size * mean + (q * size) ** 2


@dataclass(frozen=True, kw_only=True)
class DirectEncoding(FrequencyOracle):
    """k-ary randomized response as a frequency oracle ([WBLJ17] §4.1, "direct encoding").

    ``p = e^eps / (e^eps + D - 1)``, ``q = 1 / (e^eps + D - 1)``; a report is the reported value;
    ``P[report | v] / P[report | v'] <= p / q = e^eps``. Variance per owner
    ``(e^eps + D - 2) / (e^eps - 1)^2`` (``n_c = 0``).
    """

    @property
    def _krr(self) -> KaryRandomizedResponse:
        return KaryRandomizedResponse(epsilon=self.epsilon, n_classes=self.domain)

    @property
    def p(self) -> float:
        return self._krr.p

    @property
    def q(self) -> float:
        return self._krr.q

    @property
    def report_width(self) -> int:
        return 1

    @property
    def independent_supports(self) -> bool:
        return False

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self._krr.privatize(values, rng)[:, None]

    def supports(self, reports: Any) -> np.ndarray:
        r = self._reports(reports)[:, 0]
        if r.size and (r.min() < 0 or r.max() >= self.domain):
            raise ConfigError(f"k-RR reports must lie in 0..{self.domain - 1}")
        out = np.zeros((r.shape[0], self.domain), dtype=bool)
        out[np.arange(r.shape[0]), r] = True
        return out


@dataclass(frozen=True, kw_only=True)
class OptimizedUnaryEncoding(FrequencyOracle):
    """Optimized unary encoding ([WBLJ17] §4.3): bit ``v`` kept at ``p = 1/2``, others set at ``q = 1/(e^eps + 1)``.

    Two inputs differ in two bits, so the report ratio is at most ``(p (1 - q)) / ((1 - p) q) = e^eps``.
    Variance per owner ``4 e^eps / (e^eps - 1)^2`` (``n_c = 0``), independent of ``D``.
    """

    @property
    def p(self) -> float:
        return 0.5

    @property
    def q(self) -> float:
        return 1.0 / (math.exp(self.epsilon) + 1.0)

    @property
    def report_width(self) -> int:
        return self.domain

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = values.shape[0]
        bits = rng.random((n, self.domain)) < self.q
        bits[np.arange(n), values] = rng.random(n) < self.p
        return bits.astype(np.int64)

    def supports(self, reports: Any) -> np.ndarray:
        r = self._reports(reports)
        if r.size and (r.min() < 0 or r.max() > 1):
            raise ConfigError("OUE reports must be bit vectors")
        return r.astype(bool)


@dataclass(frozen=True, kw_only=True)
class OptimizedLocalHashing(FrequencyOracle):
    """Optimized local hashing ([WBLJ17] §4.4): ``g = round(e^eps) + 1`` buckets, g-ary RR on the hashed value.

    A report is ``(a_0, a_1, a_2, bucket)``: the owner's hash ``h(c) = ((a_2 c^2 + a_1 c + a_0) mod P) mod g``
    (coefficients in ``0..P-1``, drawn by the owner, independent of its value) and the bucket,
    ``h(v)`` with probability ``e^eps / (e^eps + g - 1)``, else one of the other ``g - 1``.
    Given the hash the ratio of two values is at most ``e^eps``. Variance per owner
    ``(e^eps + g - 1)^2 / ((e^eps - 1)^2 (g - 1))``, about ``4 e^eps / (e^eps - 1)^2``.
    """

    @property
    def g(self) -> int:
        """Number of hash buckets, ``round(e^eps) + 1`` (at least 2)."""
        return max(2, int(round(math.exp(min(self.epsilon, 40.0)))) + 1)

    @property
    def p(self) -> float:
        return 1.0 / (1.0 + (self.g - 1) * math.exp(-self.epsilon))

    @property
    def q(self) -> float:
        return 1.0 / self.g

    @property
    def report_width(self) -> int:
        return 4

    def _hash(self, coef: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``h(c)`` by Horner's rule mod P; every operand stays below ``2^31``, every product below ``2^62``."""
        c = values % HASH_PRIME
        h = coef[..., 2]
        for j in (1, 0):
            h = (h * c + coef[..., j]) % HASH_PRIME
        return h % self.g

    def _sample(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        coef = rng.integers(0, HASH_PRIME, size=(values.shape[0], 3), dtype=np.int64)
        bucket = KaryRandomizedResponse(epsilon=self.epsilon, n_classes=self.g).privatize(self._hash(coef, values), rng)
        return np.concatenate([coef, bucket[:, None]], axis=1)

    def supports(self, reports: Any) -> np.ndarray:
        r = self._reports(reports)
        values = np.arange(self.domain, dtype=np.int64)[None, :]
        return self._hash(r[:, None, :3], values) == r[:, 3:4]


def make_oracle(name: str, *, epsilon: float, domain: int) -> FrequencyOracle:
    """Build a frequency oracle by name: ``"krr"``, ``"oue"`` or ``"olh"`` (module docstring)."""
    classes: dict[str, type[DirectEncoding | OptimizedUnaryEncoding | OptimizedLocalHashing]] = {
        "krr": DirectEncoding,
        "oue": OptimizedUnaryEncoding,
        "olh": OptimizedLocalHashing,
    }
    if name not in classes:
        raise ConfigError(f"unknown frequency oracle {name!r}; choose one of {ORACLES}")
    return classes[name](epsilon=epsilon, domain=domain)
