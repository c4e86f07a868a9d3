"""Task handlers: the only code that turns private rows into something that may leave.

Order for every task (STYLE rule 7): validate, check the budget (nothing computed if it would
overspend), compute the perturbed share, debit the ledger in one committed transaction for
the whole batch, and only then hand the results to the transport. A share whose debit is
refused is discarded and replaced by a refusal.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from privfed.common.errors import BudgetExceeded, ConfigError
from privfed.common.ledger import Debit, Ledger
from privfed.common.learners.logistic import fit_local_logistic, lr_share
from privfed.common.learners.ncc import ncc_share
from privfed.common.mechanisms import KaryRandomizedResponse, make_mechanism
from privfed.common.dppca import owner_pca_release
from privfed.common.dpsvm import owner_svm_release
from privfed.common.messages import (
    BoostShareTask, LrShareReply, LrShareTask, NccShareReply, NccShareTask, PcaShareReply, PcaShareTask, Refusal, Result,
    SvmShareReply, SvmShareTask, Task, total_budget,
)

log = logging.getLogger("privfed.owner")


@dataclass
class LocalOwner:
    """One logical owner hosted by a node: its id, its private rows and its generator."""

    owner_id: str
    X: np.ndarray
    y: np.ndarray
    rng: np.random.Generator


def _check_shape(owner: LocalOwner, spec) -> None:
    if spec.bounds.d != owner.X.shape[1]:
        raise ConfigError(f"task bounds describe {spec.bounds.d} features, owner rows have {owner.X.shape[1]}")
    n_classes = getattr(spec, "n_classes", None)
    if n_classes is not None and owner.y.size and int(owner.y.max()) >= n_classes:
        raise ConfigError(f"task says {spec.n_classes} classes, owner holds label {int(owner.y.max())}")


def compute_share(owner: LocalOwner, spec):
    """The perturbed share for one task (pure computation; nothing is released here)."""
    if isinstance(spec, BoostShareTask):
        from privfed.owner.boosting import boost_share

        return boost_share(owner, spec)
    _check_shape(owner, spec)
    if isinstance(spec, NccShareTask):
        mechanism = make_mechanism(spec.mechanism, epsilon=spec.epsilon, d=spec.bounds.d)
        label_rr = (KaryRandomizedResponse(epsilon=spec.label_epsilon, n_classes=spec.n_classes)
                    if spec.labels == "rr" and np.isfinite(spec.label_epsilon) else None)
        share = ncc_share(owner.X, owner.y, bounds=spec.bounds, mechanism=mechanism, label_rr=label_rr,
                          rng=owner.rng)
        return NccShareReply(reports=share.reports, labels=share.labels)
    if isinstance(spec, LrShareTask):
        theta = fit_local_logistic(owner.X, owner.y, bounds=spec.bounds, n_classes=spec.n_classes, C=spec.c)
        mechanism = make_mechanism(spec.mechanism, epsilon=spec.epsilon, d=theta.size)
        reports = lr_share(theta, param_bound=spec.param_bound, mechanism=mechanism, rng=owner.rng)
        return LrShareReply(reports=np.asarray(reports).reshape(1, -1))
    if isinstance(spec, PcaShareTask):
        U, n = owner_pca_release(owner.X, spec.bounds, spec.k, spec.epsilon, spec.delta, owner.rng)
        return PcaShareReply(subspace=U, n_rows=n)
    if isinstance(spec, SvmShareTask):
        W, n, _ = owner_svm_release(owner.X, owner.y, spec.bounds, spec.subspace, spec.n_classes, spec.epsilon,
                                    spec.lam, owner.rng)
        return SvmShareReply(coef=W, n_rows=n)
    raise ConfigError(f"unknown task kind {type(spec).__name__}")


def _debits(task: Task) -> list[Debit]:
    """One ledger entry per privacy-relevant part of the release (e.g. per one-vs-rest problem)."""
    return [Debit(task.owner_id, eps, delta, f"{label}:{task.round_id}", f"{task.task_id}#{j}")
            for j, (eps, delta, label) in enumerate(task.spec.ledger_entries())]


def handle_batch(tasks: list[Task], owners: dict[str, LocalOwner], ledger: Ledger) -> list[Result]:
    """Answer ``tasks``; every released share is debited (and committed) before this returns."""
    results: dict[str, Result] = {}
    shares: dict[str, object] = {}
    clipped = 0
    for task in tasks:
        owner = owners.get(task.owner_id)
        try:
            if owner is None:
                raise ConfigError(f"owner {task.owner_id!r} is not hosted by this node")
            ledger.check(task.owner_id, *total_budget(task.spec))
            if isinstance(task.spec, BoostShareTask) and any(
                    ledger.has_released(task.owner_id, f"{label}:{task.round_id}")
                    for _, _, label in task.spec.ledger_entries()):
                raise BudgetExceeded(f"owner {task.owner_id} already released a share in boosting run "
                                     f"{task.round_id}: an owner releases in at most one round")
            shares[task.task_id] = compute_share(owner, task.spec)
            if hasattr(task.spec, "bounds"):
                clipped += task.spec.bounds.clip(owner.X)[1]
        except BudgetExceeded as exc:
            log.warning("refusing task %s: %s", task.task_id, exc)
            results[task.task_id] = Result(task.task_id, task.owner_id, Refusal("budget_exceeded", str(exc)))
        except (ConfigError, ValueError) as exc:
            log.warning("invalid task %s: %s", task.task_id, exc)
            results[task.task_id] = Result(task.task_id, task.owner_id, Refusal("invalid_task", str(exc)))
        except Exception:  # a bug here must not take the node down; nothing was released
            log.exception("task %s failed", task.task_id)
            results[task.task_id] = Result(task.task_id, task.owner_id,
                                           Refusal("internal", "the owner failed to compute this share"))
    if clipped:
        log.info("%d value(s) outside the public bounds clipped for %d task(s)", clipped, len(tasks))
    to_debit = [t for t in tasks if t.task_id in shares]
    debits = [_debits(t) for t in to_debit]
    outcomes = ledger.debit_many([d for ds in debits for d in ds])
    per_task, i = [], 0
    for ds in debits:  # a task is released only if every one of its entries was debited
        per_task.append(next((o for o in outcomes[i:i + len(ds)] if o is not None), None))
        i += len(ds)
    for task, refused in zip(to_debit, per_task):
        if refused is None:
            results[task.task_id] = Result(task.task_id, task.owner_id, shares.pop(task.task_id))
        else:
            shares.pop(task.task_id)
            log.warning("refusing task %s at debit: %s", task.task_id, refused)
            results[task.task_id] = Result(task.task_id, task.owner_id, Refusal("budget_exceeded", str(refused)))
    return [results[t.task_id] for t in tasks]
