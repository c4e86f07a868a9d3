"""What an idle coordinator and owner node have imported (issue 27, item 3: nodes at the interpreter floor).

A real ``privfed coordinator`` (mTLS, ``--schema``, task lr) and a real ``privfed owner`` that registered with it
are started as the README starts them, each through the ``privfed`` entry point (``privfed.deploy.cli:main``)
inside a small wrapper: a thread that, once the test touches a trigger file, writes the process's
``sys.modules`` to a file. The test touches it when both processes are idle (the owner has registered, the
coordinator waits for a second owner that never comes), so the lists are what a node holds at rest.

Neither process may hold the analysis stack: scikit-learn, scipy's optimizers, matplotlib, statsmodels, pandas
(each costs megabytes of RSS per node; ``bench/footprint.py`` measures the rest). They are loaded only by the
jobs and commands that use them (the launcher's reference fit, feddpdr, the boosting coordinator). An idle
owner holds no task kind's code either (the lazy registry of ``privfed.common.tasks``): it imports a kind's
family, with its learners and mechanisms, on its first task of that kind. An idle coordinator holds no secure-sum
machine (it builds them when its job starts), no envelope cryptography (it relays sealed envelopes, it opens
none) nor another task's strategy, and neither node another command's parser module.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

D = 4  # features of the owner's rows
WAIT = 60.0  # seconds a process may take to reach its idle state

#: Packages (and their submodules) an idle node must not have imported.
HEAVY = ("sklearn", "scipy.optimize", "scipy.stats", "matplotlib", "statsmodels", "pandas")
#: ``importlib.metadata`` (with the zipfile and email parsing it loads: 1.2 MB): privfed's version is
#: ``privfed.__version__``, which the job report names from its start.
METADATA = ("importlib.metadata", "zipfile", "email.parser", "email.feedparser")
#: ``shutil`` with the ``bz2`` and ``lzma`` it loads (0.5 MB): argparse reads the terminal's width through it
#: when it makes a help formatter; privfed's (``deploy/cli_parser.py``) reads it only to print a help.
ARCHIVES = ("shutil", "bz2", "lzma")
#: The code of the release kinds (``privfed.common.tasks.DECLARED``), and the learners and mechanisms it uses:
#: an owner imports a kind's on its first task of that kind. What an idle owner may hold of the registry is
#: ``tasks.base``, the contracts' helpers and the secure sums' steps, and of the mechanisms ``base`` and
#: ``snapping`` (the wire's grid).
KIND_CODE = (
    *(f"privfed.common.tasks.{family}" for family in ("shares", "feddpdr", "boosting", "gradient", "naive_bayes")),
    *(f"privfed.owner.kinds.{family}" for family in ("shares", "feddpdr", "boosting", "gradient", "naive_bayes")),
    "privfed.common.learners",
    *(f"privfed.common.mechanisms.{m}" for m in ("factory", "laplace", "piecewise", "geometric", "frequency")),
    *(f"privfed.proto.serde_{family}" for family in ("shares", "boosting", "steps")),
)

#: The secure sums' machines (their masking, aggregation and state transitions): a coordinator builds them when
#: its job starts (``privfed.server.securesum.RelayedTransport``), not while it waits for its owners.
SECURE_SUM_MACHINES = tuple(
    f"privfed.common.secagg.{m}" for m in ("coordinator", "transitions", "aggregator", "events", "requests", "runs")
)
#: The envelopes' cryptography (X25519 boxes sealed with AES-GCM; ``cryptography``'s ciphers and serialization):
#: a coordinator relays sealed envelopes and checks their sizes (``privfed.common.secagg.sizes``), it opens none.
ENVELOPE_CRYPTO = (
    "privfed.common.secagg.boxes",
    "privfed.common.secagg.signed_keys",
    "cryptography.hazmat.primitives.ciphers",
    "cryptography.hazmat.primitives.serialization",
)
#: The round logic of the tasks the idle coordinator (``--task lr``: LDP gradient descent) does not run, with the
#: share kinds only they use: ``privfed.server.strategies`` imports a job's own strategy (``make_strategy``).
OTHER_STRATEGIES = (
    *(f"privfed.server.strategies.{s}" for s in ("lr", "ncc", "naive_bayes", "boosting", "marginal_boost", "feddpdr")),
    "privfed.common.tasks.shares",
)
#: The other commands' parser modules: ``privfed.deploy.cli`` imports a command's when it builds its parser.
OTHER_COMMANDS = {
    "coordinator": ("privfed.deploy.admin_cli", "privfed.deploy.offline_cli", "privfed.deploy.owner_cli"),
    "owner": ("privfed.deploy.admin_cli", "privfed.deploy.offline_cli"),
}

#: Runs ``privfed`` with ``sys.argv[3:]``; writes ``sys.modules`` to ``argv[2]`` once ``argv[1]`` exists.
WRAPPER = """
import json, os, sys, threading, time
trigger, out = sys.argv[1], sys.argv[2]
def dump():
    while not os.path.exists(trigger):
        time.sleep(0.05)
    with open(out + ".tmp", "w") as f:
        json.dump(sorted(sys.modules), f)
    os.replace(out + ".tmp", out)
threading.Thread(target=dump, daemon=True).start()
sys.argv = ["privfed", *sys.argv[3:]]
from privfed.deploy.cli import main
sys.exit(main())
"""


def _wait_for_line(proc: subprocess.Popen, text: str) -> str:
    """The first line of ``proc``'s stderr containing ``text`` (nodes log to stderr)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"the process exited before logging {text!r}")
        if text in line:
            return line
    raise AssertionError(f"no {text!r} within {WAIT:g} s")


