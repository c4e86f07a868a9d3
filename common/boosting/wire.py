"""The public state of a federated boosting run as plain dicts (what boosting tasks carry).

Owners are stateless between rounds: each boosting task carries the run's configuration and
its history (kept learners, their α and the round's published totals E and W -- sums of the
owners' noisy evaluation releases, :mod:`privfed.common.boosting.federated`), from which an owner
recomputes its own SAMME row weights (seed 002 Alg. 2 lines 13-15). A restarted owner
therefore needs nothing but its rows; and the coordinator can't give different owners
different weights without it showing in what it sends.
"""

from __future__ import annotations

import math

import numpy as np

from privfed.common.boosting.federated import FederatedBoosting, owner_update_weights
from privfed.common.bounds import Bounds
from privfed.common.errors import RemoteProtocolError
from privfed.common.learners.samme import LEARNER_KINDS

_CONFIG_FIELDS = (
    "base",
    "epsilon",
    "mechanism",
    "n_classes",
    "n_rounds",
    "group_size",
    "n_bins",
    "weight_bound",
    "labels",
    "label_fraction",
    "C",
    "param_bound",
    "eval_fraction",
    "eval_groups",
    "eval_row_bound",
    "max_owner_rows",
)


def config_to_dict(fb: FederatedBoosting, run_id: str) -> dict:
    out = {f: getattr(fb, f) for f in _CONFIG_FIELDS}
    out["epsilon"] = "inf" if math.isinf(fb.epsilon) else fb.epsilon
    out.update(bounds=fb.bounds.to_list(), run_id=run_id)
    return out


def config_from_dict(data: dict) -> FederatedBoosting:
    try:
        kwargs = {f: data[f] for f in _CONFIG_FIELDS}
        kwargs["epsilon"] = math.inf if kwargs["epsilon"] == "inf" else float(kwargs["epsilon"])
        return FederatedBoosting(
            bounds=Bounds(data["bounds"]["lo"], data["bounds"]["hi"]), secure_sum="plain", **kwargs
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise RemoteProtocolError(f"boosting config is incomplete or malformed: {exc!r}") from exc


def empty_history() -> dict:
    return {"learners": [], "alphas": [], "totals": []}


def at_round(history: dict, round_no: int) -> dict:
    """``history`` as sent with round ``round_no``'s tasks (0-based): the kept rounds plus the round number.

    The round number keys an owner's evaluation release (one per (run, round), cached for a
    re-formed ring; :class:`privfed.owner.boosting.RingDriver`).
    """
    return dict(history, round=int(round_no))


def history_round(history: dict, n_rounds: int) -> int:
    """The round number of a task's history, checked: ``len(kept) <= round < n_rounds``.

    A history without ``"round"`` is for the round after its kept learners.

    Raises
    ------
    RemoteProtocolError
        Missing, malformed or out-of-range round, or learners, alphas and totals of different lengths.
    """
    try:
        kept = len(history["learners"])
        consistent = kept == len(history["alphas"]) == len(history["totals"])
        round_no = history.get("round", kept)  # default: the round after the kept ones
    except (KeyError, TypeError) as exc:
        raise RemoteProtocolError(f"boosting history is incomplete or malformed: {exc!r}") from exc
    if not consistent:
        raise RemoteProtocolError("boosting history has learners, alphas and totals of different lengths")
    if isinstance(round_no, bool) or not isinstance(round_no, int) or not kept <= round_no < n_rounds:
        raise RemoteProtocolError(
            f"boosting round {round_no!r} is not an int in [{kept}, {n_rounds}) "
            f"({kept} kept learners, {n_rounds} rounds in the run)"
        )
    return round_no


def with_round(history: dict, learner, alpha: float, err_total: float, weight_total: float) -> dict:
    """The history after keeping ``learner`` with weight ``alpha`` (totals are this round's E, W)."""
    return {
        "learners": history["learners"] + [learner.to_dict()],
        "alphas": history["alphas"] + [float(alpha)],
        "totals": history["totals"] + [[float(err_total), float(weight_total)]],
    }


def learner_from_dict(data: dict):
    kind = data.get("kind")
    if kind not in LEARNER_KINDS:
        raise RemoteProtocolError(f"unknown learner kind {kind!r}; known: {sorted(LEARNER_KINDS)}")
    return LEARNER_KINDS[kind].from_dict(data)


def owner_weights(history: dict, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """This owner's SAMME row weights after the kept rounds (mean-1 convention: start at 1)."""
    w = np.ones(X.shape[0])
    for learner, alpha, (err_total, weight_total) in zip(history["learners"], history["alphas"], history["totals"]):
        w = owner_update_weights(
            learner_from_dict(learner), alpha, X, y, w, err_total=err_total, weight_total=weight_total
        )
    return w
