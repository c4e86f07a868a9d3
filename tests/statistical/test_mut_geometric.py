"""Mutation round 2 (common/mechanisms/geometric.py): ``noisy_count`` releases at the epsilon it is given.

A mutant building ``GeometricMechanism(epsilon=2 * epsilon)`` inside ``noisy_count`` passed every test: the
mechanism's own law is tested, but ``noisy_count`` only for its non-private bypass and a loose spread. Every
owner's row count goes through it with the epsilon the ledger debits, so that mutant spends twice what is
debited. Statistical check with a fixed seed: the law of ``noisy_count(n) - n`` at eps = 1 (the atom at 0, the
variance ``2a/(1-a)^2``) and the ratio ``P[n]/P[n+1] = e^eps`` (the neighbouring count n+1 gives the mirror),
5 standard errors each; the mutant moves the atom from 0.46 to 0.76 (about 38 s.e.).
"""

import math

import numpy as np

from privfed.common.mechanisms.geometric import noisy_count

N = 4000
EPS = 1.0


def test_noisy_count_has_the_discrete_laplace_law_at_its_epsilon():
    rng = np.random.Generator(np.random.PCG64(20261129))
    z = np.array([noisy_count(7, epsilon=EPS, rng=rng) for _ in range(N)]) - 7
    a = math.exp(-EPS)
    atom = (1 - a) / (1 + a)
    assert abs(np.mean(z == 0) - atom) <= 5 * math.sqrt(atom * (1 - atom) / N)
    var = 2 * a / (1 - a) ** 2
    # s.e. of the sample variance: sqrt((kappa - 1) / N) var, kappa = 6.54 at eps = 1 (computed from the law)
    assert abs(np.mean(z.astype(float) ** 2) / var - 1) <= 5 * math.sqrt(5.6 / N)
    k0, k1 = np.count_nonzero(z == 0), np.count_nonzero(z == 1)
    assert abs(math.log(k0 / k1) - EPS) <= 5 * math.sqrt(1 / k0 + 1 / k1)


def test_the_sampler_rate_is_epsilon_rounded_down_never_up():
    """``dyadic_rate`` must round ε *down* to 20 bits (``s / t <= eps / sensitivity``): mutants taking ``ceil`` or
    dropping the ``floor`` passed every test, and draw the noise at a rate up to 2^-20 above the ε debited.
    Exact check with rationals over ε with more than 20 significant bits."""
    from fractions import Fraction

    from privfed.common.mechanisms.geometric import GeometricMechanism, dyadic_rate

    rng = np.random.Generator(np.random.PCG64(7))
    epsilons = [1 / 3, 0.1, math.pi, math.e / 7, 1e-5 * 1.2345678, 29.999999, *(10 ** rng.uniform(-5, 1.47, 50))]
    for eps in epsilons:
        for sensitivity in (1, 3, 1024):
            s, t = dyadic_rate(eps, sensitivity)
            assert isinstance(s, int) and isinstance(t, int)
            rate, want = Fraction(s, t), Fraction(eps) / sensitivity
            assert rate <= want, (eps, sensitivity)
            assert want - rate <= want * Fraction(1, 2**19), (eps, sensitivity)
        assert GeometricMechanism(epsilon=eps).effective_epsilon <= eps


def test_the_exact_bernoulli_exp_has_its_law():
    """``_bernoulli_exp(num, den)`` is Bernoulli(exp(-num/den)) exactly (Canonne, Kamath, Steinke, Alg. 1): each
    ``A_k`` succeeds with probability ``num / (den k)``. A mutant drawing ``A_k`` with ``<=`` (probability
    ``(num + 1) / (den k)``) passed every test: at the sampler's ``den = t`` (2^19 at eps = 1) it moves the law by
    about 2^-19, too little for a test at the mechanism's level. Here at small ``den`` it is plain: ``num = 0``
    must always succeed (exp(0) = 1), and ``num / den = 1/2`` has probability ``e^-1/2`` (5 s.e.)."""
    from privfed.common.mechanisms.geometric import _bernoulli_exp

    rng = np.random.Generator(np.random.PCG64(11))
    assert _bernoulli_exp(np.zeros(2000, dtype=np.int64), 7, rng).all()
    n = 40_000
    hits = np.count_nonzero(_bernoulli_exp(np.ones(n, dtype=np.int64), 2, rng))
    p = math.exp(-0.5)
    assert abs(hits / n - p) <= 5 * math.sqrt(p * (1 - p) / n)
