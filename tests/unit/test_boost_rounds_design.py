"""Boosting rounds that keep their signal (issue 12 item 2): the ``"rr"`` evaluation release and
``share_groups="all"`` -- the mechanism statistically, the groups and the owner's debits over the real
handlers and ledger."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.boosting.loop import plan_rounds
from privfed.common.boosting.params import BoostingParams, default_eval_mechanism
from privfed.common.boosting.releases import ReleasePlan
from privfed.common.boosting.wire import BoostHistory, config_to_dict
from privfed.common.bounds import Bounds
from privfed.common.datasets import load_builtin
from privfed.common.errors import ConfigError, LocalProtocolError
from privfed.common.ledger import Ledger
from privfed.common.mechanisms.laplace import error_pair_scale
from privfed.common.mechanisms.randomized_response import ErrorPairResponse
from privfed.common.tasks import BoostShareReply, BoostShareTask, Refusal, Task
from privfed.owner.core import handle_batch
from privfed.owner.data import build_owners, federation_split

N = 200_000


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def _rr(epsilon: float, max_rows: int = 1) -> ErrorPairResponse:
    return ErrorPairResponse(epsilon=epsilon, row_bound=1.0, max_rows=max_rows)


@pytest.mark.parametrize("epsilon", [0.5, 1.5, 4.0])
def test_rr_release_is_unbiased_and_within_its_noise_bound(epsilon):
    """Many owners holding one clipped pair: the mean release is the pair (unbiased for E and W), the
    variance is the closed form's (within 5 standard errors of a sample variance, SPEC §0) and the spread
    stays below the documented worst-case standard deviation."""
    sums = np.tile([[0.3, 0.8]], (N, 1))
    mech = _rr(epsilon)
    out = mech.privatize(sums, _rng())
    bound = mech.max_std
    se = bound / math.sqrt(N)
    assert np.all(np.abs(out.mean(axis=0) - [0.3, 0.8]) < 5 * se)
    np.testing.assert_allclose(mech.bias(sums[:1]), 0.0)
    np.testing.assert_allclose(out.var(axis=0), mech.variance(sums[:1])[0], rtol=5 * math.sqrt(2 / N))
    assert np.all(out.std(axis=0) <= bound * 1.01) and np.all(mech.variance(sums[:1]) <= bound**2)
    fb = BoostingParams(
        epsilon=epsilon / 0.3,
        eval_fraction=0.3,
        n_classes=2,
        bounds=Bounds.of(0.0, 1.0, 2),
        n_rounds=2,
        max_owner_rows=1,
    )
    assert fb.eval_mechanism == "rr"
    assert np.all(np.abs(out) <= ReleasePlan(fb).contribution_bound + 1e-12)


def test_rr_release_is_epsilon_ldp_between_the_extreme_owners():
    """An owner whose row is missed at full weight against one holding no weight: every released
    value is about e^eps times likelier for one than the other at most (k-RR's ratio p / q)."""
    eps = 1.0
    rr = _rr(eps).oracle
    a = _rr(eps).privatize(np.tile([[1.0, 1.0]], (N, 1)), _rng(1))
    b = _rr(eps).privatize(np.zeros((N, 2)), _rng(2))
    values = np.unique(np.concatenate([a, b]), axis=0)
    assert values.shape[0] == 3  # miss, hit, nothing: three fixed numbers of the report
    for v in values:
        pa, pb = np.mean(np.all(a == v, axis=1)), np.mean(np.all(b == v, axis=1))
        assert max(pa / pb, pb / pa) <= math.exp(eps) * 1.05
    assert math.isclose(rr.p / rr.q, math.exp(eps))


def test_rr_release_scales_an_owner_above_the_row_bound_down_and_is_exact_at_infinite_epsilon():
    sums = np.array([[1.0, 3.0], [0.5, 1.0]])
    exact = _rr(math.inf, max_rows=2)
    np.testing.assert_allclose(exact.privatize(sums, _rng()), [[2.0 / 3.0, 2.0], [0.5, 1.0]])
    np.testing.assert_allclose(exact.bias(sums), [[2.0 / 3.0 - 1.0, -1.0], [0.0, 0.0]])
    assert np.all(exact.variance(sums) == 0.0)


def test_default_eval_mechanism_follows_the_public_noise_comparison():
    assert default_eval_mechanism(1.0, 1.5, 1) == "rr"
    assert default_eval_mechanism(1.0, 1.5, 3) == "laplace"
    assert default_eval_mechanism(1.0, 10.0, 1) == "laplace"
    assert default_eval_mechanism(1.0, math.inf, 1) == "laplace"
    for rows, eps in [(1, 0.3), (1, 1.5), (2, 1.0), (3, 1.5)]:
        laplace = math.sqrt(2) * error_pair_scale(1.0, eps)
        assert (default_eval_mechanism(1.0, eps, rows) == "rr") == (_rr(eps, rows).max_std <= laplace)


def _fb(**kw) -> BoostingParams:
    return BoostingParams(epsilon=5.0, n_classes=2, bounds=Bounds.of(-10.0, 10.0, 20), n_rounds=4, **kw)


def test_share_groups_all_asks_every_owner_every_round_at_a_quarter_of_the_share_epsilon():
    fb = _fb(share_groups="all")
    assert fb.shares_per_owner == 4 and math.isclose(fb.share_round_epsilon, fb.share_epsilon / 4)
    assert math.isclose(ReleasePlan(fb).share_encoding.epsilon, fb.share_epsilon / 4)
    groups, evaluators = plan_rounds(fb, 40, _rng())
    assert groups.shape == (4, 40) and all(np.array_equal(g, np.arange(40)) for g in groups)
    assert np.array_equal(np.sort(np.concatenate(evaluators)), np.arange(40))  # each evaluates once
    with pytest.raises(ConfigError, match="group_size"):
        plan_rounds(_fb(share_groups="all", group_size=5), 40, _rng())


def test_simulated_owners_release_exactly_their_shares_per_run():
    from privfed.common.boosting.simulation import SimulatedOwners

    ds = load_builtin("synthetic", n_samples=80, seed=0)
    for fb, allowed in ((_fb(share_groups="all"), 4), (_fb(), 1)):
        steps = SimulatedOwners(ReleasePlan(fb), ds.X, ds.y, None, _rng())
        group = np.arange(10)
        for t in range(allowed):
            steps.release(t, group)
        with pytest.raises(LocalProtocolError, match="already released"):
            steps.release(allowed, group)


def test_an_owner_node_debits_each_of_t_shares_at_share_epsilon_over_t_and_refuses_one_more(tmp_path):
    """Over the real handler and ledger: under ``share_groups="all"`` an owner answers one share per
    round, each debited at ``share_epsilon / T``; the same round asked again gets the same share
    (no new debit); a (T+1)-th share is refused ``already_released``. Disjoint groups: one share."""
    train, _ = federation_split("synthetic", seed=0, test_fraction=0.2, n_samples=50)
    hosted = {
        o.owner_id: o
        for o in build_owners(
            train, node_id="owner-0", n_owners=40, shards=range(1), seed=0, rng_kind="seeded", rng_seed=0
        )
    }
    oid = next(iter(hosted))
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=10.0)
    fb = BoostingParams(epsilon=5.0, n_classes=2, bounds=train.bounds, n_rounds=3, share_groups="all")
    config = config_to_dict(fb, "run-all")

    def ask(task_id: str, round_no: int):
        task = Task(task_id, oid, "run-all", BoostShareTask(config, BoostHistory(round=round_no)))
        return handle_batch([task], hosted, ledger)[0].payload

    first = ask("s0", 0)
    assert isinstance(first, BoostShareReply)
    assert isinstance(ask("s1", 1), BoostShareReply)
    again = ask("s1-retry", 1)
    assert isinstance(again, BoostShareReply)
    assert isinstance(ask("s2", 2), BoostShareReply)
    history = [(h["purpose"], h["epsilon"]) for h in ledger.history(oid)]
    assert len(history) == 3 and all(p == "boost-share:run-all" for p, _ in history)
    assert all(math.isclose(e, fb.share_epsilon / 3) for _, e in history)
    assert math.isclose(ledger.spent(oid).epsilon, fb.share_epsilon)
    again = Task("s0-again", oid, "run-all", BoostShareTask(config, BoostHistory(round=0)))
    assert handle_batch([again], hosted, ledger)[0].payload == first  # cached: sent again, not a 4th release
    hosted[oid].released.clear()  # a restarted node: the shares are gone, the ledger's T debits stay
    out = handle_batch([Task("s0-new", oid, "run-all", again.spec)], hosted, ledger)[0].payload
    assert isinstance(out, Refusal) and out.code == "already_released"
    assert len(ledger.history(oid)) == 3

    disjoint = config_to_dict(BoostingParams(epsilon=5.0, n_classes=2, bounds=train.bounds, n_rounds=3), "run-d")
    ok = handle_batch([Task("d0", oid, "run-d", BoostShareTask(disjoint, BoostHistory(round=0)))], hosted, ledger)
    assert isinstance(ok[0].payload, BoostShareReply)
    later = handle_batch([Task("d1", oid, "run-d", BoostShareTask(disjoint, BoostHistory(round=1)))], hosted, ledger)
    assert later[0].payload == ok[0].payload  # the run's one share, sent again
    assert sum(h["purpose"] == "boost-share:run-d" for h in ledger.history(oid)) == 1


