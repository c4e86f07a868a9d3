"""Mutation round 2 (common/mechanisms/frequency.py): OLH hashes into g = round(e^eps) + 1 buckets.

Mutants that made OLH hash into ``g = 2`` buckets (binary local hashing) or ``floor(e^eps) + 1`` passed every
test: the statistical tests compare OLH with its own ``p``, ``q`` and ``g``, so any ``g`` is self-consistent
(still eps-LDP and unbiased). But it is then not the optimized oracle of [WBLJ17] §4.4: at eps = 3 binary hashing
has 5.5 times the variance (1.27 times at eps = 1). So the buckets reached are checked against the paper's g, and the variance
against the paper's closed form, written here independently of the implementation.
"""

import math

import numpy as np
import pytest

from privfed.common.mechanisms.frequency import make_oracle


def paper_g(eps):
    return round(math.exp(eps)) + 1


@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_olh_reports_reach_exactly_the_papers_buckets(eps):
    rng = np.random.Generator(np.random.PCG64(20261129))
    oracle = make_oracle("olh", epsilon=eps, domain=7)
    reports = oracle.privatize(rng.integers(0, 7, size=20_000), rng)
    assert np.array_equal(np.unique(reports[:, 3]), np.arange(paper_g(eps)))


@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_olh_variance_is_the_papers_closed_form(eps):
    """[WBLJ17] eq. for OLH: a value no owner holds has variance ``n (e^eps + g - 1)^2 / ((e^eps - 1)^2 (g - 1))``;
    the empirical variance of one owner's estimate matches it (5 s.e.)."""
    g, e = paper_g(eps), math.exp(eps)
    want = (e + g - 1) ** 2 / ((e - 1) ** 2 * (g - 1))
    oracle = make_oracle("olh", epsilon=eps, domain=5)
    truth = np.array([0.0, 1.0, 0.0, 0.0, 0.0])
    assert oracle.count_variance(truth)[0] == pytest.approx(want, rel=1e-12)
    rng = np.random.Generator(np.random.PCG64(20261130))
    n = 200_000
    contrib = (oracle.supports(oracle.privatize(np.ones(n, dtype=np.int64), rng))[:, 0] - 1.0 / g) / (
        (e / (e + g - 1)) - 1.0 / g
    )
    sq = contrib**2
    se = sq.std() / math.sqrt(n)
    assert 5 * se < 0.05 * want
    assert abs(sq.mean() - want) <= 5 * se, (sq.mean(), want, se)


def test_olh_estimates_are_unbiased_on_a_domain_wider_than_a_small_prime():
    """Mutation round 3: a hash prime of 2*31 - 1 = 61 (for 2**31 - 1) passed: values 61 apart then always share a
    bucket, so every owner holding 0 also counted for 61 and 122. Domain 130, all owners hold 0 (5 s.e.)."""
    oracle = make_oracle("olh", epsilon=1.0, domain=130)
    rng = np.random.Generator(np.random.PCG64(20261131))
    n = 20_000
    counts = oracle.supports(oracle.privatize(np.zeros(n, dtype=np.int64), rng)).sum(axis=0)
    est = oracle.estimate_counts(counts, n)
    truth = np.zeros(130)
    truth[0] = n
    se = np.sqrt(oracle.count_variance(truth))
    assert np.all(np.abs(est - truth) <= 5 * se), np.flatnonzero(np.abs(est - truth) > 5 * se)
