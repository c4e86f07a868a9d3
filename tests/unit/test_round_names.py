"""A run's batches are named by their step in the logs, not by the run's id again and again (walkthrough 7,
W7-12: an lr job's log said ``round gd-8443cbbe171b: 25 of 25 task(s) answered`` four times over). The run's
id stays the same for every step: the owners' ledgers tie each release to it (one gradient per run)."""

from __future__ import annotations

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.identity import owner_id
from privfed.common.tasks import LrGradientTask, Task
from privfed.common.tasks.gradient import gradient_release_id
from privfed.deploy.inprocess import InProcessTransport
from privfed.owner.local import LocalOwner
from privfed.server.config import JobConfig
from privfed.server.strategies import make_strategy


class _Recording(InProcessTransport):
    """The in-process transport, keeping each batch's tasks as the job's ``execute`` would log them."""

    batches: list[list[Task]]

    def run_tasks(self, tasks, timeout=None, **kwargs):
        self.batches.append(list(tasks))
        return super().run_tasks(tasks, timeout, **kwargs)


def test_each_gradient_step_of_a_run_is_named_by_its_number_and_shares_the_runs_release_id(rng):
    n, bounds = 100, Bounds(-np.ones(3), np.ones(3))
    X = rng.uniform(-1, 1, size=(n, 3))
    y = (X[:, 0] > 0).astype(int)
    seeds = rng.spawn(n)
    owners = [LocalOwner(owner_id("party", i), X[i : i + 1], y[i : i + 1], seeds[i], 2, bounds) for i in range(n)]
    transport = _Recording.with_ledgers(owners, epsilon_budget=2.0)
    transport.batches = []
    strategy = make_strategy(JobConfig.from_flat(task="lr", epsilon=2.0, solver="gd"), n_classes=2, bounds=bounds)
    strategy.run([o.owner_id for o in owners], transport)
    steps = [b for b in transport.batches if isinstance(b[0].spec, LrGradientTask)]
    planned = len(steps)
    assert planned >= 2
    names = [b[0].round_name for b in steps]
    run = steps[0][0].round_id
    assert names == [f"{run} (gradient step {t} of {planned})" for t in range(1, planned + 1)], names
    assert {t.round_id for b in steps for t in b} == {run}  # one run: every owner's gradient under one release id
    assert len({gradient_release_id(t.round_id) for b in steps for t in b}) == 1
    for ledger in transport.ledgers.values():
        ledger.close()