def test_budget_split_by_owners_gives_each_owner_one_role_at_the_whole_epsilon():
    fb = _fb(budget_split="owners", eval_fraction=0.3)
    assert fb.share_epsilon == fb.eval_epsilon == fb.eval_round_epsilon == 5.0
    groups, evaluators = plan_rounds(fb, 100, _rng())
    assert groups.shape == (4, 70 // 4)
    sharers, evals = set(groups.ravel().tolist()), np.concatenate(evaluators)
    assert not sharers & set(evals.tolist()) and len(evals) == len(set(evals.tolist())) == 100 - 68
    with pytest.raises(ConfigError, match="share_groups"):
        _fb(budget_split="owners", share_groups="all")


def test_an_owner_node_refuses_the_other_role_of_an_owners_split_run(tmp_path):
    """Over the real handler and ledger: an owner that evaluated in a ``budget_split="owners"`` run
    refuses its share (``already_released``, nothing debited), and one that shared refuses to evaluate."""
    from privfed.owner.kinds.base import LedgerView
    from privfed.owner.kinds.boosting import AlreadyReleased, check_one_role

    train, _ = federation_split("synthetic", seed=0, test_fraction=0.2, n_samples=50)
    hosted = {
        o.owner_id: o
        for o in build_owners(
            train, node_id="owner-0", n_owners=40, shards=range(2), seed=0, rng_kind="seeded", rng_seed=0
        )
    }
    a, b = sorted(hosted)
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=10.0)
    fb = BoostingParams(epsilon=5.0, n_classes=2, bounds=train.bounds, n_rounds=3, budget_split="owners")
    config = config_to_dict(fb, "run-o")
    ledger.debit(a, 5.0, purpose="boost-eval:run-o:once", release_id="boost-eval:run-o:once")  # a evaluated
    out = handle_batch([Task("sa", a, "run-o", BoostShareTask(config, BoostHistory(round=0)))], hosted, ledger)
    assert isinstance(out[0].payload, Refusal) and out[0].payload.code == "already_released"
    assert len(ledger.history(a)) == 1
    shared = handle_batch([Task("sb", b, "run-o", BoostShareTask(config, BoostHistory(round=0)))], hosted, ledger)
    assert isinstance(shared[0].payload, BoostShareReply)
    assert [(h["purpose"], h["epsilon"]) for h in ledger.history(b)] == [("boost-share:run-o", 5.0)]
    with pytest.raises(AlreadyReleased):
        check_one_role(LedgerView(ledger, b), b, config, "evaluate")
    check_one_role(
        LedgerView(ledger, a),
        a,
        config_to_dict(BoostingParams(**{**_kw(fb), "budget_split": "epsilon"}), "x"),
        "share",
    )


