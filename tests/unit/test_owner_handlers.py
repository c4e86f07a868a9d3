"""Owner task handlers with a real SQLite ledger: the budget is checked before anything is
computed, every part of a release is debited before it is returned, and an overspend is
refused with nothing released."""

import math

import numpy as np
import pytest

from privfed.common.ledger import Ledger
from privfed.common.messages import (
    NccShareTask, PcaShareReply, PcaShareTask, Refusal, SvmShareReply, SvmShareTask, Task,
)
from privfed.owner.data import build_owners, federation_split
from privfed.owner.handlers import handle_batch


@pytest.fixture(scope="module")
def digits():
    return federation_split("digits", seed=0, test_fraction=0.2)


def owners(train, n=2):
    return {o.owner_id: o for o in build_owners(train, n_owners=n, shards=range(n), seed=0, rng_kind="seeded",
                                                rng_seed=0)}


def test_feddpdr_debits_epsilon1_delta_then_epsilon2_per_class_and_refuses_past_budget(tmp_path, digits):
    train, _ = digits
    hosted = owners(train)
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=1.0, delta_budget=1e-5)
    pca = [Task(f"p{i}", oid, "pca", PcaShareTask(epsilon=0.5, delta=1e-5, k=5, bounds=train.bounds))
           for i, oid in enumerate(hosted)]
    replies = handle_batch(pca, hosted, ledger)
    assert all(isinstance(r.payload, PcaShareReply) for r in replies)
    oid = next(iter(hosted))
    assert (ledger.spent(oid).epsilon, ledger.spent(oid).delta) == (0.5, 1e-5)
    U = replies[0].payload.subspace
    svm = [Task(f"s{i}", o, "svm", SvmShareTask(epsilon=0.5, lam=0.01, n_classes=10, bounds=train.bounds,
                                                subspace=U)) for i, o in enumerate(hosted)]
    replies = handle_batch(svm, hosted, ledger)
    assert all(isinstance(r.payload, SvmShareReply) for r in replies)
    history = [h for h in ledger.history(oid) if h["purpose"].startswith("svm-ovr")]
    assert len(history) == 10 and math.isclose(sum(h["epsilon"] for h in history), 0.5)
    assert math.isclose(ledger.spent(oid).epsilon, 1.0)
    again = handle_batch([Task("p9", oid, "pca2", PcaShareTask(epsilon=0.1, delta=0.0, k=5, bounds=train.bounds))],
                         hosted, ledger)
    assert isinstance(again[0].payload, Refusal) and again[0].payload.code == "budget_exceeded"
    assert len(ledger.history(oid)) == 11  # nothing debited for the refusal


def test_delta_beyond_the_delta_budget_is_refused(tmp_path, digits):
    train, _ = digits
    hosted = owners(train, 1)
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=10.0, delta_budget=0.0)
    oid = next(iter(hosted))
    out = handle_batch([Task("p", oid, "pca", PcaShareTask(epsilon=0.5, delta=1e-5, k=5, bounds=train.bounds))],
                       hosted, ledger)
    assert isinstance(out[0].payload, Refusal) and ledger.history(oid) == []


def test_rr_labels_debit_features_and_labels_separately(tmp_path, digits):
    train, _ = digits
    hosted = owners(train, 1)
    oid = next(iter(hosted))
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=2.0)
    spec = NccShareTask(mechanism="pm", epsilon=1.6, labels="rr", label_epsilon=0.4, n_classes=10,
                        bounds=train.bounds)
    out = handle_batch([Task("n", oid, "r1", spec)], hosted, ledger)
    assert not isinstance(out[0].payload, Refusal)
    assert sorted(h["purpose"].split(":")[0] for h in ledger.history(oid)) == ["ncc-features", "ncc-labels"]
    assert math.isclose(ledger.spent(oid).epsilon, 2.0)


def test_a_task_for_a_foreign_owner_is_refused(tmp_path, digits):
    train, _ = digits
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=2.0)
    out = handle_batch([Task("n", "nobody", "r1", PcaShareTask(epsilon=0.5, delta=0, k=5, bounds=train.bounds))],
                       owners(train, 1), ledger)
    assert out[0].payload.code == "invalid_task"
