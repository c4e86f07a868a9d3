"""Nearest centroid with the class priors (issue 22): the one prediction rule of ``NearestCentroidModel``
is the Gaussian Bayes rule ``argmin_k ||x - mu_k||^2 / (2 s^2) - log pi_k``; the priors come from the same
private class totals as the centroids (unbiased to O(1/n)); and the served and exported model predicts what
the in-process one does."""

import json
import math

import grpc
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from privfed.common.bounds import Bounds
from privfed.common.dataset_files import read_table
from privfed.common.errors import ConfigError
from privfed.common.learners.estimators import LdpNearestCentroid
from privfed.common.learners.exported import TrainedClassifier
from privfed.common.learners.ncc_model import NCC_VARIANCE, NearestCentroidModel, class_priors
from privfed.common.learners.trained import probabilities
from privfed.common.schema import FederationSchema
from privfed.deploy.experiments.federated import federated_model
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto import serde
from privfed.server.app import CoordinatorServer
from privfed.server.config import JobConfig
from privfed.server.models import load_model, save_model

BOUNDS = Bounds(np.array([0.0, -5.0, 10.0]), np.array([4.0, 5.0, 30.0]))


def test_the_rule_is_the_bayes_rule_of_isotropic_gaussians_around_the_centroids(rng):
    """log pi_k + log N(t; mu_k, s^2 I) in the bounds' unit space, its argmax and its softmax, against scipy."""
    centroids = BOUNDS.from_unit(rng.uniform(-0.3, 0.3, size=(3, 3)))
    priors = np.array([0.6, 0.3, 0.1])
    model = NearestCentroidModel(centroids, bounds=BOUNDS, priors=priors, variance=0.2)
    X = BOUNDS.from_unit(rng.uniform(-1, 1, size=(500, 3)))
    t, mu = BOUNDS.to_unit(X), BOUNDS.to_unit(centroids)
    joint = np.column_stack(
        [np.log(p) + multivariate_normal(mu[k], 0.2 * np.eye(3)).logpdf(t) for k, p in enumerate(priors)]
    )
    np.testing.assert_array_equal(model.predict(X), np.argmax(joint, axis=1))
    posterior = np.exp(joint - joint.max(axis=1, keepdims=True))
    np.testing.assert_allclose(probabilities(model, X), posterior / posterior.sum(axis=1, keepdims=True), atol=1e-9)
    plain = NearestCentroidModel(centroids, bounds=BOUNDS)
    assert 0 < np.mean(model.predict(X) != plain.predict(X)) < 0.5  # the priors move some rows, not all


def test_the_boundary_moves_by_the_closed_form_towards_the_smaller_class():
    """Two centroids at -a and +a on one unit coordinate: the boundary is x* = s^2 log(pi_0 / pi_1) / (2a)."""
    bounds = Bounds(np.array([-1.0]), np.array([1.0]))
    a, s2, priors = 0.4, 0.25, np.array([0.8, 0.2])
    model = NearestCentroidModel([[-a], [a]], bounds=bounds, priors=priors, variance=s2)
    boundary = s2 * math.log(priors[0] / priors[1]) / (2 * a)
    assert boundary > 0
    np.testing.assert_array_equal(model.predict([[boundary - 1e-9], [boundary + 1e-9], [0.0]]), [0, 1, 0])
    assert NearestCentroidModel([[-a], [a]], bounds=bounds).predict([[1e-9]])[0] == 1  # no priors: the midpoint


def test_equal_or_no_priors_is_the_nearest_centroid_whatever_the_variance(rng):
    centroids = rng.uniform(0, 4, size=(4, 3)) * [1, 2, 5] + [0, -5, 10]
    X = BOUNDS.from_unit(rng.uniform(-1, 1, size=(300, 3)))
    plain = NearestCentroidModel(centroids, bounds=BOUNDS)
    nearest = np.argmin(((BOUNDS.to_unit(X)[:, None] - BOUNDS.to_unit(centroids)[None]) ** 2).sum(axis=2), axis=1)
    np.testing.assert_array_equal(plain.predict(X), nearest)
    for variance in (0.01, 1.0, 100.0):
        equal = NearestCentroidModel(centroids, bounds=BOUNDS, priors=np.full(4, 0.25), variance=variance)
        np.testing.assert_array_equal(equal.predict(X), nearest)


def test_class_priors_clip_the_totals_and_add_one_to_each_class():
    np.testing.assert_allclose(class_priors([30.0, 10.0], 40.0), [31 / 42, 11 / 42])
    np.testing.assert_allclose(class_priors([-5.0, 50.0, 3.0], 20.0), [1 / 26, 21 / 26, 4 / 26])  # [0, cap]
    np.testing.assert_allclose(class_priors([-1.0, -2.0], 10.0), [0.5, 0.5])


