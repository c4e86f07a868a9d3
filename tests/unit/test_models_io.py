"""Trained models survive a save/load round trip with identical predictions."""

import math

import numpy as np
import pytest

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.simulation import simulate
from privfed.common.errors import ConfigError
from privfed.owner.data import federation_split
from privfed.server.models import load_model, save_model


def test_boosted_model_roundtrip(tmp_path):
    train, test = federation_split("synthetic", seed=1, test_fraction=0.25, n_samples=800)
    fb = BoostingParams(epsilon=math.inf, n_classes=2, bounds=train.bounds, n_rounds=4, n_bins=4)
    model = simulate(fb, train.X, train.y, rng=np.random.Generator(np.random.PCG64(0))).model
    loaded = load_model(save_model(tmp_path / "model.json", model, model_id="bdt-epsinf", task="bdt", schema=None))
    np.testing.assert_array_equal(loaded.model.predict(test.X), model.predict(test.X))
    assert loaded.model_id == "bdt-epsinf"


def test_unknown_or_broken_files_are_refused(tmp_path):
    (tmp_path / "bad.json").write_text('{"kind": "mystery"}')
    with pytest.raises(ConfigError, match="unknown model kind"):
        load_model(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="cannot read"):
        load_model(tmp_path / "missing.json")
    (tmp_path / "report.json").write_text('{"status": "ok", "accuracy": 0.9}')  # a job's report, not its model
    with pytest.raises(ConfigError, match="not a saved model: .*report.json; its model is the model.json beside it"):
        load_model(tmp_path / "report.json")


def test_scale_aware_nearest_centroid_roundtrip_keeps_its_bounds(tmp_path):
    from privfed.common.bounds import Bounds
    from privfed.common.learners.ncc_model import NearestCentroidModel

    bounds = Bounds(np.array([0.0, 0.0]), np.array([1.0, 1000.0]))
    model = NearestCentroidModel([[0.2, 500.0], [0.8, 520.0]], bounds=bounds)
    X = np.array([[0.3, 518.0], [0.7, 501.0]])
    np.testing.assert_array_equal(model.predict(X), [0, 1])  # unit space: the first feature decides
    np.testing.assert_array_equal(NearestCentroidModel(model.centroids).predict(X), [1, 0])  # data space
    loaded = load_model(save_model(tmp_path / "model.json", model, model_id="ncc-eps4", task="ncc", schema=None))
    np.testing.assert_array_equal(loaded.model.predict(X), model.predict(X))


@pytest.mark.parametrize("basis, k", [("dct", 20), ("identity", 64)])
def test_feddpdr_model_roundtrip_and_broken_files(tmp_path, basis, k):
    """model.json of FedDPDR (issue 21): same predictions after reloading; a tampered file is refused."""
    import json

    from privfed.deploy.experiments.federated import federated_fit

    train, test = federation_split("digits", seed=0, test_fraction=0.2)
    parts = [(train.X[i::2], train.y[i::2]) for i in range(2)]
    model = federated_fit(
        parts,
        train.bounds,
        10,
        np.random.default_rng(0),
        epsilon=4.0,
        delta=1e-5,
        k=k,
        basis=basis,
        model="mc-huber",
        scaling="normalise",
        lam=0.01,
    )
    loaded = load_model(
        save_model(tmp_path / "model.json", model, model_id="feddpdr-eps4", task="feddpdr", schema=None)
    )
    assert (loaded.model_id, loaded.model.model, loaded.model.scaling) == ("feddpdr-eps4", "mc-huber", "normalise")
    np.testing.assert_array_equal(loaded.model.predict(test.X), model.predict(test.X))
    data = json.loads((tmp_path / "model.json").read_text())
    data["model"]["coef"] = data["model"]["coef"][:3] + [[1.0]]
    (tmp_path / "model.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="FedDPDR"):
        load_model(tmp_path / "model.json")
