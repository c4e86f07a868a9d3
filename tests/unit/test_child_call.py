"""start_in_child: a call computed in its own interpreter while the caller goes on (privfed simulate's
non-private reference beside its first federation), and never left running when the caller fails."""

from __future__ import annotations

import pytest

from privfed.common.errors import ConfigError
from privfed.deploy import child, simulate
from privfed.deploy.reference import even_parts


def test_a_started_call_gives_the_value_or_the_error_it_would_give_in_this_process():
    ok = child.start_in_child("privfed.deploy.reference:even_parts", 10, 3, 0)
    bad = child.start_in_child("privfed.common.work_rows:work_rows", -1)  # a ConfigError there
    assert [list(p) for p in ok.result()] == [list(p) for p in even_parts(10, 3, 0)]
    assert [list(p) for p in ok.result()] == [list(p) for p in even_parts(10, 3, 0)]  # read once, kept
    with pytest.raises(ConfigError, match="row count must be >= 0"):
        bad.result()


def test_a_simulation_that_fails_stops_the_reference_child_it_started(tmp_path, monkeypatch):
    started: list[child.ChildCall] = []

    def sleeping_reference(function, *args, niceness=0):  # a reference that would outlast the failed job by a minute
        started.append(child.start_in_child("time:sleep", 60, niceness=niceness))
        return started[-1]

    def failing_point(*args, **kwargs):
        raise RuntimeError("injected: the federation failed")

    monkeypatch.setattr(simulate, "start_in_child", sleeping_reference)
    monkeypatch.setattr(simulate, "run_point", failing_point)
    config = simulate.SimulationConfig.from_mapping(
        {"task": "ncc", "owners": 4, "epsilon": [1.0], "processes": 1, "n_samples": 200, "out": str(tmp_path)}
    )
    with pytest.raises(RuntimeError, match="injected"):
        simulate.simulate(config)
    assert len(started) == 1 and started[0]._proc.poll() is not None  # killed, not left sleeping


def test_a_started_call_runs_below_its_callers_priority_by_its_niceness():
    import os

    assert child.start_in_child("os:nice", 0, niceness=3).result() == os.nice(0) + 3
