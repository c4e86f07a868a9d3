"""One owner, its node restarted or not, and the coordinator's job books over runs of a boosting job: the harness of
the audits of carried accounts (audits 38 and 39; ``test_audit38_resumed_carry_netting.py``,
``test_audit39_lump_remainder.py``). A node is a real owner core over a ledger file; a job book is the coordinator's,
driven as ``run_federated_job`` drives it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from differential import BOUNDS, XB, YB, K

from privfed.common.ledger import Ledger
from privfed.common.tasks import Task
from privfed.owner.core import OwnerCore
from privfed.owner.local import LocalOwner
from privfed.server.contracts import PublicLimits
from privfed.server.dispatcher import RunOutcome
from privfed.server.rounds import JobBook

OWNER = "node-0.o00000"


def node(ledger: Path) -> OwnerCore:
    """A (re)started owner node: a fresh core and owner (nothing kept in memory) over the ledger file ``ledger``."""
    owner = LocalOwner(OWNER, XB, YB, np.random.Generator(np.random.PCG64(1)), K, BOUNDS)
    return OwnerCore([owner], Ledger(ledger, epsilon_budget=10.0, delta_budget=1e-3))


def book(*, keyed: bool = True) -> JobBook:
    """A run's job book; ``keyed``: written ahead of its batches (``run_federated_job(write_ahead=True)``)."""
    out = JobBook(PublicLimits(max_rows=XB.shape[0]), owner_ids=[OWNER])
    if keyed:
        out.on_ask = lambda: None
    return out


def ask(run: JobBook, core: OwnerCore, task: Task) -> object:
    """One task asked by ``run`` and answered by ``core``; its answer's payload."""
    run.to_ask([task])
    (answer,) = core.answer([task]).results
    run.record([task], RunOutcome({answer.task_id: answer}, [], []), silent_nodes=[])
    return answer.payload


def held(core: OwnerCore) -> float:
    """What the owner's ledger holds: every ε it debited."""
    return sum(h["epsilon"] for h in core.ledger.history(OWNER))
