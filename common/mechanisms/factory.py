"""The mechanism factory: a multidimensional LDP mechanism by name (kept apart from :mod:`.base`,
which every mechanism module imports, so that no module imports one that imports it)."""

from __future__ import annotations

import math
from functools import lru_cache
from numbers import Real

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.base import MECHANISMS, IdentityMechanism, Mechanism
from privfed.common.mechanisms.laplace import LaplaceMechanism
from privfed.common.mechanisms.piecewise_multidim import PiecewiseMultidim


def make_mechanism(name: str, *, epsilon: float, d: int) -> Mechanism:
    """Build a row-level ε-LDP mechanism by name.

    Parameters
    ----------
    name : {"pm", "hm", "duchi", "laplace"}
        ``"pm"``: :class:`PiecewiseMultidim` (Wang et al. Alg. 4, SPEC §3.2);
        ``"hm"``: the same with the Hybrid Mechanism for each sampled attribute (Wang et al. §III-C, Alg. 4
        with HM: less worst-case variance than PM at every ε);
        ``"duchi"``: :class:`DuchiMultidim` (Alg. 3, SPEC §2.2);
        ``"laplace"``: :class:`LaplaceMechanism` (ε/d per coordinate, SPEC §1).
    epsilon : float
        Budget for a whole row, > 0. ``math.inf`` returns :class:`IdentityMechanism` (no privacy).
    d : int
        Coordinates per row.
    """
    if not isinstance(name, str):
        raise TypeError(f"mechanism name must be a str, one of {MECHANISMS}, got {name!r}")
    if name not in MECHANISMS:
        raise ConfigError(f"unknown mechanism {name!r}; choose one of {MECHANISMS}")
    if isinstance(epsilon, Real) and not isinstance(epsilon, bool) and float(epsilon) == math.inf:
        return IdentityMechanism(d=d)
    if name in ("pm", "hm"):
        return PiecewiseMultidim(epsilon=epsilon, d=d, base=name)
    if name == "duchi":
        from privfed.common.mechanisms.duchi import DuchiMultidim  # here: it loads scipy.special

        return DuchiMultidim(epsilon=epsilon, d=d)
    return LaplaceMechanism(epsilon=epsilon, d=d)


@lru_cache(maxsize=32)
def mechanism_of(name: str, epsilon: float, d: int) -> Mechanism:
    """``make_mechanism(name, epsilon=epsilon, d=d)``, built once per distinct (name, ε, d) (issue 27:
    once per round, not per task or reply): a mechanism is frozen configuration, and every draw comes
    from the generator each call is given. Owners release through it and the coordinator checks each
    reply's range against it (building a PM mechanism and its output grid per reply was 12 % of the
    coordinator's profile at 10^5 LR owners). A bad name or ε raises each time (nothing is kept)."""
    return make_mechanism(name, epsilon=epsilon, d=d)
