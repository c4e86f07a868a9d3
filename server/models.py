"""Saving a trained model as ``model.json`` and loading it to serve again (``--load-model``).

The document is :func:`privfed.common.learners.trained.model_document`: the model in its kind's form
(one table of kinds for every task, :data:`privfed.common.learners.trained.KINDS`), the id it was
served under when trained, the label values of its classes and the federation schema. A model
loaded from it is served under that same id, with the same label values.
"""

from __future__ import annotations

import json
from pathlib import Path

from privfed.common.errors import ConfigError
from privfed.common.learners.trained import TrainedModel, model_document, read_document
from privfed.common.schema import FederationSchema
from privfed.server.servicer import ServedModel


def save_model(
    path: str | Path,
    model: ServedModel,
    *,
    model_id: str,
    task: str | None,
    schema: FederationSchema | None,
) -> Path:
    """Write ``model`` to ``path`` as a reloadable ``model.json`` (served as ``model_id``, class index k
    meaning ``schema.classes[k]``); returns the path."""
    classes = list(schema.classes) if schema is not None else list(range(len(getattr(model, "classes", []))))
    path = Path(path)
    path.write_text(
        json.dumps(model_document(model, model_id=model_id, task=task, classes=classes, schema=schema)) + "\n"
    )
    return path


def load_model(path: str | Path) -> TrainedModel:
    """The model saved at ``path`` by :func:`save_model` (or a bare model JSON of an older privfed,
    whose id is then its run directory's name); ConfigError if it cannot be read."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read a saved model: {exc}") from exc
    trained = read_document(data, source=str(path))
    if trained.model_id is None:
        return TrainedModel(trained.model, path.parent.name or "model", trained.task, trained.classes, trained.schema)
    return trained
