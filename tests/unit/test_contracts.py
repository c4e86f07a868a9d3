"""The public contract of every owner reply (issue 23, item 1): honest replies of every task kind
and mechanism meet it; each way of breaking it is rejected with its reason code; and the most one
accepted reply can move an aggregate is the written bound (``common/tasks/``), checked over
replies hypothesis draws."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfed.common.bounds import Bounds
from privfed.common.identity import owner_id
from privfed.common.learners.ncc import NccShare, ncc_class_sums
from privfed.common.ledger import Ledger
from privfed.common.mechanisms import make_mechanism
from privfed.common.tasks import (
    BoostEvaluateTask,
    JointNccReply,
    LrGradientReply,
    LrParametersReply,
    LrShareReply,
    LrShareTask,
    NbReportReply,
    NccRowsReply,
    NccShareReply,
    NccShareTask,
    PcaShareReply,
    PcaShareTask,
    Refusal,
    RingJoined,
    RingSpec,
    RingTotal,
    SampledStumpShareReply,
    StumpShareReply,
    SvmShareReply,
    Task,
    check_reply,
)
from privfed.common.tasks.contract import COUNT_TAIL, ContractViolation, PublicLimits, count_limit
from privfed.owner.core import handle_batch
from privfed.owner.local import LocalOwner
from privfed.server.strategies import make_strategy
from privfed.server.strategies.base import new_tasks

D, K, ROWS = 4, 3, 5
BOUNDS = Bounds.of(0.0, 1.0, D)
LIMITS = PublicLimits(max_rows=ROWS)
MECHANISMS = [("pm", 1.0), ("pm", 12.0), ("duchi", 2.0), ("laplace", 2.0), ("pm", math.inf), ("hm", 12.0)]


def _owners(n: int = 6, rows: int = ROWS) -> dict[str, LocalOwner]:
    rng = np.random.Generator(np.random.PCG64(1))
    return {
        owner_id("owner-0", i): LocalOwner(
            owner_id("owner-0", i),
            rng.uniform(0.0, 1.0, (rows, D)),
            rng.integers(0, K, rows),
            np.random.Generator(np.random.PCG64(10 + i)),
            K,
            BOUNDS,
        )
        for i in range(n)
    }


def _honest(tmp_path, tasks: list[Task]) -> list:
    owners = _owners()
    ledger = Ledger(tmp_path / "ledger.sqlite", epsilon_budget=math.inf, delta_budget=0.5)
    return [r for r in handle_batch(tasks, owners, ledger) if not isinstance(r.payload, Refusal)]


def _ncc(mechanism: str = "pm", epsilon: float = 2.0) -> NccShareTask:
    return NccShareTask(
        mechanism, epsilon, "rr", epsilon / 4, K, BOUNDS, max_owner_rows=LIMITS.max_rows
    )  # the job's bound


@pytest.mark.parametrize("mechanism,epsilon", MECHANISMS)
@pytest.mark.parametrize("task", ["ncc", "lr"])
def test_honest_replies_meet_their_contract(tmp_path, task, mechanism, epsilon):
    if task == "lr":  # the perturbed local models; gradient descent's replies: the test below
        strategy = make_strategy(task, solver="local", mechanism=mechanism, epsilon=epsilon, n_classes=K, bounds=BOUNDS)
    else:
        strategy = make_strategy(  # the job's bound on an owner's rows is the contract's (a joint share's length)
            task, mechanism=mechanism, epsilon=epsilon, n_classes=K, bounds=BOUNDS, max_owner_rows=LIMITS.max_rows
        )
    tasks = strategy.configure(list(_owners()), "r1")
    results = _honest(tmp_path, tasks)
    assert len(results) == len(tasks)
    for task_, result in zip(tasks, results):
        check_reply(task_.spec, result.payload, LIMITS)


@pytest.mark.parametrize("mechanism,epsilon", MECHANISMS)
def test_honest_gradient_replies_meet_their_contract(tmp_path, mechanism, epsilon):
    strategy = make_strategy("lr", solver="gd", mechanism=mechanism, epsilon=epsilon, n_classes=K, bounds=BOUNDS)
    theta = np.full(strategy.gd.initial().shape, 0.5)
    theta[0, 0] = -strategy.param_bound  # on the edge of the public box
    tasks = new_tasks(list(_owners()), "gd-run", strategy.spec(theta))
    results = _honest(tmp_path, tasks)
    assert len(results) == len(tasks)
    for task_, result in zip(tasks, results):
        check_reply(task_.spec, result.payload, LIMITS)
        with pytest.raises(ContractViolation):  # a report beyond the mechanism's range, or of another width
            check_reply(task_.spec, LrGradientReply(result.payload.reports * 0 + 1e6), LIMITS)
        with pytest.raises(ContractViolation):
            check_reply(task_.spec, LrGradientReply(result.payload.reports[:, :-1]), LIMITS)


@pytest.mark.parametrize(("epsilon", "n_bins"), [(0.5, 3), (1.0, 16), (8.0, 4), (math.inf, 3)])
def test_honest_nb_replies_meet_their_contract(tmp_path, epsilon, n_bins):
    strategy = make_strategy("nb", epsilon=epsilon, n_bins=n_bins, n_classes=K, bounds=BOUNDS)
    tasks = new_tasks(list(_owners()), "nb-run", strategy.spec())
    results = _honest(tmp_path, tasks)
    assert len(results) == len(tasks)
    for task_, result in zip(tasks, results):
        check_reply(task_.spec, result.payload, LIMITS)
        with pytest.raises(ContractViolation):  # a feature beyond the schema
            check_reply(task_.spec, NbReportReply(result.payload.features + D, result.payload.reports), LIMITS)
        with pytest.raises(ContractViolation):  # a report of another width
            check_reply(task_.spec, NbReportReply(result.payload.features, np.zeros((1, 40), int)), LIMITS)


def test_honest_feddpdr_replies_meet_their_contract(tmp_path):
    strategy = make_strategy("feddpdr", epsilon=4.0, n_classes=K, bounds=BOUNDS, k=2, delta=1e-3)
    split = strategy.budget_split()
    pca = PcaShareTask(split["pca"], 1e-4, 2, BOUNDS, split["count"], "ball")
    tasks = [Task(f"t{i}", o, "pca", pca) for i, o in enumerate(_owners())]
    for task, result in zip(tasks, _honest(tmp_path, tasks)):
        check_reply(task.spec, result.payload, LIMITS)


@pytest.mark.parametrize(
    "base,labels,encoding,reply",
    [("stump", "joint", "cells", SampledStumpShareReply), ("stump", "joint", "table", StumpShareReply),
     ("ncc", "joint", None, JointNccReply), ("ncc", "rr", None, NccRowsReply), ("lr", "joint", None, LrParametersReply)],
)  # fmt: skip
def test_honest_boosting_shares_are_their_types_and_meet_their_contract(tmp_path, base, labels, encoding, reply):
    from privfed.common.boosting.coordinator import CoordinatorSteps
    from privfed.common.boosting.params import BoostingParams
    from privfed.common.boosting.wire import at_round, config_to_dict, empty_history
    from privfed.common.tasks import BoostShareTask

    fb = BoostingParams(
        base=base, epsilon=4.0, labels=labels, stump_encoding=encoding, n_rounds=2, n_classes=K, bounds=BOUNDS,
        max_owner_rows=LIMITS.max_rows,  # as a job sets it (JobConfig.owner_rows_bound): an NCC share's length
    )  # fmt: skip
    spec = BoostShareTask(config_to_dict(fb, "run-1"), at_round(empty_history(), 0))
    tasks = [Task(f"t{i}", o, "run-1", spec) for i, o in enumerate(_owners())]
    results = _honest(tmp_path, tasks)
    assert len(results) == len(tasks) and all(type(r.payload) is reply for r in results)
    for result in results:
        check_reply(spec, result.payload, LIMITS)
        result.payload.release(CoordinatorSteps(spec.config.releases))  # what the coordinator's selection takes


def _code(spec, payload) -> str:
    with pytest.raises(ContractViolation) as err:
        check_reply(spec, payload, LIMITS)
    return err.value.code


def test_each_way_to_break_an_ncc_reply_has_its_code():
    spec, zeros = _ncc(), np.zeros((1, D))
    bound = make_mechanism("pm", epsilon=spec.epsilon, d=D).max_abs_output
    assert _code(spec, NccShareReply(np.full((1, D), 2.0**41), np.zeros(1, np.int64))) == "out_of_range"
    assert _code(spec, NccShareReply(np.full((1, D), bound + 0.01), np.zeros(1, np.int64))) == "out_of_range"
    assert _code(spec, NccShareReply(np.ones((ROWS + 1, D)), np.zeros(ROWS + 1, np.int64))) == "too_many_rows"
    check_reply(spec, NccShareReply(zeros, np.array([K])), LIMITS)  # ⊥, a dummy's k-RR value (common/learners/ncc_rr)
    assert _code(spec, NccShareReply(zeros, np.array([K + 1]))) == "label_out_of_range"
    one_row = dataclasses.replace(spec, max_owner_rows=1)  # one row per owner: no dummies, no ⊥
    assert _code(one_row, NccShareReply(zeros, np.array([K]))) == "label_out_of_range"
    assert _code(spec, NccShareReply(zeros, np.array([-1]))) == "label_out_of_range"
    assert _code(spec, NccShareReply(np.zeros((1, D + 3)), np.zeros(1, np.int64))) == "shape"
    assert _code(spec, NccShareReply(zeros, np.zeros(2, np.int64))) == "shape"
    assert _code(spec, NccShareReply(np.full((1, D), math.nan), np.zeros(1, np.int64))) == "not_finite"
    assert _code(spec, LrShareReply(np.zeros((1, D + 1)))) == "wrong_kind"
    full = np.full((1, D), bound)  # PM Algorithm 4 at ε = 2 reports k = 1 of the D coordinates
    assert _code(spec, NccShareReply(full, np.zeros(1, np.int64))) == "out_of_range"
    check_reply(spec, NccShareReply(np.c_[np.full((1, 1), bound), np.zeros((1, D - 1))], np.zeros(1, np.int64)), LIMITS)
    check_reply(spec, Refusal("policy", "no"), LIMITS)  # a refusal is always an answer


def test_duchi_reports_are_plus_or_minus_b_only():
    spec = _ncc("duchi", 2.0)
    b = make_mechanism("duchi", epsilon=2.0, d=D).max_abs_output
    check_reply(spec, NccShareReply(np.array([[b, -b, b, b]]), np.zeros(1, np.int64)), LIMITS)
    assert _code(spec, NccShareReply(np.array([[b, 0.0, b, b]]), np.zeros(1, np.int64))) == "out_of_range"


def test_lr_reply_is_one_vector_of_the_tasks_width():
    spec = LrShareTask("laplace", 2.0, 4.0, 1.0, K, BOUNDS)
    p = K * (D + 1)
    check_reply(spec, LrShareReply(np.zeros((1, p))), LIMITS)
    assert _code(spec, LrShareReply(np.zeros((1, p + 3)))) == "shape"
    assert _code(spec, LrShareReply(np.zeros((2, p)))) == "shape"
    assert _code(spec, LrShareReply(np.full((1, p), 2.0**41))) == "out_of_range"


def test_a_dp_pca_reply_is_an_orthonormal_basis_with_a_bounded_count():
    spec = PcaShareTask(1.0, 1e-5, 2, BOUNDS, 0.05, "ball")
    basis = np.eye(D, 2)
    top = count_limit(ROWS, 0.05)
    check_reply(spec, PcaShareReply(basis, top), LIMITS)
    assert _code(spec, PcaShareReply(basis, top + 1)) == "out_of_range"
    assert _code(spec, PcaShareReply(basis, 10**12)) == "out_of_range"
    assert _code(spec, PcaShareReply(2.0 * basis, 3)) == "out_of_range"
    assert _code(spec, PcaShareReply(np.full((D, 2), math.nan), 3)) == "not_finite"
    assert _code(spec, PcaShareReply(np.eye(D, 3), 3)) == "shape"


def test_the_count_limit_is_the_geometric_noise_tail():
    """P(|Z| > t) = 2 a^(t+1) / (1 + a) at the limit t is at most COUNT_TAIL, and more than it one below."""
    for eps in (0.01, 0.05, 1.0):
        t = count_limit(0, eps)
        a = math.exp(-eps)
        assert 2 * a ** (t + 1) / (1 + a) <= COUNT_TAIL < 2 * a**t / (1 + a)
    assert count_limit(7, math.inf) == 7


def test_an_svm_reply_has_the_tasks_shape_and_is_finite():
    from privfed.common.tasks import SvmShareTask

    spec = SvmShareTask(1.0, 0.01, K, BOUNDS, np.eye(D, 2), 1e-5, "centroid", "ball")
    check_reply(spec, SvmShareReply(np.zeros((K, 3))), LIMITS)
    assert _code(spec, SvmShareReply(np.zeros((K, 4)))) == "shape"
    assert _code(spec, SvmShareReply(np.full((K, 3), math.inf))) == "not_finite"


def test_a_ring_total_is_two_sums_within_n_times_max_abs():
    ring = RingSpec("s", ("a", "b"), 20, 2, 10.0, (), {})
    spec = BoostEvaluateTask(None, None, None, ring)  # the contract reads only the ring spec
    check_reply(spec, RingJoined("s"), LIMITS)
    check_reply(spec, RingTotal("s", np.array([20.0, -20.0])), LIMITS)
    assert _code(spec, RingTotal("s", np.array([20.5, 0.0]))) == "out_of_range"
    assert _code(spec, RingTotal("s", np.array([1.0, 2.0, 3.0]))) == "shape"
    assert _code(spec, RingTotal("s", np.array([math.nan, 0.0]))) == "not_finite"


# ---- the most one owner can move an aggregate ------------------------------------------


def _ncc_sums(replies: list[NccShareReply]) -> tuple[np.ndarray, np.ndarray]:
    # the per-output sums before the k-RR's debiasing: under rr with ⊥ (a dummy's label K) K + 1 of them
    return ncc_class_sums([NccShare(r.reports, r.labels) for r in replies], n_classes=_ncc().label_values(), d=D)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.integers(0, 3 * ROWS),
    scale=st.sampled_from([0.5, 1.0, 1.0001, 2.0, 2.0**40]),
    label=st.integers(-1, K),
    width=st.sampled_from([D, D + 1, D + 3]),
    mechanism=st.sampled_from(MECHANISMS[:4]),
)
def test_an_accepted_ncc_reply_moves_class_sums_by_at_most_the_bound(rows, scale, label, width, mechanism):
    """One owner's accepted reply changes a class sum by at most ``max_rows * max_abs_output`` per
    coordinate and a class count by at most ``max_rows`` (``common/tasks/shares.py``)."""
    name, eps = mechanism
    spec = _ncc(name, eps)
    mech = make_mechanism(name, epsilon=eps, d=D)
    bound = mech.max_abs_output
    rng = np.random.Generator(np.random.PCG64(rows))
    honest = NccShareReply(mech.privatize(rng.uniform(-1, 1, (ROWS, D)), rng), rng.integers(0, K, ROWS))
    # the hostile reply: extreme values (at the bound times scale), all with one label
    values = np.zeros((rows, width))
    values[:, 0] = bound * scale
    hostile = NccShareReply(values, np.full(rows, label, dtype=np.int64))
    try:
        check_reply(spec, hostile, LIMITS)
    except ContractViolation:
        return  # never aggregated
    before, count_before = _ncc_sums([honest])
    after, count_after = _ncc_sums([honest, hostile])
    assert np.max(np.abs(after - before)) <= LIMITS.max_rows * bound + 1e-9
    assert np.max(np.abs(count_after - count_before)) <= LIMITS.max_rows


@settings(max_examples=100, deadline=None)
@given(
    scale=st.sampled_from([0.5, 1.0, 1.001, 3.0, 2.0**41]),
    width_extra=st.sampled_from([0, 0, 1, 3]),
    n=st.integers(1, 50),
    mechanism=st.sampled_from(MECHANISMS[2:4]),
)
def test_an_accepted_lr_reply_moves_the_mean_by_at_most_two_bounds_over_n(scale, width_extra, n, mechanism):
    """Replacing one of ``n`` owners' vectors by an accepted one moves the average LR parameters by at
    most ``2 * max_abs_output / n`` per coordinate: what one honest owner's extreme draw could do."""
    name, eps = mechanism
    p = D + 1 if K == 2 else K * (D + 1)
    spec = LrShareTask(name, eps, 4.0, 1.0, K, BOUNDS)
    bound = make_mechanism(name, epsilon=eps, d=p).max_abs_output
    hostile = LrShareReply(np.full((1, p + width_extra), bound * scale))
    honest = np.full((n, p), -bound)
    try:
        check_reply(spec, hostile, LIMITS)
    except ContractViolation:
        return
    moved = np.vstack([honest[:-1], hostile.reports]).mean(axis=0) - honest.mean(axis=0)
    assert np.max(np.abs(moved)) <= 2 * bound / n + 1e-9


def test_the_ncc_bound_is_reached_by_a_reply_an_honest_owner_could_send():
    """``max_rows`` rows at the mechanism's largest output, one label: accepted (an honest owner of
    ``max_rows`` rows draws it with positive probability) and it moves the class sum by the whole bound."""
    spec = _ncc("pm", 2.0)
    bound = make_mechanism("pm", epsilon=2.0, d=D).max_abs_output
    values = np.zeros((ROWS, D))
    values[:, 0] = bound
    worst = NccShareReply(values, np.zeros(ROWS, dtype=np.int64))
    check_reply(spec, worst, LIMITS)
    sums, counts = _ncc_sums([worst])
    assert sums[0, 0] == pytest.approx(LIMITS.max_rows * bound) and counts[0] == LIMITS.max_rows
