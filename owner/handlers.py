"""Task handlers: the only code that turns private rows into something that may leave.

Order for every task (STYLE rule 7; issue 9 item 7):

1. a task id already seen in this batch is refused (``duplicate_task``);
2. the task is checked against the owner's PUBLIC configuration only -- its feature count, its
   declared number of classes, its policy flags -- and every mechanism it names is built, so an ε
   whose mechanism could not give finite, sendable output is refused here (``invalid_task``,
   ``policy``), before any budget is touched;
3. a release id already in the ledger is refused (``already_released``), then the budget is
   checked (``budget_exceeded``; nothing is computed if it would overspend);
4. the perturbed share is computed, and a share that is not finite is refused;
5. the ledger is debited in one committed transaction for the whole batch, and only then are the
   results handed to the transport. A share whose debit is refused is discarded.

Refusals carry no data (contract 3): a fixed text per code (:data:`REFUSAL_TEXTS`) plus at most a
detail built from the task's own fields and the owner's public configuration. The decision to
refuse depends on nothing private either: the class check compares the task with the number of
classes the owner's data set declares, never with the labels it holds (a coordinator could
binary-search the largest label otherwise). What went wrong in full goes to the local log.

Clear labels (contract 6) leave only when the owner node runs with ``--allow-clear-labels``; each
such release is also recorded as a non-private ledger entry (purpose ``clear-labels``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from privfed.common.errors import BudgetExceeded, ConfigError, LocalProtocolError, RemoteProtocolError
from privfed.common.learners.logistic import fit_local_logistic, lr_share
from privfed.common.learners.ncc import ncc_share
from privfed.common.ledger import Debit, Ledger
from privfed.common.mechanisms import GeometricMechanism, KaryRandomizedResponse, make_mechanism
from privfed.common.mechanisms.base import REPORT_LIMIT
from privfed.common.messages import (
    BoostShareTask,
    LrShareReply,
    LrShareTask,
    NccShareReply,
    NccShareTask,
    Payload,
    PcaShareReply,
    PcaShareTask,
    Refusal,
    Result,
    SvmShareReply,
    SvmShareTask,
    Task,
    TaskSpec,
    total_budget,
)
from privfed.common.validation import check_positive

if TYPE_CHECKING:
    from privfed.common.boosting.wire import BoostConfig
    from privfed.owner.boosting import AppliedHistory

log = logging.getLogger("privfed.owner")

#: Ledger purpose of the non-private entry recorded with every clear-label release.
CLEAR_LABELS = "clear-labels"


@dataclass
class LocalOwner:
    """One logical owner hosted by a node: its id, its private rows, its generator, and its
    public configuration (the number of classes its data set declares; the feature count is
    ``X.shape[1]``, the schema every task's bounds must match)."""

    owner_id: str
    X: np.ndarray
    y: np.ndarray
    rng: np.random.Generator
    n_classes: int
    #: run id -> the SAMME weights this node applied for the run (``privfed.owner.boosting.history_weights``)
    boost_applied: dict[str, AppliedHistory] = field(default_factory=dict, repr=False, compare=False)
    #: run id (run id and round when owners share every round, ``privfed.owner.boosting.share_key``)
    #: -> the boosting share this owner released there: asked again (a coordinator resumed after
    #: a crash lost the answer), it is sent again, never recomputed: the same release, no new
    #: debit. In memory: a restarted node refuses instead (``already_released``).
    boost_released: dict[str, Payload] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])


class TaskRefused(Exception):
    """A task refused before anything was computed; ``detail`` holds only task and public facts."""

    def __init__(self, code: str, detail: str = ""):
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


def releases_clear_labels(spec: TaskSpec) -> bool:
    """Whether answering ``spec`` sends labels without randomized response.

    NCC with ``labels="clear"``; a boosting share whose base learner is NCC and whose labels are
    anything but ``"rr"`` or ``"joint"`` (both through randomized response; a missing or unknown
    value counts as clear: the safe side).
    """
    if isinstance(spec, NccShareTask):
        return spec.labels == "clear"
    if isinstance(spec, BoostShareTask):
        return spec.config.booster.base == "ncc" and spec.config.booster.labels not in ("rr", "joint")
    return False


