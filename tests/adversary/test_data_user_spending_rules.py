"""Walkthrough 8, W8-1: a data user read, in ``privfed jobs``, ``job show`` and ``job logs``, which policy rule of each
owner declined their job. ``epsilon_per_day`` and ``epsilon_total`` say that *other* data users' jobs spent these
owners' budget (their jobs are hidden from this one): a data user who had never submitted anything learned that each
owner had released at least its day limit less their ε to someone in the last 24 hours. Those two rules now read as
"a limit on what the owner releases over time"; the rules about the job and its data user stay named, and the
operator's own copies keep every rule. In process: the real owner core, its ledger and policy, the real service and
store, no network."""

from __future__ import annotations

import json

import pytest

from privfed.common.bounds import Bounds
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Debit, Ledger
from privfed.common.schema import FederationSchema
from privfed.common.tasks import JoinTask, Refusal, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import build_owners, federation_split
from privfed.owner.policy import OwnerPolicy
from privfed.server.jobapi import JobApi
from privfed.server.report import SPENDING_LIMIT
from privfed.server.service import CoordinatorService, ServiceConfig

pytestmark = pytest.mark.in_process


def declined_by(policy: OwnerPolicy, tmp_path, spent: float) -> str:
    """The refusal line the real owner core answers bob's join with, after ``spent`` ε of alice's job."""
    train, _ = federation_split("digits", seed=0, test_fraction=0.2)
    owners = build_owners(train, node_id="owner-0", n_owners=1, shards=range(1), seed=0, rng_kind="seeded", rng_seed=0)
    ledger = Ledger(tmp_path / f"ledger-{len(list(tmp_path.glob('ledger-*')))}.sqlite", epsilon_budget=100.0)
    oid = owners[0].owner_id
    if spent:
        ledger.debit_many([Debit(oid, spent, 0.0, "ncc", "alices-job#0", job="alices-job")])
    core = OwnerCore(owners, ledger, owner_policy=policy)
    bobs = JobInfo(job_id="bobs-job", data_user="bob", task="nb", epsilon=1.0, delta=0.0, schema_sha256="ab" * 32)
    answer = core.answer([Task("join-0", oid, "accept", JoinTask())], seen=set(), job=bobs)
    ledger.close()
    (result,) = answer.results
    assert isinstance(result.payload, Refusal), result.payload
    return f"{oid}: {result.payload.line()}"


def test_a_data_user_reads_no_rule_about_what_others_spent_and_the_operator_reads_them_all(tmp_path):
    day = declined_by(OwnerPolicy(max_epsilon_per_day=4.0), tmp_path, spent=3.5)  # alice spent 3.5 of 4 today
    total = declined_by(OwnerPolicy(max_epsilon_total=4.0), tmp_path, spent=3.5)
    user = declined_by(OwnerPolicy(data_users=("alice",)), tmp_path, spent=0.0)  # about bob himself: stays named
    assert "(rule epsilon_per_day)" in day and "(rule epsilon_total)" in total and "(rule data_user)" in user

    (tmp_path / "schema.toml").write_text(json.dumps(FederationSchema.shorthand(Bounds.of(0.0, 1.0, 2), 2).to_dict()))
    config = ServiceConfig(
        store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, schema=tmp_path / "schema.toml"
    )
    service = CoordinatorService(config, tls=None)
    api = JobApi(service, require_role=True)
    record = service.store.submit({"task": "nb", "epsilon": 1.0, "owners": 3}, "bob")
    error = f"only 0 of 3 owners take part in the job; 3/3 owners refused: {day}; {total}; {user}"
    service.store.transition(record.job_id, "queued", state="running", started="2026-11-29T00:00:00Z")
    service.store.update(record.job_id, state="failed", finished="2026-11-29T00:01:00Z", error=error)
    (service.store.job_dir(record.job_id) / "job.log").write_text(f"WARNING job {record.job_id} failed: {error}\n")

    shown = json.dumps(api.show({"job_id": record.job_id}, "bob"), ensure_ascii=False)
    listed = json.dumps(api.list({}, "bob"), ensure_ascii=False)
    logged = api.logs({"job_id": record.job_id}, "bob")["log"]
    for text in (shown, listed, logged):
        assert "epsilon_per_day" not in text and "epsilon_total" not in text, text
        assert SPENDING_LIMIT in text and "(rule data_user)" in text, text
    assert "(rule epsilon_per_day)" in service.store.get(record.job_id).error  # the operator's record keeps it
