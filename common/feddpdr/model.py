"""The coordinator's side of FedDPDR-DPML phase 2 and the fitted model (seed 004 Alg. 1 line 8; SPEC §9).

:func:`aggregate_classifier` turns the owners' phase-2 releases into global coefficients (post-processing
of DP releases); :class:`FedDPDRModel` applies the public scaling, the global basis and the linear
classifier, and saves itself as JSON (``model.json``, reloaded by ``privfed coordinator --load-model``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.bounds import Bounds, flush_tiny
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.basis import BASES, PUBLIC_BASES
from privfed.common.feddpdr.choices import DELTA_MODELS, ROW_SCALINGS, SVM_MODELS
from privfed.common.feddpdr.pca import clip_rows_to_unit_ball, scale_rows
from privfed.common.feddpdr.subspace import WeightedSum
from privfed.common.validation import check_choice


def add_bias_feature(X: np.ndarray) -> np.ndarray:
    """``[x, 1] / sqrt(2)``: a regularised constant feature that keeps ``||x|| <= 1``."""
    X = np.asarray(X, dtype=np.float64)
    return np.hstack([X, np.ones((X.shape[0], 1))]) / math.sqrt(2.0)


def project(X_unit: np.ndarray, U: np.ndarray | None) -> np.ndarray:
    """Rows onto the orthonormal columns of ``U`` (``None``: no reduction), clipped to the unit ball.

    ``U``'s entries below ``2^-300`` are read as 0 (:func:`~privfed.common.bounds.flush_tiny`): it is the
    coordinator's, and an orthonormal ``U`` with entries of ``2^-1021`` (a rotation by that angle) made the
    products of the rows below a threshold it chose subnormal (audit 9)."""
    if U is None:
        return X_unit
    U = flush_tiny(U)
    if U.ndim != 2 or U.shape[0] != X_unit.shape[1] or not np.allclose(U.T @ U, np.eye(U.shape[1]), atol=1e-8):
        raise ConfigError(f"U must be (d={X_unit.shape[1]}, k) with orthonormal columns, got shape {U.shape}")
    return clip_rows_to_unit_ball(X_unit @ U)


def predict_linear(W: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Class with the largest score ``W [x, 1]^T / sqrt(2)``, for W (K, d + 1) of any phase-2 model."""
    W = np.asarray(W, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    if W.ndim != 2 or X.ndim != 2 or W.shape[1] != X.shape[1] + 1:
        raise ConfigError(f"W must be (K, d + 1) for rows (n, d); got W {W.shape} and X {X.shape}")
    return np.argmax(add_bias_feature(X) @ W.T, axis=1)


def delta_split(delta: float, *, basis: str, model: str) -> tuple[float, float]:
    """``(delta of DP-PCA, delta of the classifier)``; they add up to at most ``delta`` (seed 004 Thm 4.3).

    A public basis (:data:`privfed.common.feddpdr.basis.PUBLIC_BASES`) spends nothing, so the classifier
    gets all of delta if it uses any; otherwise the models of :data:`DELTA_MODELS` share delta
    half and half with DP-PCA, and the pure-epsilon ``ovr-huber`` leaves all of it to DP-PCA.
    """
    check_choice(basis, name="basis", allowed=BASES)
    check_choice(model, name="model", allowed=SVM_MODELS)
    classifier = delta if model in DELTA_MODELS else 0.0
    if basis in PUBLIC_BASES:
        return 0.0, classifier
    return (delta / 2, delta / 2) if model in DELTA_MODELS else (delta, 0.0)


class ClassifierSum:
    """The owners' phase-2 releases folded batch by batch as they come (issue 27), for
    :func:`aggregate_classifier`: ``centroid`` keeps :class:`~privfed.common.feddpdr.centroid.ClassSumsTotal`,
    the other models a :class:`~privfed.common.feddpdr.subspace.WeightedSum`."""

    def __init__(self, *, model: str, epsilon: float, delta: float) -> None:
        self.model = check_choice(model, name="model", allowed=SVM_MODELS)
        self.epsilon, self.delta = epsilon, delta
        if model == "centroid":
            from privfed.common.feddpdr.centroid import ClassSumsTotal

            self._sums: ClassSumsTotal | WeightedSum = ClassSumsTotal()
        else:
            self._sums = WeightedSum()
        self.count = 0

    def add(self, releases: Sequence[np.ndarray], weights: ArrayLike) -> None:
        """Add releases; ``weights`` (relative, e.g. the owners' noisy counts) are not used by ``centroid``."""
        if isinstance(self._sums, WeightedSum):
            self._sums.add(releases, weights)
        else:
            self._sums.add(releases)
        self.count += len(releases)

    def coef(self) -> np.ndarray:
        """The global coefficients (K, k + 1) of everything added."""
        if not self.count:
            raise ConfigError("aggregate_classifier needs at least one release")
        if isinstance(self._sums, WeightedSum):
            return self._sums.mean()
        from privfed.common.feddpdr.centroid import centroid_coef, class_sums_sigma

        return centroid_coef(*self._sums.combined(class_sums_sigma(self.epsilon, self.delta)))


def aggregate_classifier(
    releases: Sequence[np.ndarray], weights: ArrayLike, *, model: str, epsilon: float, delta: float
) -> np.ndarray:
    """The global coefficients (K, k + 1) from the owners' phase-2 releases (coordinator side).

    ``centroid``: the releases are summed, each weighted by the row count it carries
    (:func:`privfed.common.feddpdr.centroid.combine_class_sums`), and
    :func:`privfed.common.feddpdr.centroid.centroid_coef` uses the public noise variance of that sum;
    ``weights`` are not used. Other models: :func:`~privfed.common.feddpdr.subspace.weighted_average` with ``weights`` (seed 004 Alg. 1
    line 8). Post-processing of DP releases either way (:class:`ClassifierSum`, which the coordinator
    fills as the releases come).
    """
    total = ClassifierSum(model=model, epsilon=epsilon, delta=delta)
    if len(releases):
        total.add(releases, weights)
    return total.coef()


def _matrix(data: Any, name: str) -> np.ndarray:
    a = np.asarray(data, dtype=np.float64)
    if a.ndim != 2 or not np.all(np.isfinite(a)):
        raise ConfigError(f"a saved FedDPDR model's {name} must be a finite matrix, got shape {a.shape}")
    return a


@dataclass(frozen=True)
class FedDPDRModel:
    """A fitted FedDPDR-DPML model: public bounds and scaling, global basis, global coefficients.

    ``components`` is ``None`` for a model without dimensionality reduction (DPML); ``coef`` is
    (K, k + 1) on ``[z, 1]/sqrt 2`` (:func:`predict_linear`). ``model`` names the phase-2 classifier.
    """

    bounds: Bounds
    components: np.ndarray | None
    coef: np.ndarray
    eigenvalues: np.ndarray
    owner_sizes: tuple[int, ...]
    per_class_epsilon: np.ndarray
    scaling: str
    model: str

    kind = "feddpdr"

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Public scaling then projection, exactly as the owners did before training."""
        return project(scale_rows(X, self.bounds, self.scaling), self.components)

    @property
    def classes(self) -> np.ndarray:
        """Class indices ``0..K-1``, one per row of ``coef`` (as the other models' ``classes``)."""
        return np.arange(self.coef.shape[0])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return predict_linear(self.coef, self.transform(X))

    def score(self, X: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(self.predict(X) == np.asarray(y)))

    def to_dict(self) -> dict:
        """JSON-ready; everything in it is public configuration or post-processing of DP releases."""
        return {
            "kind": self.kind,
            "model": self.model,
            "scaling": self.scaling,
            "bounds": self.bounds.to_list(),
            "components": None if self.components is None else self.components.tolist(),
            "coef": self.coef.tolist(),
            "eigenvalues": np.asarray(self.eigenvalues).tolist(),
            "owner_sizes": list(self.owner_sizes),
            "per_class_epsilon": [float(e) for e in self.per_class_epsilon],
        }

    @classmethod
    def from_dict(cls, data: dict) -> FedDPDRModel:
        if data.get("kind") != cls.kind:
            raise ConfigError(f"not a {cls.kind} model: kind={data.get('kind')!r}")
        try:
            bounds = Bounds(np.asarray(data["bounds"]["lo"], float), np.asarray(data["bounds"]["hi"], float))
            components = None if data["components"] is None else _matrix(data["components"], "components")
            coef = _matrix(data["coef"], "coef")
            model = cls(
                bounds=bounds,
                components=components,
                coef=coef,
                eigenvalues=np.asarray(data["eigenvalues"], dtype=np.float64),
                owner_sizes=tuple(int(n) for n in data["owner_sizes"]),
                per_class_epsilon=np.asarray(data["per_class_epsilon"], dtype=np.float64),
                scaling=check_choice(data["scaling"], name="scaling", allowed=ROW_SCALINGS),
                model=check_choice(data["model"], name="model", allowed=SVM_MODELS),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"not a readable FedDPDR model: {exc}") from exc
        d = components.shape[1] if components is not None else bounds.d
        if components is not None and components.shape[0] != bounds.d or coef.shape[1] != d + 1:
            raise ConfigError(f"a saved FedDPDR model's shapes disagree: components, coef {coef.shape}, d {bounds.d}")
        return model


__all__ = [
    "FedDPDRModel",
    "add_bias_feature",
    "ClassifierSum",
    "aggregate_classifier",
    "delta_split",
    "predict_linear",
    "project",
]
