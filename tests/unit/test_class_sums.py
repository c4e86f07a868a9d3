"""DP class sums (privfed.common.feddpdr.centroid) and their path through the federation: the
sensitivity bound, the nearest-centroid model, the wire form of SvmShareTask's model and delta, the
owner's ledger entry (epsilon, delta) and the strategy's (epsilon, delta) split over real handlers."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.feddpdr.centroid import centroid_coef, dp_class_sums, exact_class_sums
from privfed.common.feddpdr.model import aggregate_classifier, predict_linear
from privfed.common.ledger import Ledger
from privfed.common.tasks import Refusal, SvmShareReply, SvmShareTask, Task
from privfed.owner.core import handle_batch
from privfed.owner.data import build_owners, federation_split
from privfed.proto import privfed_pb2 as pb
from privfed.proto.serde import task_from_proto, task_to_proto
from privfed.server.strategies import FedDpdrStrategy


@pytest.fixture(scope="module")
def digits():
    return federation_split("digits", seed=0, test_fraction=0.2)


def _unit_rows(rng, n, k):
    Z = rng.standard_normal((n, k))
    return Z / np.linalg.norm(Z, axis=1, keepdims=True) * rng.uniform(0.2, 1.0, (n, 1))  # norms in [0.2, 1]


def test_class_sums_are_per_class_sums_of_z_and_1_over_root2(rng):
    Z, y = _unit_rows(rng, 40, 3), rng.integers(0, 4, 40)
    S = exact_class_sums(Z, y, 4)
    for c in range(4):
        assert np.allclose(S[c, :3], Z[y == c].sum(axis=0) / math.sqrt(2))
        assert math.isclose(S[c, 3], np.sum(y == c) / math.sqrt(2))


def test_one_row_moves_the_sums_by_at_most_one_whatever_k_and_K(rng):
    """The L2 sensitivity the Gaussian is calibrated to: add/remove one row, Frobenius norm <= 1."""
    for k, K in ((1, 2), (5, 10), (64, 3)):
        Z, y = _unit_rows(rng, 30, k), rng.integers(0, K, 30)
        Z[0] /= np.linalg.norm(Z[0])  # a row on the sphere: the worst case is reached
        change = exact_class_sums(Z, y, K) - exact_class_sums(Z[1:], y[1:], K)
        assert np.linalg.norm(change) <= 1 + 1e-12
        assert math.isclose(np.linalg.norm(change), 1.0)


def test_rows_outside_the_unit_ball_are_refused(rng):
    with pytest.raises(ConfigError, match="norm"):
        dp_class_sums(np.full((3, 2), 1.0), np.zeros(3, int), 2, epsilon=1.0, delta=1e-5, rng=rng)


def test_non_private_centroid_model_is_the_nearest_centroid(rng):
    Z, y = _unit_rows(rng, 300, 4), rng.integers(0, 3, 300)
    W = centroid_coef(exact_class_sums(Z, y, 3), 0.0)
    means = np.stack([Z[y == c].mean(axis=0) for c in range(3)])
    nearest = np.argmin(((Z[:, None, :] - means[None]) ** 2).sum(axis=2), axis=1)
    assert np.array_equal(predict_linear(W, Z), nearest)


def test_aggregate_classifier_sums_class_sums_and_averages_models(rng):
    releases = [rng.standard_normal((3, 5)) + np.array([0, 0, 0, 0, 20.0]) for _ in range(4)]
    W = aggregate_classifier(releases, [1, 2, 3, 4], model="centroid", epsilon=1.0, delta=1e-5)
    from privfed.common.feddpdr.centroid import class_sums_sigma

    sigma = class_sums_sigma(1.0, 1e-5)
    sizes = np.array([math.sqrt(2) * r[:, 4].sum() for r in releases])
    w = 4 * sizes / sizes.sum()  # each release weighted by the row count it carries
    assert np.allclose(W, centroid_coef(sum(wi * r for wi, r in zip(w, releases)), sigma**2 * np.sum(w**2)))
    equal = [releases[0]] * 4  # equal sizes: the plain sum and N sigma^2
    W_equal = aggregate_classifier(equal, [1, 1, 1, 1], model="centroid", epsilon=1.0, delta=1e-5)
    assert np.allclose(W_equal, centroid_coef(4 * releases[0], 4 * sigma**2))
    avg = aggregate_classifier(releases, [1, 1, 1, 1], model="softmax", epsilon=1.0, delta=1e-5)
    assert np.allclose(avg, np.mean(releases, axis=0))


def test_size_weighted_sum_beats_the_biggest_owner_where_the_plain_sum_does_not(rng):
    """Uneven owners (the paper's uneven set 2, scaled): weighting each release by its own count gives a
    class-mean error below the biggest owner's alone, where the plain sum's is above it."""
    from privfed.common.feddpdr.centroid import combine_class_sums

    sizes, sigma, k, draws = (24, 120, 240, 1204, 2409), 8.0, 5, 400
    exact = [np.hstack([np.full((1, k), 0.5 * n), [[n / math.sqrt(2)]]]) for n in sizes]  # one class, mean 0.5
    err = {"weighted": [], "plain": [], "biggest": []}
    for _ in range(draws):
        noisy = [e + rng.normal(0, sigma, e.shape) for e in exact]
        for name, S in (
            ("weighted", combine_class_sums(noisy, sigma)[0]),
            ("plain", sum(noisy)),
            ("biggest", noisy[-1]),
        ):
            err[name].append(np.sum((S[0, :k] / S[0, k] / math.sqrt(2) - 0.5) ** 2))
    mse = {name: float(np.mean(v)) for name, v in err.items()}
    assert mse["weighted"] < 0.9 * mse["biggest"] < 0.9 * mse["plain"]


@pytest.mark.parametrize(
    "model, delta", [("centroid", 5e-6), ("mc-huber", 5e-6), ("softmax", 5e-6), ("ovr-huber", 0.0)]
)
def test_svm_task_model_and_delta_cross_the_wire(model, delta, digits):
    train, _ = digits
    spec = SvmShareTask(0.7, 0.01, 10, train.bounds, None, delta, model, "normalise")
    back = task_from_proto(task_to_proto(Task("t", "o", "r", spec))).spec
    assert (back.model, back.delta, back.epsilon, back.scaling) == (model, delta, 0.7, "normalise")
    assert back.ledger_entries() == spec.ledger_entries()


@pytest.mark.parametrize("field", ["model", "scaling"])
def test_a_wire_task_that_names_no_model_or_scaling_is_malformed(digits, field):
    """The wire has no default: an unset (0) or unknown enum is refused, never read as some model."""
    train, _ = digits
    msg = task_to_proto(Task("t", "o", "r", SvmShareTask(0.5, 0.01, 10, train.bounds, None, 0.0, "ovr-huber", "ball")))
    msg.svm_share.ClearField(field)
    with pytest.raises(RemoteProtocolError, match=field):
        task_from_proto(pb.Task.FromString(msg.SerializeToString()))
    setattr(msg.svm_share, field, 99)  # a value from a newer schema
    with pytest.raises(RemoteProtocolError, match=field):
        task_from_proto(pb.Task.FromString(msg.SerializeToString()))


def _owners(train, n=2):
    return {
        o.owner_id: o
        for o in build_owners(
            train, node_id="owner-0", n_owners=n, shards=range(n), seed=0, rng_kind="seeded", rng_seed=0
        )
    }


def test_owner_debits_epsilon_and_delta_once_for_the_class_sums(tmp_path, digits):
    train, _ = digits
    hosted = _owners(train)
    oid = sorted(hosted)[0]
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=1.0, delta_budget=1e-5)
    spec = SvmShareTask(0.6, 0.01, 10, train.bounds, None, 4e-6, "centroid", "ball")
    (reply,) = handle_batch([Task("s", oid, "r", spec)], hosted, ledger)
    assert isinstance(reply.payload, SvmShareReply) and reply.payload.coef.shape == (10, train.d + 1)
    (entry,) = ledger.history(oid)
    assert entry["purpose"].startswith("svm-class-sums") and entry["epsilon"] == 0.6 and entry["delta"] == 4e-6
    # the release is noised: it is not the exact class sums of the owner's rows
    from privfed.common.feddpdr.pca import scale_rows

    exact = exact_class_sums(scale_rows(hosted[oid].X, train.bounds), hosted[oid].y, 10)
    assert np.max(np.abs(reply.payload.coef - exact)) > 1.0


@pytest.mark.parametrize(
    "model, delta, eps",
    [
        ("centroid", 0.0, 0.5),
        ("softmax", 0.0, 0.5),
        ("ovr-huber", 1e-6, 0.5),
        ("centroid", 1.0, 0.5),
        ("mc-huber", 0.0, 0.5),
    ],
)
def test_owner_refuses_a_delta_that_does_not_fit_the_model(tmp_path, digits, model, delta, eps):
    train, _ = digits
    hosted = _owners(train, 1)
    oid = next(iter(hosted))
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=10.0, delta_budget=1.0)
    spec = SvmShareTask(eps, 0.01, 10, train.bounds, None, delta, model, "ball")
    (reply,) = handle_batch([Task("s", oid, "r", spec)], hosted, ledger)
    assert isinstance(reply.payload, Refusal) and reply.payload.code == "invalid_task"
    assert ledger.history(oid) == []


def test_strategy_spends_exactly_epsilon_and_delta_per_owner_and_learns(tmp_path, digits):
    train, test = digits
    owners = _owners(train, 4)
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=8.0, delta_budget=1e-5)
    strategy = FedDpdrStrategy(epsilon=8.0, n_classes=10, bounds=train.bounds, k=20, delta=1e-5, model="centroid")
    one_node = SimpleNamespace(
        fold_tasks=lambda tasks, fold, timeout=None: fold(handle_batch(tasks, owners, ledger)),
        progressed=lambda done, planned: None,
    )
    model = strategy.run(sorted(owners), one_node).model
    for oid in owners:
        spent = ledger.spent(oid)
        assert math.isclose(spent.epsilon, 8.0) and math.isclose(spent.delta, 1e-5)
        purposes = sorted(h["purpose"].split(":")[0] for h in ledger.history(oid))
        assert purposes == ["dp-count", "dp-pca", "svm-class-sums"]
        svm = [h for h in ledger.history(oid) if h["purpose"].startswith("svm")][0]
        assert math.isclose(svm["epsilon"], 4.0) and math.isclose(svm["delta"], 5e-6)
    assert model.score(test.X, test.y) > 0.5  # chance is 0.1
