"""docker-compose.yml runs the long-lived stack (issue 26 item 5): a CA signer, a coordinator
service, three owner node daemons, and a one-shot submit of the demo job; every party enrols with
its own one-time token, and no service learns which node it is from a lock on a shared volume.

Checked offline: `docker-compose config -q` (Debian's docker-compose, from .ci/install-system-deps.sh),
who mounts which volume, the demo jobs against the owners' settings and policy, and the image.
Run for real: the services' exact commands (parsed by deploy/compose_env.py, volumes -> temporary
directories), each in a network namespace of its own where the service names resolve
(deploy/netns.py), as in a container network. Until `privfed serve`/`submit`/`owner --policy`
exist on this branch, the coordinator and owners run today's one-job commands after their real
enrolment step; with them, the stack runs unchanged and the submitted job must finish.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID
from stackkit import WAIT, Stack, one_job, option, private_keys, service_mode, tail, without_policy

from privfed.common.errors import ConfigError
from privfed.common.identity import owner_id
from privfed.common.ledger import Ledger
from privfed.deploy.cli import build_parser
from privfed.deploy.compose_env import ComposeProject, dockerfile_defaults, interpolate
from privfed.deploy.netns import Lan, unavailable_reason
from privfed.deploy.owner_entry import check_partition, owner_argv, slot_ranges
from privfed.deploy.simulation_config import SimulationConfig

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
OWNERS = ["owner-0", "owner-1", "owner-2"]
ENROLLING = {"coordinator": "coordinator", **{o: o for o in OWNERS}, "submit": "demo-user"}  # service -> party


def project(**overrides) -> ComposeProject:
    pytest.importorskip("yaml", reason="PyYAML (the `test` extra) parses docker-compose.yml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRIVFED_", "COMPOSE_"))}
    return ComposeProject(COMPOSE, env | overrides)


# ---- the file ----------------------------------------------------------------------------


def test_docker_compose_config_accepts_the_file():
    if not shutil.which("docker-compose"):
        pytest.skip("docker-compose is not installed (.ci/install-system-deps.sh installs Debian's docker-compose)")
    proc = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


def test_default_up_is_the_long_lived_stack_and_submits_the_demo_job():
    p = project()
    assert p.enabled() == ["certs", "ca-signer", "coordinator", *OWNERS, "submit"]
    restart = {n: s.get("restart") for n, s in p.services.items()}
    assert restart == {"certs": "no", "submit": "no"} | dict.fromkeys(
        ["ca-signer", "coordinator", *OWNERS], "unless-stopped"
    )
    coordinator = p.services["coordinator"]["command"]
    assert tail(coordinator)[:2] == ["privfed", "serve"]
    submit = tail(p.services["submit"]["command"])
    assert submit[:2] == ["privfed", "submit"] and submit[2] == "/jobs/ncc.toml"
    assert p.services["submit"]["depends_on"] == {"coordinator": {"condition": "service_healthy"}}
    # one service per node: node i from its own environment, never from a shared lock
    indices = [int(p.services[o]["environment"]["PRIVFED_NODE_INDEX"]) for o in OWNERS]
    assert indices == [0, 1, 2]
    for o in OWNERS:
        cmd = p.services[o]["command"]
        assert option(cmd, "--nodes") == "3" and "--slots" not in cmd and "--policy" in tail(cmd)
    assert "flock" not in COMPOSE.read_text().split("\nx-image")[1]


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
    # a fresh named volume takes its mount point's owner from the image: each must exist there
    made = set(re.search(r"mkdir -p ([^&]*)", text.replace("\\\n", " ")).group(1).split())
    p = project()
    targets = {t for s in p.services.values() for src, t, _ in p.volume_specs(s) if src and not src.startswith(".")}
    assert targets <= made, targets - made


def test_interpolation_follows_compose_rules():
    env = {"SET": "x", "EMPTY": ""}
    assert interpolate("${SET:-d} ${UNSET:-d} ${EMPTY:-d} ${EMPTY-d} ${UNSET-d}", env) == "x d d  d"
    assert interpolate("$SET-$$SET-${SET:+alt}-${EMPTY:+alt}-${EMPTY+alt}", env) == "x-$SET-alt--alt"
    with pytest.raises(ConfigError, match="UNSET"):
        interpolate("${UNSET:?give it}", env)


# ---- who mounts what ---------------------------------------------------------------------


def test_each_party_mounts_its_own_token_and_state_and_only_the_signer_the_ca():
    p = project()
    mounts = {n: p.volume_specs(s) for n, s in p.services.items()}
    users: dict[str, set[str]] = {}
    for name, specs in mounts.items():
        for source, _, _ in specs:
            users.setdefault(source, set()).add(name)
    assert users["pki"] == {"certs", "ca-signer"}  # the CA key: its maker and the signer, nobody else
    assert all(ro for s, _, ro in mounts["ca-signer"] if s == "pki")
    assert users["signer-state"] == {"ca-signer"}
    assert users["ca"] == set(p.services) - {"ca-signer"}
    assert all(ro for n, specs in mounts.items() if n != "certs" for s, _, ro in specs if s == "ca")
    for service, party in ENROLLING.items():
        assert users[f"token-{party}"] == {"certs", service}
        state = "submit-state" if service == "submit" else f"{service}-state"
        assert users[state] == {service}
        argv = p.services[service]["command"]
        own = {s: t for s, t, _ in mounts[service]}
        assert option(argv, "--token-file").startswith(own[f"token-{party}"] + "/")
        assert option(argv, "--tls-dir").startswith(own[state] + "/")
        assert all(ro for s, _, ro in mounts[service] if s == f"token-{party}")
    delivered = p.services["certs"]["command"]
    pairs = [delivered[i + 1 : i + 3] for i, a in enumerate(delivered) if a == "--deliver"]
    targets = {s: t for s, t, _ in mounts["certs"]}
    assert {name: path for name, path in pairs} == {party: targets[f"token-{party}"] for party in ENROLLING.values()}


def test_demo_jobs_are_jobs_the_owners_serve_and_their_policy_allows():
    p = project()
    owner = tail(p.services["owner-0"]["command"])
    policy = tomllib.loads((ROOT / "deploy" / "compose" / "policy.toml").read_text())
    jobs = sorted((ROOT / "deploy" / "compose" / "jobs").glob("*.toml"))
    assert [j.stem for j in jobs] == sorted(policy["tasks"]) == ["bdt", "feddpdr", "lr", "ncc"]
    for path in jobs:
        config = SimulationConfig.from_toml(path.read_text(), source=str(path))
        assert config.job.task == path.stem
        assert config.job.owners == int(option(owner, "--n-owners"))
        assert (config.job.dataset, config.job.seed) == (option(owner, "--dataset"), int(option(owner, "--seed")))
        assert config.epsilons == (1.0,) and 1.0 <= policy["max_epsilon_per_job"]
    assert "demo-user" in policy["data_users"]


def test_service_commands_parse_with_privfed_s_own_parser():
    if not service_mode():
        pytest.skip("`privfed serve`, `submit` and `owner --policy` come with the service mode (branch wt-service)")
    p = project()
    parser = build_parser()
    parser.parse_args(tail(p.services["coordinator"]["command"])[1:])
    parser.parse_args(tail(p.services["submit"]["command"])[1:])
    owner = p.services["owner-0"]["command"]
    parser.parse_args(owner_argv(0, range(0, 100), Path("/state/ledgers"), tail(owner), Path("/state/tls/owner-0")))


# ---- owner_entry ---------------------------------------------------------------------------


def test_owner_entry_sets_certs_itself_when_enrolling(tmp_path):
    cmd = [sys.executable, "-m", "privfed.deploy.owner_entry", "--nodes", "1", "--index", "0"]
    cmd += ["--ledger-dir", str(tmp_path), "--signer", "s:1", "--ca", "c", "--token-file", "t", "--tls-dir", "d"]
    proc = subprocess.run([*cmd, "--", "--certs", "/certs"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--certs: set by the entry point" in proc.stderr
    proc = subprocess.run(cmd[:9] + ["--signer", "s:1", "--", "--x"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "go together" in proc.stderr


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


# ---- the stack as processes, one network namespace per service ---------------------------------


def _today(inv, job: SimulationConfig) -> list[str]:
    """A service's command on a branch without the service mode: the same enrolment step, then
    today's one-job coordinator, an owner without a policy, or nothing (submit)."""
    if inv.service in OWNERS:
        return without_policy(inv.argv)
    enrol = inv.argv[: inv.argv.index("--") + 1]
    return [*enrol, *one_job(tail(inv.argv), job)] if inv.service == "coordinator" else enrol[:-1]


