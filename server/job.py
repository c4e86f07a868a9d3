"""One federated job on a running coordinator: wait for owners, run the rounds, fit the model."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from tqdm import tqdm

from privfed.common.errors import ConfigError
from privfed.server.app import CoordinatorServer
from privfed.server.strategies import refusals

log = logging.getLogger("privfed.coordinator")


@dataclass
class JobOutcome:
    model: object
    n_owners: int
    answered: int
    refused: dict[str, str]
    lost_nodes: list[str]
    epsilon_by_owner: dict[str, float]          # what the coordinator received shares for
    timings: dict[str, float] = field(default_factory=dict)


def run_job(server: CoordinatorServer, strategy, *, expected_owners: int, register_timeout: float = 120.0,
            round_timeout: float = 600.0, show_progress: bool = True, label: str = "") -> JobOutcome:
    t0 = time.perf_counter()
    with tqdm(total=expected_owners, desc=f"{label}owners registered", disable=not show_progress,
              leave=False, unit="owner") as bar:
        n = server.dispatcher.wait_for_owners(expected_owners, register_timeout,
                                              progress=lambda k: bar.update(k - bar.n))
    if n < expected_owners:
        raise ConfigError(f"only {n} of {expected_owners} owners registered within {register_timeout:.0f} s")
    t1 = time.perf_counter()
    owner_ids = sorted(server.dispatcher.owners())
    tasks = strategy.configure(owner_ids, round_id="r1")
    with tqdm(total=len(tasks), desc=f"{label}shares received", disable=not show_progress,
              leave=False, unit="owner") as bar:
        outcome = server.dispatcher.run(tasks, timeout=round_timeout,
                                        progress=lambda done, total: bar.update(done - bar.n))
    t2 = time.perf_counter()
    results = list(outcome.results.values())
    if outcome.lost_nodes:
        log.warning("round completed without node(s) %s (%d task(s) unanswered)", outcome.lost_nodes, len(outcome.lost))
    refused = refusals(results)
    model = strategy.aggregate(results)
    t3 = time.perf_counter()
    by_task = {t.task_id: t for t in tasks}
    eps = {o: 0.0 for o in owner_ids}
    for r in results:
        if r.owner_id not in refused:
            eps[r.owner_id] = by_task[r.task_id].spec.total_epsilon
    return JobOutcome(model=model, n_owners=len(owner_ids), answered=len(results) - len(refused), refused=refused,
                      lost_nodes=outcome.lost_nodes, epsilon_by_owner=eps,
                      timings={"register_s": t1 - t0, "round_s": t2 - t1, "aggregate_s": t3 - t2})
