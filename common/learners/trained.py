"""A model a federation trained, outside the federation: ``model.json`` and a scikit-learn estimator.

Every task's model is saved as one JSON document (:func:`model_document`)::

    {"format": "privfed-model", "version": 1, "model_id": "lr-eps4", "task": "lr",
     "classes": ["benign", "malignant"], "schema": {...the federation schema...},
     "model": {"kind": "linear", ...}}

``classes`` are the label values of the class indices the model predicts (the federation schema's
``classes``), ``schema`` the public schema the rows were read with (so a reader of the file can
encode raw rows the same way: column names, categories, fill values). ``model`` is the model in
its kind's own form; :data:`KINDS` is the one table of kinds (save, load, probabilities), so a
new kind is one entry.

:class:`~privfed.common.learners.exported.TrainedClassifier` wraps such a document as a
scikit-learn classifier (``privfed export``).

Pure and numpy-only (a coordinator serving a model never loads scikit-learn): builds and reads
documents; the CLI and the coordinator write and read the files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.schema import FederationSchema

MODEL_FORMAT = "privfed-model"
FORMAT_VERSION = 1


def softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax of scores (n, K); scores of shape (n,) are the two-class logit."""
    if scores.ndim == 1:
        scores = np.column_stack([np.zeros_like(scores), scores])
    z = np.exp(scores - scores.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class ModelKind:
    """One kind of served model: its class (imported when first needed), how it is written to and
    read from JSON, and its class probabilities (None: the kind has none)."""

    kind: str
    model_type: Callable[[], type]
    to_dict: Callable[[Any], dict]
    from_dict: Callable[[dict], Any]
    proba: Callable[[Any, np.ndarray], np.ndarray] | None = None


def _linear() -> type:
    from privfed.common.learners.logistic import LinearModel

    return LinearModel


def _centroid() -> type:
    from privfed.common.learners.ncc_model import NearestCentroidModel

    return NearestCentroidModel


def _boosted() -> type:
    from privfed.common.learners.samme import BoostedModel

    return BoostedModel


def _linear_proba(model: Any, X: np.ndarray) -> np.ndarray:
    """The logistic model's softmax (sigmoid for two classes) of its scores (seed 002 §3.5.2, eq. 3)."""
    return softmax(model.decision_function(X))


def _centroid_proba(model: Any, X: np.ndarray) -> np.ndarray:
    """Softmax of the class log posteriors ``predict`` takes the argmax of (classes as Gaussians around the
    centroids, with the class priors if the model has them; unit variance and equal priors: scikit-learn's
    ``NearestCentroid``)."""
    if hasattr(model, "log_posterior"):
        return softmax(model.log_posterior(X))
    return softmax(-0.5 * ((X[:, None, :] - model.centroids[None, :, :]) ** 2).sum(axis=2))


def _boosted_proba(model: Any, X: np.ndarray) -> np.ndarray:
    """SAMME's probabilities as scikit-learn's ``AdaBoostClassifier`` gives them: the softmax of the
    normalised decision ``(K v_k - A) / ((K - 1) A)`` divided by ``K - 1`` (votes ``v``, total weight ``A``)."""
    votes = model.votes(X)
    k, total = votes.shape[1], max(float(np.sum(model.alphas)), 1e-300)
    return softmax((k * votes - total) / ((k - 1) ** 2 * total))


def _naive_bayes() -> type:
    from privfed.common.learners.naive_bayes import NaiveBayesModel

    return NaiveBayesModel


def _naive_bayes_proba(model: Any, X: np.ndarray) -> np.ndarray:
    """The naive Bayes posterior: the softmax of the log prior plus the per-feature log likelihoods."""
    return softmax(model.votes(X))


def _feddpdr() -> type:
    from privfed.common.feddpdr.model import FedDPDRModel  # scipy: only for a FedDPDR model

    return FedDPDRModel


def _own(model_type: Callable[[], type]) -> tuple[Callable[[Any], dict], Callable[[dict], Any]]:
    """The save/load pair of a class that writes itself (``to_dict``/``from_dict``)."""

    def load(data: dict) -> Any:
        cls: Any = model_type()
        return cls.from_dict(data)

    return (lambda m: m.to_dict()), load


#: Every kind of model a federation trains, by the ``kind`` its JSON carries. FedDPDR's comes last:
#: finding a model's kind imports a class only when the ones before it did not match.
KINDS = {
    k.kind: k
    for k in (
        ModelKind("linear", _linear, *_own(_linear), proba=_linear_proba),
        ModelKind("nearest_centroid", _centroid, *_own(_centroid), proba=_centroid_proba),
        ModelKind("samme", _boosted, *_own(_boosted), proba=_boosted_proba),
        ModelKind("nb", _naive_bayes, *_own(_naive_bayes), proba=_naive_bayes_proba),
        ModelKind("feddpdr", _feddpdr, *_own(_feddpdr)),
    )
}


def kind_of(model: Any) -> ModelKind:
    """The :data:`KINDS` entry of a model object; ConfigError for a model no kind describes."""
    for kind in KINDS.values():
        if isinstance(model, kind.model_type()):
            return kind
    raise ConfigError(f"no saved form for a {type(model).__name__}; known kinds: {sorted(KINDS)}")


def model_from_dict(data: object, *, source: str = "model") -> Any:
    """The model a kind's JSON describes (ConfigError naming ``source`` if it is not one)."""
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind is None:
        hint = " (a job's report.json; its model is the model.json beside it)" if isinstance(data, dict) and (
            "accuracy" in data or "status" in data) else ""  # fmt: skip
        raise ConfigError(f"{source}: not a saved model: it names no model kind{hint}")
    if kind not in KINDS or not isinstance(data, dict):
        raise ConfigError(f"{source}: unknown model kind {kind!r}; known: {sorted(KINDS)}")
    try:
        return KINDS[kind].from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{source}: a malformed {kind} model ({type(exc).__name__}: {exc})") from None


def probabilities(model: Any, X: np.ndarray) -> np.ndarray | None:
    """Class probabilities (n, K) in class-index order, or None when the model's kind has none."""
    proba = kind_of(model).proba
    return None if proba is None else proba(model, np.atleast_2d(np.asarray(X, dtype=np.float64)))


def model_document(
    model: Any, *, model_id: str, task: str | None, classes: tuple | list, schema: FederationSchema | None
) -> dict[str, Any]:
    """The ``model.json`` document of a trained model (module docstring)."""
    return {
        "format": MODEL_FORMAT,
        "version": FORMAT_VERSION,
        "model_id": model_id,
        "task": task,
        "classes": list(classes),
        "schema": None if schema is None else schema.to_dict(),
        "model": kind_of(model).to_dict(model),
    }


@dataclass(frozen=True)
class TrainedModel:
    """A ``model.json`` document read back: the model and what it needs to be used."""

    model: Any
    model_id: str | None
    task: str | None
    classes: tuple
    schema: FederationSchema | None


def read_document(doc: object, *, source: str = "model") -> TrainedModel:
    """A :func:`model_document` (or a bare model of an older file: no id, class indices as labels)."""
    if isinstance(doc, dict) and doc.get("format") == MODEL_FORMAT:
        if doc.get("version") != FORMAT_VERSION:
            raise ConfigError(
                f"{source}: model file version {doc.get('version')!r}; this privfed reads {FORMAT_VERSION}"
            )
        model = model_from_dict(doc.get("model"), source=source)
        schema = None if doc.get("schema") is None else FederationSchema.from_mapping(doc["schema"], source=source)
        classes = doc.get("classes")
        if not isinstance(classes, list) or len(classes) < 2:
            raise ConfigError(f"{source}: classes must list the label values, got {classes!r}")
        return TrainedModel(model, doc.get("model_id"), doc.get("task"), tuple(classes), schema)
    model = model_from_dict(doc, source=source)
    return TrainedModel(model, None, None, tuple(np.asarray(model.classes).tolist()), None)
