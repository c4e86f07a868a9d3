"""Deployments' commands as real processes, each in a network namespace of its own where the
service names resolve (``deploy/netns.py``): what ``test_compose.py`` and ``test_k8s.py`` run.

Until the service mode (``privfed serve``, ``submit``, ``owner --policy``) is on the branch,
:func:`one_job` and :func:`without_policy` turn a service's command into today's one-job
equivalent, keeping everything else (enrolment, certificates, addresses, volumes) as written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from privfed.deploy.cli import build_parser
from privfed.deploy.netns import Host, Lan
from privfed.deploy.simulation_config import SimulationConfig

WAIT = 120  # seconds any one process may take before a test gives up on it


def option(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def tail(argv: list[str]) -> list[str]:
    """What an enrolling step execs (after ``--``)."""
    return argv[argv.index("--") + 1 :]


def service_mode() -> bool:
    """Whether this branch's CLI has the service mode (issue 26 items 1-2)."""
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    return {"serve", "submit"} <= set(commands)


def private_keys(dirs) -> set[str]:
    """Names of the files holding a private key under ``dirs``."""
    found = set()
    for d in dirs:
        for f in Path(d).rglob("*"):
            if f.is_file() and not f.is_symlink() and b"PRIVATE KEY" in f.read_bytes():
                found.add(f.name)
    return found


def without_policy(argv: list[str]) -> list[str]:
    """An owner daemon's command as today's one-job owner (no ``--policy``)."""
    i = argv.index("--policy")
    return argv[:i] + argv[i + 2 :]


def one_job(serve: list[str], job: SimulationConfig) -> list[str]:
    """``privfed serve ...`` as today's one-job ``privfed coordinator`` running ``job``."""
    j = job.job
    return [
        *serve[: serve.index("serve")],
        "coordinator",
        "--listen",
        option(serve, "--listen"),
        "--certs",
        option(serve, "--certs"),
        "--out",
        option(serve, "--store"),
        *("--task", j.task, "--owners", str(j.owners), "--epsilon", str(job.epsilons[0])),
        *("--dataset", j.dataset, "--seed", str(j.seed)),
    ]


class Stack:
    """Processes by name, each in its host's namespace (or this one); logs in ``tmp/<name>.log``."""

    def __init__(self, lan: Lan, hosts: dict[str, Host], tmp: Path):
        self.lan, self.hosts, self.tmp = lan, hosts, tmp
        self.procs: dict[str, subprocess.Popen] = {}
        bin_dir = str(Path(sys.executable).parent)  # `privfed` for what the services exec
        self.env = os.environ | {"PYTHONUNBUFFERED": "1", "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}

    def start(self, name: str, argv: list[str], *, host: str | None = None, env: dict | None = None):
        log = open(self.tmp / f"{name}.log", "w")
        kwargs = {"env": self.env | (env or {}), "stdout": log, "stderr": subprocess.STDOUT, "cwd": self.tmp}
        where = self.hosts.get(host or name)
        proc = self.lan.popen(where, argv, **kwargs) if where else subprocess.Popen(argv, **kwargs)
        self.procs[name] = proc
        return proc

    def check(self, host: str, argv: list[str], env: dict | None = None) -> int:
        """Run ``argv`` in ``host``'s namespace (a probe or health check); its exit status."""
        cmd = ["ip", "netns", "exec", self.hosts[host].netns, *argv]
        return subprocess.run(cmd, capture_output=True, env=self.env | (env or {}), timeout=WAIT).returncode

    def wait(self, name: str) -> int:
        return self.procs[name].wait(timeout=WAIT)

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text()

    def logs(self) -> str:
        return "\n".join(f"--- {p.stem}\n{p.read_text()[-3000:]}" for p in sorted(self.tmp.glob("*.log")))
