"""Federated boosting rounds (seed 002 Alg. 2): equivalence with centralised SAMME, groups, secure sums."""

import math

import numpy as np
import pytest

from privfed.common.boosting.coordinator import CoordinatorSteps, sample_groups
from privfed.common.boosting.owner import check_learner, group_shares, local_error, share, update_weights
from privfed.common.boosting.params import EVAL_FRACTION, BoostingParams
from privfed.common.boosting.releases import ReleasePlan
from privfed.common.boosting.simulation import secure_total, simulate
from privfed.common.datasets import load_builtin, partition
from privfed.common.errors import ConfigError, PrivfedError
from privfed.common.learners.ncc import LABEL_FRACTION
from privfed.common.learners.samme import SammeBoost, SammeStep
from privfed.common.learners.stump import binarize, cross_tables, select_stump
from privfed.common.secagg.fixedpoint import FixedPoint


@pytest.fixture(scope="module")
def data():
    return load_builtin("synthetic", n_samples=400, seed=3)


def _plan(**kw) -> ReleasePlan:
    return ReleasePlan(BoostingParams(**kw))


def _coordinator(on_reject: str = "skip", **kw) -> CoordinatorSteps:
    return CoordinatorSteps(_plan(**kw), on_reject=on_reject)


def _stumps(run):
    return [(r.learner.attribute, r.learner.threshold_index, r.learner.leaves) for r in run.rounds]


def _samme_on_groups(ds, groups, n_bins):
    """Centralised SAMME whose round m fits its stump on group m's rows (exact tables)."""

    def base_fit(X, y, w, m):
        rows = groups[m]
        return select_stump(
            cross_tables(binarize(X[rows], ds.bounds, n_bins), y[rows], w[rows], 2), bounds=ds.bounds, n_bins=n_bins
        )

    return SammeBoost(base_fit, len(groups), 2).fit(ds.X, ds.y)


def test_one_round_with_all_owners_equals_centralised_samme(data, rng):
    fb = BoostingParams(
        epsilon=math.inf,
        n_classes=2,
        bounds=data.bounds,
        n_rounds=1,
        n_bins=4,
        weight_bound=1e6,
        eval_row_bound=1e6,
        eval_groups="all",
    )
    run = simulate(fb, data.X, data.y, rng=rng)
    assert run.groups.shape == (1, data.n)
    ref = _samme_on_groups(data, [np.arange(data.n)], 4)
    assert _stumps(run) == [(s.attribute, s.threshold_index, s.leaves) for s in ref.model_.learners]
    np.testing.assert_allclose(run.model.alphas, ref.model_.alphas, rtol=1e-12)


@pytest.mark.parametrize("vectorised", [True, False])
def test_rounds_with_fresh_groups_equal_centralised_samme(data, rng, vectorised):
    fb = BoostingParams(
        epsilon=math.inf,
        n_classes=2,
        bounds=data.bounds,
        n_rounds=6,
        n_bins=4,
        weight_bound=1e6,
        eval_row_bound=1e6,
        eval_groups="all",
    )
    run = simulate(fb, data.X, data.y, rng=rng, vectorised=vectorised)
    ref = _samme_on_groups(data, run.groups, 4)
    assert all(r.step == "keep" for r in run.rounds) and ref.stop_reason_ == "n_estimators"
    assert _stumps(run) == [(s.attribute, s.threshold_index, s.leaves) for s in ref.model_.learners]
    np.testing.assert_allclose(run.model.alphas, ref.model_.alphas, rtol=1e-9)
    np.testing.assert_array_equal(run.model.predict(data.X), ref.predict(data.X))
    assert run.staged_misclassification(data.X, data.y)[-1] == pytest.approx(1 - run.model.score(data.X, data.y))


@pytest.mark.parametrize("base", ["stump", "ncc", "lr"])
def test_vectorised_driver_equals_per_owner_calls(data, base):
    owners = partition(data.n, 40, seed=1)
    fb = BoostingParams(base=base, epsilon=math.inf, n_classes=2, bounds=data.bounds, n_rounds=3)
    runs = [
        simulate(fb, data.X, data.y, owners=owners, rng=np.random.Generator(np.random.PCG64(7)), vectorised=v)
        for v in (True, False)
    ]
    np.testing.assert_array_equal(runs[0].groups, runs[1].groups)
    np.testing.assert_allclose(runs[0].model.alphas, runs[1].model.alphas, rtol=1e-9)
    np.testing.assert_allclose(runs[0].weights, runs[1].weights, rtol=1e-9)
    np.testing.assert_array_equal(runs[0].model.predict(data.X), runs[1].model.predict(data.X))


