"""docker-compose.yml can't drift from the CLI: its services' exact commands and environment
(parsed by deploy/compose_env.py, service hosts -> 127.0.0.1, exposed ports -> free local ports,
volumes -> temporary directories) run as real local processes and the federation completes.
Also: `docker-compose config -q` when the binary exists, the image definition, owner slots, and
key isolation: which volumes each service mounts, and which private keys it can reach in them."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from privfed.common.errors import ConfigError
from privfed.common.identity import owner_id
from privfed.common.ledger import Ledger
from privfed.deploy.certs import load_ca
from privfed.deploy.compose_env import ComposeProject, dockerfile_defaults, interpolate
from privfed.deploy.enroll import SOCKET, Refused, answer, enroll, init, sign
from privfed.deploy.owner_entry import check_partition, claim_slot, slot_ranges
from privfed.server.parameters import TASKS as TASK_CHOICES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
PROFILES = ["ncc", "lr", "bdt", "feddpdr"]
SCALE = {"PRIVFED_NODES": "2", "PRIVFED_OWNERS": "40", "PRIVFED_EPSILON": "2", "PRIVFED_BUDGET": "2"}
WAIT = 180  # seconds any one process may take before the test gives up on it


def project(**overrides) -> ComposeProject:
    pytest.importorskip("yaml", reason="PyYAML (the `test` extra) parses docker-compose.yml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRIVFED_", "COMPOSE_"))}
    return ComposeProject(COMPOSE, env | SCALE | overrides)


# ---- the file itself ---------------------------------------------------------------------


def _compose_binaries() -> list[list[str]]:
    found = []
    if shutil.which("docker-compose"):
        found.append(["docker-compose"])
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        found.append(["docker", "compose"])
    return found


@pytest.mark.parametrize("profile", [None, *PROFILES])
def test_docker_compose_config_accepts_the_file(profile):
    binaries = _compose_binaries()
    if not binaries:
        pytest.skip(
            "neither docker-compose nor `docker compose` is installed "
            "(.ci/install-system-deps.sh installs Debian's docker-compose)"
        )
    for binary in binaries:
        cmd = [*binary, "-f", str(COMPOSE), *(["--profile", profile] if profile else []), "config", "-q"]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stderr}"


def test_default_up_runs_the_ncc_demo_and_each_profile_one_task(tmp_path):
    p = project()
    assert p.enabled() == ["certs", "ca-signer", "coordinator", "owner"], ".env must set COMPOSE_PROFILES=ncc"
    for profile in PROFILES:
        names = p.enabled([profile])
        assert names[:2] == ["certs", "ca-signer"] and len(names) == 4, names
        coordinator = next(i for i in p.invocations(tmp_path, profiles=[profile]) if "coordinator" in i.argv)
        assert coordinator.argv[coordinator.argv.index("--task") + 1] == profile


def test_owner_replicas_and_certificates_follow_the_node_count():
    p = project(PRIVFED_NODES="5")
    assert p.replicas("owner") == 5
    signer = p.services["ca-signer"]["command"]
    assert signer[signer.index("--owners") + 1] == "5"
    assert p.services["owner"]["command"][p.services["owner"]["command"].index("--nodes") + 1] == "5"


def test_image_is_non_root_installs_every_package_and_has_a_healthcheck():
    text = DOCKERFILE.read_text()
    users = [line.split()[1] for line in text.splitlines() if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    package_dirs = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values()
    )
    copied = {line.split()[1] for line in text.splitlines() if line.startswith("COPY ")}
    assert {d.split("/")[0] for d in package_dirs} <= copied
    defaults = dockerfile_defaults(DOCKERFILE)
    assert defaults["healthcheck"][:3] == ["python", "-m", "privfed.deploy.healthcheck"]
    proc = subprocess.run([sys.executable, *defaults["healthcheck"][1:], "--help"], capture_output=True, timeout=60)
    assert proc.returncode == 0


def test_interpolation_follows_compose_rules():
    env = {"SET": "x", "EMPTY": ""}
    assert interpolate("${SET:-d} ${UNSET:-d} ${EMPTY:-d} ${EMPTY-d} ${UNSET-d}", env) == "x d d  d"
    assert interpolate("$SET-$$SET-${SET:+alt}-${EMPTY:+alt}-${EMPTY+alt}", env) == "x-$SET-alt--alt"
    with pytest.raises(ConfigError, match="UNSET"):
        interpolate("${UNSET:?give it}", env)


# ---- key isolation -------------------------------------------------------------------------


def _owner_services(p: ComposeProject) -> list[str]:
    return [n for n, s in p.services.items() if s.get("entrypoint", [None])[-1:] == ["privfed.deploy.owner_entry"]]


def _coordinator_services(p: ComposeProject) -> list[str]:
    return [n for n, s in p.services.items() if (s.get("command") or [None, None])[:2] == ["privfed", "coordinator"]]


def test_only_the_ca_services_mount_the_ca_and_each_role_only_its_own_keys():
    p = project()
    coordinators, owners = _coordinator_services(p), _owner_services(p)
    assert len(coordinators) == len(owners) == len(PROFILES)
    mounts = {n: p.volume_specs(s) for n, s in p.services.items()}
    users = {}
    for name, specs in mounts.items():
        for source, _, _ in specs:
            users.setdefault(source, set()).add(name)
    assert users["pki"] == {"certs", "ca-signer"}  # the CA key: nobody else
    assert users["coordinator-tls"] == {"certs", *coordinators}  # the coordinator's pair: its writer and itself
    assert all(ro for n in coordinators for s, _, ro in mounts[n] if s == "coordinator-tls")
    assert all(ro for s, _, ro in mounts["ca-signer"] if s == "pki")
    for name in owners:
        # named volumes shared by the replicas hold no key: ledgers, and the enrolment exchange
        # (CSRs, certificates, ca.pem); the key is made in an anonymous volume, one per container
        assert sorted(s or "" for s, _, _ in mounts[name]) == ["", "enroll", "ledgers"]
        tls = next(t for s, t, _ in mounts[name] if s is None)
        cmd = p.services[name]["command"]
        assert cmd[cmd.index("--tls-dir") + 1] == tls and "--certs" not in cmd
    for name in coordinators:
        assert sorted(s for s, _, _ in mounts[name]) == ["coordinator-tls", "runs"]


def _private_keys(dirs) -> set[str]:
    """Names of the files holding a private key under ``dirs``, wherever they are."""
    found = set()
    for d in dirs:
        for f in Path(d).rglob("*"):
            if f.is_file() and not f.is_symlink() and b"PRIVATE KEY" in f.read_bytes():
                found.add(f.name)
    return found


def assert_each_service_reaches_only_its_own_keys(p: ComposeProject, root: Path, plan, slots: dict[str, int]):
    """After a run: the private keys under each replica's mounts are exactly its own."""
    for inv in plan:
        reach = _private_keys(host for _, host in p.mounts(inv.service, root, inv.replica))
        if inv.service == "certs":
            expected = {"ca-key.pem", "coordinator-key.pem"}
        elif inv.service == "ca-signer":
            expected = {"ca-key.pem"}
        elif inv.service in _coordinator_services(p):
            expected = {"coordinator-key.pem"}
        else:
            expected = {f"owner-{slots[inv.name]}-key.pem"}
        assert reach == expected, (inv.name, reach)


