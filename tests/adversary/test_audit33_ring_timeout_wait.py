"""Audit 33, A33-1: a job's ``ring_timeout`` is a wait as its ``round_timeout`` is, and ``privfed serve
--max-job-wait`` bounds it alike.

A ring secure sum's batch waits ``ring_timeout`` instead of the round timeout (``server/job.py``: ``timeout or
round_timeout``), and since walkthrough 10 (W10-1) every attempt that times out with every node online waits twice
as long as the one before (up to 16 times ``ring_timeout`` in the fifth). The service refused a ``round_timeout`` past
``--max-job-wait`` (walkthrough 8, W8-14: one data user's job held every other data user's queue) but took any
``ring_timeout``: ``1e9`` was queued, and one ring member that forwards nothing (its node polling) held the queue until
``--max-job-time`` (a day by default) cancelled the job. The real service, its store and its job-file checks; no
node."""

from __future__ import annotations

import pytest

from privfed.common.errors import ConfigError
from privfed.server.service import CoordinatorService, ServiceConfig

MAX_WAIT = 600.0
BDT = {"task": "bdt", "epsilon": 1.0, "owners": 8, "n_rounds": 2}


@pytest.fixture
def service(tmp_path):
    return CoordinatorService(
        ServiceConfig(
            store=tmp_path / "store",
            listen="127.0.0.1:0",
            status_listen=None,
            dataset="synthetic",
            max_job_wait=MAX_WAIT,
        ),
        tls=None,
    )


@pytest.mark.parametrize("key", ["round_timeout", "ring_timeout"])
def test_a_wait_past_the_services_bound_is_refused(service, key):
    with pytest.raises(ConfigError, match=f"{key} 1e\\+09 s is longer than this service lets a job wait"):
        service.submit({**BDT, key: 1e9}, "alice")
    assert service.store.ids("alice") == []  # nothing queued


@pytest.mark.parametrize("key", ["round_timeout", "ring_timeout"])
def test_a_wait_within_the_bound_is_queued(service, key):
    record = service.submit({**BDT, key: MAX_WAIT}, "alice")
    assert record.state == "queued" and record.settings[key] == MAX_WAIT
