"""One federated job on a running coordinator: wait for owners, run the rounds, fit the model."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from tqdm import tqdm

from privfed.common.errors import JobAborted, RoundFailed
from privfed.common.messages import BoostEvaluateTask, total_budget
from privfed.server.app import CoordinatorServer
from privfed.server.report import refusal_summary
from privfed.server.strategies import refusals

log = logging.getLogger("privfed.coordinator")
#: One line per round (``privfed simulate`` shows it instead of progress bars when stderr is no terminal).
round_log = logging.getLogger("privfed.coordinator.rounds")


@dataclass
class JobOutcome:
    model: object
    n_owners: int
    answered: int
    refused: dict[str, str]
    lost_nodes: list[str]
    epsilon_by_owner: dict[str, float]  # what the coordinator received shares for
    timings: dict[str, float] = field(default_factory=dict)


class Transport:
    """What a strategy may use: run a round, look up the public owner directory, and open and
    close ring sessions (contract 5: the dispatcher relays only among an open session's members).

    No row counts (contract 2): a registration carries none, and a strategy needs only public
    bounds.
    """

    def __init__(self, execute, dispatcher):
        self._execute = execute
        self.peer_key = dispatcher.peer_key
        self.certificates = dispatcher.certificates
        self.silent_owners = dispatcher.silent_owners
        self.open_ring = dispatcher.open_ring
        self.close_ring = dispatcher.close_ring

    def __call__(self, tasks, timeout=None):
        return self._execute(tasks, timeout)


def run_job(
    server: CoordinatorServer,
    strategy,
    *,
    expected_owners: int,
    register_timeout: float = 120.0,
    round_timeout: float = 600.0,
    show_progress: bool = True,
    label: str = "",
) -> JobOutcome:
    t0 = time.perf_counter()
    with tqdm(
        total=expected_owners, desc=f"{label}owners registered", disable=not show_progress, leave=False, unit="owner"
    ) as bar:
        n = server.dispatcher.wait_for_owners(
            expected_owners, register_timeout, progress=lambda k: bar.update(k - bar.n)
        )
    if server.dispatcher.aborted:
        raise JobAborted("job aborted while waiting for owners")
    if n < expected_owners:
        raise RoundFailed(
            f"only {n} of {expected_owners} owners registered within {register_timeout:.0f} s; "
            "start the missing owner nodes, or pass a larger --register-timeout or a smaller --owners"
        )
    t1 = time.perf_counter()
    owner_ids = sorted(server.dispatcher.owners())
    eps = {o: 0.0 for o in owner_ids}
    counted: set[tuple[str, str]] = set()  # (owner, release id) already counted (a re-formed ring reuses it)
    refused: dict[str, str] = {}
    lost_nodes: set[str] = set()
    answered: set[str] = set()

    def execute(tasks, timeout=None):
        """Send one round's tasks, wait for the answers, keep the accounting."""
        with tqdm(
            total=len(tasks),
            desc=f"{label}round {tasks[0].round_id if tasks else ''}",
            disable=not show_progress,
            leave=False,
            unit="owner",
        ) as bar:
            outcome = server.dispatcher.run(
                tasks, timeout=timeout or round_timeout, progress=lambda done, total: bar.update(done - bar.n)
            )
        if outcome.lost:
            log.warning(
                "round %s completed with %d task(s) unanswered (silent nodes: %s)",
                tasks[0].round_id,
                len(outcome.lost),
                outcome.lost_nodes or "none",
            )
        lost_nodes.update(outcome.lost_nodes)
        results = list(outcome.results.values())
        round_log.info(
            "%sround %s: %d of %d task(s) answered", label, tasks[0].round_id if tasks else "", len(results), len(tasks)
        )
        round_refused = refusals(results)
        refused.update(round_refused)
        by_task = {t.task_id: t for t in tasks}
        for r in results:
            task = by_task[r.task_id]
            if r.owner_id in round_refused or not task.spec.ledger_entries():  # not a release
                continue
            key = (r.owner_id, getattr(task.spec, "release_id", task.task_id))
            if key not in counted:
                counted.add(key)
                eps[r.owner_id] += total_budget(task.spec)[0]
            if not isinstance(task.spec, BoostEvaluateTask):
                answered.add(r.owner_id)
        return results

    try:
        model = strategy.run(owner_ids, Transport(execute, server.dispatcher))
    except RoundFailed as exc:  # say why owners did not answer: their refusals, the nodes lost
        why = [str(exc), refusal_summary(refused, len(owner_ids))]
        if lost_nodes:
            why.append(f"nodes lost: {', '.join(sorted(lost_nodes))}")
        raise RoundFailed("; ".join(w for w in why if w)) from exc
    t2 = time.perf_counter()
    return JobOutcome(
        model=model,
        n_owners=len(owner_ids),
        answered=len(answered - set(refused)),
        refused=refused,
        lost_nodes=sorted(lost_nodes),
        epsilon_by_owner=eps,
        timings={"register_s": t1 - t0, "rounds_s": t2 - t1},
    )