def test_enrolment_gives_each_owner_a_certificate_for_its_own_key(tmp_path):
    pki, coord, exchange, tls = (tmp_path / d for d in ("pki", "coordinator-tls", "enroll", "tls"))
    slots = exchange / "slots"
    init(pki, coord, exchange, sans=["coordinator-lr"])
    ca = (pki / "ca" / "ca.pem").read_bytes()
    assert sorted(p.name for p in coord.iterdir()) == ["ca.pem", "coordinator-key.pem", "coordinator.pem"]
    assert not (pki / "coordinator").exists() and _private_keys([exchange]) == set()
    signer = threading.Thread(target=sign, args=(pki, exchange, slots, 2), kwargs={"timeout": 60})
    signer.start()
    claims = [claim_slot(slots, 2) for _ in range(2)]
    try:
        dirs = [enroll(exchange, tls, f"owner-{i}", fd, timeout=60) for i, fd in reversed(claims)]
    finally:
        for _, fd in claims:
            os.close(fd)
    signer.join(60)
    assert not signer.is_alive()  # exits once every slot is signed
    for d, i in zip(dirs, (1, 0)):
        assert sorted(f.name for f in d.iterdir()) == ["ca.pem", f"owner-{i}-key.pem", f"owner-{i}.pem"]
        assert (d / "ca.pem").read_bytes() == ca and oct(os.stat(d / f"owner-{i}-key.pem").st_mode & 0o777) == "0o600"
        leaf = x509.load_pem_x509_certificate((d / f"owner-{i}.pem").read_bytes())
        leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(ca))
        assert leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == f"owner-{i}"
    assert _private_keys([exchange, pki]) == {"ca-key.pem"}
    # a second `up`: the CA and coordinator pair are kept, the exchange is reset
    before = (coord / "coordinator-key.pem").read_bytes()
    init(pki, coord, exchange, sans=["coordinator-lr"])
    assert (coord / "coordinator-key.pem").read_bytes() == before and (pki / "ca" / "ca.pem").read_bytes() == ca
    assert not (exchange / SOCKET).exists()


