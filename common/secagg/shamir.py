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
dozen lines of integer arithmetic here. Coefficients come from :mod:`secrets` (STYLE rule 5),
each reduced from 64 more bits than the prime has (statistical distance below 2^-64 from uniform).
The prime ``p = 2^384 - 2^128 - 2^96 + 2^32 - 1`` (FIPS 186-4, D.1.2.4) exceeds every 32-byte
secret, so secrets never wrap. Share points are small ints, so ``f(x) = Σ c_j x^j`` is computed
with exact small powers and one reduction (no modular Horner steps): an owner of a 10^4-owner run
splits ~13 secrets for ~16 neighbours, and this keeps it to tens of microseconds each.
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
_COEFF_BYTES = SHARE_BYTES + 8
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
    if not isinstance(secret, bytes) or len(secret) != SECRET_BYTES:
        raise ConfigError(f"a shared secret is {SECRET_BYTES} bytes, got {len(secret)}")
    if len(set(xs)) != len(xs) or not all(isinstance(x, int) and 1 <= x < 2**31 for x in xs):
        raise ConfigError(f"share points must be distinct ints in [1, 2^31), got {list(xs)[:8]}")
    if isinstance(threshold, bool) or not isinstance(threshold, int) or not 1 <= threshold <= len(xs):
        raise ConfigError(f"threshold must be an int in [1, {len(xs)}] (the number of holders), got {threshold!r}")
    noise = secrets.token_bytes(_COEFF_BYTES * (threshold - 1))
    coefficients = [int.from_bytes(secret, "big")] + [
        int.from_bytes(noise[i : i + _COEFF_BYTES], "big") % PRIME for i in range(0, len(noise), _COEFF_BYTES)
    ]
    return {x: (sum(map(mul, coefficients, _powers(x, threshold))) % PRIME).to_bytes(SHARE_BYTES, "big") for x in xs}


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
