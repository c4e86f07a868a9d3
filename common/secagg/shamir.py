"""Shamir t-of-n secret sharing over the prime field of NIST P-384 (Shamir, CACM 1979).

A secret ``s`` (an int below the prime, e.g. a 32-byte key read big-endian) is the constant term
of a random polynomial ``f`` of degree ``t - 1``; share ``i`` is ``(x_i, f(x_i))`` for distinct
non-zero ``x_i``. Any ``t`` shares give ``s = f(0)`` by Lagrange interpolation at 0; any ``t - 1``
shares are independent of ``s`` (uniform), which is what lets the pairwise-mask secure sum
(:mod:`privfed.common.secagg.pairwise`; Bonawitz et al. CCS 2017, §4 "Dealing with dropped users")
recover a dropped owner's mask key from its surviving neighbours while fewer than ``t`` colluding
neighbours learn nothing.

Why our own: the PyPI packages that do this (``secretsharing``, ``shamir``, ``pyshamir``) are
unmaintained, share over GF(2^8) per byte, or draw coefficients from :mod:`random`; the scheme is a
dozen lines of integer arithmetic here. Coefficients come from :mod:`secrets` (STYLE rule 5).
The prime ``p = 2^384 - 2^128 - 2^96 + 2^32 - 1`` (FIPS 186-4, D.1.2.4) exceeds every 32-byte
secret, so secrets never wrap. Each coefficient ``c_j`` (``j ≥ 1``) is uniform on ``[0, p)``: 48
random bytes, drawn again in the (probability below 2^-250) case that any of a draw's values is ``≥ p``.

Several secrets at once (:func:`split_joined`; an owner of a 10^5-owner run shares 11 secrets with
20 neighbours): their polynomials are evaluated together on packed integers, each secret's value in
a slot of its own wide enough that no sum carries into the next (``Σ_j c_j x^j < 2^(8·slot)``), so a
point costs ``t`` multiplications of one long integer by small powers instead of ``t`` per secret,
and the reduction mod ``p`` folds every slot at once (``2^384 ≡ δ = 2^128 + 2^96 - 2^32 + 1``).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from functools import lru_cache
from operator import mul

from privfed.common.errors import ConfigError, RemoteProtocolError

#: The field modulus, the P-384 prime.
PRIME = 2**384 - 2**128 - 2**96 + 2**32 - 1
#: Bytes of one encoded share value.
SHARE_BYTES = 48
#: Bytes of a secret this module shares (a 32-byte key or seed).
SECRET_BYTES = 32


def split(secret: bytes, xs: Sequence[int], threshold: int) -> dict[int, bytes]:
    """Shares of ``secret`` at the points ``xs``: ``{x: f(x)}``, any ``threshold`` of which recover it.

    Parameters
    ----------
    secret : bytes
        :data:`SECRET_BYTES` bytes.
    xs : sequence of int
        Distinct evaluation points in ``[1, 2^31)`` (the holders' 1-based positions).
    threshold : int
        ``t`` with ``1 <= t <= len(xs)``.

    Raises
    ------
    ConfigError
        A wrong secret length, repeated or out-of-range points, or ``t`` outside ``[1, len(xs)]``.
    """
    return split_joined([secret], xs, threshold)


def split_joined(secrets_: Sequence[bytes], xs: Sequence[int], threshold: int) -> dict[int, bytes]:
    """Shares of each of ``secrets_`` (independent polynomials) at the points ``xs``, joined per point:
    ``{x: f_1(x) ‖ f_2(x) ‖ ...}``, :data:`SHARE_BYTES` each, in the order of ``secrets_``.

    The same shares as :func:`split` of each secret alone (module docstring: evaluated packed).

    Raises
    ------
    ConfigError
        As :func:`split`, for any of ``secrets_``, or no secret at all.
    """
    if not secrets_ or not all(isinstance(s, bytes) and len(s) == SECRET_BYTES for s in secrets_):
        raise ConfigError(f"shared secrets are {SECRET_BYTES} bytes each, at least one")
    if len(set(xs)) != len(xs) or not all(isinstance(x, int) and 1 <= x < 2**31 for x in xs):
        raise ConfigError(f"share points must be distinct ints in [1, 2^31), got {list(xs)[:8]}")
    if isinstance(threshold, bool) or not isinstance(threshold, int) or not 1 <= threshold <= len(xs):
        raise ConfigError(f"threshold must be an int in [1, {len(xs)}] (the number of holders), got {threshold!r}")
    packing = _packing(len(secrets_), max(xs), threshold)
    width = packing.slot - SECRET_BYTES
    coefficients = [int.from_bytes(b"".join(bytes(width) + s for s in secrets_), "big")]
    coefficients += [_uniform_packed(packing) for _ in range(threshold - 1)]
    return {x: packing.shares(sum(map(mul, coefficients, _powers(x, threshold)))) for x in xs}


#: ``δ = 2^384 - p``: ``2^384 ≡ δ (mod p)``.
_DELTA = 2**384 - PRIME


class _Packing:
    """Slots of ``slot`` bytes for ``n`` values, the first value in the most significant slot."""

    def __init__(self, n: int, slot: int) -> None:
        self.n, self.slot = n, slot

        def each(value: int) -> int:  # ``value`` in every slot
            return sum(value << (8 * slot * i) for i in range(n))

        self.low, self.high = each(2**384 - 1), each(2 ** (8 * slot - 384) - 1)
        self.delta, self.carry = each(_DELTA), each(2**384)

    def at_least_p(self, packed: int) -> bool:
        """Whether any slot of ``packed`` (each below ``2^384``) is ``≥ p``: adding ``δ`` carries past bit 384."""
        return bool((packed + self.delta) & self.carry)

    def shares(self, packed: int) -> bytes:
        """Every slot of ``packed`` reduced mod ``p``, as :data:`SHARE_BYTES` bytes each, joined."""
        low, high, slot = self.low, self.high, self.slot
        while hi := (packed >> 384) & high:  # fold: v = hi·2^384 + lo ≡ hi·δ + lo, each slot below 2^(8·slot)
            packed = (packed & low) + hi * _DELTA
        raw = packed.to_bytes(self.n * slot, "big")
        values = [raw[i - SHARE_BYTES : i] for i in range(slot, len(raw) + 1, slot)]
        if self.at_least_p(packed):  # probability about 2^-255 per slot
            values = [(int.from_bytes(v, "big") % PRIME).to_bytes(SHARE_BYTES, "big") for v in values]
        return b"".join(values)


@lru_cache(maxsize=256)
def _packing(n: int, x_max: int, threshold: int) -> _Packing:
    """Slots wide enough for ``Σ_j c_j x^j`` with every ``c_j < p`` and ``x ≤ x_max``, and for a fold's sum."""
    bound = (PRIME - 1) * sum(x_max**j for j in range(threshold))
    return _Packing(n, max(bound.bit_length(), 386) // 8 + 1)


def _uniform_packed(packing: _Packing) -> int:
    """A uniform value of ``[0, p)`` in every slot (48 random bytes each, drawn again if any is ``≥ p``)."""
    pad = bytes(packing.slot - SHARE_BYTES)
    while True:
        noise = secrets.token_bytes(SHARE_BYTES * packing.n)
        packed = int.from_bytes(
            b"".join(pad + noise[i : i + SHARE_BYTES] for i in range(0, len(noise), SHARE_BYTES)), "big"
        )
        if not packing.at_least_p(packed):
            return packed


@lru_cache(maxsize=4096)
def _powers(x: int, t: int) -> tuple[int, ...]:
    """``(x^0, ..., x^(t-1))``: share points repeat (1..k for every owner), so these are computed once."""
    return tuple(x**j for j in range(t))


@lru_cache(maxsize=4096)
def _lagrange_at_zero(xs: tuple[int, ...]) -> tuple[int, ...]:
    """``λ_j = Π_{m≠j} x_m / (x_m - x_j) mod p``: the weights of ``f(0) = Σ λ_j f(x_j)``."""
    weights = []
    for j, xj in enumerate(xs):
        num, den = 1, 1
        for m, xm in enumerate(xs):
            if m != j:
                num = num * xm % PRIME
                den = den * (xm - xj) % PRIME
        weights.append(num * pow(den, -1, PRIME) % PRIME)
    return tuple(weights)


def combine(shares: dict[int, bytes], threshold: int) -> bytes:
    """The secret from at least ``threshold`` shares ``{x: f(x)}`` (the ``threshold`` smallest points are used).

    Raises
    ------
    RemoteProtocolError
        Fewer than ``threshold`` shares, a malformed share, or a value that is not a
        :data:`SECRET_BYTES`-byte secret (shares of different secrets, or tampered ones).
    """
    if len(shares) < threshold:
        raise RemoteProtocolError(f"{len(shares)} share(s) cannot recover a {threshold}-of-n secret")
    xs = tuple(sorted(shares)[:threshold])
    ys = []
    for x in xs:
        raw = shares[x]
        if not isinstance(raw, bytes) or len(raw) != SHARE_BYTES or int.from_bytes(raw, "big") >= PRIME:
            raise RemoteProtocolError(f"share at x = {x} is not a field element of {SHARE_BYTES} bytes")
        ys.append(int.from_bytes(raw, "big"))
    secret = sum(w * y for w, y in zip(_lagrange_at_zero(xs), ys)) % PRIME
    if secret >= 1 << (8 * SECRET_BYTES):
        raise RemoteProtocolError("the shares do not interpolate to a 32-byte secret: inconsistent or tampered")
    return secret.to_bytes(SECRET_BYTES, "big")
