"""A hostile data user against the coordinator service (wt-redteam2), over real processes.

``privfed serve`` and three owner daemons whose policies answer ``alice`` only (tests/integration's
ServiceFleet: the nodes hold different rows of the built-in data set), and a second data user,
``bob``, with a certificate of the same federation CA. Bob

* submits a job: every owner declines it by the rule ``data_user``, with one text for all of them
  whatever rows they hold (a differential check over nine owners on three nodes), and no ledger
  records a release of it;
* cannot read, list or cancel alice's finished job: each answers as for a job that does not exist
  (tests/integration/test_service.py checks the same of her served model); and alice's own record of
  it (``privfed job show``, ``privfed job logs``) holds no training row's value (only releases, their
  aggregates and public configuration are there).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))
from servicefleet import NODES, OWNERS_PER_NODE, ServiceFleet  # noqa: E402

from privfed.common.datasets import federation_split  # noqa: E402
from privfed.common.ledger import read_accounts  # noqa: E402

OWNERS = len(NODES) * OWNERS_PER_NODE


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with ServiceFleet.running(tmp_path_factory.mktemp("data-user")) as f:  # its certificates name alice and bob
        yield f


def _released(fleet: ServiceFleet, job_id: str) -> list[dict]:
    return [r for n in NODES for a in read_accounts(fleet.ledger(n)) for r in a.releases if r["job"] == job_id]


def test_bobs_job_is_declined_alike_by_owners_with_different_rows_and_costs_nothing(fleet):
    job_id = fleet.submit(name="bob", task="ncc", epsilon=1.0, owners=OWNERS)
    assert fleet.wait(job_id)["data_user"] == "bob"
    report = fleet.report(job_id)
    texts = {re.sub(r"owner-\d\.o\d{5}", "OWNER", text) for text in report["refused"].values()}
    assert len(report["refused"]) == OWNERS and len(texts) == 1, texts
    assert "rule data_user" in next(iter(report["refused"].values()))
    assert sorted(report["declined_owners"]) == sorted(report["refused"])
    assert _released(fleet, job_id) == []


def test_bob_cannot_read_alices_job_and_her_record_of_it_holds_no_training_row(fleet):
    job_id = fleet.submit(name="alice", task="bdt", epsilon=2.0, owners=OWNERS, base="ncc", rounds=2, min_owners=1)
    assert fleet.wait(job_id)["state"] == "done"
    assert _released(fleet, job_id)  # the owners answered alice
    missing = "20261126T000000000000Z-0000"
    for args in (("job", "show"), ("job", "logs"), ("job", "cancel")):
        theirs, none = (fleet.cli(*args, i, name="bob") for i in (job_id, missing))
        assert theirs.returncode == none.returncode == 2, theirs.stderr
        assert theirs.stderr.replace(job_id, "ID") == none.stderr.replace(missing, "ID"), (theirs.stderr, none.stderr)
    listed = fleet.cli("jobs", "--json", "--all", name="bob")
    assert listed.returncode == 0 and job_id not in listed.stdout and "alice" not in listed.stdout
    show = fleet.cli("job", "show", job_id, name="alice")
    logs = fleet.cli("job", "logs", job_id, name="alice")
    assert show.returncode == 0 and logs.returncode == 0, show.stderr + logs.stderr
    assert json.loads(show.stdout)["job"]["data_user"] == "alice"
    text = show.stdout + logs.stdout
    train, _ = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)  # servicefleet's DATASET
    values = {f"{v:.8g}" for v in np.unique(train.X)} | {repr(float(v)) for v in np.unique(train.X)}
    numbers = set(re.findall(r"-?\d+\.\d{5,}(?:e-?\d+)?", text))
    assert numbers, "the record holds numbers (accuracy, noisy totals): the check below is not empty"
    found = {n for n in numbers if n in values or f"{float(n):.8g}" in values}
    assert not found, f"training values in alice's job record: {sorted(found)[:5]}"
