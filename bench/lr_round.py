"""The one-round LR job of ``bench/federation.py`` and the bare computation it is measured against.

:class:`RoundTimer` runs the job's LR round again and again in the coordinator and times it;
:func:`in_process_round` computes the same owners' fits, shares and aggregate in this process
(:func:`fit_local_logistic`, :func:`lr_share`, :func:`lr_aggregate`), the owners built from the node files
as the nodes build them (:func:`bench_owners`, :func:`privfed.owner.data.build_owners`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from privfed.common.learners.logistic import fit_local_logistic, lr_aggregate, lr_share
from privfed.common.mechanisms import make_mechanism
from privfed.owner.data import build_owners, load_owner_file
from privfed.server.strategies import make_strategy
from privfed.server.strategies.base import Transport
from privfed.server.strategies.result import PrivacySplit, StrategyResult

D = 10  # features
ROWS_PER_OWNER = 20
BOUND = 4.0  # public bounds -BOUND:BOUND on every feature


def write_rows(path: Path, n: int, rng: np.random.Generator, d: int = D, k: int = 2) -> None:
    """``n`` rows of a ``k``-class Gaussian mixture in ``d`` features (class c shifts features c, c+k, ...
    up and the others down), clipped to the public bounds, label last."""
    y = rng.integers(0, k, n)
    X = np.clip(rng.normal(size=(n, d)) + np.where(np.arange(d) % k == y[:, None], 0.8, -0.8), -BOUND, BOUND)
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", fmt=["%.6f"] * d + ["%d"])


class RoundTimer:
    """A strategy that runs the LR round ``repeats`` times (new round id each) and times each."""

    def __init__(self, lr: Any, repeats: int, after_first: Callable[[], object] | None = None) -> None:
        self.lr, self.repeats, self.after_first = lr, repeats, after_first
        self.times: list[float] = []

    def privacy(self) -> PrivacySplit:
        return self.lr.privacy()

    def check_feasible(self, n_owners: int) -> None:
        """Any number of owners can release."""

    def run(self, owner_ids: list[str], transport: Transport) -> StrategyResult[Any]:
        model = None
        for r in range(self.repeats):
            t0 = time.perf_counter()
            model = self.lr.aggregate(transport.run_tasks(self.lr.configure(owner_ids, f"bench-r{r}")))
            self.times.append(time.perf_counter() - t0)
            if r == 0 and self.after_first is not None:
                self.after_first()
        assert model is not None, "at least one round"
        return StrategyResult(model, self.privacy())


def lr_strategy(d: int = D, k: int = 2) -> Any:
    from privfed.common.bounds import Bounds

    return make_strategy(
        "lr", solver="local", mechanism="pm", epsilon=float("inf"), n_classes=k, bounds=Bounds.of(-BOUND, BOUND, d)
    )


def bench_owners(files: list[Path], owners_per_node: int, seed: int, first: int = 0) -> list[Any]:
    """The owners the nodes of ``files`` host (node ``first + i`` holds ``files[i]``), as the nodes build them."""
    owners = []
    for i, path in enumerate(files, start=first):
        ds = load_owner_file(str(path), f"-{BOUND:g}:{BOUND:g}", 2)
        owners += build_owners(
            ds,
            node_id=f"owner-{i}",
            n_owners=owners_per_node,
            shards=range(owners_per_node),
            seed=seed,
            rng_kind="seeded",
            rng_seed=seed,
        )
    return owners


def owner_reports(lr: Any, owners: list[Any]) -> list[np.ndarray]:
    """Each owner's computation of the LR round: its local fit and its perturbed share."""
    reports = []
    for o in owners:
        theta = fit_local_logistic(o.X, o.y, bounds=lr.bounds, n_classes=2, C=lr.C)
        mech = make_mechanism(lr.mechanism, epsilon=lr.epsilon, d=theta.size)
        reports.append(lr_share(theta, param_bound=lr.param_bound, mechanism=mech, rng=o.rng))
    return reports


def in_process_round(files: list[Path], owners_per_node: int, seed: int, repeats: int) -> tuple[float, float]:
    """The same owners' computation without processes or a wire: fit, share, aggregate. Returns the
    median (wall s, CPU s) of ``repeats`` rounds."""
    lr = lr_strategy()
    owners = bench_owners(files, owners_per_node, seed)
    times, cpus = [], []
    for _ in range(repeats):
        t0, cpu0 = time.perf_counter(), time.process_time()
        reports = owner_reports(lr, owners)
        lr_aggregate(np.stack(reports), param_bound=lr.param_bound, n_classes=2, bounds=lr.bounds)
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - cpu0)
    return statistics.median(times), statistics.median(cpus)