def lr_parameter_count(d: int, n_classes: int) -> int:
    """Length of an owner's logistic-regression parameter vector: ``(d + 1)`` per binary problem,
    one problem for two classes, ``K`` one-vs-rest problems otherwise."""
    return (d + 1) * (1 if n_classes == 2 else n_classes)


def check_boost_config(owner: LocalOwner, config: BoostConfig) -> None:
    """The public parts of a boosting configuration against the owner's public configuration:
    its class count and its feature count. Checked before the boosting code sees the rows, so
    whether a boosting task is answered never depends on the labels held."""
    from privfed.common.boosting import wire  # lazily: scipy only for boosting

    if not isinstance(config, wire.BoostConfig):
        raise TaskRefused("invalid_task", "the boosting configuration must be a BoostConfig")
    fb = config.booster
    if fb.n_classes != owner.n_classes:
        raise TaskRefused(
            "invalid_task", f"task says {fb.n_classes!r} classes; this owner's data set declares {owner.n_classes}"
        )
    if fb.bounds.d != owner.n_features:
        raise TaskRefused("invalid_task", f"task bounds must list {owner.n_features} features (this owner's schema)")


def check_boost_share(owner: LocalOwner, spec: BoostShareTask) -> None:
    """A boosting share task against the owner's public configuration and the run's history
    (:func:`privfed.owner.boosting.check_history`), before anything is computed. A history that
    rewrites rounds this node applied is refused with the fixed text alone."""
    from privfed.owner.boosting import HistoryRewritten, check_history

    check_boost_config(owner, spec.config)
    try:
        check_history(owner, spec.config, spec.history)
    except HistoryRewritten as exc:
        log.warning("boosting share for %s: %s", owner.owner_id, exc)
        raise TaskRefused("invalid_task") from exc
    except (ConfigError, RemoteProtocolError) as exc:
        raise TaskRefused("invalid_task", str(exc)) from exc  # built from the task's fields only


def validate_task(owner: LocalOwner, spec: TaskSpec, *, allow_clear_labels: bool) -> None:
    """Raise :class:`TaskRefused` if ``spec`` cannot be answered by ``owner``.

    Looks at the task's fields and the owner's public configuration only (module docstring).
    Builds every mechanism the task names, so a mechanism's own check (e.g. an ε so small its
    reports would not be finite) refuses the task here, before the budget is checked.
    """
    if releases_clear_labels(spec) and not allow_clear_labels:
        raise TaskRefused(
            "policy",
            "clear labels are released only by an owner started with --allow-clear-labels; ask for labels='rr' "
            "(or 'joint' for boosted NCC)",
        )
    if isinstance(spec, BoostShareTask):
        check_boost_share(owner, spec)
        return
    if not isinstance(spec, (NccShareTask, LrShareTask, PcaShareTask, SvmShareTask)):
        raise TaskRefused("invalid_task", f"task kind {type(spec).__name__} is not a share task")
    d = spec.bounds.d
    if d != owner.n_features:
        raise TaskRefused(
            "invalid_task", f"task bounds describe {d} features; this owner's schema has {owner.n_features}"
        )
    n_classes = getattr(spec, "n_classes", None)
    if n_classes is not None and n_classes != owner.n_classes:
        raise TaskRefused(
            "invalid_task", f"task says {n_classes} classes; this owner's data set declares {owner.n_classes}"
        )
    try:
        if isinstance(spec, NccShareTask):
            make_mechanism(spec.mechanism, epsilon=spec.epsilon, d=d)
            if spec.labels == "rr" and math.isfinite(spec.label_epsilon):
                KaryRandomizedResponse(epsilon=spec.label_epsilon, n_classes=spec.n_classes)
            elif spec.labels == "rr":
                check_positive(spec.label_epsilon, name="label_epsilon", allow_inf=True)
        elif isinstance(spec, LrShareTask):
            make_mechanism(spec.mechanism, epsilon=spec.epsilon, d=lr_parameter_count(d, spec.n_classes))
            check_positive(spec.param_bound, name="param_bound")
            check_positive(spec.c, name="c")
        elif isinstance(spec, PcaShareTask):
            check_positive(spec.epsilon, name="epsilon", allow_inf=True)
            if not 0 <= spec.delta < 1:
                raise TaskRefused("invalid_task", f"delta={spec.delta!r} must be in [0, 1)")
            if not 1 <= spec.k <= d:
                raise TaskRefused("invalid_task", f"k={spec.k} must be in [1, {d}]")
            if math.isfinite(spec.count_epsilon):
                GeometricMechanism(epsilon=spec.count_epsilon)
        elif isinstance(spec, SvmShareTask):
            from privfed.common.feddpdr.svm import DELTA_MODELS, SVM_MODELS

            check_positive(spec.epsilon, name="epsilon", allow_inf=True)
            check_positive(spec.lam, name="lam")
            if spec.model not in SVM_MODELS:
                raise TaskRefused("invalid_task", f"model={spec.model!r} must be one of {SVM_MODELS}")
            if spec.model in DELTA_MODELS:
                delta_ok = 0 < spec.delta < 1 or (spec.delta == 0 and math.isinf(spec.epsilon))
            else:
                delta_ok = spec.delta == 0  # pure epsilon-DP: a delta would be debited for nothing
            if not delta_ok:
                raise TaskRefused("invalid_task", f"delta={spec.delta!r} does not fit model {spec.model!r}")
            if spec.subspace is not None and (
                spec.subspace.ndim != 2 or spec.subspace.shape[0] != d or not np.all(np.isfinite(spec.subspace))
            ):
                raise TaskRefused("invalid_task", f"subspace of shape {spec.subspace.shape} must be finite, ({d}, k)")
    except (ConfigError, TypeError, ValueError, OverflowError) as exc:
        raise TaskRefused("invalid_task", str(exc)) from exc  # built from the task's fields only


