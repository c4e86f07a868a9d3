"""A model a federation trained, as a scikit-learn classifier: ``privfed export`` writes one.

:class:`TrainedClassifier` wraps a ``model.json`` document
(:func:`privfed.common.learners.trained.model_document`): ``predict`` gives label values,
``predict_proba`` class probabilities where the model's kind has them, ``score`` accuracy. It needs
numpy and scikit-learn only (no gRPC, no network code): ``privfed export`` pickles a fitted one, and
``pickle.load`` or ``joblib.load`` give it back anywhere privfed is installed.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from privfed.common.errors import ConfigError, reason
from privfed.common.learners.trained import kind_of, probabilities, read_document
from privfed.common.schema import RawTable


class TrainedClassifier(ClassifierMixin, BaseEstimator):
    """A model trained by a privfed federation, as a scikit-learn classifier (``privfed export``).

    The model is already trained: :meth:`fit` only reads ``model`` (the ``model.json`` document)
    and learns nothing from ``X`` or ``y`` (like scikit-learn's ``FrozenEstimator``), so it fits
    in pipelines, ``cross_val_score`` and ``score`` unchanged.

    Parameters
    ----------
    model : dict
        A ``model.json`` document (:func:`~privfed.common.learners.trained.model_document`); :meth:`from_file` reads one.

    Attributes
    ----------
    model_ : the model (predicts class indices); classes_ : label values, in class-index order;
    schema_ : FederationSchema or None; n_features_in_ : columns the model reads.

    Rows are either the model's columns (numbers: categorical features one-hot, as
    ``schema_.encoded_features``), or the schema's raw columns: a pandas DataFrame with the feature
    names (any order, categories as text, missing cells filled with the schema's public values), or
    an array of ``len(schema_.features)`` columns in schema order.
    """

    def __init__(self, model: dict | None = None) -> None:
        self.model = model

    @classmethod
    def from_file(cls, path: str) -> TrainedClassifier:
        """The fitted classifier of a ``model.json`` file."""
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: cannot read a saved model: {reason(exc)}") from None
        return cls(model=doc).fit()

    def fit(self, X: ArrayLike | None = None, y: ArrayLike | None = None) -> Self:
        """Read the model document (``X`` and ``y`` are not used: the model is trained)."""
        trained = read_document(self.model, source="TrainedClassifier(model=...)")
        self.model_ = trained.model
        self.classes_ = np.asarray(trained.classes)
        self.schema_ = trained.schema
        self.model_id_ = trained.model_id
        self.n_features_in_ = self.schema_.d if self.schema_ is not None else _model_width(self.model_)
        return self

    def _rows(self, X: Any) -> np.ndarray:
        """The model's columns for ``X`` (class docstring)."""
        check_is_fitted(self)
        schema = self.schema_
        if hasattr(X, "columns") and schema is not None:  # a DataFrame: columns by name
            text = X.to_csv(index=False)
            lines = tuple(line for line in text.splitlines() if line.strip())
            table = RawTable("rows", lines, tuple(range(1, len(lines) + 1)))
            return dataclasses.replace(schema, header=True).load(table, labels=None).X
        arr = np.asarray(X)
        if arr.ndim != 2:
            raise ConfigError(f"rows must be a 2-D array, got shape {arr.shape}")
        if arr.dtype.kind in "biuf" and arr.shape[1] == self.n_features_in_:
            return arr.astype(np.float64)
        if schema is not None and arr.shape[1] == len(schema.features):
            lines = tuple(",".join("" if v is None else str(v) for v in row) for row in arr.tolist())
            table = RawTable("rows", lines, tuple(range(1, len(lines) + 1)), unit="row", positional=True)
            return dataclasses.replace(schema, header=False).load(table, labels=False).X
        raise ConfigError(
            f"rows have {arr.shape[1]} columns; the model reads {self.n_features_in_}"
            + ("" if schema is None else f" (or give the {len(schema.features)} raw features {list(schema.features)})")
        )

    def _class_index(self, X: Any) -> np.ndarray:
        return np.asarray(self.model_.predict(self._rows(X))).astype(np.int64)

    def predict(self, X: Any) -> np.ndarray:
        """Label values (``classes_``) of the rows."""
        return self.classes_[self._class_index(X)]

    def _has_proba(self) -> bool:
        check_is_fitted(self)
        return kind_of(self.model_).proba is not None

    @available_if(_has_proba)
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (n, K) in the order of ``classes_`` (:func:`~privfed.common.learners.trained.probabilities`)."""
        out = probabilities(self.model_, self._rows(X))
        assert out is not None  # _has_proba
        return out


def _model_width(model: Any) -> int:
    """The number of columns a model reads, from its own parameters."""
    for attribute in ("bounds",):
        bounds = getattr(model, attribute, None)
        if bounds is not None:
            return int(bounds.d)
    centroids = getattr(model, "centroids", None)
    if centroids is not None:
        return int(np.asarray(centroids).shape[1])
    raise ConfigError(f"a {type(model).__name__} file without a schema: the number of features is unknown")
