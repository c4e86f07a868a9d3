"""Non-private reference learners, fitted on the same split the federation uses."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.decomposition import PCA
from sklearn.ensemble import AdaBoostClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import NearestCentroid
from sklearn.pipeline import make_pipeline
from sklearn.svm import LinearSVC
from sklearn.tree import DecisionTreeClassifier

from privfed.common.bounds import Bounds
from privfed.common.datasets import Dataset
from privfed.common.errors import ConfigError


def reference_accuracy(
    task: str,
    train: Dataset,
    test: Dataset,
    *,
    C: float = 1.0,
    k: int = 20,
    lam: float = 0.01,
    boost: dict | None = None,
) -> float:
    """Test accuracy of the non-private counterpart of ``task`` (rows mapped by the public bounds)."""
    Xtr, Xte = train.bounds.to_unit(train.X), test.bounds.to_unit(test.X)
    if task == "ncc":
        with warnings.catch_warnings():  # constant pixels: harmless for centroids
            warnings.simplefilter("ignore", UserWarning)
            model = NearestCentroid().fit(Xtr, train.y)
    elif task == "lr":
        model = LogisticRegression(C=C, max_iter=2000).fit(Xtr, train.y)
    elif task == "bdt":  # non-private SAMME with decision stumps, T rounds, on all rows
        model = AdaBoostClassifier(
            DecisionTreeClassifier(max_depth=1), n_estimators=(boost or {}).get("n_rounds", 10), random_state=0
        ).fit(Xtr, train.y)
    elif task == "feddpdr":
        return paper_nonprivate_pipeline(train.X, train.y, train.bounds, k).score(test.X, test.y)
    else:
        raise ConfigError(f"no reference learner for task {task!r}")
    return float(np.mean(model.predict(Xte) == test.y))


class PaperPipeline:
    """Seed 004's non-private pipeline (§5.1, "Non-Priv"): PCA to ``k`` dimensions, then a linear SVM
    (scikit-learn ``PCA`` + ``LinearSVC``, C = 1), on rows mapped to [0, 1] by the public bounds."""

    def __init__(self, bounds: Bounds, k: int, *, C: float = 1.0, random_state: int = 0) -> None:
        self.bounds = bounds
        self.pipeline = make_pipeline(PCA(k, random_state=random_state), LinearSVC(C=C, max_iter=5000))

    def fit(self, X: np.ndarray, y: np.ndarray) -> PaperPipeline:
        self.pipeline.fit((self.bounds.to_unit(X) + 1.0) / 2.0, y)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.pipeline.predict((self.bounds.to_unit(X) + 1.0) / 2.0))

    def score(self, X: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(self.predict(X) == np.asarray(y)))


def paper_nonprivate_pipeline(
    X: np.ndarray, y: np.ndarray, bounds: Bounds, k: int, *, C: float = 1.0, random_state: int = 0
) -> PaperPipeline:
    """:class:`PaperPipeline` fitted on ``(X, y)`` (``k`` capped at the number of features and rows)."""
    return PaperPipeline(bounds, min(k, X.shape[1], X.shape[0]), C=C, random_state=random_state).fit(X, y)
