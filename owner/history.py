"""A boosting run's history at an owner: checked against the run's public configuration, then
applied incrementally to the owner's SAMME row weights (seed 002 Alg. 2 lines 13-15).

A node keeps, per (run, owner), the weights after the rounds it applied and the digest of the
config and those rounds (:func:`history_digests`); a task's history must extend that prefix, and
only its new rounds are applied. A history that rewrites an applied round is refused
(:class:`HistoryRewritten`, code ``invalid_task``); a restarted node, or a run it no longer keeps,
recomputes from the full history.

Two halves, as the owner core wants them (``privfed.owner.core``): :func:`check_history` is public
-- the history's rounds against the run's configuration (every learner's kind and shape, every α
within the public bound :func:`~privfed.common.learners.samme.max_alpha`, ``0 <= E <= W``) and
against the digests of what was applied, never a weight; :func:`history_weights` reads the rows
and is total: the weights saturate at public bounds
(:func:`~privfed.common.boosting.owner.update_weights`). The weights are not a release:
they only ever leave inside a noised, debited share or evaluation, whose sensitivity does not
depend on them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np

from privfed.common.errors import RemoteProtocolError
from privfed.proto import serde

if TYPE_CHECKING:  # common/boosting imports scipy: loaded once a boosting task arrives
    from privfed.common.boosting.wire import BoostConfig, BoostHistory, KeptRound
    from privfed.owner.local import LocalOwner


_V = TypeVar("_V")


class HistoryRewritten(RemoteProtocolError):
    """A task's history does not extend the rounds this node already applied for the run (another
    learner, α, E or W in one of them, fewer kept rounds, or another config under the run id)."""


#: Runs whose applied history a node keeps per owner (the latest ones); a task of an older run
#: recomputes its weights from the full history, as a restarted node does.
APPLIED_RUNS = 4


@dataclass(frozen=True)
class AppliedHistory:
    """An owner's SAMME weights after the first ``n_kept`` rounds of a run, and the digest of the
    run's config and those rounds (:func:`history_digests`) they came from. ``n_kept`` and
    ``digest`` are public (functions of tasks); ``weights`` are not."""

    n_kept: int
    digest: bytes
    weights: np.ndarray


def history_digests(config: BoostConfig, kept: Sequence[KeptRound]) -> list[bytes]:
    """SHA-256 chain over the run's config and its kept rounds: entry k digests the first k rounds.

    Each link hashes the previous digest and the round's deterministic wire form
    (``proto/serde.py``), so a digest names one exact prefix of one run's history.
    """
    h = hashlib.sha256(
        b"privfed-boost-history\0" + serde.boost_config_to_proto(config).SerializeToString(deterministic=True)
    )
    out = [h.digest()]
    for r in kept:
        h = hashlib.sha256(out[-1] + serde.kept_round_to_proto(r).SerializeToString(deterministic=True))
        out.append(h.digest())
    return out


class _LastPair(Generic[_V]):
    """A value kept for the last (config, kept rounds) pair, by identity. A node decodes a round's config
    and history once for all the tasks that carry them (``proto/serde.py``), so its owners' tasks share the
    two objects: the public checks and digests of a history are made once per node and round instead of
    once per owner and task (issue 27: they were ~7% of a node's CPU in a 10-round BDT, growing with the
    rounds). Public inputs only, so the same work for every owner whatever its rows; only a check that
    passed is kept (a failing one raises for every task). The entry is swapped in one assignment."""

    def __init__(self) -> None:
        self._last: tuple[object, object, _V] | None = None

    def get(self, config: object, kept: object) -> _V | None:
        last = self._last
        return last[2] if last is not None and last[0] is config and last[1] is kept else None

    def holds(self, config: object, kept: object) -> bool:
        return self.get(config, kept) is not None

    def keep(self, config: object, kept: object, value: _V) -> None:
        self._last = (config, kept, value)


_CHECKED: _LastPair[bool] = _LastPair()  # the last history whose rounds passed check_history's public checks
_DIGESTED: _LastPair[list[bytes]] = _LastPair()  # the last history's digests


def _digests(config: BoostConfig, kept: tuple[KeptRound, ...]) -> list[bytes]:
    """:func:`history_digests`, kept for the last (config, kept) objects (:class:`_LastPair`)."""
    digests = _DIGESTED.get(config, kept)
    if digests is None:
        digests = history_digests(config, kept)
        _DIGESTED.keep(config, kept, digests)
    return digests


def _check_prefix(applied: tuple[int, bytes] | None, config: BoostConfig, digests: list[bytes]) -> None:
    """``applied`` = (rounds applied, their digest) for the run, or None; raise if the task's history
    does not extend it."""
    if applied is not None and (applied[0] >= len(digests) or digests[applied[0]] != applied[1]):
        raise HistoryRewritten(
            f"boosting run {config.run_id!r}: the task's history does not extend the {applied[0]} "
            "round(s) this node applied for the run"
        )


def check_history(applied: tuple[int, bytes] | None, config: BoostConfig, history: BoostHistory) -> None:
    """A task's history against the run's public configuration and what this node applied.

    ``applied`` is the public half of the owner's :class:`AppliedHistory` for the run (rounds applied
    and their digest; ``PublicView.applied``), or None. The round is in ``[len(kept), n_rounds)``,
    every kept learner has the run's kind and shape (:func:`~privfed.common.boosting.owner.check_learner`),
    every α, E and W is one SAMME can publish (:func:`~privfed.common.boosting.owner.check_kept_round`), and the history
    extends the rounds this node applied for the owner in the run.

    Raises
    ------
    ConfigError
        A learner or a round that does not fit the run.
    RemoteProtocolError
        A round outside the run; :class:`HistoryRewritten` for a history that rewrites applied rounds.
    """
    from privfed.common.boosting.owner import check_kept_round, check_learner

    fb, plan = config.params, config.releases
    if not history.round < fb.n_rounds:
        raise RemoteProtocolError(
            f"boosting round {history.round} is not in [{len(history.kept)}, {fb.n_rounds}) "
            f"({len(history.kept)} kept learners, {fb.n_rounds} rounds in the run)"
        )
    if not _CHECKED.holds(config, history.kept):
        for r in history.kept:
            check_learner(plan, r.learner)
            check_kept_round(plan, r.alpha, r.err_total, r.weight_total)
        _CHECKED.keep(config, history.kept, True)
    _check_prefix(applied, config, _digests(config, history.kept))


def applied_digest(owner: LocalOwner, run_id: str) -> tuple[int, bytes] | None:
    """The public half of what ``owner`` applied for a run: (rounds applied, their digest), or None."""
    applied = owner.boost_applied.get(run_id)
    return None if applied is None else (applied.n_kept, applied.digest)


def history_weights(
    owner: LocalOwner, config: BoostConfig, history: BoostHistory, X: np.ndarray, y: np.ndarray
) -> np.ndarray:
    """``owner``'s SAMME row weights after ``history``'s kept rounds, applying only the rounds this
    node has not applied for the run yet (all of them after a restart), and remembering the result.

    ``X``, ``y``: the owner's rows and labels padded to their public row cell
    (:func:`~privfed.common.work_rows.cell_rows`); the weights are the cell's, the padding's exactly 0 (zero
    weights add exact zeros to every share and evaluation), so the rounds' predictions and updates work on the
    cell, not on the private row count (audit 12, ``tests/adversary/test_differential_row_work.py``).

    Raises :class:`HistoryRewritten` if ``history`` does not extend what was applied (the weights
    are then not touched; :func:`check_history` refuses such a task before this is called). The
    returned array is read-only: it is also the node's cached state.
    """
    from privfed.common.boosting.wire import apply_rounds
    from privfed.common.work_rows import cell_rows, pad_rows, zero_padding

    if owner.rows_of is not None:  # a view (LocalOwner.without): its owner's weights at its rows (each row's
        whole, rows = owner.rows_of  # weight is its own: SAMME's update reads that row alone)
        weights = history_weights(whole, config, history, *cell_rows(whole.X, whole.y))
        w = pad_rows(weights[rows], y.shape[0], axis=-1)
        w.setflags(write=False)
        return w
    digests = _digests(config, history.kept)
    applied = owner.boost_applied.get(config.run_id)
    _check_prefix(applied_digest(owner, config.run_id), config, digests)
    n = owner.n_rows
    start, w = (
        (0, zero_padding(np.ones(y.shape[0]), n, axis=-1)) if applied is None else (applied.n_kept, applied.weights)
    )
    w = zero_padding(apply_rounds(w, history.kept[start:], X, y), n, axis=-1)  # the update saturates a 0 at WEIGHT_MIN
    w.setflags(write=False)
    cache = owner.boost_applied
    cache.pop(config.run_id, None)
    cache[config.run_id] = AppliedHistory(len(history.kept), digests[-1], w)
    while len(cache) > APPLIED_RUNS:
        cache.pop(next(iter(cache)))
    return w
