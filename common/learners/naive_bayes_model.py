"""LDP naive Bayes's fitted model (:mod:`~privfed.common.learners.naive_bayes`): per-feature log tables over the
public bins and a log class prior, as ``--task nb`` serves and exports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.split_points import grid_cells


@dataclass(frozen=True)
class NaiveBayesModel:
    """``argmax_k log P(k) + sum_j log P(bin_j(x) | k)`` over public bins (ties: the lowest class).

    Attributes
    ----------
    log_tables : (d, B, K) ``log P(bin | k)`` per feature
    log_prior : (K,)
    bounds : Bounds
    """

    log_tables: np.ndarray
    log_prior: np.ndarray
    bounds: Bounds

    kind = "nb"

    @property
    def classes(self) -> np.ndarray:
        return np.arange(self.log_prior.shape[0])

    def votes(self, X: ArrayLike) -> np.ndarray:
        """Unnormalised log posteriors ``(n, K)``."""
        d, n_bins, _ = self.log_tables.shape
        cells = grid_cells(X, self.bounds, n_bins)
        return self.log_prior[None, :] + self.log_tables[np.arange(d)[None, :], cells].sum(axis=1)

    def predict(self, X: ArrayLike) -> np.ndarray:
        return np.argmax(self.votes(X), axis=1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "log_tables": self.log_tables.tolist(),
            "log_prior": self.log_prior.tolist(),
            "bounds": self.bounds.to_list(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NaiveBayesModel:
        if data.get("kind") != cls.kind:
            raise ConfigError(f"not a {cls.kind} model: kind={data.get('kind')!r}")
        tables = np.asarray(data["log_tables"], dtype=np.float64)
        prior = np.asarray(data["log_prior"], dtype=np.float64)
        b = data["bounds"]
        bounds = Bounds(np.asarray(b["lo"], dtype=np.float64), np.asarray(b["hi"], dtype=np.float64))
        if tables.ndim != 3 or prior.shape != (tables.shape[2],) or tables.shape[0] != bounds.d:
            raise ConfigError(f"log_tables {tables.shape}, log_prior {prior.shape} and {bounds.d} features disagree")
        return cls(tables, prior, bounds)