def _finished_reports(store: Path) -> list[Path]:
    """The service's job reports of jobs that ended (a running job's report says ``"status": "running"``)."""
    out = []
    for path in store.glob("*/report.json"):
        try:
            if json.loads(path.read_text()).get("status") != "running":
                out.append(path)
        except ValueError:  # written as it is read
            continue
    return out


@pytest.mark.slow
@pytest.mark.netns
def test_the_stack_runs_each_service_in_its_own_network(tmp_path):
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"network namespaces: {reason}")
    p = project()
    root = tmp_path / "compose"
    plan = {inv.service: inv for inv in p.invocations(root, map_addresses=False)}
    job_file = Path(tail(plan["submit"].argv)[2])
    job = SimulationConfig.from_toml(job_file.read_text(), source=str(job_file))
    full = service_mode()
    networked = [s for s in plan if s != "certs"]
    with Lan(len(networked), subnet="10.78.0.0/24") as lan:
        hosts = dict(zip(networked, lan.hosts))
        lan.name(hosts)
        stack = Stack(lan, hosts, tmp_path)
        assert stack.start("certs", plan["certs"].argv).wait(timeout=WAIT) == 0, stack.logs()
        stack.start("ca-signer", plan["ca-signer"].argv)
        coordinator = plan["coordinator"]
        stack.start("coordinator", coordinator.argv if full else _today(coordinator, job))
        for _ in range(WAIT):  # the coordinator's health check, from its own namespace (as Docker runs it)
            if (
                stack.check("coordinator", coordinator.healthcheck) == 0
                or stack.procs["coordinator"].poll() is not None
            ):
                break
            time.sleep(1)
        assert stack.check("coordinator", coordinator.healthcheck) == 0, stack.logs()
        for o in OWNERS:
            stack.start(o, plan[o].argv if full else _today(plan[o], job), env=plan[o].env)
        stack.start("submit", plan["submit"].argv if full else _today(plan["submit"], job))
        assert stack.wait("submit") == 0, stack.logs()
        store = root / "volumes" / "coordinator-state" / "store"
        if full:
            deadline = time.monotonic() + WAIT
            while not (reports := _finished_reports(store)) and time.monotonic() < deadline:  # the service writes
                time.sleep(1)  # a running job's report before each batch too
            assert all(stack.procs[s].poll() is None for s in ["ca-signer", "coordinator", *OWNERS]), stack.logs()
        else:
            assert [stack.wait(s) for s in ["coordinator", *OWNERS]] == [0] * 4, stack.logs()
            reports = list(store.glob("*/report.json"))
        assert reports, stack.logs()
        report = json.loads(reports[0].read_text())
        signer_log = stack.log("ca-signer")
    # lan.down() sent SIGTERM to whatever still ran
    print(f"\nsigner log:\n{signer_log}")
    assert report["transport"] == "grpc+mTLS" and report["config"]["task"] == job.job.task
    assert (report["owners"], report["lost_nodes"]) == (job.job.owners, [])
    # every party enrolled once, with its own token, over the network; nothing was refused
    assert sorted(re.findall(r"enroll: signed (\S+)", signer_log)) == sorted(ENROLLING.values())
    assert "refused" not in signer_log
    volumes = root / "volumes"
    for service, party in ENROLLING.items():
        state = volumes / ("submit-state" if service == "submit" else f"{service}-state")
        cert = x509.load_pem_x509_certificate((state / "tls" / party / f"{party}.pem").read_bytes())
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == party
        units = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)]
        assert units == (["data-user"] if service == "submit" else [])
        # what this service can reach: its own key only (and never the CA's)
        assert private_keys(host for _, host in p.mounts(service, root)) == {f"{party}-key.pem"}
    assert private_keys(host for _, host in p.mounts("ca-signer", root)) >= {"ca-key.pem"}
    # each node's ledger is on its own volume, debited for the owners it hosts, as the report says
    spent = {}
    argv = plan["owner-0"].argv
    budget = {
        "epsilon_budget": float(option(argv, "--epsilon-budget")),
        "delta_budget": float(option(argv, "--delta-budget")),
    }
    for i, hosted in enumerate(slot_ranges(job.job.owners, len(OWNERS))):
        with Ledger(volumes / f"owner-{i}-state" / "ledgers" / f"owner-{i}.sqlite", **budget) as led:
            spent |= {owner_id(f"owner-{i}", j): led.spent(owner_id(f"owner-{i}", j)).epsilon for j in hosted}
    assert spent == pytest.approx(report["epsilon_by_owner"], rel=1e-9)
    assert report["answered"] == job.job.owners
    assert all(e == pytest.approx(job.epsilons[0]) for e in spent.values())
    # a second `up`: nothing new is minted, and a node enrolled before starts without its signer or token
    again = subprocess.run(plan["certs"].argv, capture_output=True, text=True, timeout=WAIT)
    assert again.returncode == 0 and "nobody new" in again.stderr
    enrol = plan["owner-0"].argv
    (volumes / "token-owner-0" / "token").unlink()
    restart = subprocess.run(
        [sys.executable, "-m", "privfed.deploy.enroll", "request", "--signer", "127.0.0.1:9"]
        + ["--ca", option(enrol, "--ca"), "--name", "owner-0", "--token-file", option(enrol, "--token-file")]
        + ["--tls-dir", option(enrol, "--tls-dir"), "--timeout", "1"],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert restart.returncode == 0, restart.stderr
