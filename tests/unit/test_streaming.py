"""Streaming aggregation (issue 27): the one-round strategies fold replies batch by batch as the
dispatcher hands them over, and hold none of them.

In the order of the task list (the in-process transport's) the folded model is the materialised
aggregate bit for bit; over gRPC the replies come in the order the nodes answer, and the model then
differs by float rounding only, within the pinned bound of reordering a float sum:
``|fl(s) - s| <= (n - 1) u sum |x_i|`` (u = 2^-53), so two orders differ by at most twice that.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.feddpdr.centroid import ClassSumsTotal
from privfed.common.feddpdr.subspace import ProjectorSum, WeightedSum
from privfed.common.identity import owner_id
from privfed.common.learners.logistic import lr_aggregate
from privfed.common.learners.ncc import NccShare, ncc_centroids
from privfed.common.mechanisms import make_mechanism
from privfed.common.tasks import LrShareReply, NccShareReply, OwnerInfo, Refusal, Result
from privfed.server.contracts import Rejection
from privfed.server.dispatcher import Dispatcher
from privfed.server.strategies import make_strategy

D, K, N = 6, 3, 3000
BOUNDS = Bounds(np.zeros(D), np.ones(D))
U = 2.0**-53  # the unit roundoff of float64


def _batches(results: list[Result], rng: np.random.Generator, shuffle: bool) -> list[list[Result]]:
    """``results`` cut into batches of random sizes (a node's pushes), in task order or shuffled."""
    order = rng.permutation(len(results)) if shuffle else np.arange(len(results))
    cuts = np.sort(rng.choice(np.arange(1, len(results)), size=40, replace=False))
    return [[results[i] for i in part] for part in np.split(order, cuts)]


def _fold(strategy, batches: list[list[Result]]):
    running = strategy.running()
    for batch in batches:
        running.add(batch)
    return running.model()


def test_lr_folded_in_task_order_is_the_materialised_aggregate_and_in_any_order_within_rounding():
    rng = np.random.default_rng(3)
    strategy = make_strategy("lr", solver="local", n_classes=K, bounds=BOUNDS, epsilon=1.0, mechanism="pm")
    p = K * (D + 1)
    reports = make_mechanism("pm", epsilon=1.0, d=p).privatize(rng.uniform(-1, 1, (N, p)), rng)
    results = [Result(f"t{i}", owner_id("n", i), LrShareReply(reports[i : i + 1])) for i in range(N)]
    results.insert(7, Result("refused", owner_id("n", N), Refusal("budget_exceeded", "spent")))  # not a share
    exact = lr_aggregate(reports, param_bound=strategy.param_bound, n_classes=K, bounds=BOUNDS)
    folded = _fold(strategy, _batches(results, rng, shuffle=False))
    np.testing.assert_array_equal(folded.coef_, exact.coef_)
    np.testing.assert_array_equal(folded.intercept_, exact.intercept_)
    theta = np.hstack([exact.coef_, exact.intercept_[:, None]])
    pin = 2 * (N - 1) * U * np.abs(reports).mean(axis=0).reshape(theta.shape) * strategy.param_bound
    for _ in range(5):
        other = _fold(strategy, _batches(results, rng, shuffle=True))
        difference = np.abs(np.hstack([other.coef_, other.intercept_[:, None]]) - theta)
        assert np.all(difference <= pin), (difference.max(), pin.min())


@pytest.mark.parametrize("labels", ["rr", "clear"])
def test_ncc_folded_in_task_order_is_the_materialised_aggregate_and_in_any_order_within_rounding(labels):
    rng = np.random.default_rng(4)
    strategy = make_strategy("ncc", n_classes=K, bounds=BOUNDS, epsilon=2.0, mechanism="duchi", labels=labels)
    rows = rng.integers(1, 3, N)  # owners of one or two rows
    shares = [
        NccShareReply(
            make_mechanism("duchi", epsilon=strategy.eps_features, d=D).privatize(rng.uniform(-1, 1, (m, D)), rng),
            rng.integers(0, K + (labels == "rr"), m),  # rr: ⊥ = K among the reported labels too
        )
        for m in rows
    ]
    results = [Result(f"t{i}", owner_id("n", i), s) for i, s in enumerate(shares)]
    label_rr = strategy.spec().label_response()  # rr: K + 1 values with ⊥ (no max_owner_rows), None for clear
    exact = ncc_centroids(
        [NccShare(s.reports, s.labels) for s in shares], n_classes=K, bounds=BOUNDS, label_rr=label_rr
    )
    np.testing.assert_array_equal(_fold(strategy, _batches(results, rng, shuffle=False)).centroids, exact)
    for _ in range(3):  # a reordered sum; the centroids (a ratio, clipped to the box) within a loose rounding pin
        other = _fold(strategy, _batches(results, rng, shuffle=True)).centroids
        np.testing.assert_allclose(other, exact, rtol=0, atol=1e-9)


def test_the_dispatcher_hands_answers_to_the_sink_as_they_come_and_keeps_none():
    d = Dispatcher()
    owners = [owner_id("node-a", i) for i in range(5)]
    d.register("node-a", [OwnerInfo(o) for o in owners])
    strategy = make_strategy("lr", solver="local", n_classes=2, bounds=BOUNDS, epsilon=1.0)
    tasks = strategy.configure(owners, "r1")
    handed: list[list[str]] = []
    first = threading.Event()

    def sink(answers):
        handed.append([t.task_id for t, _ in answers])
        first.set()

    box: list = []
    runner = threading.Thread(target=lambda: box.append(d.run(tasks, timeout=30, sink=sink)))
    runner.start()
    pulled, _ = d.pull("node-a", 1.0)
    assert [t.task_id for t in pulled] == [t.task_id for t in tasks]
    reply = LrShareReply(np.zeros((1, D + 1)))
    d.push("node-a", [Result(t.task_id, t.owner_id, reply) for t in tasks[:3]])
    assert first.wait(5), "the first push was not handed over while the round still waited"
    assert runner.is_alive() and handed == [[t.task_id for t in tasks[:3]]]
    d.push("node-a", [Result(tasks[3].task_id, owners[3], reply)], [Rejection(tasks[4].task_id, owners[4], "x", "y")])
    runner.join(5)
    assert not runner.is_alive()
    (outcome,) = box
    assert handed[1:] == [[tasks[3].task_id, tasks[4].task_id]]
    assert outcome.results == {} and outcome.rejected == {} and outcome.lost == [] and outcome.answered == 4


def test_feddpdr_sums_folded_in_batches_are_the_materialised_aggregates_within_rounding():
    """Phase 1: the projector sum's top-k basis is the top-k left singular vectors of the stacked
    sqrt(w_i) U_i (the aggregate before streaming); phase 2: the size-weighted class sums and the
    weighted average, folded in shuffled batches, equal the all-at-once formulas."""
    rng = np.random.default_rng(5)
    d, k, n = 12, 3, 400
    Us = [np.linalg.qr(rng.normal(size=(d, k)) + np.eye(d, k) * 3)[0] for _ in range(n)]
    counts = rng.integers(1, 50, n)
    w = counts / counts.sum()
    left, singular, _ = np.linalg.svd(np.hstack([np.sqrt(wi) * U for wi, U in zip(w, Us)]), full_matrices=False)
    releases = [rng.normal(size=(K, k + 1)) + 5.0 for _ in range(n)]
    sizes = np.array([max(1.0, np.sqrt(2.0) * r[:, -1].sum()) for r in releases])
    weights = n * sizes / sizes.sum()
    sigma = 0.7
    for _ in range(3):
        order = rng.permutation(n)
        projectors, class_sums, average = ProjectorSum(d, k), ClassSumsTotal(), WeightedSum()
        for part in np.array_split(order, 7):
            projectors.add([Us[i] for i in part], counts[part])
            class_sums.add([releases[i] for i in part])
            average.add([releases[i] for i in part], counts[part])
        U, eigenvalues = projectors.result()
        np.testing.assert_allclose(U @ U.T, left[:, :k] @ left[:, :k].T, atol=1e-10)
        np.testing.assert_allclose(eigenvalues, singular**2, atol=1e-12)
        S_w, v = class_sums.combined(sigma)
        np.testing.assert_allclose(S_w, np.tensordot(weights, np.stack(releases), axes=1), rtol=1e-12)
        assert v == pytest.approx(sigma**2 * np.sum(weights**2), rel=1e-12)
        np.testing.assert_allclose(average.mean(), np.tensordot(w, np.stack(releases), axes=1), rtol=1e-12)
