"""Separate "machines" on one host: Linux network namespaces joined by veth pairs and a bridge.

Used by ``tests/integration/test_netns.py`` to run the coordinator and owner nodes each in its
own network stack with its own address, so that they reach one another only over a routed
interface (not loopback), as on separate hosts. Topology::

    switch namespace:  bridge br0 ── h0 ── h1 ── ... ── h<k>      (hub ends of the veth pairs)
    host namespace i:  eth0 = <subnet>.(i+1)/prefix, lo up          (the other end of pair i)

Only namespaces this object created are touched: the switch and hosts are named
``<prefix>-sw`` and ``<prefix>-<i>``, with a prefix unique to the process; the addresses live
inside those namespaces only (nothing is added to the host's own network stack), so the test
traffic never leaves them. :meth:`Lan.down` kills the processes started with
:meth:`Lan.popen` and deletes every namespace it made, also after a failure half-way through
:meth:`Lan.up`. :meth:`Lan.name` gives hosts names that resolve inside every namespace (an
``/etc/netns/<namespace>/hosts`` file, which ``ip netns exec`` mounts over ``/etc/hosts``), as
service names resolve in a container network. Needs root (``CAP_SYS_ADMIN``, ``CAP_NET_ADMIN``) and iproute2's ``ip``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

#: How long one ``ip`` command may take before it counts as hung (seconds).
IP_TIMEOUT = 20.0
#: Per-namespace files that ``ip netns exec`` mounts over ``/etc`` (iproute2's convention).
NETNS_ETC = "/etc/netns"
#: How long a process started in a namespace gets to exit after SIGTERM at teardown.
STOP_TIMEOUT = 10.0


@dataclass(frozen=True)
class Host:
    """One machine: a network namespace and its address on the LAN."""

    netns: str
    address: str


def unavailable_reason() -> str | None:
    """Why namespaces can't be built here (no ``ip``, not root, not permitted), or None if they can.

    Tries one: creates and deletes a namespace named ``pf<pid>-probe``.
    """
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed (apt-get install iproute2)"
    if os.geteuid() != 0:
        return "building network namespaces needs root"
    name = f"pf{os.getpid()}-probe"
    try:
        ip("netns", "add", name)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return f"this machine does not allow network namespaces: {exc}"
    try:
        ip("netns", "del", name)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return f"could not delete the probe namespace {name}: {exc}"
    return None


def ip(*args: str, netns: str | None = None) -> str:
    """Run ``ip [-n NETNS] ARGS`` and return its output; raise ``RuntimeError`` with its stderr."""
    cmd = ["ip", *(["-n", netns] if netns else []), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=IP_TIMEOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


class Lan:
    """``n_hosts`` namespaces on one switched LAN; a context manager (``up`` ... ``down``).

    Parameters
    ----------
    n_hosts : int
        Hosts (namespaces) on the LAN, at least 2; host i gets the (i+1)-th address of ``subnet``.
    subnet : str
        An IPv4 network with room for the hosts; only used inside the namespaces.
    prefix : str, optional
        Namespace name prefix; default ``pf<pid>``, unique to this process.
    """

    def __init__(self, n_hosts: int, *, subnet: str = "10.77.0.0/24", prefix: str | None = None):
        net = ipaddress.ip_network(subnet)
        if n_hosts < 2 or n_hosts > min(net.num_addresses - 2, 250):
            raise ValueError(f"n_hosts must be in [2, {min(net.num_addresses - 2, 250)}] for {subnet}, got {n_hosts}")
        self.prefix = prefix or f"pf{os.getpid()}"
        self.switch = f"{self.prefix}-sw"
        addresses = list(net.hosts())[:n_hosts]
        self.hosts = [Host(f"{self.prefix}-{i}", str(a)) for i, a in enumerate(addresses)]
        self._prefixlen = net.prefixlen
        self._made: list[str] = []
        self._procs: list[subprocess.Popen] = []
        self._names: dict[str, Host] = {}

    def up(self) -> list[Host]:
        """Create the switch, the hosts and their links; on any failure undo what was made."""
        try:
            self._add_netns(self.switch)
            ip("link", "add", "br0", "type", "bridge", netns=self.switch)
            ip("link", "set", "br0", "up", netns=self.switch)
            for i, host in enumerate(self.hosts):
                self._add_netns(host.netns)
                ip(
                    "link",
                    "add",
                    f"h{i}",
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "eth0",
                    "netns",
                    host.netns,
                    netns=self.switch,
                )
                ip("link", "set", f"h{i}", "master", "br0", netns=self.switch)
                ip("link", "set", f"h{i}", "up", netns=self.switch)
                ip("addr", "add", f"{host.address}/{self._prefixlen}", "dev", "eth0", netns=host.netns)
                ip("link", "set", "eth0", "up", netns=host.netns)
                ip("link", "set", "lo", "up", netns=host.netns)
        except BaseException:
            self.down()
            raise
        return self.hosts

    def _add_netns(self, name: str) -> None:
        ip("netns", "add", name)
        self._made.append(name)

    def name(self, names: dict[str, Host]) -> None:
        """Make each name resolve to its host's address inside every host namespace (from now on)."""
        self._names |= names
        lines = ["127.0.0.1 localhost", *(f"{h.address} {n}" for n, h in self._names.items())]
        for host in self.hosts:
            d = os.path.join(NETNS_ETC, host.netns)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "hosts"), "w") as f:
                f.write("\n".join(lines) + "\n")

    def popen(self, host: Host, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        """Start ``argv`` inside ``host``'s namespace (``ip netns exec``); stopped by :meth:`down`."""
        proc = subprocess.Popen(["ip", "netns", "exec", host.netns, *argv], **kwargs)
        self._procs.append(proc)
        return proc

    def down(self) -> None:
        """Stop the processes started here, then delete the namespaces made here (idempotent)."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        errors = []
        for host in self.hosts:
            shutil.rmtree(os.path.join(NETNS_ETC, host.netns), ignore_errors=True)
        if self._names:
            with contextlib.suppress(OSError):  # the directory, if nothing else is in it
                os.rmdir(NETNS_ETC)
        self._names.clear()
        for name in reversed(self._made):  # deleting a namespace destroys the interfaces in it
            try:
                ip("netns", "del", name)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                errors.append(str(exc))
        self._made.clear()
        if errors:
            raise RuntimeError("could not delete network namespace(s): " + "; ".join(errors))

    def __enter__(self) -> Lan:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()
