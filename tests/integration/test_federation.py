"""Real federations over gRPC with mTLS and real owner processes: correctness against the
non-private reference, accuracy rising with ε, and a node killed mid-round."""

import math
import os
import signal
import time

import numpy as np
import pytest
from fedharness import Federation
from liveness import LivenessClock

from privfed.common.datasets import partition
from privfed.common.identity import owner_id
from privfed.common.learners.reference import reference_accuracy
from privfed.common.ledger import Ledger
from privfed.owner.data import federation_split
from privfed.server.strategies import make_strategy

pytestmark = pytest.mark.slow


def split():
    return federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)


def accuracy(model, test) -> float:
    return float(np.mean(model.predict(test.X) == test.y))


@pytest.mark.parametrize("task,n_owners,n_samples", [("ncc", 60, 600), ("lr", 2, 2000)])
def test_epsilon_inf_matches_non_private_reference(tmp_path, task, n_owners, n_samples):
    """ε = ∞ bypasses the mechanism on the same code path. LR averages local models, which
    matches a central fit when each owner holds enough rows (here 750)."""
    train, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=n_samples)
    dataset = ["--dataset", "synthetic", "--n-samples", str(n_samples), "--seed", "3", "--test-fraction", "0.25"]
    fed = Federation(tmp_path)
    try:
        half = n_owners // 2
        fed.spawn("owner-0", n_owners=n_owners, shards=f"0:{half}", budget=math.inf, dataset=dataset)
        fed.spawn("owner-1", n_owners=n_owners, shards=f"{half}:{n_owners}", budget=math.inf, dataset=dataset)
        lr = {"param_bound": 8.0, "solver": "local"} if task == "lr" else {}  # averaged local models of 1000 rows
        strategy = make_strategy(task, mechanism="pm", epsilon=math.inf, n_classes=2, bounds=test.bounds, **lr)
        outcome = fed.run(strategy, n_owners)
    finally:
        fed.close()
    assert outcome.answered == n_owners
    assert abs(accuracy(outcome.model, test) - reference_accuracy(task, train, test)) <= 0.01


def test_ncc_accuracy_rises_with_epsilon(tmp_path):
    """Mean over seeds of PM-NCC accuracy on digits rises over ε ∈ {0.5, 1, 2, 4, 8}: one
    federation per seed whose owners hold a budget of Σε and release once per ε. The paper's
    scheme (seed 002 §3.5.1) sends labels in the clear, so the owners opt in with
    --allow-clear-labels; with the private default (rr, 20 % of ε on 10-class labels) accuracy
    stays at chance below ε = 2 on one row per owner, which says nothing about the mechanism."""
    epsilons, seeds = [0.5, 1, 2, 4, 8], [1, 2, 3]
    acc = np.zeros((len(seeds), len(epsilons)))
    for i, seed in enumerate(seeds):
        dataset = ["--dataset", "digits", "--seed", str(seed), "--test-fraction", "0.25"]
        _, test = federation_split("digits", seed=seed, test_fraction=0.25)
        fed = Federation(tmp_path / f"seed{seed}")
        try:
            fed.spawn(
                "owner-0",
                n_owners=400,
                shards="0:400",
                budget=sum(epsilons),
                dataset=dataset,
                extra=["--allow-clear-labels"],
            )
            for j, eps in enumerate(epsilons):
                outcome = fed.run(
                    make_strategy("ncc", mechanism="pm", epsilon=eps, n_classes=10, bounds=test.bounds, labels="clear"),
                    400,
                )
                assert outcome.answered == 400
                acc[i, j] = accuracy(outcome.model, test)
        finally:
            fed.close()
    mean = acc.mean(axis=0)
    assert np.all(np.diff(mean) > 0), mean


def test_round_completes_when_a_node_is_killed_mid_round(tmp_path):
    _, test = split()
    # Silence is measured on a liveness clock: a loaded box that starves a healthy node stops it.
    clock = LivenessClock(("owner-0", "owner-1", "owner-2"))
    fed = Federation(tmp_path, node_timeout=3.0, clock=clock)
    try:
        fed.spawn("owner-0", n_owners=60, shards="0:20", budget=5.0)
        fed.spawn("owner-1", n_owners=60, shards="20:40", budget=5.0)
        victim = fed.spawn("owner-2", n_owners=60, shards="40:60", budget=5.0)
        assert fed.server.dispatcher.wait_for_owners(60, 60) == 60
        os.kill(victim.pid, signal.SIGSTOP)  # frozen: registered, but it will never answer
        clock.forget("owner-2")
        thread, box = fed.run_in_thread(  # the accept round waits 5 s for it to call again (W10-8), in vain
            make_strategy("ncc", mechanism="pm", epsilon=5.0, n_classes=2, bounds=test.bounds), 60, register_timeout=5
        )
        time.sleep(0.5)
        os.kill(victim.pid, signal.SIGKILL)  # killed with the round in flight
        thread.join(timeout=60)
        assert "outcome" in box, box.get("error")
        outcome = box["outcome"]
    finally:
        fed.close()
    assert outcome.lost_nodes == ["owner-2"]
    assert outcome.answered == 40
    # The 40 answers made the model: finite centroids of both classes, and an accuracy within the spread of such
    # runs. 40 owners' shares at eps = 5 (joint labels, the default below 5.5), in process over 80 seeds and their
    # own partitions: 0.60 with sd 0.085, the lowest 0.39 (the same before stop 46's padding draws: paired
    # +0.004 +- 0.013); a bound of 0.55 failed one seed in four, and this seed since the draws moved (0.43)
    assert np.all(np.isfinite(outcome.model.centroids)) and outcome.model.centroids.shape[0] == 2
    assert accuracy(outcome.model, test) > 0.3


