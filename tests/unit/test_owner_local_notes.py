"""What an owner's own log tells it about a batch (walkthrough 4): releases its rows could not afford, answered from
the data-independent fallback, are counted once per batch (M3: only a DEBUG line per release said so), and a refused
task is logged once (m5: twice, two WARNING lines per budget refusal). Nothing of it reaches the coordinator: the
results are the same kinds as before, and the refusals' texts are the fixed ones."""

from __future__ import annotations

import logging

import pytest

from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Ledger
from privfed.common.tasks import LrShareReply, LrShareTask, Refusal, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import build_owners, federation_split

NODE = "hospital-a"
JOB = JobInfo("job-2", "alice", "lr", 1.0, 0.0, "")


@pytest.fixture(scope="module")
def train():
    return federation_split("synthetic", seed=0, test_fraction=0.2, n_samples=200)[0]


def _owners(train, n, node=NODE):
    return build_owners(train, node_id=node, n_owners=n, shards=range(n), seed=0, rng_kind="seeded", rng_seed=0)


def _tasks(train, owners, tag):
    spec = LrShareTask(mechanism="laplace", epsilon=1.0, param_bound=4.0, c=1.0, n_classes=2, bounds=train.bounds)
    return [Task(f"{tag}-{o.owner_id}", o.owner_id, tag, spec) for o in owners]


def _owner_lines(caplog, level=logging.WARNING):
    return [r.getMessage() for r in caplog.records if r.name == "privfed.owner" and r.levelno >= level]


def test_releases_answered_from_the_fallback_are_counted_once_per_batch(tmp_path, train, caplog):
    """A node renamed and re-sharded over the same rows (2 owners, then 4 under new ids): the rows spent their budget
    under the first ids, so every release of the new ids is the fallback; the owner's log says so in one line."""
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=1.0)
    first = _owners(train, 2)
    out = OwnerCore(first, ledger).answer(_tasks(train, first, "r1"), job=JOB).results
    assert all(isinstance(r.payload, LrShareReply) for r in out)
    assert not _owner_lines(caplog)  # the rows afforded every release: no line
    again = _owners(train, 4, "hospital-a2")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="privfed.owner"):
        out = OwnerCore(again, ledger).answer(_tasks(train, again, "r2"), job=JOB).results
    assert all(isinstance(r.payload, LrShareReply) for r in out)  # the coordinator sees releases, as before
    lines = _owner_lines(caplog)
    assert len(lines) == 1, lines
    assert lines[0].startswith("job job-2: 4 of 4 release(s) answered from the data-independent fallback"), lines
    assert "budget is spent" in lines[0]
    ledger.close()


def test_a_budget_refusal_is_logged_once_with_its_numbers(tmp_path, train, caplog):
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=0.5)
    owners = _owners(train, 2)
    with caplog.at_level(logging.INFO, logger="privfed.owner"):
        out = OwnerCore(owners, ledger).answer(_tasks(train, owners, "r1")).results
    assert all(isinstance(r.payload, Refusal) and r.payload.code == "budget_exceeded" for r in out)
    lines = _owner_lines(caplog)
    assert len(lines) == 2, lines  # one per task
    assert all("refusing task" in line and "budget_exceeded" in line for line in lines), lines
    assert all("exceeds budget (epsilon=0.5" in line for line in lines), lines  # the ledger's numbers, one line
    ledger.close()
