"""Coordinator and owner nodes on separate "machines": one network namespace each, joined by
veth pairs on a bridge (deploy/netns.py), addresses 10.77.0.0/24 that exist only inside those
namespaces. mTLS with certificates whose SANs carry the coordinator's address.

Each namespace is a fresh network stack, so the coordinator's fixed port is free there by
construction; nothing listens on or dials the host's own interfaces.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from privfed.common.ledger import Ledger
from privfed.deploy.netns import Lan, unavailable_reason
from privfed.owner.data import owner_id

pytestmark = [pytest.mark.slow, pytest.mark.netns]

_REASON = unavailable_reason()
if _REASON:
    pytest.skip(f"network namespace tests skipped: {_REASON}", allow_module_level=True)

PORT = 50051
N_OWNERS = 40
EPSILON = 2.0
DATASET = ["--dataset", "synthetic", "--n-samples", "600", "--seed", "3", "--test-fraction", "0.25"]
CLI = [sys.executable, "-m", "privfed.deploy.cli"]
WAIT = 120  # seconds a process may take before the test gives up on it


def make_certs(out: Path, *sans: str) -> Path:
    cmd = [*CLI, "certs", "--out", str(out), "--owners", "2"] + [a for s in sans for a in ("--san", s)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=WAIT)
    return out


def coordinator(lan: Lan, host, certs: Path, tmp: Path) -> subprocess.Popen:
    log = open(tmp / "coordinator.log", "w")
    return lan.popen(
        host,
        [
            *CLI,
            "coordinator",
            "--listen",
            f"{host.address}:{PORT}",
            "--certs",
            str(certs),
            "--owners",
            str(N_OWNERS),
            "--epsilon",
            str(EPSILON),
            "--task",
            "ncc",
            *DATASET,
            "--out",
            str(tmp / "runs"),
            "--register-timeout",
            "60",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def owner(
    lan: Lan, host, index: int, shards: str, coordinator_address: str, certs: Path, tmp: Path, connect_timeout: int = 60
) -> subprocess.Popen:
    log = open(tmp / f"owner-{index}.log", "w")
    return lan.popen(
        host,
        [
            *CLI,
            "owner",
            "--coordinator",
            f"{coordinator_address}:{PORT}",
            "--name",
            f"owner-{index}",
            "--certs",
            str(certs),
            "--n-owners",
            str(N_OWNERS),
            "--shards",
            shards,
            "--ledger",
            str(tmp / f"owner-{index}.sqlite"),
            "--epsilon-budget",
            str(EPSILON),
            "--rng",
            "seeded",
            "--connect-timeout",
            str(connect_timeout),
            *DATASET,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def logs(tmp: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(tmp.glob("*.log")))


def test_federation_across_namespaces_over_mtls(tmp_path):
    certs = make_certs(tmp_path / "certs", "10.77.0.1")
    with Lan(3, subnet="10.77.0.0/24") as lan:
        coord_host, host_a, host_b = lan.hosts
        assert coord_host.address == "10.77.0.1"
        coord = coordinator(lan, coord_host, certs, tmp_path)
        owners = [
            owner(lan, host_a, 0, "0:20", coord_host.address, certs, tmp_path),
            owner(lan, host_b, 1, "20:40", coord_host.address, certs, tmp_path),
        ]
        codes = [p.wait(timeout=WAIT) for p in [coord, *owners]]
    assert codes == [0, 0, 0], logs(tmp_path)
    report = json.loads(next((tmp_path / "runs").glob("*/report.json")).read_text())
    assert report["transport"] == "grpc+mTLS"
    assert (report["owners"], report["answered"], report["lost_nodes"]) == (N_OWNERS, N_OWNERS, [])
    # Each node's ledger debited exactly its own logical owners, once.
    for index, hosted in ((0, range(0, 20)), (1, range(20, 40))):
        with Ledger(tmp_path / f"owner-{index}.sqlite", epsilon_budget=EPSILON) as ledger:
            assert [ledger.spent(owner_id(f"owner-{index}", i)).epsilon for i in hosted] == [EPSILON] * len(hosted)


def test_owner_refuses_a_coordinator_whose_certificate_lacks_its_address(tmp_path):
    """Positive control for the SAN: same CA, but the coordinator's certificate doesn't name
    10.77.0.1, so the owner's TLS check fails and it gives up with an error (exit 2)."""
    certs = make_certs(tmp_path / "certs")  # no --san 10.77.0.1
    with Lan(2, subnet="10.77.0.0/24") as lan:
        coord_host, host_a = lan.hosts
        coord = coordinator(lan, coord_host, certs, tmp_path)
        node = owner(lan, host_a, 0, "0:20", coord_host.address, certs, tmp_path, connect_timeout=5)
        code = node.wait(timeout=WAIT)
        assert coord.poll() is None  # still waiting for owners: nobody got through
    assert code == 2, logs(tmp_path)
    assert "unreachable" in (tmp_path / "owner-0.log").read_text()
