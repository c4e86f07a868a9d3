"""Domain messages exchanged between the coordinator and owners (transport-free).

These frozen dataclasses are what strategies and owner handlers see; ``proto/serde.py`` maps
them to and from protobuf. Every payload an owner can send is listed here: registration data,
perturbed shares and refusals (the DESIGN.md allowlist). No raw row has a field to go in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError

LABEL_MODES = ("clear", "rr")
REFUSAL_CODES = ("budget_exceeded", "invalid_task", "internal")


@dataclass(frozen=True)
class OwnerInfo:
    owner_id: str
    n_rows: int


@dataclass(frozen=True)
class NccShareTask:
    """Release every row once, perturbed, for nearest-centroid learning (seed 002 §3.5.1)."""

    mechanism: str
    epsilon: float
    labels: str
    label_epsilon: float
    n_classes: int
    bounds: Bounds

    def __post_init__(self):
        if self.labels not in LABEL_MODES:
            raise ConfigError(f"labels must be one of {LABEL_MODES}, got {self.labels!r}")

    @property
    def total_epsilon(self) -> float:
        return self.epsilon + (self.label_epsilon if self.labels == "rr" else 0.0)


@dataclass(frozen=True)
class LrShareTask:
    """Release one perturbed local logistic-regression model (seed 002 §3.5.2)."""

    mechanism: str
    epsilon: float
    param_bound: float
    c: float
    n_classes: int
    bounds: Bounds

    @property
    def total_epsilon(self) -> float:
        return self.epsilon


TaskSpec = NccShareTask | LrShareTask


@dataclass(frozen=True)
class Task:
    task_id: str
    owner_id: str
    round_id: str
    spec: TaskSpec


@dataclass(frozen=True)
class Refusal:
    code: str
    message: str

    def __post_init__(self):
        if self.code not in REFUSAL_CODES:
            raise ConfigError(f"refusal code must be one of {REFUSAL_CODES}, got {self.code!r}")


@dataclass(frozen=True)
class NccShareReply:
    reports: np.ndarray  # (m, d) perturbed rows in [-1, 1]-space
    labels: np.ndarray   # (m,) clear or randomized-response labels


@dataclass(frozen=True)
class LrShareReply:
    reports: np.ndarray  # (1, p) perturbed parameter vector in [-1, 1]-space


Payload = Refusal | NccShareReply | LrShareReply


@dataclass(frozen=True)
class Result:
    task_id: str
    owner_id: str
    payload: Payload
