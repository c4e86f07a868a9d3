"""Round logic as objects (STYLE rule 12): build tasks, aggregate replies.

A strategy never sends anything: :class:`~privfed.server.dispatcher.Dispatcher` does. The
aggregation calls the same ``privfed.common.learners`` functions an in-process simulation uses.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.logistic import lr_aggregate
from privfed.common.learners.ncc import NccShare, ncc_centroids, split_label_budget, NearestCentroidModel
from privfed.common.mechanisms import KaryRandomizedResponse, MECHANISMS
from privfed.common.messages import (
    LrShareReply, LrShareTask, NccShareReply, NccShareTask, Refusal, Result, Task,
)

TASKS = ("ncc", "lr")


def _new_tasks(owner_ids, round_id, spec) -> list[Task]:
    return [Task(task_id=f"{round_id}-{secrets.token_hex(6)}", owner_id=o, round_id=round_id, spec=spec)
            for o in owner_ids]


def _shares(results: list[Result], kind) -> list:
    return [r.payload for r in results if isinstance(r.payload, kind)]


@dataclass
class NccStrategy:
    """Nearest centroid from perturbed samples (seed 002 §3.5.1): every owner releases its
    rows once; the coordinator averages them per (reported) class."""

    mechanism: str
    epsilon: float
    n_classes: int
    bounds: Bounds
    labels: str = "clear"
    label_fraction: float = 0.2

    def __post_init__(self):
        if self.mechanism not in MECHANISMS:
            raise ConfigError(f"mechanism must be one of {MECHANISMS}, got {self.mechanism!r}")
        self.eps_features, self.eps_labels = split_label_budget(self.epsilon, self.labels, self.label_fraction)

    def configure(self, owner_ids, round_id: str) -> list[Task]:
        spec = NccShareTask(mechanism=self.mechanism, epsilon=self.eps_features, labels=self.labels,
                            label_epsilon=self.eps_labels, n_classes=self.n_classes, bounds=self.bounds)
        return _new_tasks(owner_ids, round_id, spec)

    def aggregate(self, results: list[Result]) -> NearestCentroidModel:
        replies = _shares(results, NccShareReply)
        if not replies:
            raise ConfigError("no owner released a share: cannot fit nearest centroids")
        shares = [NccShare(reports=r.reports, labels=r.labels) for r in replies]
        label_rr = (KaryRandomizedResponse(epsilon=self.eps_labels, n_classes=self.n_classes)
                    if self.labels == "rr" and np.isfinite(self.eps_labels) else None)
        centroids = ncc_centroids(shares, n_classes=self.n_classes, bounds=self.bounds, label_rr=label_rr)
        return NearestCentroidModel(centroids, np.arange(self.n_classes))


@dataclass
class LrStrategy:
    """Logistic regression from perturbed local models (seed 002 §3.5.2): every owner fits an
    L2-regularised model, clips it to ``param_bound`` and perturbs it; the coordinator averages."""

    mechanism: str
    epsilon: float
    n_classes: int
    bounds: Bounds
    param_bound: float = 4.0
    c: float = 1.0

    def __post_init__(self):
        if self.mechanism not in MECHANISMS:
            raise ConfigError(f"mechanism must be one of {MECHANISMS}, got {self.mechanism!r}")

    def configure(self, owner_ids, round_id: str) -> list[Task]:
        spec = LrShareTask(mechanism=self.mechanism, epsilon=self.epsilon, param_bound=self.param_bound,
                           c=self.c, n_classes=self.n_classes, bounds=self.bounds)
        return _new_tasks(owner_ids, round_id, spec)

    def aggregate(self, results: list[Result]):
        replies = _shares(results, LrShareReply)
        if not replies:
            raise ConfigError("no owner released a share: cannot fit logistic regression")
        reports = np.concatenate([r.reports.reshape(1, -1) for r in replies])
        return lr_aggregate(reports, param_bound=self.param_bound, n_classes=self.n_classes, bounds=self.bounds)


def refusals(results: list[Result]) -> dict[str, str]:
    """owner_id -> refusal message, for the report."""
    return {r.owner_id: f"{r.payload.code}: {r.payload.message}" for r in results if isinstance(r.payload, Refusal)}


def make_strategy(task: str, **kwargs):
    if task == "ncc":
        return NccStrategy(**{k: v for k, v in kwargs.items() if k not in ("param_bound", "c")})
    if task == "lr":
        return LrStrategy(**{k: v for k, v in kwargs.items() if k not in ("labels", "label_fraction")})
    raise ConfigError(f"task must be one of {TASKS}, got {task!r}")
