"""The models a coordinator serves (:class:`ModelStore`), and saving a trained model as ``model.json``
and loading it to serve again (``--load-model``).

The document is :func:`privfed.common.learners.trained.model_document`: the model in its kind's form
(one table of kinds for every task, :data:`privfed.common.learners.trained.KINDS`), the id it was
served under when trained, the label values of its classes and the federation schema. A model
loaded from it is served under that same id, with the same label values.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privfed.common.bounds import box_scale
from privfed.common.errors import ConfigError, RemoteProtocolError, reason
from privfed.common.files import replace_file
from privfed.common.learners.trained import TrainedModel, model_document, read_document
from privfed.common.schema import FederationSchema

#: A fitted model the coordinator serves: LinearModel, NearestCentroidModel, FedDPDRModel or
#: BoostedModel (each has ``predict``; the linear ones also ``bounds``). Any until those classes
#: share a protocol (several are being rewritten for issue 10).
ServedModel = Any


def model_linear_stage(model: ServedModel) -> tuple[str, np.ndarray]:
    """(kind, A_d): the first linear map a served model applies to data-space rows, (d, m); kind is ``lr``,
    ``feddpdr`` (``ball`` scaling) or ``feddpdr-box``.

    Null-space cleaning (seed 003) needs it to know which directions the model reads:
    for LR, A_d = coef_dataᵀ; for FedDPDR, U_k after the public diagonal of its affine row scaling
    (``ball``: 1 / the bounds' radius; ``box``: 1 / (each feature's half-width · sqrt d),
    :func:`~privfed.common.feddpdr.pca.box_scale`); the centring offset cancels in x − x̃.
    Nearest centroid and ``normalise`` (each row by its own norm) have no linear first stage.
    """
    from privfed.common.feddpdr.model import FedDPDRModel
    from privfed.common.learners.logistic import LinearModel

    if isinstance(model, LinearModel):
        coef, _ = model.data_linear_stage
        return "lr", np.asarray(coef).T
    if isinstance(model, FedDPDRModel):
        # an identity basis (no DP-PCA) reads every column: its stage is served, and privfed query refuses it for
        # its rank, in words that say so (walkthrough 13, W13-7: it was refused for a scaling it had)
        basis = model.components if model.components is not None else np.eye(model.bounds.d)
        if model.scaling == "ball":
            radius = float(np.sqrt(np.sum(((model.bounds.hi - model.bounds.lo) / 2.0) ** 2)))
            return "feddpdr", basis / radius
        if model.scaling == "box":
            # its own kind: the owner's report of what the model reads (query_cleaning.model_scores) clips the
            # norm of the box-scaled row, not of x − c by the radius
            return "feddpdr-box", box_scale(model.bounds)[:, None] * basis
        raise ConfigError(
            f"a FedDPDR model with {model.scaling!r} row scaling has no linear first stage "
            "to clean queries against (only 'ball' and 'box' scaling are affine)"
        )
    raise ConfigError(
        f"a {type(model).__name__} has no linear first stage to clean queries against: `privfed query` sends cleaned "
        "rows, which needs an lr model or a feddpdr model with 'ball' or 'box' scaling; the data user of its job can fetch it "
        "(`privfed job model JOB_ID --out model.json`) and predict from files (`privfed export`), walkthrough 11"
    )


def has_probabilities(model: ServedModel) -> bool:
    """Whether Predict can answer class probabilities for ``model`` (its kind has them)."""
    from privfed.common.learners.trained import kind_of

    try:
        return kind_of(model).proba is not None
    except ConfigError:  # a model object no saved kind describes (tests wrap models)
        return False


@dataclass(frozen=True)
class Prediction:
    """What Predict answers: class indices, their label values (text) and, if asked and the model
    has them, class probabilities (n, K)."""

    indices: np.ndarray
    values: list[str]
    probabilities: np.ndarray | None


def may_use(data_user: str | None, submitter: str) -> bool:
    """Whether ``data_user`` (None: a caller that is no data user, e.g. an owner cleaning its query) may
    use a model trained by ``submitter``'s job: a data user uses its own jobs' models, and models of no
    job (``submitter`` empty)."""
    return data_user is None or not submitter or submitter == data_user


@dataclass(frozen=True)
class ServedEntry:
    """A served model, the label value (as text) of each class index, the schema it reads rows by, and
    the data user whose job trained it (empty: none, e.g. a standalone coordinator's model)."""

    model: ServedModel
    classes: tuple[str, ...]
    schema: FederationSchema | None
    data_user: str = ""

    def serves(self, data_user: str | None) -> bool:
        """Whether ``data_user`` may use this model (:func:`may_use`)."""
        return may_use(data_user, self.data_user)


#: At most this many model ids in a refusal (the latest): a data user of many jobs lists them with ``privfed jobs``.
LISTED = 10


def no_model_message(model_id: str, data_user: str | None, held: Sequence[str], pending: str | None = None) -> str:
    """The refusal of a model id this caller has no model by (walkthrough 8, W8-11). The ids listed are those
    of ``data_user``'s own jobs and of models of no job: a job's id is its submission time, so an owner node
    (``data_user`` None), which may query any model, is not handed every data user's ids, and a data user is
    shown none of another's. The same words whether or not another's job has that id, and why a job has none.
    ``pending``: the state of the caller's own job by that id that has no model yet (``queued``, ``running``;
    walkthrough 11, W11-1: it read "failed, was cancelled or was deleted")."""
    held = sorted(held)
    more = len(held) - LISTED
    shown = held[-LISTED:]
    listed = f"; served models: {shown}" if data_user is not None or held else ""
    if more > 0:
        listed += f" and {more} earlier (privfed jobs lists them)"
    if pending is not None:
        return f"no model {model_id!r} yet: job {model_id} is {pending}; its model is served once it is done{listed}"
    return (
        f"no model {model_id!r}{listed}. A job that failed, was cancelled or was deleted has no model "
        "(privfed job show ID, as the job's data user, says why)"
    )


class ModelStore:
    """Trained models the coordinator serves, by id.

    ``load(model_id, data_user)`` reads a model this store does not hold and who it serves (None if there
    is none by that id that ``data_user`` may use: another's is not read, wt-redteam4): the service reads
    a finished job's ``model.json`` back, with the job's data user. ``keep`` bounds how many are held in memory, the least
    recently used dropped first (None: every model put), so a service that stays up across jobs holds
    a fixed number however many jobs it ran. ``loadable(data_user)`` names the models ``load`` can read for
    ``data_user`` and ``pending(model_id, data_user)`` the state of their own job by that id that has none yet
    (None: no such job of theirs), both for the refusal of an id with no model (:func:`no_model_message`): the
    models held in memory are only those last used, none after a restart (walkthrough 11, W11-1)."""

    def __init__(
        self,
        *,
        load: Callable[[str, str | None], tuple[TrainedModel, str] | None] | None = None,
        keep: int | None = None,
        loadable: Callable[[str | None], Sequence[str]] | None = None,
        pending: Callable[[str, str | None], str | None] | None = None,
    ) -> None:
        self._models: OrderedDict[str, ServedEntry] = OrderedDict()
        self._load, self._keep = load, keep
        self._loadable, self._pending = loadable, pending
        self._lock = threading.Lock()  # the servicer's threads and the job's

    def put(
        self,
        model_id: str,
        model: ServedModel,
        *,
        classes: Sequence[object] | None = None,
        schema: FederationSchema | None = None,
        data_user: str = "",
    ) -> ServedEntry:
        """Serve ``model`` as ``model_id`` (to ``data_user`` alone among data users, if given); class index
        k means ``classes[k]`` (default: the schema's classes, else the model's own)."""
        if classes is None:
            classes = schema.classes if schema is not None else np.asarray(getattr(model, "classes", [])).tolist()
        entry = ServedEntry(model, tuple(str(c) for c in classes), schema, data_user)
        with self._lock:
            self._models[model_id] = entry
            self._models.move_to_end(model_id)
            while self._keep is not None and len(self._models) > self._keep:
                self._models.popitem(last=False)
        return entry

    def entry(self, model_id: str, data_user: str | None = None) -> ServedEntry:
        """The model served as ``model_id``, if it serves ``data_user`` (:meth:`ServedEntry.serves`);
        another data user's model answers as one that does not exist."""
        with self._lock:
            entry = self._models.get(model_id)
            if entry is not None and entry.serves(data_user):  # another's is not touched (audit 25, F1)
                self._models.move_to_end(model_id)
            held = sorted(m for m, e in self._models.items() if e.data_user in ("", data_user))
        if entry is None:
            loaded = self._load(model_id, data_user) if self._load is not None else None
            if loaded is not None:
                trained, owner = loaded
                entry = self.put(
                    model_id, trained.model, classes=trained.classes, schema=trained.schema, data_user=owner
                )
        if entry is None or not entry.serves(data_user):
            if self._loadable is not None:
                held = sorted(set(held) | set(self._loadable(data_user)))
            pending = self._pending(model_id, data_user) if self._pending is not None else None
            raise ConfigError(no_model_message(model_id, data_user, held, pending))
        return entry

    def drop(self, model_id: str) -> None:
        """Serve ``model_id`` no more (its job was deleted); a model this store does not hold is left alone."""
        with self._lock:
            self._models.pop(model_id, None)

    def get(self, model_id: str, data_user: str | None = None) -> ServedModel:
        return self.entry(model_id, data_user).model

    def predict(self, model_id: str, rows: np.ndarray, data_user: str | None = None) -> np.ndarray:
        """Class indices of ``rows``."""
        model = self.get(model_id, data_user)
        if rows.ndim != 2:
            raise RemoteProtocolError(f"rows must be a 2-D matrix, got shape {rows.shape}")
        return np.asarray(model.predict(rows))

    def answer(
        self, model_id: str, rows: np.ndarray, *, probabilities: bool = False, data_user: str | None = None
    ) -> Prediction:
        """:class:`Prediction` of ``rows``: indices, label values, probabilities if asked (and the model has them)."""
        from privfed.common.learners.trained import probabilities as class_probabilities

        entry = self.entry(model_id, data_user)
        if probabilities and not has_probabilities(entry.model):
            raise ConfigError(f"model {model_id!r} has no class probabilities")
        indices = self.predict(model_id, rows, data_user).astype(np.int64)
        values = [entry.classes[i] if 0 <= i < len(entry.classes) else str(i) for i in indices.tolist()]
        proba = class_probabilities(entry.model, rows) if probabilities else None
        return Prediction(indices, values, proba)


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
    document = model_document(model, model_id=model_id, task=task, classes=classes, schema=schema)
    return replace_file(path, json.dumps(document) + "\n")  # whole or not at all: the owners paid for it (W9-1)


def load_model(path: str | Path) -> TrainedModel:
    """The model saved at ``path`` by :func:`save_model` (or a bare model JSON of an older privfed,
    whose id is then its run directory's name); ConfigError if it cannot be read."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read a saved model: {reason(exc)}") from exc
    trained = read_document(data, source=str(path))
    if trained.model_id is None:
        return TrainedModel(trained.model, path.parent.name or "model", trained.task, trained.classes, trained.schema)
    return trained
