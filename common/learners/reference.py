"""Non-private reference learners, fitted on the same split the federation uses."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import NearestCentroid

from privfed.common.errors import ConfigError


def reference_accuracy(task: str, train, test, *, C: float = 1.0) -> float:
    """Test accuracy of the non-private counterpart of ``task`` (rows mapped by the public bounds)."""
    Xtr, Xte = train.bounds.to_unit(train.X), test.bounds.to_unit(test.X)
    if task == "ncc":
        with warnings.catch_warnings():  # constant pixels: harmless for centroids
            warnings.simplefilter("ignore", UserWarning)
            model = NearestCentroid().fit(Xtr, train.y)
    elif task == "lr":
        model = LogisticRegression(C=C, max_iter=2000).fit(Xtr, train.y)
    else:
        raise ConfigError(f"no reference learner for task {task!r}")
    return float(np.mean(model.predict(Xte) == test.y))
