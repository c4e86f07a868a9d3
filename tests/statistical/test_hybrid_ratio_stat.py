"""The epsilon ratio of the Hybrid Mechanism (SPEC §3.3) and of Algorithm 4 with HM (SPEC §3.2, ``base="hm"``).

Their moments and output range are tested in test_mechanisms_stat.py (``test_coordinatewise_moments``,
``test_algorithm4_moments``), HM's ``+C_D`` atom in ``test_hm_atoms``; the ratio was tested for PM, Duchi and
Alg. 4 with PM only. An HM report is ``PM(t, eps)`` with probability ``alpha = 1 - e^(-eps/2)`` (for eps > eps*),
else ``Duchi1D(t, eps)``: the two Duchi atoms ``+-C_D`` have probability ``(1 - alpha)(1 +- t tanh(eps/2))/2``
(the closed form, checked here), whose ratio between ``t = 1`` and ``t = -1`` is ``e^eps`` exactly, and the PM
part has PM's density, within ``e^eps`` for every pair of inputs.

Outputs are cut into categories -- each atom, then bins of the other values -- and for every pair of inputs
every category's log ratio must stay below ``eps`` by at most 5 standard errors (delta method), and the atom's
must equal ``eps`` within 5 s.e. (the bound is attained). ``test_the_check_catches_a_mechanism_spending_more``
runs the same check on HM at 1.5 eps and requires it to fail: the check can fail.
"""

import itertools
import math

import numpy as np
import pytest

from privfed.common.mechanisms import HybridMechanism, PiecewiseMultidim
from privfed.common.mechanisms.duchi import duchi_constant

pytestmark = pytest.mark.slow

M = 1_000_000
Z = 5.0
BINS = 40


def categories(out, atoms, bound):
    """Counts of each atom, then of ``BINS`` equal bins of ``[-bound, bound]`` holding the other outputs."""
    is_atom = np.zeros(out.shape, dtype=bool)
    counts = []
    for a in atoms:
        hit = out == a
        counts.append(np.count_nonzero(hit))
        is_atom |= hit
    edges = np.linspace(-bound, bound, BINS + 1)
    edges[0], edges[-1] = -np.inf, np.inf
    rest, _ = np.histogram(out[~is_atom], bins=edges)
    return np.concatenate([counts, rest]).astype(np.float64)


def worst_excess(c1, c2, eps, floor=200):
    """Largest ``(|log(c1/c2)| - eps) / s.e.`` over categories both inputs hit at least ``floor`` times
    (rarer ones have no usable normal approximation; with M = 10^6 they hold under 2e-4 of the mass)."""
    both = (c1 >= floor) & (c2 >= floor)
    assert np.count_nonzero(both) >= 10, "too few categories to test"
    se = np.sqrt(1 / c1[both] + 1 / c2[both])
    return float(np.max((np.abs(np.log(c1[both] / c2[both])) - eps) / se))


def log_ratio_z(k1, k2, eps):
    """``(log(k1/k2) - eps) / s.e.`` for two counts out of M each."""
    return (math.log(k1 / k2) - eps) / math.sqrt(1 / k1 + 1 / k2 - 2 / M)


def hm_outputs(mech, t, rng):
    return mech.privatize(np.full((M, 1), t), rng)[:, 0]


@pytest.mark.parametrize("eps", [1.0, 3.0])
def test_hm_ratio_is_attained_at_the_atoms_and_never_exceeded(eps, rng):
    mech = HybridMechanism(epsilon=eps)
    assert mech.alpha > 0  # both branches in play
    c_d = duchi_constant(eps)
    atoms = (-c_d, c_d)
    bound = mech.output_bounds[1]
    counts = {}
    for t in (1.0, 0.3, -1.0):
        out = hm_outputs(mech, t, rng)
        counts[t] = categories(out, atoms, bound)
        for sign, k in zip((-1.0, 1.0), counts[t][:2]):  # the atoms' closed form
            p = (1 - mech.alpha) * (1 + sign * t * math.tanh(eps / 2)) / 2
            assert abs(k / M - p) <= Z * math.sqrt(p * (1 - p) / M), (t, sign, k / M, p)
    for a, b in itertools.combinations(counts, 2):
        assert worst_excess(counts[a], counts[b], eps) <= Z, (a, b)
    # attained: +C_D from t = 1 against t = -1 (and -C_D the other way round)
    assert abs(log_ratio_z(counts[1.0][1], counts[-1.0][1], eps)) <= Z
    assert abs(log_ratio_z(counts[-1.0][0], counts[1.0][0], eps)) <= Z


def test_the_check_catches_a_mechanism_spending_more(rng):
    """HM at 1.5 eps, checked against eps: the atoms' ratio is e^(1.5 eps), far beyond 5 s.e."""
    eps = 1.0
    loose = HybridMechanism(epsilon=1.5 * eps)
    c_d = duchi_constant(1.5 * eps)
    bound = loose.output_bounds[1]
    c1 = categories(hm_outputs(loose, 1.0, rng), (-c_d, c_d), bound)
    c2 = categories(hm_outputs(loose, -1.0, rng), (-c_d, c_d), bound)
    assert worst_excess(c1, c2, eps) > 10 * Z
    assert log_ratio_z(c1[1], c2[1], eps) > 10 * Z


@pytest.mark.parametrize("eps", [0.5, 2.0])  # below eps* HM is Duchi alone; at 2 both branches, k = 1
def test_algorithm4_with_hm_ratio_per_coordinate(eps, rng):
    """Alg. 4 with HM, d = 3, k = 1: each coordinate reports ``3 HM(t_j, eps)`` with probability 1/3, else 0.
    Rows (1, 0, -1) and (-1, 0, 1): on every coordinate the categories {0, +-3 C_D, bins} stay within e^eps,
    and coordinate 0's +3 C_D atom attains it."""
    mech = PiecewiseMultidim(epsilon=eps, d=3, base="hm")
    assert (mech.k, mech.attribute_epsilon) == (1, eps)
    atoms = (0.0, -mech.scale * duchi_constant(eps), mech.scale * duchi_constant(eps))
    bound = mech.output_bounds[1]
    rows = (np.array([1.0, 0.0, -1.0]), np.array([-1.0, 0.0, 1.0]))
    outs = [mech.privatize(np.broadcast_to(r, (M, 3)), rng) for r in rows]
    assert all(np.all(np.abs(o) <= bound) for o in outs)
    for j in range(3):
        c1, c2 = (categories(o[:, j], atoms, bound) for o in outs)
        if eps < 0.6093524930273093:  # Duchi alone: three categories (0 and the atoms), no bins
            assert np.all(c1[3:] == 0) and np.all(c2[3:] == 0)
            se = np.sqrt(1 / c1[:3] + 1 / c2[:3])
            assert np.all(np.abs(np.log(c1[:3] / c2[:3])) <= eps + Z * se)
        else:
            assert worst_excess(c1, c2, eps) <= Z, j
    c1, c2 = (categories(o[:, 0], atoms, bound) for o in outs)
    assert abs(log_ratio_z(c1[2], c2[2], eps)) <= Z
