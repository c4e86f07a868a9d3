"""Pairwise-mask secure aggregation (Bonawitz et al. CCS 2017 on Bell et al.'s sparse graph):
owners dropped at every step, thresholds, and what the coordinator sees."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from privfed.common.errors import ConfigError, LocalProtocolError, RemoteProtocolError, RoundFailed
from privfed.common.secagg import shamir
from privfed.common.secagg.aggregator import SecAggServer
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.inprocess import run_in_process
from privfed.common.secagg.masking import degree, neighbour_graph, threshold
from privfed.common.secagg.messages import UnmaskRequest
from privfed.common.secagg.pairwise import OwnerState

from .secagg_harness import Federation


def _values(ids, seed, m=2, scale=5.0):
    rng = np.random.default_rng(seed)
    return {o: rng.uniform(-scale, scale, m) for o in ids}


# ---------------------------------------------------------------------- public pieces


@pytest.mark.parametrize("n", [3, 4, 10, 50, 1000])
def test_graph_is_symmetric_regular_and_fixed_by_the_run(n):
    members = tuple(f"o{i:04d}" for i in range(n))
    graph = neighbour_graph("run-a", members)
    k = degree(n)
    assert k % 2 == 0 or k == n - 1
    assert all(2 <= len(near) <= k and o not in near for o, near in graph.items())
    assert np.mean([len(near) for near in graph.values()]) > k - 1  # few cycles share an edge
    assert all(o in graph[v] for o, near in graph.items() for v in near)
    assert neighbour_graph("run-a", members) == graph
    if n > 20:
        assert neighbour_graph("run-b", members) != graph  # another run, another public graph
        assert k <= 2 * np.log2(n) + 4  # O(log N)


def test_graph_refuses_unsorted_members_and_too_few():
    with pytest.raises(ConfigError):
        neighbour_graph("r", ("b", "a", "c"))
    with pytest.raises(ConfigError):
        degree(2)


@pytest.mark.parametrize("t,n", [(1, 1), (2, 3), (5, 9), (9, 16)])
def test_shamir_any_t_shares_recover_and_fewer_refuse(t, n):
    secret = bytes(range(32))
    shares = shamir.split(secret, range(1, n + 1), t)
    rng = np.random.default_rng(t)
    for _ in range(5):
        pick = rng.choice(np.arange(1, n + 1), size=t, replace=False)
        assert shamir.combine({int(x): shares[int(x)] for x in pick}, t) == secret
    if t > 1:
        with pytest.raises(RemoteProtocolError):
            shamir.combine({x: shares[x] for x in list(shares)[: t - 1]}, t)


def test_shamir_fewer_than_t_shares_are_uniform():
    """Two different secrets give the same distribution of any t-1 shares (chi-square on a byte)."""
    counts = []
    for secret in (b"\x00" * 32, b"\xff" * 32):
        draws = [shamir.split(secret, [1, 2, 3], 3)[2][-1] for _ in range(3000)]
        counts.append(np.bincount(np.array(draws) % 16, minlength=16))
    assert stats.chi2_contingency(np.array(counts))[1] > 1e-4


# ---------------------------------------------------------------------- sums


@pytest.mark.parametrize("n", [3, 7, 40])
def test_sum_over_rounds_is_exact(n):
    fed = Federation(n, rounds=3)
    fed.key_agreement()
    for r in range(3):
        values = _values(fed.ids, r)
        total = fed.round(values)
        np.testing.assert_array_equal(total, fed.exact_sum(values, fed.ids))
        assert fed.server.included == tuple(fed.ids)


def test_run_in_process_matches_the_plain_sum():
    values = _values([f"p{i}" for i in range(12)], 7)
    fp = FixedPoint.choose(n_parties=12, max_abs=5.0)
    for total in run_in_process(values, fp, "run-x", rounds=2):
        np.testing.assert_allclose(total, sum(values.values()), atol=12 * fp.error_bound)


# ---------------------------------------------------------------------- drops at each step


N = 30


def test_owner_dropped_before_keys_is_not_a_member():
    fed = Federation(N)
    fed.key_agreement(no_advert=["o003"])
    assert "o003" not in fed.server.members
    values = _values(fed.ids, 1)
    np.testing.assert_array_equal(fed.round(values), fed.exact_sum(values, set(fed.ids) - {"o003"}))


def test_owner_dropped_after_keys_before_shares_is_left_out():
    fed = Federation(N)
    fed.key_agreement(no_shares=["o004", "o017"])
    values = _values(fed.ids, 2)
    np.testing.assert_array_equal(fed.round(values), fed.exact_sum(values, set(fed.ids) - {"o004", "o017"}))
    assert "o004" not in fed.server.included


def test_owners_dropped_after_shares_before_masked_input_are_recovered_without_rerunning():
    fed = Federation(N)
    fed.key_agreement()
    values = _values(fed.ids, 3)
    dropped = {"o001", "o011", "o022"}
    total = fed.round(values, silent_input=dropped)
    np.testing.assert_array_equal(total, fed.exact_sum(values, set(fed.ids) - dropped))
    assert fed.server.burned == dropped  # their keys are known now: out of the run
    values = _values(fed.ids, 4)
    np.testing.assert_array_equal(fed.round(values), fed.exact_sum(values, set(fed.ids) - dropped))


def test_owners_dropped_during_unmasking_still_count():
    fed = Federation(N)
    fed.key_agreement()
    values = _values(fed.ids, 5)
    total = fed.round(values, silent_unmask={"o002", "o013"})
    np.testing.assert_array_equal(total, fed.exact_sum(values, fed.ids))


def test_drops_at_input_and_unmasking_together():
    fed = Federation(N)
    fed.key_agreement()
    values = _values(fed.ids, 6)
    total = fed.round(values, silent_input={"o005"}, silent_unmask={"o006", "o020"})
    np.testing.assert_array_equal(total, fed.exact_sum(values, set(fed.ids) - {"o005"}))


def test_owner_unmasked_before_that_drops_makes_the_round_run_again_without_it():
    fed = Federation(N)
    fed.key_agreement()
    fed.round(_values(fed.ids, 7))
    values = _values(fed.ids, 8)
    with pytest.raises(RoundFailed, match="run again"):
        fed.server.on_masked(fed.masked(values, silent={"o009"}))
    assert "o009" in fed.server.burned
    np.testing.assert_array_equal(fed.round(values), fed.exact_sum(values, set(fed.ids) - {"o009"}))


def test_a_survivor_with_too_few_surviving_neighbours_fails_the_round_before_any_share_leaves():
    """Neither its self-mask nor its key could be recovered: the round fails at once, and the
    next one runs without the silent owners (and without it, until it has t neighbours again)."""
    fed = Federation(N)
    fed.key_agreement()
    victim = "o000"
    near = fed.server.graph[victim]
    silent = set(near[: len(near) - threshold(len(near)) + 1])  # leaves it t - 1 surviving neighbours
    values = _values(fed.ids, 9)
    with pytest.raises(RoundFailed, match="fewer than t surviving"):
        fed.server.on_masked(fed.masked(values, silent=silent))
    assert fed.server.burned == silent
    total = fed.round(values)
    assert victim not in fed.server.included and not silent & set(fed.server.included)
    np.testing.assert_array_equal(total, fed.exact_sum(values, fed.server.included))


def test_an_input_outside_the_public_range_fails_the_round_and_decodes_nothing():
    """A hostile owner masks a value beyond max_abs (here 2^60 / 2^f, far beyond n × max_abs): the
    coordinator cannot tell whose, but the decoded total is outside what n honest inputs can sum to."""
    fed = Federation(10)
    fed.key_agreement()
    masked = fed.masked(_values(fed.ids, 11))
    hostile = masked[fed.ids[3]]
    shifted = FixedPoint.add(hostile.masked, np.array([0, 2**60], dtype=np.uint64))
    masked[fed.ids[3]] = type(hostile)(hostile.owner_id, hostile.round, shifted)
    requests = fed.server.on_masked(masked)
    with pytest.raises(RoundFailed, match="outside the public range"):
        fed.server.on_unmask(fed.unmask(requests))
    assert fed.server.included == ()


def test_inputs_at_the_public_bound_sum_without_a_refusal():
    fed = Federation(10, max_abs=10.0)
    fed.key_agreement()
    values = {o: np.array([10.0, -10.0]) for o in fed.ids}
    total = fed.server.on_unmask(fed.unmask(fed.server.on_masked(fed.masked(values))))
    np.testing.assert_allclose(total, [100.0, -100.0], atol=fed.fp.error_bound)


# ---------------------------------------------------------------------- thresholds


def test_fewer_than_t_unmask_answers_refuse_and_decode_nothing():
    fed = Federation(10)
    fed.key_agreement()
    requests = fed.server.on_masked(fed.masked(_values(fed.ids, 10)))
    t = threshold(degree(10))
    answering = fed.ids[: t - 1]
    with pytest.raises(RoundFailed, match="fewer than the threshold"):
        fed.server.on_unmask(fed.unmask({o: requests[o] for o in answering}))
    assert fed.server.included == ()


def test_too_few_members_refuse_to_start():
    fed = Federation(5)
    with pytest.raises(RoundFailed, match="at least 3"):
        fed.server.on_adverts({o: fed.owners[o].start(lambda pk: b"") for o in fed.ids[:2]})
    with pytest.raises(ConfigError):
        SecAggServer("r", ["a", "b"], FixedPoint.choose(n_parties=2, max_abs=1.0), rounds=1)


def test_rounds_are_bounded_by_the_key_agreement():
    fed = Federation(5, rounds=1)
    fed.key_agreement()
    fed.round(_values(fed.ids, 11))
    with pytest.raises(RoundFailed, match="new run"):
        fed.server.input_requests()


# ---------------------------------------------------------------------- what the coordinator sees


def test_a_single_masked_input_is_uniform_whatever_the_input():
    """The coordinator's view of one owner, y_u, for x = 0 and x = max: same distribution, uniform."""
    samples = {0.0: [], 9.0: []}
    for x, ys in samples.items():
        for _ in range(120):
            fed = Federation(4, rounds=1)
            fed.key_agreement()
            values = {o: np.full(8, x) for o in fed.ids}
            ys.extend(fed.masked(values)["o000"].masked.tolist())
    for ys in samples.values():
        top = np.array(ys, dtype=np.uint64) >> np.uint64(60)  # 16 bins of the top bits
        assert stats.chisquare(np.bincount(top.astype(int), minlength=16))[1] > 1e-4
    a, b = (np.array(samples[x], dtype=np.uint64) >> np.uint64(60) for x in samples)
    table = np.array([np.bincount(a.astype(int), minlength=16), np.bincount(b.astype(int), minlength=16)])
    assert stats.chi2_contingency(table)[1] > 1e-4


