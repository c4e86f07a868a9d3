"""A boosting share is counted against the run its config names, whatever the task's round id (audit 22, low).

The finding: a share's ledger purpose, its per-run count (``shares_per_owner``) and the owners-split role check
(``check_one_role``) read ``task.round_id``; an evaluation's read ``config.run_id``. Nothing binds the two, so a
coordinator that sends a share with ``round_id != config.run_id`` gets, under ``budget_split="owners"``, a share
and an evaluation of one run from one owner (each at the run's whole ε), or more than ``shares_per_owner`` shares
of one run. Every release is still debited (the ledger's total holds); the run's per-owner ε does not.

Through a real :class:`~privfed.owner.core.OwnerCore`: a share sent under another round id than its run is
refused (``invalid_task``) or counted against its run; the control (round id == run id) refuses the evaluation.
"""

from __future__ import annotations

import numpy as np
import pytest

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import BoostConfig, BoostHistory
from privfed.common.bounds import Bounds
from privfed.common.learners.stump import Stump, thresholds
from privfed.common.ledger import Ledger
from privfed.common.tasks import BoostEvaluateTask, BoostShareTask, Refusal, RingSpec, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner

pytestmark = pytest.mark.in_process

BOUNDS = Bounds.of(0.0, 1.0, 2)


@pytest.mark.parametrize("share_round_id", ["run-R", "another-id"])
def test_an_owner_of_an_owners_split_run_shares_or_evaluates_never_both(monkeypatch, share_round_id):
    import privfed.owner.ring as ringmod

    monkeypatch.setattr(ringmod.RingMod, "prepare", lambda self, owner_id, spec: None)  # the ring only moves the pair
    monkeypatch.setattr(ringmod.RingMod, "start", lambda self, task, party, value: (None, []))
    X, y = np.array([[0.1, 0.1]]), np.array([0])
    owner = LocalOwner("node-0.o00000", X, y, np.random.Generator(np.random.PCG64(1)), 2, BOUNDS,
                       row_keys=tuple(row_digests(X, y)))  # fmt: skip
    core = OwnerCore([owner], Ledger(":memory:", epsilon_budget=100.0))
    params = BoostingParams(base="stump", epsilon=2.0, n_classes=2, bounds=BOUNDS, n_rounds=2, n_bins=3,
                            budget_split="owners")  # fmt: skip
    config = BoostConfig("run-R", params)
    (share,) = core.answer(
        [Task("s", owner.owner_id, share_round_id, BoostShareTask(config, BoostHistory((), 0)))]
    ).results
    learner = Stump(0, 1, float(thresholds(BOUNDS, 3)[0, 0]), (1, 1), 0.0)
    ring = RingSpec("sess", (owner.owner_id, "node-1.o00000"), 24, 2, 1e6, (), {})
    evaluated = core.answer(
        [Task("e", owner.owner_id, "run-R", BoostEvaluateTask(config, BoostHistory((), 0), learner, ring))]
    ).results
    shared = not isinstance(share.payload, Refusal)
    evaluated_ok = not (evaluated and isinstance(evaluated[0].payload, Refusal))
    assert not (shared and evaluated_ok), "one owner released a share and an evaluation of one owners-split run"
    assert core.ledger.spent(owner.owner_id).epsilon <= params.epsilon
