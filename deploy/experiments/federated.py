"""The federation's own strategies run in process for the experiments: ``--task lr`` and ``--task nb``
(logistic regression and naive Bayes) and any job's strategy (:func:`federated_model`).

:func:`federated_model` runs a job's strategy over the in-process transport (below); :func:`federated_nb_fit`
is ``--task nb`` (:class:`~privfed.server.strategies.naive_bayes.NbStrategy`). :func:`federated_lr_fit` runs the coordinator's strategy (``--solver gd``: LDP gradient descent,
:class:`~privfed.server.strategies.ldp_gd.LdpGdStrategy`; ``--solver local``: perturbed local models,
:class:`~privfed.server.strategies.lr.LrStrategy`) over the in-process transport, every owner with its
own generator and a fresh ledger holding ε, each task through the owner core (validate, debit, compute),
as :func:`federated_fit` does for FedDPDR (``--task feddpdr``). So a number from
``privfed experiment tabular`` is a number of the networked job's code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.feddpdr.model import FedDPDRModel
from privfed.common.identity import owner_id
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.naive_bayes import NaiveBayesModel
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
    config = JobConfig.from_flat(task="lr", epsilon=epsilon, solver=solver, mechanism=mechanism, seed=seed)
    model = federated_model(config, parts, bounds, n_classes, rng)
    if not isinstance(model, LinearModel):
        raise TypeError(f"--task lr trained a {type(model).__name__}, not a LinearModel")
    return model


def federated_nb_fit(
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
    bounds: Bounds,
    n_classes: int,
    rng: np.random.Generator,
    *,
    epsilon: float,
    **options: Any,
) -> NaiveBayesModel:
    """``--task nb`` on ``parts`` (as :func:`federated_lr_fit`); ``options``: :class:`NbParams` fields."""
    model = federated_model(JobConfig.from_flat(task="nb", epsilon=epsilon, **options), parts, bounds, n_classes, rng)
    if not isinstance(model, NaiveBayesModel):
        raise TypeError(f"--task nb trained a {type(model).__name__}, not a NaiveBayesModel")
    return model


def federated_model(
    config: JobConfig,
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
    bounds: Bounds,
    n_classes: int,
    rng: np.random.Generator,
) -> Any:
    """The model of the job ``config`` over the in-process transport: one owner per part, owner i's noise from
    child i of ``rng``, each with a fresh ledger holding ``config.epsilon`` (and feddpdr's δ), every task through the owner core."""
    seeds = rng.spawn(len(parts))
    owners = [
        LocalOwner(owner_id("party", i), X, y, r, n_classes, bounds) for i, ((X, y), r) in enumerate(zip(parts, seeds))
    ]
    transport = InProcessTransport.with_ledgers(owners, epsilon_budget=config.epsilon, delta_budget=config.delta)
    try:
        strategy = make_strategy(config, n_classes=n_classes, bounds=bounds)
        return strategy.run([o.owner_id for o in owners], transport).model
    finally:
        for ledger in transport.ledgers.values():
            ledger.close()


def federated_fit(
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
    bounds: Bounds,
    n_classes: int,
    rng: np.random.Generator,
    *,
    epsilon: float,
    **options: Any,
) -> FedDPDRModel:
    """FedDPDR-DPML (``--task feddpdr``) on ``parts`` as :func:`federated_model` runs it, each owner's ledger
    holding ``(epsilon, delta)``; ``options``: :class:`~privfed.server.parameters.FeddpdrParams` fields (``delta``,
    ``k``, ``basis``, ``model``, ``scaling``, ``lam``). One part is DPDR-DPML (a party alone)."""
    config = JobConfig.from_flat(task="feddpdr", epsilon=epsilon, **options)
    model = federated_model(config, parts, bounds, n_classes, rng)
    if not isinstance(model, FedDPDRModel):
        raise TypeError(f"--task feddpdr trained a {type(model).__name__}, not a FedDPDRModel")
    return model
