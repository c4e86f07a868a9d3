"""``--task lr`` as the federation runs it, in process: the experiments' logistic regression.

:func:`federated_lr_fit` runs the coordinator's strategy (``--solver gd``: LDP gradient descent,
:class:`~privfed.server.strategies.ldp_gd.LdpGdStrategy`; ``--solver local``: perturbed local models,
:class:`~privfed.server.strategies.lr.LrStrategy`) over the in-process transport, every owner with its
own generator and a fresh ledger holding ε, each task through the owner core (validate, debit, compute),
as :func:`privfed.deploy.experiments.feddpdr.federated_fit` does for FedDPDR. So a number from
``privfed experiment tabular`` is a number of the networked job's code.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.identity import owner_id
from privfed.common.learners.logistic import LinearModel
from privfed.deploy.inprocess import InProcessTransport
from privfed.owner.local import LocalOwner
from privfed.server.config import JobConfig
from privfed.server.strategies import make_strategy


def federated_lr_fit(
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
    bounds: Bounds,
    n_classes: int,
    rng: np.random.Generator,
    *,
    epsilon: float,
    solver: str,
    seed: int = 0,
    mechanism: str = "pm",
) -> LinearModel:
    """``--task lr --solver SOLVER`` on ``parts`` (one owner per part; owner i's noise from child i of
    ``rng``); ``seed``: the job's public seed (gd's groups)."""
    seeds = rng.spawn(len(parts))
    owners = [
        LocalOwner(owner_id("party", i), X, y, r, n_classes, bounds) for i, ((X, y), r) in enumerate(zip(parts, seeds))
    ]
    transport = InProcessTransport.with_ledgers(owners, epsilon_budget=epsilon)
    config = JobConfig.from_flat(task="lr", epsilon=epsilon, solver=solver, mechanism=mechanism, seed=seed)
    strategy = make_strategy(config, n_classes=n_classes, bounds=bounds)
    model = strategy.run([o.owner_id for o in owners], transport).model
    if not isinstance(model, LinearModel):
        raise TypeError(f"--task lr trained a {type(model).__name__}, not a LinearModel")
    return model