def compute_share(owner: LocalOwner, spec: TaskSpec) -> Payload:
    """The perturbed share for one task (pure computation; nothing is released here)."""
    if isinstance(spec, BoostShareTask):
        from privfed.owner.boosting import boost_share

        return boost_share(owner, spec)
    if isinstance(spec, NccShareTask):
        mechanism = make_mechanism(spec.mechanism, epsilon=spec.epsilon, d=spec.bounds.d)
        label_rr = (
            KaryRandomizedResponse(epsilon=spec.label_epsilon, n_classes=spec.n_classes)
            if spec.labels == "rr" and np.isfinite(spec.label_epsilon)
            else None
        )
        share = ncc_share(owner.X, owner.y, bounds=spec.bounds, mechanism=mechanism, label_rr=label_rr, rng=owner.rng)
        return NccShareReply(reports=share.reports, labels=share.labels)
    if isinstance(spec, LrShareTask):
        theta = fit_local_logistic(owner.X, owner.y, bounds=spec.bounds, n_classes=spec.n_classes, C=spec.c)
        mechanism = make_mechanism(spec.mechanism, epsilon=spec.epsilon, d=theta.size)
        reports = lr_share(theta, param_bound=spec.param_bound, mechanism=mechanism, rng=owner.rng)
        return LrShareReply(reports=np.asarray(reports).reshape(1, -1))
    if isinstance(spec, PcaShareTask):
        from privfed.common.feddpdr.pca import owner_pca_release  # lazily: scipy only for the tasks that need it

        U, n = owner_pca_release(
            owner.X, spec.bounds, spec.k, spec.epsilon, spec.delta, owner.rng, scaling=spec.scaling
        )
        count = (
            n
            if math.isinf(spec.count_epsilon)
            else int(GeometricMechanism(epsilon=spec.count_epsilon).privatize(np.int64(n), owner.rng))
        )
        return PcaShareReply(subspace=U, noisy_count=int(count))
    if isinstance(spec, SvmShareTask):
        from privfed.common.feddpdr.svm import owner_svm_release

        W, _, _ = owner_svm_release(
            owner.X,
            owner.y,
            spec.bounds,
            spec.subspace,
            spec.n_classes,
            spec.epsilon,
            spec.lam,
            owner.rng,
            delta=spec.delta,
            model=spec.model,
            scaling=spec.scaling,
        )
        return SvmShareReply(coef=W)
    raise ConfigError(f"unknown task kind {type(spec).__name__}")


