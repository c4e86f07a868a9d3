"""Statistical tests of the frequency oracles (Wang et al., USENIX Security 2017): unbiased counts,
variance against eq. 2 and against the set second moment, output range, and the e^eps ratio.

Tolerances are 5 standard errors (SPEC §0); each variance test also checks it keeps its power.
"""

import math

import numpy as np
import pytest

from privfed.common.mechanisms.frequency import HASH_PRIME, make_oracle

pytestmark = pytest.mark.slow

M = 400_000
Z = 5.0
CASES = [("krr", 1.0, 5), ("krr", 3.0, 8), ("oue", 1.0, 6), ("oue", 3.0, 4), ("olh", 1.0, 6), ("olh", 3.0, 9)]


def log_ratio_se(k1, k2, n1, n2):
    p1, p2 = k1 / n1, k2 / n2
    return math.sqrt((1 - p1) / (n1 * p1) + (1 - p2) / (n2 * p2))


@pytest.mark.parametrize("name, eps, domain", CASES)
def test_counts_unbiased_and_variance_matches_closed_form(name, eps, domain, rng):
    oracle = make_oracle(name, epsilon=eps, domain=domain)
    value = 1
    reports = oracle.privatize(np.full(M, value), rng)
    support = oracle.supports(reports)
    contrib = (support - oracle.q) / (oracle.p - oracle.q)  # one owner's unbiased count estimate
    truth = np.zeros(domain)
    truth[value] = 1.0
    var = oracle.count_variance(truth)  # n = 1 owner
    err = contrib.mean(axis=0) - truth
    assert np.all(np.abs(err) <= Z * np.sqrt(var / M)), (err, np.sqrt(var / M))
    sq = (contrib - truth) ** 2
    v_hat, se = sq.mean(axis=0), sq.std(axis=0) / math.sqrt(M)
    assert np.all(Z * se < 0.1 * var), "lost power"
    assert np.all(np.abs(v_hat - var) <= Z * se + 1e-9), (v_hat, var, se)  # OUE: held bit constant
    # aggregate estimate of many owners with mixed values: within 5 sd of the truth
    values = rng.integers(0, domain, size=M)
    counts = np.bincount(values, minlength=domain)
    est = oracle.estimate_counts(oracle.supports(oracle.privatize(values, rng)).sum(axis=0), M)
    assert np.all(np.abs(est - counts) <= Z * np.sqrt(oracle.count_variance(counts)))


@pytest.mark.parametrize("name, eps, domain", CASES)
@pytest.mark.parametrize("inside", [True, False])
def test_set_second_moment(name, eps, domain, inside, rng):
    oracle = make_oracle(name, epsilon=eps, domain=domain)
    subset = np.arange(domain) < 3
    value = 0 if inside else domain - 1
    s = oracle.supports(oracle.privatize(np.full(M, value), rng))[:, subset].sum(axis=1)
    x = (s - oracle.q * 3) ** 2
    want = oracle.set_second_moment(3, 1.0 if inside else 0.0)
    se = x.std() / math.sqrt(M)
    assert abs(x.mean() - want) <= Z * se, (x.mean(), want, se)


@pytest.mark.parametrize("name, eps, domain", CASES)
def test_output_range(name, eps, domain, rng):
    oracle = make_oracle(name, epsilon=eps, domain=domain)
    r = oracle.privatize(rng.integers(0, domain, size=20_000), rng)
    assert r.shape == (20_000, oracle.report_width)
    if name == "krr":
        assert r.min() >= 0 and r.max() < domain
    elif name == "oue":
        assert set(np.unique(r)) <= {0, 1}
    else:
        assert r[:, :3].min() >= 0 and r[:, :3].max() < HASH_PRIME
        assert r[:, 3].min() >= 0 and r[:, 3].max() < oracle.g


@pytest.mark.parametrize("name, eps, domain", CASES)
def test_epsilon_ratio_attained_not_exceeded(name, eps, domain, rng):
    """The most likely and least likely report of value 0 against value 1: probability ratio e^eps."""
    oracle = make_oracle(name, epsilon=eps, domain=domain)
    a = oracle.supports(oracle.privatize(np.zeros(M, dtype=np.int64), rng))
    b = oracle.supports(oracle.privatize(np.ones(M, dtype=np.int64), rng))
    # event: the report supports 0 and not 1 (k-RR: reports 0; OUE: bit 0 set, bit 1 clear;
    # OLH: the bucket is h(0) and h(1) differs); other bits are equally distributed under both.
    k1 = np.count_nonzero(a[:, 0] & ~a[:, 1])
    k2 = np.count_nonzero(b[:, 0] & ~b[:, 1])
    # OLH: P = p (1 - 1/g) against (1 - p)/(g - 1) (1 - 1/g), ratio e^eps as well.
    assert abs(math.log(k1 / k2) - eps) <= Z * log_ratio_se(k1, k2, M, M)
    assert math.log(k1 / k2) <= eps + Z * log_ratio_se(k1, k2, M, M)