def test_group_release_equals_each_owners_release(data, rng):
    """One vectorised share call for a group = each owner's own share (exact tables at eps = inf)."""
    owners = partition(data.n, 25, seed=2)
    owner_of_row = np.empty(data.n, dtype=np.int64)
    for i, idx in enumerate(owners):
        owner_of_row[idx] = i
    w = rng.uniform(0.0, 0.5, data.n)  # owners hold 16 rows: most totals exceed the bound and are scaled
    group = np.array([3, 0, 17, 9])
    plan = _plan(epsilon=math.inf, n_classes=2, bounds=data.bounds, n_rounds=4, n_bins=3, weight_bound=5.0)
    got = group_shares(plan, data.X, data.y, w, owner_of_row, group, rng=rng)
    assert got.shape == (4, data.d * 2 * 2 * 2)
    for row, o in zip(got, group):
        idx = owners[o]
        np.testing.assert_allclose(row, share(plan, data.X[idx], data.y[idx], w[idx], rng=rng), rtol=0, atol=1e-12)
        tables = cross_tables(binarize(data.X[idx], data.bounds, 3), data.y[idx], w[idx], 2)
        want = tables * min(1.0, 5.0 / w[idx].sum())
        np.testing.assert_allclose(plan.share_encoding.aggregate(row), want, atol=1e-5)


def test_groups_are_disjoint_and_sized(rng):
    groups = sample_groups(100, 7, 14, rng)
    assert groups.shape == (7, 14)
    assert np.unique(groups).size == groups.size and groups.min() >= 0 and groups.max() < 100
    assert sample_groups(10, 5, 2, rng).size == 10  # T * group = N exactly is allowed


@pytest.mark.parametrize(("n", "t", "g"), [(10, 3, 4), (5, 6, 1), (100, 1, 101)])
def test_groups_refuse_reuse(rng, n, t, g):
    with pytest.raises(ConfigError, match="release twice"):
        sample_groups(n, t, g, rng)