def _modules(out: Path) -> set[str]:
    deadline = time.monotonic() + WAIT
    while not out.exists():
        assert time.monotonic() < deadline, f"{out.name} was never written"
        time.sleep(0.05)
    return set(json.loads(out.read_text()))


def _within(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.fixture(scope="module")
def idle_modules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """``{"coordinator": ..., "owner": ...}``: the modules of each process, both idle."""
    tmp = tmp_path_factory.mktemp("idle")
    rng = np.random.Generator(np.random.PCG64(27))
    header = ",".join([*(f"x{i}" for i in range(D)), "y"])
    for name, n in (("rows.csv", 20), ("test.csv", 40)):
        y = rng.integers(0, 2, n)
        X = np.clip(rng.normal(size=(n, D)), -3.0, 3.0)
        np.savetxt(
            tmp / name, np.column_stack([X, y]), delimiter=",", fmt=["%.5f"] * D + ["%d"], header=header, comments=""
        )
    features = ", ".join(f'"x{i}"' for i in range(D))
    (tmp / "schema.toml").write_text(
        f'features = [{features}]\nclasses = [0, 1]\ntest = "test.csv"\n[bounds]\nlo = -3.0\nhi = 3.0\n'
    )
    cli = [sys.executable, "-m", "privfed.deploy.cli"]
    subprocess.run([*cli, "certs", "--out", str(tmp / "certs"), "--owners", "1"], check=True, capture_output=True)
    trigger = tmp / "dump"
    common = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "text": True, "cwd": tmp}
    wrapped = [sys.executable, "-c", WRAPPER, str(trigger)]
    procs: list[subprocess.Popen] = []
    try:
        coordinator = subprocess.Popen(
            [*wrapped, str(tmp / "coordinator.json"), "coordinator", "--certs", str(tmp / "certs")]
            + ["--listen", "127.0.0.1:0", "--owners", "2", "--epsilon", "1", "--task", "lr"]
            + ["--schema", str(tmp / "schema.toml"), "--out", str(tmp / "runs")],
            **common,
        )
        procs.append(coordinator)
        port = _wait_for_line(coordinator, "listening on port").split("listening on port")[1].split()[0]
        owner = subprocess.Popen(
            [*wrapped, str(tmp / "owner.json"), "owner", "--coordinator", f"127.0.0.1:{port}", "--name", "owner-0"]
            + ["--certs", str(tmp / "certs"), "--ledger", str(tmp / "ledger.sqlite"), "--epsilon-budget", "10"]
            + ["--data", str(tmp / "rows.csv"), "--schema", str(tmp / "schema.toml")],
            **common,
        )
        procs.append(owner)
        _wait_for_line(owner, "fit the federation schema")
        trigger.touch()
        return {"coordinator": _modules(tmp / "coordinator.json"), "owner": _modules(tmp / "owner.json")}
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("role", ["coordinator", "owner"])
def test_an_idle_node_holds_no_analysis_stack(idle_modules: dict[str, set[str]], role: str) -> None:
    modules = idle_modules[role]
    assert "privfed.deploy.cli" in modules and "grpc" in modules  # the dump is of a running node
    assert _within(modules, HEAVY) == [], f"an idle {role} imported {_within(modules, HEAVY)}"
    assert _within(modules, METADATA) == [], f"an idle {role} imported {_within(modules, METADATA)}"
    assert _within(modules, ARCHIVES) == [], f"an idle {role} imported {_within(modules, ARCHIVES)}"


def test_an_idle_owner_holds_no_task_kinds_code(idle_modules: dict[str, set[str]]) -> None:
    modules = idle_modules["owner"]
    assert "privfed.owner.core" in modules and "privfed.common.tasks.base" in modules
    assert _within(modules, KIND_CODE) == [], f"an idle owner imported {_within(modules, KIND_CODE)}"


def test_an_idle_coordinator_holds_no_secure_sum_machines(idle_modules: dict[str, set[str]]) -> None:
    modules = idle_modules["coordinator"]
    assert "privfed.server.securesum" in modules  # the module its transport is made from, without the machines
    assert _within(modules, SECURE_SUM_MACHINES) == [], (
        f"an idle coordinator imported {_within(modules, SECURE_SUM_MACHINES)}"
    )


@pytest.mark.parametrize("role", ["coordinator", "owner"])
def test_a_node_imports_its_own_commands_parser_only(idle_modules: dict[str, set[str]], role: str) -> None:
    modules = idle_modules[role]
    assert _within(modules, OTHER_COMMANDS[role]) == [], (
        f"an idle {role} imported {_within(modules, OTHER_COMMANDS[role])}"
    )


def test_an_idle_coordinator_holds_its_own_tasks_strategy_only(idle_modules: dict[str, set[str]]) -> None:
    modules = idle_modules["coordinator"]
    assert "privfed.server.strategies.ldp_gd" in modules  # lr's default solver: the job's strategy is built at start
    assert _within(modules, OTHER_STRATEGIES) == [], (
        f"an idle coordinator imported {_within(modules, OTHER_STRATEGIES)}"
    )


def test_an_idle_coordinator_holds_no_envelope_cryptography(idle_modules: dict[str, set[str]]) -> None:
    modules = idle_modules["coordinator"]
    assert "privfed.server.relay" in modules and "privfed.common.secagg.ring" in modules  # it relays ring envelopes
    assert _within(modules, ENVELOPE_CRYPTO) == [], f"an idle coordinator imported {_within(modules, ENVELOPE_CRYPTO)}"