def test_sealed_shares_are_opaque_to_the_coordinator():
    fed = Federation(5)
    requests = fed.server.on_adverts({o: m.start(lambda pk: b"") for o, m in fed.owners.items()})
    reply = fed.owners["o000"].on_share_keys(requests["o000"])
    secret = fed.owners["o000"]._mask_key.private_bytes_raw()
    assert all(secret not in s.ciphertext for s in reply.shares)
    assert len({s.ciphertext for s in reply.shares}) == len(reply.shares)


# ---------------------------------------------------------------------- machine rules


def test_rounds_only_increase_and_machine_refuses_after_failure():
    fed = Federation(5)
    fed.key_agreement()
    values = _values(fed.ids, 12)
    req = fed.server.input_requests()
    owner = fed.owners["o001"]
    owner.masked_input(req["o001"], values["o001"])
    with pytest.raises(RemoteProtocolError, match="rounds only increase"):
        owner.masked_input(req["o001"], values["o001"])
    assert owner.state is OwnerState.FAILED
    with pytest.raises(LocalProtocolError):
        owner.masked_input(req["o001"], values["o001"])


def test_messages_before_start_are_the_driver_bug():
    fed = Federation(5)
    with pytest.raises(LocalProtocolError):
        fed.owners["o000"].on_unmask(None)  # type: ignore[arg-type]


def test_an_unexpected_message_fails_the_machine():
    fed = Federation(5)
    fed.key_agreement()
    owner = fed.owners["o000"]
    with pytest.raises(RemoteProtocolError, match="unexpected UnmaskRequest"):
        owner.on_unmask(UnmaskRequest(0, (), ()))
    assert owner.state is OwnerState.FAILED
