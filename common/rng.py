"""Random generators for privfed (SPEC §13, STYLE rule 5).

Two kinds, both ``numpy.random.Generator`` so every sampler has one API:

* ``seeded``: PCG64 from an explicit integer seed. For tests and reproducible
  simulations only; the seed is written to the report.
* ``secure``: AES-128 in counter mode (``randomgen.AESCounter``, AES-NI when the CPU has
  it) keyed from :mod:`secrets`. A cryptographically strong stream at numpy speed, the
  default for noise that is really released. Masks and keys never come from here: they
  come from :mod:`secrets` / :mod:`cryptography` directly.

There is deliberately no way to get numpy's global generator.
"""

from __future__ import annotations

import secrets

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.validation import check_choice, check_int

RNG_KINDS = ("seeded", "secure")


def make_rng(kind: str, seed: int | None = None) -> np.random.Generator:
    """Build a generator of the given ``kind``.

    Parameters
    ----------
    kind : {"seeded", "secure"}
    seed : int, required for ``seeded`` and forbidden for ``secure`` (a secure stream
        keyed by a known seed would not be secure).
    """
    if check_choice(kind, name="rng kind", allowed=RNG_KINDS) == "seeded":
        seed = check_int(seed, name="the seed of rng 'seeded'", minimum=0, fix="pass --seed N")
        return np.random.Generator(np.random.PCG64(seed))
    if seed is not None:
        raise ConfigError("rng 'secure' takes no seed (its key comes from the OS); drop --seed or use --rng seeded")
    # Imported here: randomgen loads all its bit generators (~8 MB RSS), which a seeded
    # simulation never uses (issue 10, "a lean owner node").
    from randomgen import AESCounter

    return np.random.Generator(AESCounter(seed=secrets.randbits(128)))


def spawn(rng: np.random.Generator, n: int) -> list[np.random.Generator]:
    """``n`` independent child generators of the same kind as ``rng``."""
    return (
        [np.random.Generator(bg) for bg in rng.bit_generator.spawn(n)]
        if hasattr(rng.bit_generator, "spawn")
        else [np.random.Generator(type(rng.bit_generator)(seed=secrets.randbits(128))) for _ in range(n)]
    )