def _kw(fb: BoostingParams) -> dict:
    return dict(epsilon=fb.epsilon, n_classes=fb.n_classes, bounds=fb.bounds, n_rounds=fb.n_rounds)


def test_one_batch_of_share_tasks_releases_at_most_the_runs_shares_per_owner(tmp_path):
    """T + 1 share tasks for one owner in one batch: T shares leave (each debited at share_epsilon / T),
    the last is refused; under fresh groups two tasks of a run release one share."""
    train, _ = federation_split("synthetic", seed=0, test_fraction=0.2, n_samples=50)
    hosted = {
        o.owner_id: o
        for o in build_owners(
            train, node_id="owner-0", n_owners=40, shards=range(1), seed=0, rng_kind="seeded", rng_seed=0
        )
    }
    (oid,) = hosted
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=20.0)
    for groups, run, allowed in (("all", "run-a", 2), ("disjoint", "run-d", 1)):
        fb = BoostingParams(epsilon=5.0, n_classes=2, bounds=train.bounds, n_rounds=2, share_groups=groups)
        config = config_to_dict(fb, run)
        tasks = [Task(f"{run}-{i}", oid, run, BoostShareTask(config, BoostHistory(round=i % 2))) for i in range(3)]
        out = [r.payload for r in handle_batch(tasks, hosted, ledger)]
        assert sum(isinstance(p, BoostShareReply) for p in out) == allowed
        assert all(p.code == "already_released" for p in out if isinstance(p, Refusal))
        assert sum(h["purpose"] == f"boost-share:{run}" for h in ledger.history(oid)) == allowed
