"""Non-private reference learners, fitted on the same split the federation uses."""

from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.ensemble import AdaBoostClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import NearestCentroid
from sklearn.tree import DecisionTreeClassifier

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
        from privfed.common.feddpdr.svm import feddpdr_fit

        model = feddpdr_fit(
            [(train.X, train.y)],
            train.bounds,
            min(k, train.X.shape[1]),
            math.inf,
            1e-5,
            math.inf,
            lam,
            np.random.Generator(np.random.PCG64(0)),
            n_classes=len(train.classes),
        )
        return float(np.mean(model.predict(test.X) == test.y))
    else:
        raise ConfigError(f"no reference learner for task {task!r}")
    return float(np.mean(model.predict(Xte) == test.y))
