"""Public bases for FedDPDR-DPML's phase 2 (privfed.common.feddpdr.basis, issue 13.1): the DCT basis is
orthonormal and low-frequency first, a public basis releases and debits nothing in phase 1 so the
classifier gets all of (epsilon, delta), and the in-process pipeline and the networked strategy agree."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.feddpdr.basis import dct_basis, image_side, public_basis
from privfed.common.feddpdr.model import delta_split
from privfed.common.ledger import Ledger
from privfed.common.tasks import SvmShareTask
from privfed.deploy.experiments.federated import federated_fit
from privfed.owner.core import handle_batch
from privfed.owner.data import build_owners, federation_split
from privfed.server.strategies import FedDpdrStrategy


@pytest.fixture(scope="module")
def digits():
    return federation_split("digits", seed=0, test_fraction=0.2)


def test_dct_basis_is_orthonormal_and_starts_with_the_constant_image():
    U = dct_basis(64, 64)
    np.testing.assert_allclose(U.T @ U, np.eye(64), atol=1e-12)
    np.testing.assert_allclose(U[:, 0], np.full(64, 1 / 8), atol=1e-15)
    np.testing.assert_allclose(dct_basis(64, 10), U[:, :10])  # a prefix of the same order


def test_dct_basis_keeps_a_smooth_image_in_its_first_columns():
    side = 28
    r, c = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    smooth = np.exp(-((r - 13.5) ** 2 + (c - 13.5) ** 2) / 60.0).ravel()
    coef = dct_basis(side * side, side * side).T @ smooth
    assert np.sum(coef[:20] ** 2) > 0.99 * np.sum(coef**2)


def test_dct_needs_square_images_and_identity_needs_k_equal_d():
    assert image_side(784) == 28
    with pytest.raises(ConfigError, match="square"):
        dct_basis(30, 5)
    with pytest.raises(ConfigError, match="k"):
        dct_basis(64, 65)
    assert public_basis("identity", 64, 64) is None
    with pytest.raises(ConfigError, match="k = 64"):
        public_basis("identity", 64, 20)
    with pytest.raises(ConfigError, match="basis"):
        public_basis("dp-pca", 64, 20)  # not public


@pytest.mark.parametrize(
    "basis, model, split",
    [
        ("dp-pca", "centroid", (5e-6, 5e-6)),
        ("dp-pca", "ovr-huber", (1e-5, 0.0)),
        ("dct", "centroid", (0.0, 1e-5)),
        ("identity", "softmax", (0.0, 1e-5)),
        ("dct", "ovr-huber", (0.0, 0.0)),
    ],
)
def test_delta_split(basis, model, split):
    assert delta_split(1e-5, basis=basis, model=model) == split


def test_public_basis_pipeline_spends_nothing_in_phase_one_and_learns(digits):
    """The experiments' in-process federation (the strategy over real owner handlers) with a public basis."""
    train, test = digits
    parts = [(train.X[i::4], train.y[i::4]) for i in range(4)]
    options = dict(epsilon=4.0, delta=1e-5, model="centroid", scaling="ball", lam=0.01)
    model = federated_fit(parts, train.bounds, 10, np.random.default_rng(0), k=20, basis="dct", **options)
    np.testing.assert_allclose(model.components, dct_basis(64, 20))
    assert model.score(test.X, test.y) > 0.6  # chance 0.1
    full = federated_fit(parts, train.bounds, 10, np.random.default_rng(0), k=64, basis="identity", **options)
    assert full.components is None and full.score(test.X, test.y) > 0.6


def test_strategy_with_a_public_basis_sends_only_the_classifier_task_and_debits_it_once(tmp_path, digits):
    """Real owner handlers and a real ledger: no DP-PCA, no count; the class sums take all of (eps, delta)."""
    train, test = digits
    owners = {
        o.owner_id: o
        for o in build_owners(
            train, node_id="owner-0", n_owners=4, shards=range(4), seed=0, rng_kind="seeded", rng_seed=0
        )
    }
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=4.0, delta_budget=1e-5)
    sent = []

    def run_tasks(tasks, timeout=None):
        sent.append(tasks)
        return handle_batch(tasks, owners, ledger)

    strategy = FedDpdrStrategy(epsilon=4.0, n_classes=10, bounds=train.bounds, k=20, basis="dct", model="centroid")
    assert strategy.budget_split() == {"pca": 0.0, "count": 0.0, "svm": 4.0}
    transport = SimpleNamespace(
        fold_tasks=lambda tasks, fold, timeout=None: fold(run_tasks(tasks)), progressed=lambda done, planned: None
    )
    model = strategy.run(sorted(owners), transport).model
    assert len(sent) == 1 and all(isinstance(t.spec, SvmShareTask) for t in sent[0])
    np.testing.assert_allclose(sent[0][0].spec.subspace, dct_basis(64, 20))
    for oid in owners:
        (entry,) = ledger.history(oid)
        assert entry["purpose"].startswith("svm-class-sums")
        assert math.isclose(entry["epsilon"], 4.0) and math.isclose(entry["delta"], 1e-5)
    assert model.owner_sizes == () and model.score(test.X, test.y) > 0.5
    with pytest.raises(ConfigError, match="k = 64"):
        FedDpdrStrategy(epsilon=4.0, n_classes=10, bounds=train.bounds, k=20, basis="identity")