def share_is_sendable(share: Payload) -> bool:
    """Every array of the share finite, and every report within the wire's range (:data:`REPORT_LIMIT`)."""
    for name in ("reports", "subspace", "coef", "labels"):
        a = getattr(share, name, None)
        if a is None:
            continue
        a = np.asarray(a)
        if a.size and (a.dtype.kind not in "iuf" or not np.all(np.isfinite(a))):
            return False
        if name == "reports" and a.size and np.max(np.abs(a)) >= REPORT_LIMIT:
            return False
    return True


def release_debits(task: Task) -> list[Debit]:
    """One ledger entry per privacy-relevant part of the release (e.g. per one-vs-rest problem),
    plus a non-private entry when the release carries clear labels."""
    debits = [
        Debit(task.owner_id, eps, delta, f"{label}:{task.round_id}", f"{task.task_id}#{j}")
        for j, (eps, delta, label) in enumerate(task.spec.ledger_entries())
    ]
    if releases_clear_labels(task.spec):
        debits.append(
            Debit(
                task.owner_id,
                0.0,
                0.0,
                f"{CLEAR_LABELS}:{task.round_id}",
                f"{task.task_id}#{CLEAR_LABELS}",
                nonprivate=True,
            )
        )
    return debits


def _refuse(task: Task, code: str, detail: str = "", log_reason: str = "") -> Result:
    log.warning("refusing task %s for %s (%s): %s", task.task_id, task.owner_id, code, log_reason or detail or "-")
    return Result(task.task_id, task.owner_id, Refusal.of(code, detail))


def _prepare(
    task: Task,
    owner: LocalOwner | None,
    ledger: Ledger,
    allow_clear_labels: bool,
    pending: dict[str, tuple[float, float]],
    pending_shares: dict[tuple[str, str], int],
) -> Result | Payload:
    """Steps 2-4 of the module docstring for one task: its share, or a refusal.

    ``pending`` holds what earlier tasks of the batch will debit per owner; the budget check adds
    it, so a second task for the same owner is refused whole instead of half-debited.
    ``pending_shares`` counts the boosting shares earlier tasks of the batch release per (owner,
    run): with the ledger's, at most the run's ``shares_per_owner`` leave."""
    if owner is None:
        return _refuse(task, "invalid_task", f"owner {task.owner_id!r} is not hosted by this node")
    try:
        validate_task(owner, task.spec, allow_clear_labels=allow_clear_labels)
        debits = release_debits(task)
        if any(ledger.has_release_id(d.owner_id, d.release_id) for d in debits):
            raise TaskRefused("already_released", f"task id {task.task_id!r}")
        if isinstance(task.spec, BoostShareTask):
            from privfed.owner.boosting import AlreadyReleased, check_one_role, share_key, shares_released

            try:
                check_one_role(ledger, task.owner_id, task.spec.config, "share")
            except AlreadyReleased as exc:
                raise TaskRefused("already_released", "") from exc
            released, key = shares_released(ledger, task.owner_id, task.spec, task.round_id), share_key(task)
            released += pending_shares.get((task.owner_id, task.round_id), 0)
            if released and key in owner.boost_released:  # the same release again: nothing new leaves
                log.info("task %s: boosting run %r's share sent again", task.task_id, task.round_id)
                return Result(task.task_id, task.owner_id, owner.boost_released[key])
            if released >= task.spec.config.booster.shares_per_owner:
                raise TaskRefused(
                    "already_released",
                    f"boosting run {task.round_id!r}: an owner releases at most "
                    f"{task.spec.config.booster.shares_per_owner} share(s) in a run",
                )
        eps, delta = total_budget(task.spec)
        before = pending.get(task.owner_id, (0.0, 0.0))
        ledger.check(task.owner_id, before[0] + eps, before[1] + delta)
    except TaskRefused as exc:
        return _refuse(task, exc.code, exc.detail)
    except BudgetExceeded as exc:
        return _refuse(task, "budget_exceeded", f"request epsilon={eps:g}, delta={delta:g}", str(exc))
    except (ConfigError, TypeError, ValueError) as exc:  # e.g. an ε the ledger cannot record
        return _refuse(task, "invalid_task", "", str(exc))
    try:
        share = compute_share(owner, task.spec)
    except (ConfigError, ValueError, ArithmeticError) as exc:
        # The message may quote private values (a clipped range, a solver's state): log only.
        return _refuse(task, "invalid_task", "", f"{type(exc).__name__}: {exc}")
    except Exception:  # noqa: BLE001 - a bug here must not take the node down; nothing was released
        log.exception("task %s failed", task.task_id)
        return _refuse(task, "internal")
    if not share_is_sendable(share):
        return _refuse(task, "invalid_task", "the release would not be finite at these parameters")
    if hasattr(task.spec, "bounds"):
        clipped = task.spec.bounds.clip(owner.X)[1]
        if clipped:
            log.info("task %s: %d value(s) outside the public bounds clipped", task.task_id, clipped)
    pending[task.owner_id] = (before[0] + eps, before[1] + delta)
    if isinstance(task.spec, BoostShareTask):
        run = (task.owner_id, task.round_id)
        pending_shares[run] = pending_shares.get(run, 0) + 1
    return share


