"""FedDPDR-DPML strategy in-process with real owner handlers and a real ledger: the budget split
(DP-PCA, DP row count, SVM) adds up to ε, the weights use the noisy counts released once in the
PCA phase, and the report names clear-label releases (issue 9, contracts 6 and 7)."""

import math

import pytest

from privfed.common.ledger import Ledger
from privfed.common.tasks import PcaShareTask, SvmShareTask
from privfed.owner.core import handle_batch
from privfed.owner.data import build_owners, federation_split
from privfed.server.config import JobConfig
from privfed.server.report import nonprivate_releases
from privfed.server.strategies import FedDpdrStrategy
from privfed.server.strategies.base import Transport as BaseTransport


@pytest.fixture(scope="module")
def digits():
    return federation_split("digits", seed=0, test_fraction=0.2)


@pytest.mark.parametrize("eps", [2.0, 0.3, math.inf])
def test_budget_split_adds_up(digits, eps):
    train, _ = digits
    split = FedDpdrStrategy(epsilon=eps, n_classes=10, bounds=train.bounds, k=5).budget_split()
    if math.isinf(eps):
        assert all(math.isinf(v) for v in split.values())
    else:
        assert math.isclose(split["pca"] + split["count"] + split["svm"], eps)
        assert math.isclose(split["count"], 0.05 * eps / 2) and split["svm"] == eps / 2


def test_counts_released_once_and_svm_only_to_owners_that_gave_one(tmp_path, digits):
    train, _ = digits
    owners = {
        o.owner_id: o
        for o in build_owners(
            train, node_id="owner-0", n_owners=4, shards=range(4), seed=0, rng_kind="seeded", rng_seed=0
        )
    }
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=2.0, delta_budget=1e-5)
    silent = sorted(owners)[-1]
    sent = []

    class Transport(BaseTransport):  # its default fold_tasks hands the batch run_tasks returns
        def run_tasks(self, tasks, timeout=None):
            sent.append(tasks)
            return [r for r in handle_batch(tasks, owners, ledger) if r.owner_id != silent]  # a lost node

    model = FedDpdrStrategy(epsilon=2.0, n_classes=10, bounds=train.bounds, k=5).run(sorted(owners), Transport()).model
    assert [type(t.spec) for t in sent[0]] == [PcaShareTask] * 4
    assert [t.owner_id for t in sent[1]] == sorted(owners)[:-1]  # no count, no SVM task
    assert all(isinstance(t.spec, SvmShareTask) for t in sent[1])
    assert len(model.owner_sizes) == 3 and all(isinstance(n, int) and n >= 1 for n in model.owner_sizes)
    for oid in sorted(owners)[:-1]:
        purposes = [h["purpose"].split(":")[0] for h in ledger.history(oid)]
        assert purposes.count("dp-count") == 1 and math.isclose(ledger.spent(oid).epsilon, 2.0)


def test_report_names_clear_label_releases():
    def clear(task: str, **params: str) -> bool:
        return JobConfig.from_flat(task=task, epsilon=1.0, **params).clear_labels

    assert not clear("ncc", labels="rr") and not clear("lr") and not clear("feddpdr")
    assert not clear("bdt", labels="clear", base="stump") and not clear("bdt", base="ncc")
    assert clear("ncc", labels="clear") and clear("bdt", labels="clear", base="ncc")
    assert nonprivate_releases(True, 0) == [] and nonprivate_releases(False, 10) == []
    (entry,) = nonprivate_releases(True, 7)
    assert entry["what"] == "clear-labels" and entry["owners"] == 7