def test_priors_and_variance_travel_in_model_json_and_an_old_file_loads_without_them(rng):
    model = NearestCentroidModel([[1.0, 0.0, 20.0], [3.0, 1.0, 12.0]], [4, 7], BOUNDS, priors=[0.7, 0.3], variance=0.3)
    restored = NearestCentroidModel.from_dict(json.loads(json.dumps(model.to_dict())))
    np.testing.assert_array_equal(restored.priors, model.priors)
    assert restored.variance == 0.3
    X = BOUNDS.from_unit(rng.uniform(-1, 1, size=(200, 3)))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
    old = {k: v for k, v in model.to_dict().items() if k not in ("priors", "variance")}
    loaded = NearestCentroidModel.from_dict(old)
    assert loaded.priors is None and loaded.variance == 1.0
    for bad in ([0.7, 0.2], [1.0, 0.0], [0.5, 0.5, 0.0], [-0.5, 1.5]):
        with pytest.raises(ConfigError):
            NearestCentroidModel([[1.0, 0.0, 20.0], [3.0, 1.0, 12.0]], bounds=BOUNDS, priors=bad)
    with pytest.raises(ConfigError):
        NearestCentroidModel([[1.0, 0.0, 20.0]], bounds=BOUNDS, variance=0.0)


def imbalanced(rng, n, share=0.75):
    """Two overlapping classes, ``share`` of the rows in class 0, within BOUNDS."""
    y = (rng.random(n) >= share).astype(np.int64)
    X = np.array([2.0, 0.0, 20.0]) + np.where(y[:, None] == 1, [0.5, 1.0, 2.0], 0.0)
    X = X + rng.normal(scale=[0.8, 2.0, 4.0], size=(n, 3))
    return np.clip(X, BOUNDS.lo, BOUNDS.hi), y


@pytest.mark.parametrize("labels", ["joint", "rr"])
def test_the_private_priors_estimate_the_class_shares(labels):
    """Statistical: over 200 noise draws the mean served prior is the class share to within 4 standard errors
    of the mean plus the add-one smoothing's O(1/n) (the totals are unbiased; clipping never binds here)."""
    rng = np.random.default_rng(11)
    X, y = imbalanced(rng, 3000)
    share = np.bincount(y, minlength=2) / y.size
    draws = np.array(
        [
            LdpNearestCentroid(epsilon=3.0 if labels == "joint" else 8.0, labels=labels, bounds=BOUNDS,
                               random_state=np.random.default_rng(100 + r)).fit(X, y).model_.priors
            for r in range(200)
        ]
    )  # fmt: skip
    se = draws.std(axis=0, ddof=1) / math.sqrt(len(draws))
    assert np.all(draws.std(axis=0) > 0)  # the priors are noisy: estimated, not the true shares
    assert np.all(np.abs(draws.mean(axis=0) - share) <= 4 * se + 2.0 / y.size), (draws.mean(axis=0), share, se)


SCHEMA = """features = ["a", "b", "c"]
classes = ["common", "rare"]
label = "kind"
[bounds]
lo = [0, -5, 10]
hi = [4, 5, 30]
"""


def test_the_served_and_exported_model_predicts_what_the_federation_trained(tmp_path):
    """``--task ncc`` through the federation (in-process transport, owner cores, ε = 3): model.json, the
    coordinator's Predict over gRPC and the exported classifier give the in-process model's labels and
    probabilities, priors included (a copy without them predicts otherwise on these rows)."""
    rng = np.random.default_rng(5)
    X, y = imbalanced(rng, 400)
    lines = ["a,b,c,kind"] + [f"{a:.4f},{b:.4f},{c:.4f},{['common', 'rare'][k]}" for (a, b, c), k in zip(X, y)]
    (tmp_path / "rows.csv").write_text("\n".join(lines) + "\n")
    schema = FederationSchema.parse(SCHEMA)
    ds = schema.dataset(read_table(tmp_path / "rows.csv"))
    parts = [(ds.X[i : i + 1], ds.y[i : i + 1]) for i in range(ds.n)]
    model = federated_model(JobConfig.from_flat(task="ncc", epsilon=3.0), parts, ds.bounds, 2, rng)
    assert model.priors is not None and model.variance == NCC_VARIANCE
    without = NearestCentroidModel(model.centroids, model.classes, model.bounds)
    assert np.any(without.predict(ds.X) != model.predict(ds.X))
    expected, proba = model.predict(ds.X), probabilities(model, ds.X)

    path = save_model(tmp_path / "model.json", model, model_id="ncc-eps3", task="ncc", schema=schema)
    loaded = load_model(path).model
    np.testing.assert_array_equal(loaded.predict(ds.X), expected)
    np.testing.assert_allclose(probabilities(loaded, ds.X), proba, atol=1e-12)
    clf = TrainedClassifier.from_file(str(path))
    assert clf.predict(ds.X).tolist() == [schema.classes[i] for i in expected]
    np.testing.assert_allclose(clf.predict_proba(ds.X), proba, atol=1e-12)

    server = CoordinatorServer(tls=None)
    server.models.put("ncc-eps3", loaded, schema=schema)
    port = server.start("127.0.0.1:0")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.CoordinatorStub(channel)
            request = pb.PredictRequest(model_id="ncc-eps3", rows=serde.reports_to_proto(ds.X), probabilities=True)
            reply = stub.Predict(request, timeout=10)
    finally:
        server.stop(0)
    assert list(reply.labels) == expected.tolist()
    np.testing.assert_allclose(serde.matrix_from_proto(reply.probabilities), proba, atol=1e-6)  # float32 on the wire
