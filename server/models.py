"""Saving and loading trained models as JSON (learners, boosted ensembles, FedDPDR), to serve them again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from privfed.common.errors import ConfigError
from privfed.common.learners.samme import LEARNER_KINDS, BoostedModel
from privfed.server.servicer import ServedModel

FEDDPDR_KIND = "feddpdr"  # FedDPDRModel.kind; its module imports scipy, so it is loaded only for such a file


def _kinds(kind: object) -> dict[str, Any]:
    kinds: dict[str, Any] = {**LEARNER_KINDS, BoostedModel.kind: BoostedModel}
    if kind == FEDDPDR_KIND:
        from privfed.common.feddpdr.model import FedDPDRModel

        kinds[FedDPDRModel.kind] = FedDPDRModel
    return kinds


def save_model(path: str | Path, model: object) -> Path | None:
    """Write ``model`` as JSON if it knows how (``to_dict``); returns the path or None."""
    if not hasattr(model, "to_dict"):
        return None
    path = Path(path)
    path.write_text(json.dumps(model.to_dict()) + "\n")
    return path


def load_model(path: str | Path) -> ServedModel:
    """The model saved at ``path`` by :func:`save_model`; ConfigError if it cannot be read."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read a saved model: {exc}") from exc
    kind = data.get("kind") if isinstance(data, dict) else None
    kinds = _kinds(kind)
    if kind not in kinds:
        raise ConfigError(f"{path}: unknown model kind {kind!r}; known: {sorted(kinds) + [FEDDPDR_KIND]}")
    return kinds[kind].from_dict(data)