#: Boosting runs whose share an owner keeps for sending again (the latest ones).
KEPT_SHARES = 4


def _remember_share(owner: LocalOwner, run_id: str, share: Payload) -> None:
    owner.boost_released[run_id] = share
    while len(owner.boost_released) > KEPT_SHARES:
        owner.boost_released.pop(next(iter(owner.boost_released)))


def handle_batch(
    tasks: list[Task], owners: dict[str, LocalOwner], ledger: Ledger, *, allow_clear_labels: bool = False
) -> list[Result]:
    """Answer ``tasks``, one result per task in order; every released share is debited (and
    committed) before this returns. One bad task is refused alone; the others proceed."""
    results: dict[tuple[str, str], Result] = {}
    order: list[tuple[str, str] | Result] = []
    shares: dict[tuple[str, str], Payload] = {}
    seen: set[str] = set()
    pending: dict[str, tuple[float, float]] = {}
    pending_shares: dict[tuple[str, str], int] = {}
    for task in tasks:
        key = (task.owner_id, task.task_id)
        if task.task_id in seen:
            order.append(_refuse(task, "duplicate_task", f"task id {task.task_id!r}"))
            continue
        seen.add(task.task_id)
        order.append(key)
        outcome = _prepare(task, owners.get(task.owner_id), ledger, allow_clear_labels, pending, pending_shares)
        if isinstance(outcome, Result):
            results[key] = outcome
        else:
            shares[key] = outcome
    to_debit = [t for t in tasks if (t.owner_id, t.task_id) in shares and (t.owner_id, t.task_id) not in results]
    to_debit = list({(t.owner_id, t.task_id): t for t in to_debit}.values())
    debits = [release_debits(t) for t in to_debit]
    outcomes = ledger.debit_many([d for ds in debits for d in ds])
    i = 0
    for task, ds in zip(to_debit, debits):  # a task is released only if every one of its entries was debited
        refused = next((o for o in outcomes[i : i + len(ds)] if o is not None), None)
        i += len(ds)
        key = (task.owner_id, task.task_id)
        share = shares.pop(key)
        if refused is None:
            results[key] = Result(task.task_id, task.owner_id, share)
            if isinstance(task.spec, BoostShareTask):
                from privfed.owner.boosting import share_key

                _remember_share(owners[task.owner_id], share_key(task), share)
        elif isinstance(refused, LocalProtocolError):
            results[key] = _refuse(task, "already_released", f"task id {task.task_id!r}", str(refused))
        else:
            results[key] = _refuse(task, "budget_exceeded", "", str(refused))
    return [results[k] if isinstance(k, tuple) else k for k in order]
