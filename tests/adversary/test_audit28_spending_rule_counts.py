"""Audit 28, A28-5: the data user's view scrubs the names of the spending rules (``epsilon_per_day``,
``epsilon_total``: 5e8ea8a) by replacing the text, after the operator's summary (``report.refusal_summary``) grouped
the refusals by text with their counts. Two rules that declined give two entries of the *same* scrubbed text with
their counts ("2: ... (a limit on what the owner releases over time); 1: ... (a limit on what the owner releases
over time)"): the data user still reads that both kinds of spending limit declined it, and how many owners by each.
The real summary, the real service and store, the real job API. The summary now counts the spending rules as one,
for the operator too (each owner's entry in the report's ``refused`` keeps its rule)."""

from __future__ import annotations

import json

import pytest

from privfed.common.bounds import Bounds
from privfed.common.schema import FederationSchema
from privfed.common.tasks import Refusal
from privfed.server.jobapi import JobApi
from privfed.server.report import SPENDING_LIMIT, refusal_summary
from privfed.server.service import CoordinatorService, ServiceConfig

pytestmark = pytest.mark.in_process


def test_a_data_user_cannot_count_the_spending_rules_apart(tmp_path):
    day = Refusal.of("policy", "rule epsilon_per_day").line()
    total = Refusal.of("policy", "rule epsilon_total").line()
    error = "only 0 of 3 owners take part in the job; " + refusal_summary({"a": day, "b": day, "c": total}, 3)
    (tmp_path / "schema.toml").write_text(json.dumps(FederationSchema.shorthand(Bounds.of(0.0, 1.0, 2), 2).to_dict()))
    config = ServiceConfig(
        store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, schema=tmp_path / "schema.toml"
    )
    service = CoordinatorService(config, tls=None)
    record = service.store.submit({"task": "nb", "epsilon": 1.0, "owners": 3}, "bob")
    service.store.transition(record.job_id, "queued", state="running", started="2026-11-29T00:00:00Z")
    service.store.update(record.job_id, state="failed", finished="2026-11-29T00:01:00Z", error=error)
    shown = json.dumps(JobApi(service, require_role=True).show({"job_id": record.job_id}, "bob"), ensure_ascii=False)
    assert "epsilon_per_day" not in shown and "epsilon_total" not in shown  # the names are gone
    assert shown.count(SPENDING_LIMIT) == 1, shown  # but two entries of it, counted 2 and 1
