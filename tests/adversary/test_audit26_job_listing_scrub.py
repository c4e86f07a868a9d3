"""Audit 26: what a data user's ``privfed jobs`` lists of their jobs names no operator path and no node address,
as ``privfed job show`` and ``privfed job logs`` do not (walkthrough 6, W6-10).

A failed job's error is its report's reason, which can name the job's journal in the service's store (``journal
/srv/store/jobs/<id>/journal.sqlite: job ... ran over other owners than those registered now``, a boosting job
resumed after a restart) and a job's note now carries its report's warnings. ``job show`` scrubs both
(``JobApi._for_data_user``); before audit 26 the listing (``JobApi.list``: the same record's ``error`` and
``note``) gave them as they were. In process: the real service and store, no node.
"""

from __future__ import annotations

import json

import pytest

from privfed.common.bounds import Bounds
from privfed.common.schema import FederationSchema
from privfed.server.jobapi import JobApi
from privfed.server.service import CoordinatorService, ServiceConfig

pytestmark = pytest.mark.in_process


@pytest.mark.parametrize("store", ["store", "st\u00f6re"])  # a path JSON would write escaped (\\u00f6) unless told
def test_the_listing_names_no_store_path_and_no_address(tmp_path, store):
    (tmp_path / "schema.toml").write_text(json.dumps(FederationSchema.shorthand(Bounds.of(0.0, 1.0, 2), 2).to_dict()))
    config = ServiceConfig(
        store=tmp_path / store, listen="127.0.0.1:0", status_listen=None, schema=tmp_path / "schema.toml"
    )
    service = CoordinatorService(config, tls=None)
    api = JobApi(service, require_role=True)
    record = service.store.submit({"task": "bdt", "release": "shares", "epsilon": 1.0, "owners": 4}, "alice")
    journal = service.store.job_dir(record.job_id) / "journal.sqlite"
    error = (
        f"journal {journal}: job r1 ran over other owners than those registered now; start the same owner nodes "
        "(node hospital-a at ipv4:10.1.2.3:41234 was not)"
    )
    service.store.transition(record.job_id, "queued", state="running", started="2026-11-29T00:00:00Z")
    service.store.update(record.job_id, state="failed", finished="2026-11-29T00:01:00Z", error=error)

    shown = json.dumps(api.show({"job_id": record.job_id}, "alice"), ensure_ascii=False)
    listed = json.dumps(api.list({}, "alice"), ensure_ascii=False)
    root = str(service.store.root)
    for text in (shown, listed):
        assert root not in text and str(service.store.root.resolve()) not in text, text
        assert "10.1.2.3" not in text, text
    assert "ran over other owners" in listed  # the reason itself is still there
    assert json.loads(listed)["jobs"][0]["job_id"] == record.job_id
    assert api.list({}, "bob")["jobs"] == []  # another data user's job: not listed