def _feddpdr_over_grpc(tmp_path, eps, **options):
    """One FedDPDR job over gRPC with mTLS: 4 logical owners of digits on 2 owner node processes."""
    train, test = federation_split("digits", seed=0, test_fraction=0.2)
    dataset = ["--dataset", "digits", "--seed", "0", "--test-fraction", "0.2"]
    fed = Federation(tmp_path)
    try:
        for i, shards in enumerate(("0:2", "2:4")):
            fed.spawn(
                f"owner-{i}", n_owners=4, shards=shards, budget=eps, dataset=dataset, extra=["--delta-budget", "1e-5"]
            )
        outcome = fed.run(make_strategy("feddpdr", epsilon=eps, n_classes=10, bounds=test.bounds, **options), 4)
    finally:
        fed.close()
    assert outcome.answered == 4 and not outcome.refused
    history = Ledger(tmp_path / "owner-0.sqlite", epsilon_budget=eps, delta_budget=1e-5).history(owner_id("owner-0", 0))
    return train, test, outcome, [(h["purpose"].split(":")[0], h["epsilon"], h["delta"]) for h in history]


def test_feddpdr_two_phases_over_grpc_match_the_in_process_federation(tmp_path):
    """At ε = ∞ the networked job and the experiments' in-process federation (the same strategy over
    the owners' handlers) give the same model: the transport only moves bytes. The ledger holds
    DP-PCA, the exact count (an infinite count budget) and the class sums."""
    from privfed.deploy.experiments.federated import federated_fit

    train, test, outcome, history = _feddpdr_over_grpc(tmp_path, math.inf, k=20, model="centroid")
    assert [p for p, _, _ in history] == ["dp-pca", "dp-count", "svm-class-sums"]
    exact = sorted(len(p) for p in partition(train.X.shape[0], 4, seed=0))
    assert sorted(outcome.model.owner_sizes) == exact
    parts = [(train.X[i], train.y[i]) for i in partition(train.X.shape[0], 4, seed=0)]
    local = federated_fit(
        parts,
        train.bounds,
        10,
        np.random.default_rng(0),
        epsilon=math.inf,
        delta=1e-5,
        k=20,
        basis="dp-pca",
        model="centroid",
        scaling="ball",
        lam=0.01,
    )
    assert accuracy(outcome.model, test) == pytest.approx(local.score(test.X, test.y), abs=0.01)
    assert accuracy(outcome.model, test) > 0.85


def test_feddpdr_paper_pipeline_over_grpc_debits_epsilon_over_k_per_class(tmp_path):
    """The seed's pipeline (DP-PCA + one-vs-rest Huber SVMs) over the network: (0.95 ε/2, δ) for DP-PCA,
    0.05 ε/2 for the noisy row count, ε/2K per one-vs-rest problem; the model saved as model.json
    reloads and predicts the same labels."""
    from privfed.server.models import load_model, save_model

    eps = 2.0
    _, test, outcome, history = _feddpdr_over_grpc(tmp_path, eps, k=20, model="ovr-huber")
    assert [p for p, _, _ in history] == ["dp-pca", "dp-count"] + [f"svm-ovr-{c}" for c in range(10)]
    assert history[0][1:] == pytest.approx((0.95 * eps / 2, 1e-5)) and history[1][1] == pytest.approx(0.05 * eps / 2)
    assert all(e == pytest.approx(eps / 20) and d == 0 for _, e, d in history[2:])
    saved = save_model(tmp_path / "model.json", outcome.model, model_id="feddpdr-eps2", task="feddpdr", schema=None)
    reloaded = load_model(saved).model
    assert reloaded.model == "ovr-huber" and np.array_equal(reloaded.predict(test.X), outcome.model.predict(test.X))


def test_feddpdr_multiclass_svm_over_grpc_debits_one_epsilon_delta_and_learns(tmp_path):
    """The one-budget multiclass Huber SVM on a public basis: one (ε, δ) entry per owner, and it learns."""
    _, test, outcome, history = _feddpdr_over_grpc(tmp_path, 4.0, k=20, model="mc-huber", basis="dct")
    assert history == [("svm-mc-huber", 4.0, 1e-5)]
    assert accuracy(outcome.model, test) > 0.5  # chance 0.1


def test_simulate_runs_bdt_with_the_weight_bound_of_its_public_rows_per_owner(tmp_path):
    """``privfed simulate`` plays every owner, so rows per owner is public there: its JobConfig
    derives the share weight bound from it (2 * ceil(rows)), and the report says so."""
    import json
    import subprocess
    import sys

    out = tmp_path / "runs"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "privfed.deploy.cli",
            "simulate",
            "--owners",
            "8",
            "--processes",
            "2",
            "--epsilon",
            "inf",
            "--task",
            "bdt",
            "--rounds",
            "2",
            "--insecure",
            "--n-samples",
            "400",
            "--out",
            str(out),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=900,  # a hang guard only: 240 s ran out at load 20 (a healthy run)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (report_path,) = out.glob("*/report.json")
    report = json.loads(report_path.read_text())
    rows = 400 * (1 - 0.2) / 8  # default --test-fraction 0.2
    assert report["config"]["rows_per_owner"] == rows
    assert report["config"]["share_weight_bound"] == math.ceil(rows)
    assert report["config"]["weight_bound_source"] == "--rows-per-owner"
    (point,) = report["points"]
    assert point["epsilon"] == "inf" and point["owners"] == 8 and point["answered"] > 0
