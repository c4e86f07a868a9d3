"""What ``privfed simulate`` computes outside its coordinator process (issue 27, item 2).

:func:`prepare` runs before the first job, in a child process (:func:`privfed.deploy.child.call_in_child`):
it computes each repeat's split of a built-in data set once, into the run's split cache (the owner
nodes and the coordinator read it with numpy alone), and checks that the job can run with the owners.
:func:`references` fits the non-private reference of each seed (privfed's own model at ε = ∞, with
scikit-learn and scipy as the learners need them) in another child, beside the first job
(:func:`privfed.deploy.child.start_in_child`: at 10^6 owners it is minutes of one core, which the job's
processes leave idle while they start and wait on each other). :func:`plot` draws the accuracy-vs-ε
figure after the last job, in another child (matplotlib). So the coordinator of a simulation imports what a bare
coordinator does and no more.
"""

from __future__ import annotations

import logging
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from privfed.common.datasets import Dataset, federation_split, synthetic_rows_for_training
from privfed.common.schema import FederationSchema
from privfed.deploy.reference import even_parts, report_reference
from privfed.deploy.simulation_config import SimulationConfig
from privfed.deploy.simulation_nodes import node_ranges
from privfed.owner.data import check_owner_rows, read_owner_rows
from privfed.server.config import JobConfig
from privfed.server.main import federation_schema
from privfed.server.report import learner_label, plot_lines
from privfed.server.strategies import make_strategy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """What the coordinator needs of the data before its jobs: the training rows of the first seed's split."""

    train_rows: int
    #: Each seed's ``n_samples``: the job's, or the size giving exactly one training row per owner.
    n_samples: dict[int, int | None]
    #: The job's public rows per owner: given, or the simulation's own (:func:`_with_rows`).
    rows_per_owner: float
    #: :func:`rows_bound_warning`'s, or None.
    warning: str | None = None
    #: Each owner file's rows (owners' own files; none for a built-in set): its node's owners follow them.
    sizes: tuple[int, ...] = ()


def prepare(config: SimulationConfig, job: JobConfig, seeds: list[int], split_cache: Path | None) -> Prepared:
    """Splits into ``split_cache`` (built-in data sets) and the feasibility check.

    ``job`` is the simulation's job with ``rows_per_owner`` unset or given. Raises :class:`ConfigError`
    (one line) for a job the owners cannot run, or an owner file that does not fit the schema.
    """
    n_samples = {s: None if config.data else _n_samples(config, job, s) for s in seeds}
    splits, sizes = _splits(config, job, seeds, split_cache, n_samples)
    train0, test0 = splits[seeds[0]]
    job = _with_rows(config, job, train0, sizes)
    make_strategy(job, n_classes=len(test0.classes), bounds=test0.bounds).check_feasible(config.owners)
    warning = rows_bound_warning(job, _largest_owner(config, sizes, seeds[0], train0))
    if warning:  # before the references, which a clipped job may fail
        print(f"  {warning}", file=sys.stderr)
    assert job.rows_per_owner is not None
    return Prepared(int(train0.n), n_samples, job.rows_per_owner, warning, tuple(sizes))


def references(
    config: SimulationConfig,
    job: JobConfig,
    seeds: list[int],
    split_cache: Path | None,
    n_samples: dict[int, int | None],
) -> dict[int, dict[str, object]]:
    """Each seed's non-private reference (``reference_accuracy``, ``reference_learner``) of the job
    :func:`prepare` accepted, its splits read from ``split_cache``, with the public rows per owner the
    coordinator will use. ``privfed simulate`` runs it in a child beside its first federation."""
    splits, sizes = _splits(config, job, seeds, split_cache, n_samples)
    job = _with_rows(config, job, splits[seeds[0]][0], sizes)
    return {
        s: report_reference(job.replace(seed=s), tr, te, _owner_parts(config, sizes, s, tr))
        for s, (tr, te) in splits.items()
    }


def _splits(
    config: SimulationConfig,
    job: JobConfig,
    seeds: list[int],
    split_cache: Path | None,
    n_samples: dict[int, int | None],
) -> tuple[dict[int, tuple[Dataset, Dataset]], list[int]]:
    """Each seed's (training rows, test rows), and each owner file's row count (none for a built-in set)."""
    if config.data:  # owners' own files: pooled only for the non-private reference, never shipped
        schema, public_test = federation_schema(job)
        assert public_test is not None  # the launcher checked the schema names one
        pooled, sizes = _pooled(config.data, schema)
        return {s: (pooled, public_test) for s in seeds}, sizes
    splits = {
        s: federation_split(
            job.dataset, seed=s, test_fraction=job.test_fraction, n_samples=n_samples[s], cache_dir=split_cache
        )
        for s in seeds
    }
    return splits, []


