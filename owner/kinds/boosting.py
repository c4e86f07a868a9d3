"""Task kinds of LDP boosting (seed 002 Alg. 2): an owner's share for the round's base learner,
and its evaluation release, the noisy ``(err_sum, w_sum)`` that goes into a secure sum.

Both compute the owner's SAMME weights from the public history (``privfed.owner.history``): the
history is checked in ``validate`` against the run's public configuration (every α within the
public bound, ``0 <= E <= W``, learners of the run's kind and shape) and against what this node
applied; the weights saturate at public bounds, so a history the checks let through is computed,
never refused (issue 20, finding 2).

An evaluation is a release (issue 9 item 1, contract 4): every row's weight clipped to the public
row bound ``b``, noise calibrated to it (:func:`privfed.common.boosting.owner.evaluation_release`; the
sensitivity argument is in :mod:`privfed.common.mechanisms.laplace` and ``.randomized_response``), debited under its
release id before the secure sum's first message. The noisy pair is kept per (owner, release id):
a ring re-formed for the same (run, round) gets the same pair and no new debit. After a restart
the pair is gone: the ledger's record of the release then makes the owner refuse (a fresh draw
would be a second release under the same debit). A new run id is a new release, debited like any
other: the ledger bounds the total over runs, nothing bounds the number of runs.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from privfed.common.errors import LocalProtocolError, RemoteProtocolError
from privfed.common.ledger import Debit
from privfed.common.tasks import (
    BOOST_EVALUATE,
    BOOST_SHARE,
    BoostEvaluateTask,
    BoostShareReply,
    BoostShareTask,
    Task,
    boost_release_epsilons,
    share_reply,
)
from privfed.owner.history import check_history, history_weights
from privfed.owner.kinds.base import (
    KEPT_RUNS,
    LedgerView,
    NodeState,
    PublicView,
    Refused,
    TaskKind,
    check_classes,
    check_limit,
    check_schema,
)
from privfed.owner.local import Cached, LocalOwner, PublicConfig, Release

if TYPE_CHECKING:
    from types import ModuleType

    from privfed.common.boosting.wire import BoostConfig

log = logging.getLogger("privfed.owner")

#: Ledger labels of a boosting share (``privfed.common.tasks.boost_release_epsilons``).
SHARE_LABELS = ("boost-share", "boost-share-features", "boost-share-labels")


class AlreadyReleased(LocalProtocolError):
    """The coordinator asked for a release this owner already made and can't repeat (another round
    of a run that evaluates once, or a release whose kept value a restart lost)."""


def _steps() -> ModuleType:
    """:mod:`privfed.common.boosting.owner` (an owner's boosting steps), imported once a boosting task
    arrives: it imports scipy, which a lean owner node loads only for the tasks that need it."""
    from privfed.common.boosting import owner

    return owner


def check_config(config: BoostConfig, view: PublicView) -> None:
    """The public parts of a boosting configuration against the owner's public configuration: its
    class count, its schema bounds and the public limits of the weight bounds."""
    from privfed.common.boosting import wire  # lazily: scipy only for boosting

    if not isinstance(config, wire.BoostConfig):
        raise Refused("invalid_task", "the boosting configuration must be a BoostConfig")
    fb = config.params
    check_classes(fb.n_classes, view)
    check_schema(fb.bounds, view)
    for name in ("weight_bound", "eval_row_bound", "param_bound", "max_owner_rows", "C"):
        check_limit(name, getattr(fb, name))


def check_one_role(ledger: LedgerView, owner_id: str, config: BoostConfig, role: str) -> None:
    """Under ``budget_split="owners"`` an owner releases in one role per run, at the whole ε: refuse a
    share (``role="share"``) after an evaluation of the run, and an evaluation after a share."""
    if config.params.budget_split != "owners":
        return
    other = f"boost-eval:{config.run_id}:" if role == "share" else tuple(f"{lb}:{config.run_id}" for lb in SHARE_LABELS)
    if any(h["purpose"].startswith(other) for h in ledger.history()):
        raise AlreadyReleased(
            f"boosting run {config.run_id!r} splits its budget between owners: {owner_id} already released "
            f"{'an evaluation' if role == 'share' else 'a share'} in it"
        )


def share_key(task: Task, spec: BoostShareTask) -> str:
    """Where an owner keeps the boosting share of ``task``: :attr:`BoostShareTask.release_id` (its run id, and the
    round when every owner shares in every round); ``validate`` checked the task's round id is that run."""
    return spec.release_id


def boost_share(owner: LocalOwner, spec: BoostShareTask) -> BoostShareReply:
    """The perturbed share of this round's base learner, with this owner's SAMME weights."""
    return _share(spec, _weighted_rows(owner, spec), owner.n_rows, owner.rng)


def _share(
    spec: BoostShareTask,
    rows: tuple[np.ndarray, np.ndarray, np.ndarray],
    n: int,
    rng: np.random.Generator,
    count: int | None = None,
) -> BoostShareReply:
    """The share of ``rows`` (rows, labels, weights on the cell, the first ``n`` real). An NCC share's rows are the
    real ``n`` (views): ``ncc_release_rows`` pads or subsamples them to the share's public count itself, or makes a
    fallback's ``count`` of dummies."""
    plan = spec.config.releases
    steps = _steps()
    X, y, w = rows if plan.params.base != "ncc" else (rows[0][:n], rows[1][:n], rows[2][:n])
    X, y, w = steps.ncc_release_rows(plan, X, y, w, rng=rng, count=count)
    return share_reply(plan, steps.ordered(plan, steps.share(plan, X, y, w, rng=rng), rng=rng))


def _weighted_rows(
    owner: LocalOwner, spec: BoostShareTask | BoostEvaluateTask
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The owner's rows, labels and SAMME weights on its public row cell (``cell_rows``: zero rows of weight 0),
    what every pass of a share or an evaluation works on: a stump's binarising and encoding, an LR fit and an
    evaluation's predictions add exact zeros for them (audit 12, ``tests/unit/test_boost_padding.py``)."""
    from privfed.common.work_rows import cell_rows

    X, y = cell_rows(owner.X, owner.y)
    return X, y, history_weights(owner, spec.config, spec.history, X, y)


def _fallback_rows(
    spec: BoostShareTask, public: PublicConfig, n_rows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The data-independent rows of a share's fallback, on the cell as :func:`_weighted_rows` gives a release's
    (padding of weight 0): the bounds' midpoint, class 0, and a public weight whatever ``n_rows`` is -- one row of
    weight 1 for a stump share (which encodes rows that exist), none for an LR share (its fit of no rows). Until
    audit 15 it was ``n_rows`` rows of weight 1: a stump's encoding picked a row with probability
    ``min(n, B) / B`` and an LR fit's intercept grew with ``n``, so a fallback, which the rows' accounts are not
    charged for, told the count (``tests/adversary/test_boost_fallback_row_count.py``). An NCC share's fallback
    has no rows: :meth:`BoostShareKind.fallback`."""
    from privfed.common.work_rows import work_rows, zero_padding
    from privfed.owner.kinds.shares import midpoint_rows

    X = midpoint_rows(public.bounds, work_rows(n_rows))
    weighted = 1 if spec.config.params.base == "stump" else 0
    return X, np.zeros(X.shape[0], dtype=np.int64), zero_padding(np.ones(X.shape[0]), weighted, axis=-1)


def note_run(node: NodeState, config: BoostConfig) -> None:
    """The config this node first saw for a run; a task of the run with another one is refused, and
    so is a task of a run the node forgot (:data:`~privfed.owner.kinds.base.KEPT_RUNS` runs used since)."""
    run_id = config.run_id
    if run_id in node.forgotten_runs:
        raise RemoteProtocolError(
            f"boosting run {run_id!r} is over on this node ({KEPT_RUNS} other runs since): it takes no more tasks"
        )
    seen = node.runs.pop(run_id, config)
    node.runs[run_id] = seen  # the latest used last: an ongoing run is not forgotten
    if seen != config:
        raise RemoteProtocolError(
            f"boosting run {run_id!r}: this task's config differs from the one this node already saw for the run"
        )
    node.forgotten_runs.forget_oldest(node.runs, KEPT_RUNS)


class BoostShareKind(TaskKind[BoostShareTask]):
    """One perturbed share per owner and run (T under ``share_groups="all"``), with SAMME weights."""

    kind = BOOST_SHARE
    #: An owner's share is as large as its rows, as an NCC share's (``privfed.owner.kinds.shares``): one ledger
    #: transaction (a synced commit, ~8 ms on a busy disk) per 256 of them, not per 16.
    batch = 256

    def releases_clear_labels(self, spec: BoostShareTask) -> bool:
        # NCC labels other than "rr" or "joint" (both through randomized response) count as clear: the safe side.
        return spec.config.params.base == "ncc" and spec.config.params.labels not in ("rr", "joint")

    def validate(self, task: Task, spec: BoostShareTask, view: PublicView) -> Cached | None:
        check_config(spec.config, view)
        if task.round_id != spec.config.run_id:  # a share is counted, kept and role-checked by its run (audit 22)
            raise Refused(
                "invalid_task", f"a boosting share's round id {task.round_id!r} is not its run {spec.config.run_id!r}"
            )
        plan = spec.config.releases
        if plan.params.base != "stump":  # build the share's mechanisms now (a stump's encoding: with the config)
            if plan.joint_encoding is None:
                plan.release_mechanism  # noqa: B018 - builds (validates) the mechanism at the share's epsilon
            plan.label_rr()
        check_history(view.applied.get(spec.config.run_id), spec.config, spec.history)
        cached = view.cached.get(share_key(task, spec))
        # under share_groups="all" a round's entries are keyed by the round (debits): a kept share is sent again below
        kept_round = cached is not None and spec.config.params.shares_per_owner > 1
        if not kept_round and any(view.ledger.has_release_id(d.release_id) for d in self.debits(task, spec)):
            raise Refused("already_released", f"task id {task.task_id!r}")
        try:
            check_one_role(view.ledger, task.owner_id, spec.config, "share")
        except AlreadyReleased as exc:
            raise Refused("already_released") from exc
        purpose = f"{spec.ledger_entries()[0][2]}:{task.round_id}"
        released = sum(1 for h in view.ledger.history() if h["purpose"] == purpose)
        if released and cached is not None:  # the same release again: nothing new leaves
            log.info("task %s: boosting run %r's share sent again", task.task_id, task.round_id)
            return cached
        allowed = spec.config.params.shares_per_owner
        if released >= allowed:
            raise Refused(
                "already_released",
                f"boosting run {task.round_id!r}: an owner releases at most {allowed} share(s) in a run",
            )
        return None

    def debits(self, task: Task, spec: BoostShareTask) -> list[Debit]:
        """The share's entries; under ``share_groups="all"`` each keyed by its run and round (:func:`share_key`), not
        the task: a round asked again under another task id, by a resumed job of a node restarted meanwhile (its
        kept share gone with the process), is refused ``already_released`` by its ledger instead of drawn again
        (audit 37, A37-2: a second debit for the round, and a resumed job's report one share short)."""
        debits = super().debits(task, spec)
        if spec.config.params.shares_per_owner == 1:  # one share per run: check_one_role refuses a second
            return debits
        key = share_key(task, spec)
        return [replace(d, release_id=f"{key}#{d.release_id.rpartition('#')[2]}") for d in debits]

    def compute(self, task: Task, spec: BoostShareTask, owner: LocalOwner) -> BoostShareReply:
        return boost_share(owner, spec)

    def compute_many(self, tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release] | None:
        """A stump run's shares of a node's owners in one vectorised draw per (config, history), from the
        generator of each group's first owner (as ``privfed.owner.kinds.shares``); other base learners one by one."""
        return _stump_shares_of(tasks, owners, lambda spec, o: _weighted_rows(o, spec))

    def fallback_many(self, tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release] | None:
        return _stump_shares_of(tasks, owners, lambda spec, o: _fallback_rows(spec, o.public, o.n_rows))

    def fallback(
        self, spec: BoostShareTask, public: PublicConfig, n_rows: int, rng: np.random.Generator
    ) -> BoostShareReply:
        """A release's public shape from data-independent rows. An NCC share's: its public count
        ``work_rows(n_rows, max_owner_rows)`` of weight-0 dummies alone, a function of its length (as an
        ``ncc_share``'s since audit 13); ``n_rows`` rows of weight 1 and class 0 among the dummies told ``n_rows`` by the
        reports (⊥ under joint labels, the k-RR labels under rr: ``tests/adversary/test_ncc_fallback_row_count.py``)."""
        p = spec.config.releases.params
        if p.base != "ncc":
            return _share(spec, _fallback_rows(spec, public, n_rows), n_rows, rng)
        from privfed.common.work_rows import work_rows

        no_rows = (np.zeros((0, p.bounds.d)), np.zeros(0, dtype=np.int64), np.zeros(0))
        return _share(spec, no_rows, 0, rng, count=work_rows(n_rows, p.max_owner_rows))

    def released(self, task: Task, spec: BoostShareTask, release: Release, owner: LocalOwner, node: NodeState) -> None:
        owner.remember(share_key(task, spec), Cached(release))
        try:  # a run's released share fixes its config: later evaluations of the run must carry the same
            note_run(node, spec.config)
        except RemoteProtocolError as exc:  # its evaluations will be refused
            log.warning("boosting share %s: %s", task.task_id, exc)


def _stump_shares_of(
    tasks: Sequence[Task],
    owners: Sequence[LocalOwner],
    rows_of: Callable[[BoostShareTask, LocalOwner], tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> list[Release] | None:
    """:meth:`BoostShareKind.compute_many` and ``fallback_many``: the tasks grouped by their (config, history)
    objects (a node decodes a round's once), each group's shares drawn together from the rows ``rows_of``
    gives; None unless every task is a share of a stump run."""
    specs = [t.spec for t in tasks if isinstance(t.spec, BoostShareTask) and t.spec.config.params.base == "stump"]
    if len(specs) != len(tasks):
        return None
    out: list[Release] = [np.empty(0)] * len(tasks)
    groups: dict[tuple[int, int], list[int]] = {}
    for i, s in enumerate(specs):
        groups.setdefault((id(s.config), id(s.history)), []).append(i)
    for group in groups.values():
        spec = specs[group[0]]
        X, y, w = zip(*(rows_of(spec, owners[i]) for i in group), strict=True)
        plan = spec.config.releases
        for i, share in zip(group, _steps().stump_shares_each(plan, X, y, w, rng=owners[group[0]].rng), strict=True):
            out[i] = share_reply(plan, share)
    return out


def _check_against_share(ledger: LedgerView, config: BoostConfig) -> None:
    """If this owner released a share in the run, its debits must be the share part of this config.

    So a coordinator can't release a share under one ε split and then ask for evaluations
    under another: the run's total per owner stays ``config.params.epsilon`` (the ledger keeps the
    share's entries under ``<label>:<run id>``; one per share, at most ``shares_per_owner`` of
    them, each at ``share_round_epsilon``).
    """
    purposes = {f"{label}:{config.run_id}": label for label in SHARE_LABELS}
    debited = sorted((purposes[h["purpose"]], h["epsilon"]) for h in ledger.history() if h["purpose"] in purposes)
    if not debited:
        return
    expected = {label: eps for eps, _, label in boost_release_epsilons(config)}
    counts = Counter(label for label, _ in debited)
    same = (
        set(counts) == set(expected)
        and len(set(counts.values())) == 1
        and max(counts.values()) <= config.params.shares_per_owner
        and all(x == expected[a] or math.isclose(x, expected[a], rel_tol=1e-9) for a, x in debited)
    )
    if not same:
        raise RemoteProtocolError(
            f"boosting run {config.run_id!r}: this config's share budget {sorted(expected.items())} differs from "
            f"the share this owner released in the run {debited}"
        )


class BoostEvaluateKind(TaskKind[BoostEvaluateTask]):
    """The evaluation release: the noisy, debited ``(err_sum, w_sum)``, into the task's secure sum."""

    kind = BOOST_EVALUATE
    batch = math.inf  # cheap, and a ring waits for every member's first message: all in one transaction

    def mod(self, spec: BoostEvaluateTask) -> str:
        return "ring" if spec.secagg is None else "secagg"

    def validate(self, task: Task, spec: BoostEvaluateTask, view: PublicView) -> Cached | None:
        config = spec.config
        check_config(config, view)
        note_run(view.node, config)
        check_one_role(view.ledger, task.owner_id, config, "evaluate")
        _check_against_share(view.ledger, config)
        check_history(view.applied.get(config.run_id), config, spec.history)
        _steps().check_learner(config.releases, spec.learner)
        config.releases.evaluation  # noqa: B018 - builds (validates) the evaluation mechanism at its epsilon
        cached = view.cached.get(spec.release_id)
        if cached is not None:
            if cached.tag != spec.round:
                raise AlreadyReleased(
                    f"{task.owner_id} already evaluated round {cached.tag} of run {config.run_id!r}, which evaluates once"
                )
            return cached
        if view.ledger.has_release_id(spec.release_id):
            raise AlreadyReleased(
                f"{task.owner_id} released {spec.release_id!r} before this process started; "
                "the noisy value is gone and a fresh draw would be a second release"
            )
        return None

    def debits(self, task: Task, spec: BoostEvaluateTask) -> list[Debit]:
        return [Debit(task.owner_id, spec.config.params.eval_round_epsilon, 0.0, spec.release_id, spec.release_id)]

    def compute(self, task: Task, spec: BoostEvaluateTask, owner: LocalOwner) -> np.ndarray:
        plan = spec.config.releases
        sums = _steps().evaluation_sums(plan, spec.learner, *_weighted_rows(owner, spec))
        return _steps().evaluation_release(plan, np.array([sums]), rng=owner.rng)[0]

    def fallback(
        self, spec: BoostEvaluateTask, public: PublicConfig, n_rows: int, rng: np.random.Generator
    ) -> np.ndarray:
        return _steps().evaluation_release(spec.config.releases, np.zeros((1, 2)), rng=rng)[0]

    def released(
        self, task: Task, spec: BoostEvaluateTask, release: Release, owner: LocalOwner, node: NodeState
    ) -> None:
        owner.remember(spec.release_id, Cached(release, tag=spec.round))

    def mod_input(self, spec: BoostEvaluateTask, release: Release) -> np.ndarray:
        """The pair clipped to the secure sum's public range: post-processing of the release."""
        bound = min(float(spec.ring.max_abs), spec.config.releases.contribution_bound)
        return np.clip(np.asarray(release, dtype=np.float64), -bound, bound)
