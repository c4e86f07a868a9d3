"""A boosted NCC share under ``labels="joint"`` is made at the ε it is debited, whatever ``share_groups`` (audit 22).

The finding: under ``share_groups="all"`` every owner shares in each of the T rounds and each share is debited
``share_round_epsilon = share_epsilon / T`` (``privfed.common.tasks.boost_release_epsilons``), but
``ReleasePlan.joint_encoding`` built the (label, sign) k-RR at ``share_epsilon``, T times the debit. ``joint`` is
the default label scheme of ``--task bdt --base ncc``, so ``--share-groups all`` released T x share_epsilon per
owner and run against a ledger that recorded share_epsilon. Measured by audit 22 through the real owner core
(one-row owner, K = 3, run ε = 5, T = 3): one share debited 1.0 showed ε >= 2.19 (Clopper-Pearson, 3000 draws a
side), the run's three shares debited 3.0 together showed ε >= 4.58.

Two checks through a real :class:`~privfed.owner.core.OwnerCore`, each release debited on its ledger:

* no clock: the encoding each share is drawn with has the ε its ledger entry records;
* statistical: one share of an owner of one row (label 0) against one of label 1: the event "the report is the
  value label 0's row reports most" has a Clopper-Pearson lower bound on ε within the debit. Control: the same
  test under ``share_groups="disjoint"`` at the same per-share debit passes on the current code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import BoostConfig, BoostHistory
from privfed.common.bounds import Bounds
from privfed.common.learners import ncc_joint
from privfed.common.ledger import Ledger
from privfed.common.tasks import BoostShareTask, JointNccReply, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner
from privfed.proto import serde

pytestmark = pytest.mark.in_process

K, T = 3, 3
BOUNDS = Bounds.of(0.0, 1.0, 2)
DRAWS = 300


def _params(share_groups: str) -> BoostingParams:
    # share_round_epsilon = 1.0 in both: run ε 5 split 0.6 to shares over T=3 rounds, or run ε 5/3 in one share
    eps = 5.0 if share_groups == "all" else 5.0 / 3.0
    p = BoostingParams(base="ncc", epsilon=eps, n_classes=K, bounds=BOUNDS, n_rounds=T, share_groups=share_groups,
                       labels="joint")  # fmt: skip
    assert p.share_round_epsilon == pytest.approx(1.0)
    return p


def _shares(label: int, share_groups: str, seed: int) -> tuple[np.ndarray, float]:
    X, y = np.array([[0.1, 0.1]]), np.array([label])
    owner = LocalOwner("node-0.o00000", X, y, np.random.Generator(np.random.PCG64(seed)), K, BOUNDS,
                       row_keys=tuple(row_digests(X, y)))  # fmt: skip
    core = OwnerCore([owner], Ledger(":memory:", epsilon_budget=1e9))
    params = _params(share_groups)
    out = []
    for i in range(DRAWS):  # a run each: the owner's first share of the run (round 0)
        task = Task(
            f"t{i}", owner.owner_id, f"run-{i}", BoostShareTask(BoostConfig(f"run-{i}", params), BoostHistory((), 0))
        )
        (result,) = core.answer([task]).results
        payload = serde.result_from_proto(serde.result_to_proto(result)).payload
        assert isinstance(payload, JointNccReply), payload
        out.append(int(np.asarray(payload.reports).reshape(-1)[0]))
    spent = core.ledger.spent(owner.owner_id).epsilon
    return np.asarray(out), spent / DRAWS


def _eps_lower_bound(a: np.ndarray, b: np.ndarray, value: int, alpha: float = 0.01) -> float:
    ka, kb, n = int(np.sum(a == value)), int(np.sum(b == value)), len(a)
    lo = beta.ppf(alpha / 2, ka, n - ka + 1) if ka else 0.0
    hi = beta.ppf(1 - alpha / 2, kb + 1, n - kb) if kb < n else 1.0
    return math.log(lo / hi) if lo > 0 else -math.inf


@pytest.mark.parametrize("share_groups", ["all", "disjoint"])
def test_the_joint_encoding_is_drawn_at_the_debited_epsilon(monkeypatch, share_groups):
    drawn = []
    share = ncc_joint.JointLabelEncoding.share

    def spy(self, *args, **kwargs):
        drawn.append(self.epsilon)
        return share(self, *args, **kwargs)

    monkeypatch.setattr(ncc_joint.JointLabelEncoding, "share", spy)
    X, y = np.array([[0.1, 0.1]]), np.array([0])
    owner = LocalOwner("node-0.o00000", X, y, np.random.Generator(np.random.PCG64(1)), K, BOUNDS,
                       row_keys=tuple(row_digests(X, y)))  # fmt: skip
    core = OwnerCore([owner], Ledger(":memory:", epsilon_budget=1e9))
    config = BoostConfig("run", _params(share_groups))
    (result,) = core.answer([Task("t0", owner.owner_id, "run", BoostShareTask(config, BoostHistory((), 0)))]).results
    assert isinstance(result.payload, JointNccReply)
    debited = core.ledger.spent(owner.owner_id).epsilon
    assert drawn and all(e == pytest.approx(debited) for e in drawn), (drawn, debited)


@pytest.mark.parametrize("share_groups", ["all", "disjoint"])
def test_one_share_tells_labels_apart_no_more_than_its_debit(share_groups):
    a, debit_a = _shares(0, share_groups, 11)
    b, debit_b = _shares(1, share_groups, 12)
    assert debit_a == pytest.approx(1.0) and debit_b == pytest.approx(1.0)
    value = int(np.bincount(a).argmax())  # the report label 0's row makes most
    assert _eps_lower_bound(a, b, value) <= debit_a
