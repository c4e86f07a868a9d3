"""The non-private reference every report records: privfed's own model at ε = ∞.

Not a scikit-learn stand-in fitted another way (before issue 24 the nearest-centroid reference
measured distances on bounds-scaled rows while privfed's model measured them on raw rows, and the
two disagreed at ε = ∞: 0.930 against 0.912, 0.955 against 0.627 on a 3-class set). The reference
is the job itself with every release exact:

* ``ncc``, ``lr``, ``feddpdr``: the job's strategy (same scaling, same aggregation) run over the
  in-process transport (:class:`~privfed.deploy.inprocess.InProcessTransport`: the real owner
  handlers) at ε = ∞, by owners holding the training rows as the federation's owners hold them;
* ``bdt``: the same SAMME loop, stump tables and groups over simulated owners
  (:func:`~privfed.common.boosting.simulation.simulate`, which a test checks against the
  networked loop at ε = ∞).

``ncc`` and ``lr`` (local fits) are one round: their reference plays the owners :data:`CHUNK` at a time
(:class:`OwnersInChunks`), each chunk's owners built, answered, folded into the strategy's running
sums and dropped, in task order, so its memory is bounded by a chunk and not by the federation (issue
27: 4.4 GB for all 10^6 owners at once), and the model is the one all owners at once give, bit for
bit (the running sums add the replies in the same order; ``tests/unit/test_reference_chunks.py``).

``privfed simulate`` holds every owner's rows (it plays them all); so does a coordinator of a
built-in data set (its split and partition are public). A coordinator of owners' own files holds
only the public test file: its reference is the same model cross-validated on that file
(:data:`FOLDS` folds, each training fold held by one owner), and the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from privfed.common.datasets import Dataset, federation_split, partition
from privfed.common.errors import ConfigError
from privfed.common.identity import owner_id
from privfed.common.rng import make_rng
from privfed.common.tasks import Result, Task
from privfed.deploy.inprocess import InProcessTransport
from privfed.owner.local import LocalOwner
from privfed.server.config import JobConfig
from privfed.server.strategies import make_strategy
from privfed.server.strategies.base import Fold, SingleRound, SumResult, Transport

#: Folds of the cross-validated reference on a public test file.
FOLDS = 5
#: The node that hosts the reference's owners (in this process only).
NODE = "reference"
#: Owners the reference of a one-round task plays at a time: a multiple of the owner core's batches
#: (``TaskKind.batch``: 1024 LR, 256 NCC tasks), so each batch holds the owners it holds in one pass.
CHUNK = 16 * 1024


class OwnersInChunks(Transport):
    """The reference's owners for a one-round strategy (:class:`SingleRound`: ``ncc``, ``lr`` by local
    fits), played :data:`CHUNK` at a time:
    the tasks of each chunk go to an :class:`InProcessTransport` of just those owners (built from
    ``train``'s rows ``parts[i]`` and seed ``seed + i``, with an unbounded in-memory ledger), whose
    answers go to the fold, and the chunk is dropped. A one-round task asks each owner once and
    needs no secure sum."""

    def __init__(self, train: Dataset, parts: Sequence[np.ndarray], seed: int) -> None:
        self._train, self._parts, self._seed = train, parts, seed
        self.owner_ids = [owner_id(NODE, i) for i in range(len(parts))]
        self._index = {o: i for i, o in enumerate(self.owner_ids)}

    def owner(self, oid: str) -> LocalOwner:
        """Owner ``oid`` (built afresh: its rows, and its noise stream from the start)."""
        i, t = self._index[oid], self._train
        rows = self._parts[i]
        return LocalOwner(oid, t.X[rows], t.y[rows], make_rng("seeded", self._seed + i), t.n_classes, t.bounds)

    def fold_tasks(self, tasks: list[Task], fold: Fold, timeout: float | None = None) -> None:
        for start in range(0, len(tasks), CHUNK):
            chunk = tasks[start : start + CHUNK]
            transport = _exact_transport([self.owner(t.owner_id) for t in chunk], owner_keys=False)
            try:
                transport.fold_tasks(chunk, fold)
            finally:
                _close(transport)

    def run_tasks(self, tasks: list[Task], timeout: float | None = None) -> list[Result]:
        results: list[Result] = []
        self.fold_tasks(tasks, results.extend)
        return results

    def secure_sum(self, *args: Any, **kwargs: Any) -> SumResult:
        raise ConfigError("the chunked reference plays one-round tasks only: no secure sum")

    def silent_owners(self) -> set[str]:
        return set()


def _exact_transport(owners: list[LocalOwner], *, owner_keys: bool = True) -> InProcessTransport:
    """The owners on one in-process node with an unbounded ledger in memory. The reference plays
    every owner, and nothing leaves this process: clear labels are allowed. A chunk of a one-round
    task needs no secure sum, so no owner keys (``owner_keys=False``)."""
    return InProcessTransport.with_ledgers(
        owners, epsilon_budget=math.inf, delta_budget=1.0, allow_clear_labels=True, owner_keys=owner_keys
    )


def _close(transport: InProcessTransport) -> None:
    for ledger in transport.ledgers.values():
        ledger.close()


def reference_model(job: JobConfig, train: Dataset, parts: Sequence[np.ndarray]) -> Any:
    """privfed's model of ``job`` at ε = ∞ from owners holding ``train``'s rows ``parts[i]``."""
    exact = job.replace(epsilon=math.inf, journal=None, resume=False)
    strategy = make_strategy(exact, n_classes=train.n_classes, bounds=train.bounds)
    if job.task == "bdt" and job.release == "shares":
        from privfed.common.boosting.simulation import simulate  # scipy: only for this task

        params = strategy.params  # type: ignore[attr-defined]
        rng = np.random.Generator(np.random.PCG64(job.seed))
        return simulate(params, train.X, train.y, owners=[np.asarray(p) for p in parts], rng=rng).model
    chunks = OwnersInChunks(train, parts, job.seed)
    if isinstance(strategy, SingleRound):  # one round, one task per owner: chunk by chunk
        return strategy.run(chunks.owner_ids, chunks).model
    transport = _exact_transport([chunks.owner(o) for o in chunks.owner_ids])
    try:
        return strategy.run(chunks.owner_ids, transport).model
    finally:
        _close(transport)


def accuracy(model: Any, test: Dataset) -> float:
    return float(np.mean(np.asarray(model.predict(test.X)) == test.y))


def report_reference(job: JobConfig, train: Dataset, test: Dataset, parts: Sequence[np.ndarray]) -> dict[str, Any]:
    """The report's ``reference_accuracy`` and ``reference_learner`` for owners holding ``parts`` of ``train``."""
    return {
        "reference_accuracy": accuracy(reference_model(job, train, parts), test),
        "reference_learner": f"privfed {job.task} at epsilon=inf, {len(parts)} owner(s) holding the training rows",
    }


def even_parts(n_rows: int, n_owners: int, seed: int) -> list[np.ndarray]:
    """The federation's even partition of ``n_rows`` among ``n_owners`` (``privfed owner --n-owners``)."""
    return partition(n_rows, min(n_owners, n_rows), seed=seed)


def cross_validated(job: JobConfig, test: Dataset) -> dict[str, Any]:
    """The reference of a coordinator that holds only a public test file: privfed's ε = ∞ model,
    :data:`FOLDS`-fold cross-validated on it (stratification not needed: folds are a seeded shuffle)."""
    folds = np.array_split(make_rng("seeded", job.seed).permutation(test.n), min(FOLDS, test.n))
    correct = 0
    for k, held in enumerate(folds):
        rest = np.concatenate([f for j, f in enumerate(folds) if j != k])
        train = test.take(rest)
        # bdt and lr by gradient descent take a step per group of owners, nb one report per owner: one row per owner
        one_row = job.task in ("bdt", "nb") or (job.task == "lr" and job.task_options()["solver"] == "gd")
        parts = even_parts(train.n, train.n if one_row else 1, job.seed)
        correct += int(np.sum(np.asarray(reference_model(job, train, parts).predict(test.X[held])) == test.y[held]))
    return {
        "reference_accuracy": correct / test.n,
        "reference_learner": f"privfed {job.task} at epsilon=inf, {len(folds)}-fold cross-validated on the public "
        "test file (the coordinator holds no training rows)",
    }


def coordinator_reference(job: JobConfig) -> dict[str, Any]:
    """The reference of ``privfed coordinator``'s report: on a built-in data set's public split and
    partition (``--owners`` owners, ``--seed``); for owners' own files, cross-validated on the schema's
    public test file (None when it names none: there is nothing public to measure on)."""
    from privfed.server.main import federation_schema

    if job.schema is None:
        train, test = federation_split(
            job.dataset, seed=job.seed, test_fraction=job.test_fraction, n_samples=job.n_samples
        )
        return report_reference(job, train, test, even_parts(train.n, job.owners or 1, job.seed))
    _, test = federation_schema(job)
    if test is None:
        return {"reference_accuracy": None, "reference_learner": "none: the schema names no public test file"}
    return cross_validated(job, test)
