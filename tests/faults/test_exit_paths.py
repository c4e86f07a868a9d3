"""Every way a job ends leaves a report (issue 23, item 3): a property test over injected failures.

``privfed coordinator``'s job (:func:`privfed.server.main.run_coordinator`, in this process, a real
gRPC server on port 0) and ``privfed simulate`` (:func:`privfed.deploy.simulate.simulate`) are made to
fail at each stage a job goes through, with each kind of failure a process meets: a configuration
error, a failed round, a bug, an I/O error, Ctrl-C, an exit, and SIGTERM or SIGINT while waiting.
Whatever hypothesis draws, ``report.json`` exists with ``"status": "failed"`` and the reason, and
the failure reaches the caller as it was (a :class:`PrivfedError` naming the report).
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfed.common.errors import ConfigError, PrivfedError, RoundFailed
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.server import job as job_module
from privfed.server import main as main_module
from privfed.server.app import CoordinatorServer
from privfed.server.config import JobConfig
from privfed.server.strategies.base import SingleRound
from privfed.server.strategies.result import StrategyResult

FAILURES = {
    "config": lambda: ConfigError("injected: a bad setting"),
    "round": lambda: RoundFailed("injected: no owner released a share"),
    "bug": lambda: RuntimeError("injected: a coordinator bug"),
    "io": lambda: OSError(28, "injected: no space left on device"),
    "ctrl-c": lambda: KeyboardInterrupt(),
    "exit": lambda: SystemExit(0),
}
#: Where a coordinator's job fails: each stage's function, as run_coordinator reaches it.
STAGES = ("strategy", "listen", "register", "rounds", "save")


def _raise(failure: BaseException):
    def raiser(*args, **kwargs):
        raise failure

    return raiser


def _inject(mp: pytest.MonkeyPatch, stage: str, failure: BaseException) -> None:
    """Make ``stage`` raise ``failure``; the stages before it succeed without any owner node."""
    mp.setattr(main_module, "RELEASE_GRACE", 0.0)
    if stage == "strategy":
        mp.setattr(main_module, "coordinator_strategy", _raise(failure))
        return
    if stage == "listen":
        mp.setattr(CoordinatorServer, "start", _raise(failure))
        return
    if stage == "register":
        mp.setattr(job_module, "wait_for_registration", _raise(failure))
        return
    mp.setattr(job_module, "wait_for_registration", lambda dispatcher, expected, *a, **k: expected.owners)
    if stage == "rounds":
        mp.setattr(SingleRound, "run", _raise(failure))
        return
    trained = lambda self, owners, transport: StrategyResult(NearestCentroidModel(np.zeros((2, 20))), self.privacy())  # noqa: E731
    mp.setattr(SingleRound, "run", trained)
    mp.setattr(job_module, "save_model", _raise(failure))


def _report(out: Path) -> dict:
    (path,) = out.glob("*/report.json")
    return json.loads(path.read_text())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stage=st.sampled_from(STAGES), kind=st.sampled_from(sorted(FAILURES)))
def test_a_coordinator_job_that_fails_anywhere_writes_a_failed_report(tmp_path_factory, stage, kind):
    out = tmp_path_factory.mktemp("runs")
    failure = FAILURES[kind]()
    config = JobConfig(task="ncc", epsilon=1.0, owners=1, listen="127.0.0.1:0", out=out, register_timeout=5)
    with pytest.MonkeyPatch.context() as mp:
        _inject(mp, stage, failure)
        with pytest.raises(type(failure)) as raised:
            main_module.run_coordinator(config, None)
    report = _report(out)
    assert report["status"] == "failed", (stage, kind, report)
    assert report["error"], report
    if isinstance(failure, PrivfedError):
        assert str(failure) in report["error"]
        assert f"(report: {out}" in str(raised.value)  # the one-line error names the report
    assert report["version"]["privfed"] and report["config"]["task"] == "ncc"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_waiting_for_owners_writes_a_failed_report(tmp_path, monkeypatch, signum):
    monkeypatch.setattr(main_module, "RELEASE_GRACE", 0.0)
    config = JobConfig(task="ncc", epsilon=1.0, owners=1, listen="127.0.0.1:0", out=tmp_path, register_timeout=30)
    # The signal once the job waits for owners (not after a fixed 0.5 s: a loaded box may not be there yet)
    waiting, wait_for_registration = threading.Event(), job_module.wait_for_registration

    def entered(*args, **kwargs):
        waiting.set()
        return wait_for_registration(*args, **kwargs)

    monkeypatch.setattr(job_module, "wait_for_registration", entered)
    sender = threading.Thread(target=lambda: waiting.wait(60) and os.kill(os.getpid(), signum), daemon=True)
    sender.start()
    code = main_module.run_coordinator(config, None)
    sender.join()
    assert code == (130 if signum == signal.SIGINT else 0)
    report = _report(tmp_path)
    assert report["status"] == "failed"
    assert report["error"].startswith(f"stopped by {signal.Signals(signum).name}: job aborted while waiting")


@pytest.mark.parametrize("kind", ["round", "bug", "ctrl-c"])
def test_a_simulation_that_fails_anywhere_writes_a_failed_report(tmp_path, monkeypatch, kind):
    from privfed.deploy import simulate as simulate_module

    failure = FAILURES[kind]()
    monkeypatch.setattr(simulate_module, "run_point", _raise(failure))
    config = simulate_module.SimulationConfig.from_mapping(
        {"task": "ncc", "owners": 4, "epsilon": [1.0], "processes": 1, "n_samples": 200, "out": str(tmp_path)}
    )
    with pytest.raises(type(failure)):
        simulate_module.simulate(config)
    report = _report(tmp_path)
    assert report["status"] == "failed" and report["error"]
    assert "interrupted" in report["error"] if kind == "ctrl-c" else str(failure) in report["error"]


def test_a_job_its_owners_cannot_do_fails_before_the_port_opens_with_a_report(tmp_path, monkeypatch):
    listened = []
    monkeypatch.setattr(CoordinatorServer, "start", lambda self, address: listened.append(address))
    config = JobConfig(task="bdt", epsilon=1.0, owners=3, listen="127.0.0.1:0", out=tmp_path)
    with pytest.raises(ConfigError, match="--task bdt cannot run with 3 owners"):
        main_module.run_coordinator(config, None)
    assert listened == []  # nobody could connect, nobody was asked for anything
    report = _report(tmp_path)
    assert report["status"] == "failed" and "cannot run with 3 owners" in report["error"]
