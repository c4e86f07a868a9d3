"""Round logic, one module per task (STYLE rule 12): a strategy builds tasks and aggregates
results; the transport it is given sends them (:class:`~privfed.server.strategies.base.Transport`:
gRPC in :mod:`privfed.server.job`, in-process in ``privfed.deploy.inprocess``).

``ncc``, ``lr``: one-round LDP learners (seed 002 §3.5); ``ldp_gd``: ``lr`` by LDP gradient descent
(``--solver gd``, Wang et al. ICDE 2019 §V); ``naive_bayes``: ``nb``, LDP naive Bayes in one round
(issue 22 item 3); ``feddpdr``: FedDPDR-DPML (seed 004);
``boosting``: federated SAMME (seed 002 Alg. 2); ``marginal_boost``: ``bdt --release marginals``, SAMME on
the coordinator from nb's one report per owner (issue 22). :func:`make_strategy` builds the one a
:class:`~privfed.server.config.JobConfig` names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.choices import default_k
from privfed.server.config import JobConfig
from privfed.server.parameters import BdtParams
from privfed.server.strategies.base import SingleRound, Strategy, Transport, refusals

if TYPE_CHECKING:
    from privfed.server.strategies.feddpdr import FedDpdrStrategy
    from privfed.server.strategies.lr import LrStrategy
    from privfed.server.strategies.ncc import NccStrategy

__all__ = [
    "FedDpdrStrategy",
    "LrStrategy",
    "NccStrategy",
    "SingleRound",
    "Strategy",
    "Transport",
    "make_strategy",
    "refusals",
]


def make_strategy(config: JobConfig | str, /, *, n_classes: int, bounds: Bounds, **options: Any) -> Strategy:
    """Build the round logic of ``config.task`` for a federation with this public schema.

    Parameters
    ----------
    config : JobConfig or str
        The job; a task name is shorthand for ``JobConfig.from_flat(task=config, **options)`` (options
        left out or None keep the defaults; a parameter of another task is refused), as tests and
        benchmarks use it.
    n_classes, bounds : int, Bounds
        The data set's public number of classes and feature bounds.

    bdt runs :attr:`JobConfig.release` (``--release``, else ``marginals`` for one-row owners, ``shares``
    otherwise). Boosting by shares gets :attr:`JobConfig.share_weight_bound` as its share weight bound, and a
    group sampler seeded by ``config.seed`` (group sampling is public: it needs no secrecy).
    """
    if isinstance(config, str):
        config = JobConfig.from_flat(task=config, **{k: v for k, v in options.items() if v is not None})
    elif options:
        raise TypeError(f"make_strategy(JobConfig, ...) takes only n_classes and bounds, got {sorted(options)}")
    options = {k: v for k, v in config.task_options().items() if k != "solver"}  # solver: which lr strategy
    if config.task == "lr" and config.task_options()["solver"] == "gd":  # LDP gradient descent (issue 22 item 4)
        from privfed.server.strategies.ldp_gd import LdpGdStrategy

        gd = {k: v for k, v in options.items() if k in ("mechanism", "param_bound")}  # C: the local fits' only
        return LdpGdStrategy(**gd, epsilon=config.epsilon, n_classes=n_classes, bounds=bounds, seed=config.seed)
    if config.task == "nb":  # LDP naive Bayes (issue 22 item 3)
        from privfed.server.strategies.naive_bayes import NbStrategy

        return NbStrategy(**options, epsilon=config.epsilon, n_classes=n_classes, bounds=bounds)
    if config.task in ("ncc", "lr", "feddpdr"):  # each takes its table's parameters (server/parameters.py)
        strategy: type[NccStrategy | LrStrategy | FedDpdrStrategy] = (
            _ncc() if config.task == "ncc" else _lr() if config.task == "lr" else _feddpdr()
        )
        if config.task == "ncc":  # a joint share's length: the job's public bound on an owner's rows
            options["max_owner_rows"] = config.owner_rows_bound
        if config.task == "feddpdr" and options["k"] is None:
            options["k"] = default_k(options["basis"], bounds.d)
        return strategy(**options, epsilon=config.epsilon, n_classes=n_classes, bounds=bounds)
    bdt = config.task_params
    assert isinstance(bdt, BdtParams)  # the task is bdt
    if config.release == "marginals":  # nb's one report per owner, SAMME on the coordinator (issue 22)
        from privfed.server.strategies.marginal_boost import MarginalBoostStrategy

        if config.journal is not None:  # nothing to resume: never ask an owner for its one report twice
            raise ConfigError(
                f"--journal checkpoints the rounds of --release shares; --release marginals{config.default_release_note()} "
                "asks each owner for one report and keeps no journal, so it cannot be resumed: drop --journal and "
                "--resume, or give --release shares"
            )

        marginal = {k: options[k] for k in ("n_bins", "n_rounds", "smoothing")}
        return MarginalBoostStrategy(**marginal, epsilon=config.epsilon, n_classes=n_classes, bounds=bounds)
    from privfed.server.strategies.boosting import BoostingStrategy

    params = config.boosting_params(n_classes=n_classes, bounds=bounds)
    rng = np.random.Generator(np.random.PCG64(config.seed))
    journal = None
    if config.journal is not None:
        from privfed.server.journal import Journal

        journal = Journal(config.journal)
    elif config.resume:
        raise ConfigError("--resume needs --journal FILE (the journal of the job to continue)")
    return BoostingStrategy(
        params,
        rng,
        ring_timeout=bdt.ring_timeout,
        secure_sum=bdt.secure_sum,
        journal=journal,
        resume=config.resume,
        seed=config.seed,
    )


def _feddpdr() -> type[FedDpdrStrategy]:
    from privfed.server.strategies.feddpdr import FedDpdrStrategy  # imports scipy: only for this task

    return FedDpdrStrategy


def _ncc() -> type[NccStrategy]:
    from privfed.server.strategies.ncc import NccStrategy

    return NccStrategy


def _lr() -> type[LrStrategy]:
    from privfed.server.strategies.lr import LrStrategy

    return LrStrategy


def __getattr__(name: str) -> object:
    """A task's strategy class on first use: a coordinator imports its own task's round logic only (issue 27,
    idle RSS; ``FedDpdrStrategy`` imports scipy, which the other tasks' coordinators never load)."""
    lazy = {"FedDpdrStrategy": _feddpdr, "LrStrategy": _lr, "NccStrategy": _ncc}
    if name in lazy:
        return lazy[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
