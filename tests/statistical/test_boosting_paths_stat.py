"""The two owner paths of a boosting evaluation agree in distribution at finite ε: the per-owner
path (real owner cores through the in-process transport's ring secure sum, each release debited
in a real ledger) and the vectorised simulation (``SimulatedOwners``, one generator stream) both
give ``E`` with mean the exact clipped error sum and variance ``n * 2 s^2``, ``s = 2 b / ε_e``
(Laplace per owner, SPEC §1). Tolerances from the standard errors (SPEC §0)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.releases import ReleasePlan
from privfed.common.boosting.simulation import SimulatedOwners
from privfed.common.boosting.wire import at_round, config_to_dict, empty_history
from privfed.common.datasets import load_builtin, partition
from privfed.common.learners.stump import Stump, thresholds
from privfed.common.tasks import BoostEvaluateTask
from privfed.deploy.inprocess import InProcessTransport
from privfed.owner.data import build_owners

pytestmark = pytest.mark.slow

N_OWNERS, REPEATS = 20, 250


def test_per_owner_and_vectorised_evaluations_have_the_same_mean_and_variance():
    ds = load_builtin("synthetic", n_samples=200, seed=2)
    fb = BoostingParams(epsilon=2.0, n_classes=2, bounds=ds.bounds, n_rounds=2, n_bins=4, max_owner_rows=20)
    stump = Stump(0, 2, float(thresholds(ds.bounds, 4)[0, 1]), (0, 1), 0.3)
    owners = build_owners(
        ds, node_id="owner-0", n_owners=N_OWNERS, shards=range(N_OWNERS), seed=0, rng_kind="seeded", rng_seed=0
    )
    exact = sum(float(np.sum(stump.predict(o.X) != o.y)) for o in owners)  # weights 1 = the row bound: no clip
    transport = InProcessTransport.with_ledgers(owners, epsilon_budget=math.inf)
    ids = sorted(transport.owners)
    per_owner = []
    for r in range(REPEATS):  # a fresh run id per repeat: a fresh release
        config, history = config_to_dict(fb, f"stat-{r}"), at_round(empty_history(), 0)
        outcome = transport.secure_sum(
            ids,
            lambda ring, config=config, history=history: BoostEvaluateTask(config, history, stump, ring),
            max_abs=ReleasePlan(fb).contribution_bound,
            round_id=f"ring-{r}",
        )
        per_owner.append(outcome.totals[0])
    sim = SimulatedOwners(
        ReleasePlan(fb), ds.X, ds.y, partition(ds.n, N_OWNERS, seed=0), np.random.Generator(np.random.PCG64(4))
    )
    vectorised = [sim.evaluate(0, np.arange(N_OWNERS), stump).err_total for _ in range(REPEATS)]
    var = N_OWNERS * 2.0 * ReleasePlan(fb).eval_noise_scale ** 2
    kurtosis = 3.0 / N_OWNERS  # excess kurtosis of a sum of n Laplace draws
    for sample in (np.asarray(per_owner), np.asarray(vectorised)):
        assert abs(sample.mean() - exact) < 4.0 * math.sqrt(var / REPEATS)
        assert abs(sample.var(ddof=1) / var - 1.0) < 4.0 * math.sqrt((2.0 + kurtosis) / REPEATS)
    ledger = transport.ledgers["owner-0"]
    assert all(ledger.spent(o).epsilon == pytest.approx(REPEATS * fb.eval_round_epsilon) for o in ids)