def _with_rows(config: SimulationConfig, job: JobConfig, train0: Dataset, sizes: list[int]) -> JobConfig:
    """``job`` with the public rows per owner the coordinator will use: given, or -- the simulation plays every
    owner, so their row counts are its public configuration -- the training rows over the owners for a built-in
    set's even split, the largest owner's rows for owners' own files (their sizes differ: a mean would bound the
    larger owners below their rows, clip their releases and bias the model; walkthrough 4)."""
    if job.rows_per_owner is not None:
        return job
    if config.data:
        return job.replace(rows_per_owner=float(_largest_owner(config, sizes, job.seed, train0)))
    return job.replace(rows_per_owner=train0.n / config.owners)


def _largest_owner(config: SimulationConfig, sizes: list[int], seed: int, train: Dataset) -> int:
    return max(len(p) for p in _owner_parts(config, sizes, seed, train))


def _owner_parts(config: SimulationConfig, sizes: list[int], seed: int, train: Dataset) -> list[np.ndarray]:
    """The rows of each owner, as the nodes partition them (a file's rows among its node's owners)."""
    if not config.data:
        return even_parts(train.n, config.owners, seed)
    starts = np.cumsum([0, *sizes])
    ranges = node_ranges(config.owners, config.n_processes, sizes)
    return [starts[i] + p for i, r in enumerate(ranges) for p in even_parts(sizes[i], len(r), seed)]


def rows_bound_warning(job: JobConfig, largest_owner_rows: int) -> str | None:
    """A one-line warning when the job's public bound on an owner's rows (``--rows-per-owner`` or
    ``--max-owner-rows``) is below the rows the simulation's largest owner holds: such owners' releases
    are clipped or scaled down to the bound (never less private, but biased), which a user who mistyped
    the flag should hear about rather than read off a model that learns nothing."""
    if job.owner_rows_bound >= largest_owner_rows:
        return None
    flag = "--max-owner-rows" if job.max_owner_rows is not None else "--rows-per-owner"
    return (
        f"warning: {flag} bounds an owner at {job.owner_rows_bound} row(s), but the largest simulated owner "
        f"holds {largest_owner_rows}: the releases of owners above the bound are clipped to it, which biases "
        f"the model; leave {flag} out to use the split's own"
    )


def _n_samples(config: SimulationConfig, job: JobConfig, seed: int) -> int | None:
    """``job.n_samples``, or -- for a synthetic set sized to the owners -- the size whose split leaves
    exactly one training row per owner: a row of slack would give one owner two rows, and the public
    rows-per-owner bound (weight bound, sensitivities) would be 2 for every owner."""
    if not config.sized_to_owners:
        return job.n_samples
    assert job.n_samples is not None  # sized_to_owners
    exact = synthetic_rows_for_training(
        config.owners,
        test_fraction=job.test_fraction,
        seed=seed,
        guess=math.ceil(config.owners / (1 - job.test_fraction)),
    )
    if exact is None:
        log.warning(
            "no size of the synthetic set near %d leaves exactly %d training rows (seed %d): one owner holds "
            "two rows, so the public rows-per-owner bound is 2; --n-samples sets the size",
            job.n_samples,
            config.owners,
            seed,
        )
        return job.n_samples
    return exact


def _pooled(files: tuple[Path, ...], schema: FederationSchema) -> tuple[Dataset, list[int]]:
    """The rows of every owner file, each checked against ``schema``, pooled (the reference's training
    set), and each file's row count."""
    parts = [check_owner_rows(read_owner_rows(str(path)), schema) for path in files]
    pooled = Dataset(
        "+".join(p.name for p in parts),
        np.vstack([p.X for p in parts]),
        np.concatenate([p.y for p in parts]),
        schema.bounds,
        np.array(schema.classes),
        schema.encoded_features,
    )
    return pooled, [p.n for p in parts]


def plot(
    path: Path,
    config: SimulationConfig,
    job: JobConfig,
    points: list[dict],
    reference: float,
    chance: float,
    majority: float,
) -> None:
    """The accuracy-vs-ε plot of a simulation (with the reference, majority and chance lines)."""
    eps = [p["epsilon"] for p in points]
    label = learner_label(job)
    names = [p.name for p in config.data]
    data = (", ".join(names[:3]) + (f", ... ({len(names)} files)" if len(names) > 3 else "")) if names else job.dataset
    plot_lines(
        path,
        eps,
        {
            label: [p["accuracy"] for p in points],
            "non-private reference (privfed at eps=inf)": [reference] * len(points),
        },
        errors={label: [p["accuracy_std"] for p in points]} if config.repeats > 1 else None,
        hlines={"majority class": majority, "chance": chance},
        xlabel="epsilon",
        ylabel="test accuracy" + (f" (mean ± std of {config.repeats} runs)" if config.repeats > 1 else ""),
        logx=True,
        title=f"{data}: {config.owners} owners, {config.n_processes} node processes",
    )