def test_fit_refuses_group_size_that_would_reuse_owners(data, rng):
    fb = BoostingParams(epsilon=1.0, n_classes=2, bounds=data.bounds, n_rounds=3, group_size=data.n // 3 + 1)
    with pytest.raises(ConfigError, match="release twice"):
        simulate(fb, data.X, data.y, rng=rng)


def test_private_run_uses_each_owner_at_most_once(data, rng):
    fb = BoostingParams(epsilon=4.0, n_classes=2, bounds=data.bounds, n_rounds=4)
    run = simulate(fb, data.X, data.y, rng=rng)
    assert run.groups.shape == (4, data.n // 4)
    assert np.unique(run.groups).size == run.groups.size
    assert len(run.rounds) <= 4 and len(run.model.learners) >= 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ring_sum_of_local_errors_equals_plain_sum_within_fixed_point_bound(seed):
    r = np.random.Generator(np.random.PCG64(seed))
    w = r.uniform(0, 3, 12)
    values = np.stack([w * r.uniform(0, 1, 12), w], axis=1)  # (err_sum, w_sum) of 12 owners
    fp = FixedPoint(8, 12, 10.0)  # coarse on purpose: the rounding is visible
    ring = secure_total(values, method="ring", fixed_point=fp)
    plain = secure_total(values, method="plain")
    assert np.all(np.abs(ring - plain) <= fp.error_bound + 1e-12)
    exact = np.rint(values * 2**8).sum(axis=0) / 2**8  # what the ring computes: the sum of the roundings
    np.testing.assert_array_equal(ring, exact)


def test_ring_and_plain_drivers_agree(data, rng):
    owners = partition(data.n, 20, seed=0)
    kw = dict(
        epsilon=math.inf,
        n_classes=2,
        bounds=data.bounds,
        n_rounds=3,
        weight_bound=1e6,
        eval_row_bound=1e6,
        max_owner_rows=1,
    )
    fb = BoostingParams(**kw)
    plain = simulate(fb, data.X, data.y, owners=owners, rng=np.random.Generator(np.random.PCG64(5)))
    ring = simulate(fb, data.X, data.y, owners=owners, rng=np.random.Generator(np.random.PCG64(5)), secure_sum="ring")
    assert _stumps(ring) == _stumps(plain)
    np.testing.assert_allclose(ring.model.alphas, plain.model.alphas, rtol=1e-6)


def test_weight_update_keeps_total_and_makes_last_learner_chance(data, rng):
    fb = BoostingParams(
        epsilon=math.inf,
        n_classes=2,
        bounds=data.bounds,
        n_rounds=1,
        weight_bound=1e6,
        eval_row_bound=1e6,
        max_owner_rows=1,
    )
    learner = simulate(fb, data.X, data.y, rng=rng).model.learners[0]
    owners = partition(data.n, 10, seed=4)
    w = rng.uniform(0.5, 1.5, data.n)
    sums = np.array([local_error(learner, data.X[i], data.y[i], w[i]) for i in owners])
    e, total = sums.sum(axis=0)
    alpha = CoordinatorSteps(ReleasePlan(fb)).decide(e, total, 0).alpha
    new = np.empty_like(w)
    for i in owners:
        new[i] = update_weights(learner, alpha, data.X[i], data.y[i], w[i], err_total=e, weight_total=total)
    assert new.sum() == pytest.approx(total, rel=1e-12)
    miss = learner.predict(data.X) != data.y
    assert new[miss].sum() / new.sum() == pytest.approx(0.5, rel=1e-12)  # (K - 1) / K, SPEC §5
    assert local_error(learner, data.X[:0], data.y[:0], w[:0]) == (0.0, 0.0)


def test_reject_rules(data):
    kw = dict(epsilon=1.0, n_classes=2, bounds=data.bounds, n_rounds=2)
    with pytest.raises(PrivfedError, match="no better than chance"):
        _coordinator("stop", **kw).decide(0.6, 1.0, 0)
    assert _coordinator("stop", **kw).decide(0.6, 1.0, 2).step is SammeStep.DISCARD_AND_STOP
    assert _coordinator("skip", **kw).decide(0.6, 1.0, 0) is None
    assert _coordinator(**kw).decide(0.0, 1.0, 0).step is SammeStep.KEEP_AND_STOP


@pytest.mark.parametrize(
    "bad",
    [
        dict(base="tree"),
        dict(epsilon=0.0),
        dict(epsilon="1"),
        dict(mechanism="gauss"),
        dict(n_rounds=0),
        dict(n_bins=1),
        dict(weight_bound=0.0),
        dict(weight_bound=math.inf),
        dict(group_size=0),
        dict(labels="noisy"),
        dict(bounds=(0.0, 1.0)),
        dict(eval_fraction=0.0),
        dict(eval_fraction=1.0),
        dict(eval_groups="some"),
    ],
)
def test_invalid_parameters(data, bad):
    kw = dict(epsilon=1.0, n_classes=2, bounds=data.bounds, n_rounds=2) | bad
    with pytest.raises(ConfigError):
        BoostingParams(**kw)


def test_the_simulation_and_coordinator_options_are_checked_where_they_live(data, rng):
    fb = BoostingParams(epsilon=1.0, n_classes=2, bounds=data.bounds, n_rounds=2)
    with pytest.raises(ConfigError, match="secure_sum"):
        simulate(fb, data.X, data.y, rng=rng, secure_sum="mpc")
    with pytest.raises(ConfigError, match="on_reject"):
        CoordinatorSteps(ReleasePlan(fb), on_reject="retry")


def test_every_field_has_one_declared_constraint_and_the_wire_fields_are_the_public_ones():
    """The parameter table (scikit-learn's _parameter_constraints) names every field once; only the
    coordinator-chosen split points stay off the wire."""
    from dataclasses import fields

    from privfed.common.boosting.params import PARAMETERS, WIRE_FIELDS

    assert set(PARAMETERS) == {f.name for f in fields(BoostingParams)}
    assert set(PARAMETERS) - set(WIRE_FIELDS) == {"split_points"}
    assert all(p.help for p in PARAMETERS.values())


def test_release_dimensions(data):
    kw = dict(epsilon=2.0, n_classes=3, bounds=data.bounds, n_rounds=1)
    table = _plan(n_bins=4, stump_encoding="table", **kw)
    assert table.release_dim == table.share_encoding.mechanism.d == 20 * 3 * 2 * 3
    assert table.share_encoding.mechanism.epsilon == pytest.approx(2.0 * (1 - EVAL_FRACTION))
    cells = _plan(n_bins=4, **kw)  # the default for three classes: one k-RR report per owner
    assert cells.params.stump_encoding == "cells" and cells.release_dim == 1
    assert cells.share_encoding.epsilon == pytest.approx(2.0 * (1 - EVAL_FRACTION))
    with pytest.raises(ConfigError, match="stump_encoding"):
        BoostingParams(stump_encoding="dense", **kw)
    with pytest.raises(ConfigError, match="two classes"):
        _plan(stump_encoding="signs", **kw)
    assert _plan(base="ncc", **kw).release_mechanism.d == 21
    assert _plan(base="lr", **kw).release_mechanism.d == 3 * 21
    assert _plan(base="ncc", labels="rr", **kw).label_rr().epsilon == pytest.approx(
        2.0 * (1 - EVAL_FRACTION) * LABEL_FRACTION
    )


# ---------------------------------------------------------------- evaluation releases (issue 9, contract 4)
def test_evaluation_noise_has_the_laplace_variance_of_the_row_bound_whatever_the_rows(rng):
    """Per coordinate Var = 2 (2 b / eps)^2 = 8 b^2 / eps^2 (SPEC §1), within SPEC §0's 1.5% at 10^6
    draws, for a one-row pair and a 400-row pair alike: the noise follows the row bound, not the rows."""
    from privfed.common.boosting.params import MAX_OWNER_ROWS
    from privfed.common.mechanisms import ErrorPairLaplace

    b, eps, m = 3.0, 0.7, 10**6
    mech = ErrorPairLaplace(epsilon=eps, row_bound=b, max_rows=MAX_OWNER_ROWS)
    assert mech.scale == pytest.approx(2 * b / eps)
    for pair in ([1.0, 2.5], [120.0, 400.0]):
        noisy = mech.privatize(np.tile(pair, (m, 1)), rng)
        np.testing.assert_allclose(noisy.var(axis=0), 8 * b**2 / eps**2, rtol=0.015)
        np.testing.assert_allclose(mech.variance([pair])[0], 8 * b**2 / eps**2, rtol=1e-12)  # the closed form
        np.testing.assert_allclose(noisy.mean(axis=0), pair, atol=5 * math.sqrt(8 * b**2 / eps**2 / m))


def test_one_row_moves_each_evaluation_coordinate_by_at_most_the_row_bound(data, rng):
    """The sensitivity argument (ErrorPairLaplace's): with rows clipped to b, adding, removing or
    replacing one row of an owner -- any features, label or weight -- moves (err_sum, w_sum) by at
    most b in each coordinate, whatever the owner's row count."""
    from privfed.common.learners.stump import Stump

    b = 2.0
    learner = Stump(attribute=0, threshold_index=1, threshold=0.0, leaves=(0, 1), error=math.nan)
    X, y = data.X[:200], data.y[:200]
    w = rng.exponential(3.0, 200)  # many rows far above b
    base = np.array(local_error(learner, X, y, w, row_bound=b))
    worst = 0.0
    for i in range(200):
        keep = np.arange(200) != i
        removed = np.array(local_error(learner, X[keep], y[keep], w[keep], row_bound=b))
        j = (i + 7) % 200
        Xr, yr, wr = X.copy(), y.copy(), w.copy()
        Xr[i], yr[i], wr[i] = X[j], 1 - y[j], 1e9
        replaced = np.array(local_error(learner, Xr, yr, wr, row_bound=b))
        worst = max(worst, np.abs(base - removed).max(), np.abs(base - replaced).max())
    assert 0 < worst <= b
    assert base[1] == pytest.approx(np.minimum(w, b).sum())
    assert local_error(learner, X, y, w) == pytest.approx((float(w @ (learner.predict(X) != y)), w.sum()))


def test_evaluation_pairs_are_clipped_to_the_public_range(rng):
    from privfed.common.mechanisms import ErrorPairLaplace, clip_error_pairs

    got = clip_error_pairs([[3.0, 12.0], [-1.0, 2.0], [5.0, 2.0], [0.5, 1.0]])
    np.testing.assert_allclose(got, [[3.0, 12.0], [0.0, 2.0], [2.0, 2.0], [0.5, 1.0]])
    assert ErrorPairLaplace(epsilon=0.5, row_bound=2.0, max_rows=300).bound == pytest.approx(2.0 * (300 + 80 / 0.5))
    exact = ErrorPairLaplace(epsilon=math.inf, row_bound=2.0, max_rows=400)
    got = exact.privatize([[3.0, 12.0], [700.0, 900.0]], rng)
    np.testing.assert_allclose(got, [[3.0, 12.0], [700.0, 800.0]])  # b * max_rows = 800
    np.testing.assert_allclose(exact.bias([[3.0, 12.0], [700.0, 900.0]]), [[0.0, 0.0], [0.0, -100.0]])
    mech = ErrorPairLaplace(epsilon=0.01, row_bound=4.0, max_rows=10)
    noisy = mech.privatize(np.tile([1e9, 1e9], (1000, 1)), rng)
    assert np.all(np.abs(noisy) <= mech.output_bounds[1])


def test_the_evaluation_noise_depends_on_the_row_bound_only(data):
    kw = dict(epsilon=2.0, n_classes=2, bounds=data.bounds, n_rounds=10)
    one, many = _plan(weight_bound=2.0, **kw), _plan(weight_bound=400.0, **kw)
    assert (
        one.eval_noise_scale
        == many.eval_noise_scale
        == pytest.approx(2 * one.params.eval_row_bound / (2.0 * EVAL_FRACTION))
    )
    assert _plan(eval_row_bound=4.0, **kw).eval_noise_scale == pytest.approx(2 * 4.0 / (2.0 * EVAL_FRACTION))
    assert _plan(max_owner_rows=10, **kw).contribution_bound < one.contribution_bound


def test_nothing_to_boost_says_why_with_the_numbers(data):
    fb = _coordinator(epsilon=2.0, n_classes=2, bounds=data.bounds, n_rounds=2)
    drowned = fb.nothing_to_boost([(4, 30.0, 50.0), (4, 26.0, 48.0)])  # noise std ~9.4 against W ~49
    assert "\n" not in drowned
    for part in (
        "[0.6, 0.542]",
        f"{fb.plan.eval_noise_scale:.3g} per owner",
        f"std ~{math.sqrt(8) * fb.plan.eval_noise_scale:.3g}",
        "W ~49",
        "the noise drowns",
        "more owners",
        "larger epsilon (now 2)",
        "eval fraction (now 0.4)",
    ):
        assert part in drowned, (part, drowned)
    small = fb.nothing_to_boost([(4, 410.0, 790.0), (4, 402.0, 801.0)])  # W ~796: the learners are the cause
    assert "the noise is small" in small and "share group" in small and "W ~796" in small
    tiny = BoostingParams(epsilon=1e-3, n_classes=2, bounds=data.bounds, n_rounds=2)
    with pytest.raises(PrivfedError, match="no base learner was better than chance"):
        for seed in range(20):  # hopeless noise: some run keeps nothing
            simulate(tiny, data.X[:40], data.y[:40], rng=np.random.Generator(np.random.PCG64(seed)), on_reject="skip")


def test_evaluation_groups_cover_every_owner_once_and_avoid_the_share_group(rng):
    from privfed.common.boosting.coordinator import evaluation_groups

    groups = sample_groups(103, 5, 12, rng)
    evals = evaluation_groups(groups, 103, "disjoint", rng)
    assert np.array_equal(np.sort(np.concatenate(evals)), np.arange(103))
    assert all(not set(e) & set(g) for e, g in zip(evals, groups))
    assert all(np.array_equal(e, np.arange(103)) for e in evaluation_groups(groups, 103, "all", rng))


def test_budget_split_adds_up_to_the_run_epsilon(data):
    from privfed.common.boosting.wire import config_to_dict
    from privfed.common.tasks import boost_release_epsilons

    for how, per_run in (("disjoint", 1), ("all", 4)):
        for base in ("stump", "ncc"):
            fb = BoostingParams(base=base, epsilon=2.0, n_classes=2, bounds=data.bounds, n_rounds=4, eval_groups=how)
            config = config_to_dict(fb, "run")
            share = sum(e for e, _, _ in boost_release_epsilons(config))
            assert config.params.eval_round_epsilon == pytest.approx(fb.eval_round_epsilon)
            assert share + per_run * config.params.eval_round_epsilon == pytest.approx(2.0)
    inf = config_to_dict(
        BoostingParams(base="ncc", epsilon=math.inf, n_classes=2, bounds=data.bounds, n_rounds=2), "run"
    )
    assert all(e == math.inf for e, _, _ in boost_release_epsilons(inf))  # not NaN (issue 10)


# budget_split="owners" with share_groups="all" is refused: an owner shares or evaluates, never both
@pytest.mark.parametrize(
    "share_groups, budget_split", [("disjoint", "epsilon"), ("all", "epsilon"), ("disjoint", "owners")]
)
@pytest.mark.parametrize(
    "base, labels", [("stump", "joint"), ("lr", "joint"), ("ncc", "joint"), ("ncc", "rr"), ("ncc", "clear")]
)
def test_every_share_mechanism_draws_at_the_epsilon_its_share_is_debited(
    data, base, labels, share_groups, budget_split
):
    """The ε each mechanism of a share is built with sums to the share's ledger entries, and an evaluation's to
    its: one place per release (``ReleasePlan``) against one place per debit (``boost_release_epsilons``, the
    evaluation task's entries). Audit 22 found the joint (label, sign) encoding built at the run's share ε while
    each of the T shares of ``share_groups="all"`` was debited 1/T of it."""
    from privfed.common.boosting.releases import ReleasePlan
    from privfed.common.boosting.wire import config_to_dict
    from privfed.common.tasks import boost_release_epsilons

    fb = BoostingParams(base=base, epsilon=3.0, n_classes=3, bounds=data.bounds, n_rounds=4, labels=labels,
                        share_groups=share_groups, budget_split=budget_split)  # fmt: skip
    plan, debit = ReleasePlan(fb), sum(e for e, _, _ in boost_release_epsilons(config_to_dict(fb, "run")))
    if base == "stump":
        drawn = plan.share_encoding.epsilon
    elif plan.joint_encoding is not None:
        drawn = plan.joint_encoding.epsilon
    else:
        label_rr = plan.label_rr()
        drawn = plan.release_mechanism.epsilon + (label_rr.epsilon if label_rr is not None else 0.0)
    assert drawn == pytest.approx(debit)
    assert plan.evaluation.epsilon == pytest.approx(fb.eval_round_epsilon)


def test_noisy_totals_never_trigger_the_zero_error_stop(data):
    fb = _coordinator(epsilon=1.0, n_classes=2, bounds=data.bounds, n_rounds=2)
    floored = fb.floor_error_total(-30.0, 50)
    assert floored == pytest.approx(math.sqrt(100) * fb.plan.eval_noise_scale)
    assert fb.decide(floored, 400.0, 0).step is SammeStep.KEEP


@pytest.mark.parametrize("eps", [5e-324, 1e-310])
def test_an_epsilon_with_non_finite_noise_is_refused_before_any_release(eps, rng):
    from privfed.common.boosting.params import MAX_OWNER_ROWS
    from privfed.common.mechanisms import ErrorPairLaplace

    with pytest.raises(ConfigError, match="non-finite"):
        ErrorPairLaplace(epsilon=eps, row_bound=1.0, max_rows=MAX_OWNER_ROWS)


def test_check_learner_accepts_the_run_kind_and_shapes_and_refuses_others(data):
    from privfed.common.learners.logistic import LinearModel
    from privfed.common.learners.ncc_model import NearestCentroidModel

    d = data.bounds.d
    ncc = _plan(base="ncc", epsilon=1.0, n_classes=2, bounds=data.bounds, n_rounds=2)
    check_learner(ncc, NearestCentroidModel(np.zeros((2, d))))
    for bad in (
        NearestCentroidModel(np.zeros((3, d))),
        NearestCentroidModel(np.zeros((2, d + 1))),
        LinearModel(np.zeros((1, d)), np.zeros(1), data.bounds, np.arange(2)),
    ):
        with pytest.raises(ConfigError):
            check_learner(ncc, bad)
    lr = _plan(base="lr", epsilon=1.0, n_classes=2, bounds=data.bounds, n_rounds=2)
    check_learner(lr, LinearModel(np.zeros((1, d)), np.zeros(1), data.bounds, np.arange(2)))
    with pytest.raises(ConfigError):
        check_learner(
            lr,
            LinearModel(
                np.zeros((1, d)), np.zeros(1), data.bounds.__class__(data.bounds.lo - 1, data.bounds.hi), np.arange(2)
            ),
        )
