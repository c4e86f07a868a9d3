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

import functools
import importlib.util
import secrets
import sys
from typing import Any

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
    return np.random.Generator(_aes_counter()(seed=secrets.randbits(128)))


@functools.cache
def _aes_counter() -> Any:
    """randomgen's ``AESCounter`` class, loaded without running randomgen's package ``__init__``.

    ``import randomgen`` loads all 30 of its bit generators (5.1 MB RSS per process; 0.45 MB for
    this one: ``bench/footprint.py``, issue 27), and a secure owner node needs one. So the package
    is registered bare (its ``__init__`` not run) while :mod:`randomgen.aes` loads, with the
    ``randomgen.common`` and ``randomgen.seed_sequence`` it imports itself, and is then removed:
    a later ``import randomgen`` runs its ``__init__`` as usual and reuses those modules, and
    ``randomgen.AESCounter`` is this very class. A seeded simulation loads none of it (issue 10).
    """
    if "randomgen" in sys.modules:  # imported in full already
        from randomgen import AESCounter

        return AESCounter
    spec = importlib.util.find_spec("randomgen")
    if spec is None:
        raise ConfigError("rng 'secure' needs the randomgen package (pip install randomgen)")
    sys.modules["randomgen"] = importlib.util.module_from_spec(spec)
    try:
        from randomgen.aes import AESCounter
    finally:
        del sys.modules["randomgen"]
    return AESCounter


def spawn(rng: np.random.Generator, n: int) -> list[np.random.Generator]:
    """``n`` independent child generators of the same kind as ``rng``."""
    return (
        [np.random.Generator(bg) for bg in rng.bit_generator.spawn(n)]
        if hasattr(rng.bit_generator, "spawn")
        else [np.random.Generator(type(rng.bit_generator)(seed=secrets.randbits(128))) for _ in range(n)]
    )
