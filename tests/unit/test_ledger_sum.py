"""The ledger's running exact sum (privfed.common.ledger_sum): after every addition it equals
``math.fsum`` of everything added so far, bit for bit, on sequences where a plain float sum
under-counts; and so does an owner's spent ε/δ, debited one by one, in one batch or read back from
the file (issue 27)."""

import math
from fractions import Fraction

import pytest

from privfed.common.ledger import Debit, Ledger
from privfed.common.ledger_sum import ExactSum, add_rounding_up


def same(a: float, b: float) -> bool:
    return a.hex() == b.hex()


def assert_running_fsum(values):
    """ExactSum equals fsum of every prefix of ``values``."""
    s = ExactSum()
    for i, x in enumerate(values):
        s.add(x)
        expected = math.fsum(values[: i + 1])
        assert same(s.value(), expected), (i, x, s.value(), expected)


def adversarial():
    """Non-negative sequences (ε and δ are non-negative) where rounding matters."""
    tie = 2.0**-53  # half an ulp of 1.0: ties and their breaking by smaller partials
    return {
        "many 0.1": [0.1] * 3000,
        "1e-17 after 1.0": [1.0] + [1e-17] * 500,
        "1e-16s under 1.0": [1.0] + [1e-16] * 50,
        "half-ulp ties": [1.0, tie, tie * 2**-60, 1.0, tie, tie],
        "ties to even": [1.0 + 2.0**-52, tie, 1.0, tie, 2.0**-200],
        "magnitudes": [1e16, 1.0, 1e-16, 1e-300, 5e-324, 1e300, 0.3, 1e16, 2.0**-1074, 7.0],
        "decimal splits": [0.1, 0.2, 0.3, 0.7, 0.01, 0.05, 1 / 3, 2 / 3, 0.15, 0.45] * 40,
        "subnormals": [5e-324] * 100 + [2.0**-1022, 1e-310],
    }


@pytest.mark.parametrize("name", list(adversarial()))
def test_the_running_sum_is_fsum_of_every_prefix_bit_for_bit(name):
    assert_running_fsum(adversarial()[name])


def test_a_plain_float_sum_would_under_count_where_the_running_sum_does_not():
    values = adversarial()["1e-16s under 1.0"]
    plain = 0.0
    for x in values:
        plain += x
    s = ExactSum()
    for x in values:
        s.add(x)
    assert plain == 1.0 and s.value() > 1.0 and same(s.value(), math.fsum(values))


def test_random_mixtures_of_magnitudes_match_fsum(rng):
    for _ in range(40):
        n = int(rng.integers(1, 300))
        values = [float(m) * 10.0 ** int(e) for m, e in zip(rng.random(n), rng.integers(-40, 40, n))]
        assert_running_fsum(values)


def test_signed_values_and_specials_follow_fsum():
    assert_running_fsum([1e100, 1.0, -1e100, 1e-100, -1.0, 0.1, -0.0])
    assert_running_fsum([1.0, math.inf, 2.0])  # an infinite ε: the sum is ∞ from then on
    overflow = ExactSum()
    for x in (1.7e308, 1.7e308):
        overflow.add(x)
    with pytest.raises(OverflowError):
        overflow.value()
    with pytest.raises(OverflowError):
        math.fsum([1.7e308, 1.7e308])
    both = ExactSum()
    for x in (math.inf, -math.inf):
        both.add(x)
    with pytest.raises(ValueError):
        both.value()


def test_a_copy_is_independent_and_the_partials_stay_few():
    s = ExactSum.of([0.1] * 10_000 + [1e-17] * 1000)
    c = s.copy()
    c.add(1.0)
    assert same(s.value(), math.fsum([0.1] * 10_000 + [1e-17] * 1000))
    assert same(c.value(), math.fsum([0.1] * 10_000 + [1e-17] * 1000 + [1.0]))
    assert len(s._partials) <= 40  # non-overlapping doubles: the state does not grow with the values


def test_an_owners_spent_is_fsum_of_its_releases_one_by_one_batched_and_read_back(tmp_path, rng):
    eps = [float(x) for x in rng.choice([0.1, 1e-17, 1e-3, 0.3, 2.0**-53, 1e-9], 600)]
    delta = [float(x) for x in rng.choice([1e-12, 3e-13, 1e-17, 2.0**-70], 600)]
    path = tmp_path / "l.sqlite"
    with Ledger(path, epsilon_budget=math.inf, delta_budget=1.0) as ledger:
        for i in range(100):  # one by one: the cache's sum grows after each commit
            ledger.debit("a", eps[i], delta[i], purpose="p", release_id=f"r{i}")
            assert same(ledger.spent("a").epsilon, math.fsum(eps[: i + 1]))
        ledger.debit_many([Debit("a", e, d, "p", f"r{i}") for i, (e, d) in enumerate(zip(eps, delta)) if i >= 100])
        spent = ledger.standings(["a"])["a"].spent
        assert same(spent.epsilon, math.fsum(eps)) and same(spent.delta, math.fsum(delta))
    with Ledger(path, epsilon_budget=math.inf, delta_budget=1.0) as again:  # read back from the file
        assert same(again.spent("a").epsilon, math.fsum(eps)) and same(again.spent("a").delta, math.fsum(delta))


@pytest.mark.parametrize("name", list(adversarial()))
def test_a_total_rounded_up_never_falls_below_the_exact_sum_and_drifts_at_most_an_ulp_a_step(name):
    values = adversarial()[name]
    total, exact = 0.0, Fraction(0)
    for x in values:
        before = total
        total = add_rounding_up(total, x)
        exact += Fraction(x)
        assert Fraction(total) >= exact
        assert total <= math.nextafter(before + x, math.inf)  # the nearest sum or one step above it
        if Fraction(before) + Fraction(x) == Fraction(before + x):
            assert total == before + x  # an exact addition is not bumped


def test_a_rows_account_is_not_under_counted_where_nearest_additions_would_be(tmp_path):
    values = adversarial()["1e-16s under 1.0"]  # nearest additions stay at 1.0, below the exact sum
    with Ledger(tmp_path / "l.sqlite", epsilon_budget=math.inf) as ledger:
        ledger.bind_rows("a", [b"row"])
        ledger.debit_many([Debit("a", x, 0.0, "p", f"r{i}") for i, x in enumerate(values)])
        ledger.bind_rows("b", [b"row"])  # another id on the same row: its rows spent what the account holds
        assert Fraction(ledger.rows_spent("b").epsilon) >= sum(map(Fraction, values)) > 1
    with Ledger(tmp_path / "l.sqlite", epsilon_budget=math.inf) as again:  # as stored in the file
        again.bind_rows("c", [b"row"])
        assert Fraction(again.rows_spent("c").epsilon) >= sum(map(Fraction, values))