def test_signer_refuses_a_bad_request_and_names_the_slots_it_waited_for(tmp_path):
    pki, exchange = tmp_path / "pki", tmp_path / "enroll"
    init(pki, tmp_path / "coordinator-tls", exchange)
    with pytest.raises(ConfigError, match="owner-1"):
        sign(pki, exchange, exchange / "slots", 2, timeout=0.0)
    slot, lock = claim_slot(exchange / "slots", 1)
    key = ec.generate_private_key(ec.SECP384R1())  # not the federation's curve
    csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([])).sign(key, hashes.SHA256())
    client, server = socket.socketpair(socket.AF_UNIX)
    with client, server:
        socket.send_fds(client, [csr.public_bytes(serialization.Encoding.PEM)], [lock])
        client.shutdown(socket.SHUT_WR)
        done: set[str] = set()
        with pytest.raises(Refused, match="P-256"):
            answer(server, load_ca(pki), exchange / "slots", 1, done)
        assert client.recv(4096).startswith(b"refused: not a self-signed ECDSA P-256") and done == set()
    os.close(lock)


def test_owner_entry_sets_certs_itself_when_enrolling(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "privfed.deploy.owner_entry",
            "--nodes",
            "1",
            "--slots",
            str(tmp_path / "s"),
            "--ledger-dir",
            str(tmp_path),
            "--enroll",
            str(tmp_path / "e"),
            "--tls-dir",
            str(tmp_path / "t"),
            "--",
            "--certs",
            "/certs",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--certs: set by the entry point" in proc.stderr


# ---- owner slots -------------------------------------------------------------------------


def test_each_replica_claims_its_own_slot_and_a_freed_slot_is_reused(tmp_path):
    first, second = claim_slot(tmp_path, 2), claim_slot(tmp_path, 2)
    assert (first[0], second[0]) == (0, 1)
    with pytest.raises(ConfigError, match="all 2 owner slots"):
        claim_slot(tmp_path, 2)
    os.close(first[1])  # the container holding slot 0 stopped
    again = claim_slot(tmp_path, 2)
    assert again[0] == 0
    os.close(again[1])
    os.close(second[1])


def test_slot_ranges_partition_every_owner_once():
    ranges = slot_ranges(40, 3)
    assert [i for r in ranges for i in r] == list(range(40))
    with pytest.raises(ConfigError):
        slot_ranges(2, 3)


def test_ledgers_refuse_another_partition(tmp_path):
    check_partition(tmp_path, {"nodes": 2, "n_owners": 40})
    check_partition(tmp_path, {"nodes": 2, "n_owners": 40})  # a restart with the same settings
    with pytest.raises(ConfigError, match="nodes: 2 -> 3"):
        check_partition(tmp_path, {"nodes": 3, "n_owners": 40})


# ---- the services as processes -------------------------------------------------------------


def _coordinator_has_client_usage(certs: Path) -> bool:
    cert = x509.load_pem_x509_certificate((certs / "coordinator.pem").read_bytes())
    return ExtendedKeyUsageOID.CLIENT_AUTH in cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value


class Services:
    """Starts invocations in order, honouring depends_on conditions, and cleans up."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.procs: dict[str, subprocess.Popen] = {}
        self.health: dict[str, int] = {}

    def start(self, inv) -> subprocess.Popen:
        log = open(self.tmp / f"{inv.name}.log", "w")
        cwd = self.tmp / "cwd" / inv.name
        cwd.mkdir(parents=True)
        proc = subprocess.Popen(
            inv.argv,
            env=os.environ | {"PYTHONUNBUFFERED": "1"} | inv.env,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs[inv.name] = proc
        return proc

    def healthy(self, inv, attempts: int = 20) -> int:
        """Run the service's health check until it passes (as `docker compose` would)."""
        code = 1
        for _ in range(attempts):
            code = subprocess.run(inv.healthcheck, capture_output=True, timeout=60).returncode
            if code == 0 or self.procs[inv.name].poll() is not None:
                break
            time.sleep(0.5)
        return code

    def wait(self, name: str) -> int:
        return self.procs[name].wait(timeout=WAIT)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.tmp.glob("*.log")))

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILES)
def test_compose_services_run_the_federation_as_processes(tmp_path, profile):
    p = project()
    plan = p.invocations(tmp_path, profiles=[profile])
    coordinator = next(i for i in plan if i.healthcheck is not None)
    task = coordinator.argv[coordinator.argv.index("--task") + 1]
    if task not in TASK_CHOICES:
        pytest.skip(f"profile {profile}: `privfed coordinator --task {task}` is not in the CLI yet")
    services, health = Services(tmp_path), None
    try:
        for inv in plan:
            for dep, condition in inv.depends_on.items():
                if condition == "service_completed_successfully":
                    assert all(services.wait(n) == 0 for n in services.procs if n.startswith(f"{dep}-")), (
                        services.logs()
                    )
            services.start(inv)
            if inv is coordinator:  # check health before any owner exists: the job can't finish first
                usable = _coordinator_has_client_usage(Path(inv.argv[inv.argv.index("--certs") + 1]))
                health = services.healthy(inv, attempts=20 if usable else 1)
        codes = {coordinator.name: services.wait(coordinator.name)}
        if codes[coordinator.name] == 0:  # else the owners would only wait out --connect-timeout
            codes |= {name: services.wait(name) for name in services.procs}
    finally:
        services.close()
    owners = [i for i in plan if "privfed.deploy.owner_entry" in i.argv]
    assert len(owners) == int(SCALE["PRIVFED_NODES"])  # deploy.replicas
    assert set(codes.values()) == {0}, f"{codes}\n{services.logs()}"
    volumes = tmp_path / "volumes"
    report = json.loads(next((volumes / "runs").glob("*/report.json")).read_text())
    n = int(SCALE["PRIVFED_OWNERS"])
    assert report["transport"] == "grpc+mTLS" and report["config"]["task"] == task
    assert (report["owners"], report["lost_nodes"]) == (n, [])
    # Each slot's ledger holds its own share of the logical owners, and what every owner debited
    # is exactly what the coordinator says it received from that owner.
    argv = owners[0].argv
    budgets = {
        "epsilon_budget": float(argv[argv.index("--epsilon-budget") + 1]),
        "delta_budget": float(argv[argv.index("--delta-budget") + 1]) if "--delta-budget" in argv else 0.0,
    }
    spent = {}
    for i, hosted in enumerate(slot_ranges(n, len(owners))):
        with Ledger(volumes / "ledgers" / f"owner-{i}.sqlite", **budgets) as led:
            spent |= {owner_id(f"owner-{i}", j): led.spent(owner_id(f"owner-{i}", j)).epsilon for j in hosted}
    assert spent == pytest.approx(report["epsilon_by_owner"], rel=1e-9)
    assert report["answered"] == sum(e > 0 for e in spent.values()) > 0
    slots = {
        o.name: int(re.search(r"owner_entry: slot (\d+) of", (tmp_path / f"{o.name}.log").read_text()).group(1))
        for o in owners
    }
    assert sorted(slots.values()) == list(range(len(owners)))
    assert_each_service_reaches_only_its_own_keys(p, tmp_path, plan, slots)
    if task != "bdt":  # boosting asks only the owners in its rounds' groups
        assert report["answered"] == n
        assert all(e == pytest.approx(float(SCALE["PRIVFED_EPSILON"])) for e in spent.values())
    if health != 0:
        if not usable:
            pytest.xfail(
                "health check needs a coordinator certificate with the clientAuth usage "
                "(deploy/certs.py change requested)"
            )
        pytest.fail(f"the coordinator's health check never passed\n{services.logs()}")
