"""deploy/k8s (issue 26 item 4), offline: the kustomization renders (deploy/kustomize.py; where
kubectl is installed, `kubectl kustomize` must render the same objects), every object validates
against the Kubernetes schemas (the kubernetes-validate package ships them), and the manifests
keep their promises: no pod but the signer mounts the CA key, each pod makes its own key on a
volume of its own and is the only one given its token, owner nodes reach nothing but the
coordinator's and signer's ports (and DNS), a PodDisruptionBudget covers the owners, probes are
the gRPC health check, and every container's command parses with privfed's own parsers.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stackkit import WAIT, Stack, one_job, option, private_keys, service_mode, without_policy

from privfed.deploy import enroll
from privfed.deploy.cli import build_parser, main
from privfed.deploy.kustomize import containers, pod_spec, render
from privfed.deploy.netns import Lan, unavailable_reason
from privfed.deploy.owner_entry import _parse as parse_owner_entry
from privfed.deploy.owner_entry import owner_argv
from privfed.deploy.signer import PORT as SIGNER_PORT
from privfed.deploy.simulation_config import SimulationConfig

yaml = pytest.importorskip("yaml", reason="PyYAML (the `test` extra) reads the manifests")

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "k8s" / "base"
OVERLAYS = sorted((ROOT / "deploy" / "k8s" / "overlays").iterdir())
#: The oldest Kubernetes the manifests are for (the apps.kubernetes.io/pod-index label, 1.28).
OLDEST = "1.28.0"
HEALTHCHECK = ["python", "-m", "privfed.deploy.healthcheck"]


def _key(obj: dict) -> tuple:
    return obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"]


@pytest.fixture(scope="module")
def objects() -> dict[tuple, dict]:
    rendered = render(BASE)
    assert len({_key(o) for o in rendered}) == len(rendered), "two objects with one name"
    return {_key(o): o for o in rendered}


def _one(objects, kind: str, name: str) -> dict:
    (obj,) = [o for (_, k, _, n), o in objects.items() if (k, n) == (kind, name)]
    return obj


def _kinds(objects) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, kind, _, _ in objects:
        out[kind] = out.get(kind, 0) + 1
    return out


@pytest.mark.parametrize("directory", [BASE, *OVERLAYS], ids=lambda d: d.name)
def test_manifests_validate_against_the_kubernetes_schemas(directory):
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (the `test` extra)")
    for version in (OLDEST, kv.latest_version()):
        for obj in render(directory):
            kv.validate(obj, version, strict=True)


@pytest.mark.parametrize("directory", [BASE, *OVERLAYS], ids=lambda d: d.name)
def test_kubectl_kustomize_renders_the_same_objects(directory):
    if not shutil.which("kubectl"):
        pytest.skip("kubectl is not installed; deploy/kustomize.py renders alone")
    proc = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    theirs = {_key(o): o for o in yaml.safe_load_all(proc.stdout) if o}
    assert theirs == {_key(o): o for o in render(directory)}


def test_the_fleet_has_its_parts(objects):
    assert _kinds(objects) == {
        "Namespace": 1,
        "ConfigMap": 2,
        "Deployment": 2,
        "StatefulSet": 1,
        "Service": 3,
        "PersistentVolumeClaim": 2,
        "PodDisruptionBudget": 1,
        "NetworkPolicy": 4,
    }
    owners = _one(objects, "StatefulSet", "privfed-owner")
    federation = _one(objects, "ConfigMap", "privfed-federation")["data"]
    assert owners["spec"]["replicas"] == int(federation["PRIVFED_NODES"])
    pdb = _one(objects, "PodDisruptionBudget", "privfed-owner")["spec"]
    labels = owners["spec"]["template"]["metadata"]["labels"]
    assert pdb["selector"]["matchLabels"].items() <= labels.items() and pdb["maxUnavailable"] == 1
    for name, port in (("privfed-coordinator", 50051), ("privfed-signer", SIGNER_PORT)):
        service = _one(objects, "Service", name)["spec"]
        pods = _one(objects, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
        assert service["selector"].items() <= pods.items() and [p["port"] for p in service["ports"]] == [port]


# ---- keys and tokens ---------------------------------------------------------------------


def _volumes(obj: dict) -> dict[str, dict]:
    return {v["name"]: v for v in pod_spec(obj).get("volumes", [])}


def _workloads(objects) -> list[dict]:
    return [o for o in objects.values() if pod_spec(o) is not None]


def _secrets(volume: dict) -> set[str]:
    sources = [volume] + [s for s in volume.get("projected", {}).get("sources", [])]
    return {s["secret"]["secretName"] for s in sources if "secret" in s}


def test_no_pod_but_the_signer_mounts_the_ca_key(objects):
    holders = set()
    for obj in _workloads(objects):
        for volume in _volumes(obj).values():
            assert "hostPath" not in volume, f"{obj['metadata']['name']} mounts a host path"
            if "privfed-signer-ca" in _secrets(volume):
                holders.add(obj["metadata"]["name"])
        for c in containers(obj):
            assert not any("secretKeyRef" in e.get("valueFrom", {}) for e in c.get("env", []))
            assert not any("secretRef" in e for e in c.get("envFrom", []))
    assert holders == {"privfed-signer"}
    signer = _one(objects, "Deployment", "privfed-signer")
    ca = _volumes(signer)["ca"]["secret"]
    assert signer["spec"]["replicas"] == 1 and {i["key"] for i in ca["items"]} == {
        "ca.pem",
        "ca-key.pem",
        "tokens.json",
    }


def _mounted(container: dict, volume: str) -> str | None:
    return next((m["mountPath"] for m in container.get("volumeMounts", []) if m["name"] == volume), None)


def _state_volume(obj: dict) -> str:
    """The volume holding the pod's key: its own claim (one per pod, or a Deployment of one)."""
    if obj["kind"] == "StatefulSet":
        (template,) = obj["spec"]["volumeClaimTemplates"]
        return template["metadata"]["name"]
    claims = [n for n, v in _volumes(obj).items() if "persistentVolumeClaim" in v]
    assert len(claims) == 1 and obj["spec"]["replicas"] == 1 and obj["spec"]["strategy"]["type"] == "Recreate"
    return claims[0]


def test_each_pod_makes_its_own_key_and_only_it_gets_its_token(objects):
    claims = [
        v["persistentVolumeClaim"]["claimName"]
        for o in _workloads(objects)
        for v in _volumes(o).values()
        if "persistentVolumeClaim" in v
    ]
    assert len(claims) == len(set(claims)), "two workloads share a volume"
    tokens = {}
    for obj in (_one(objects, "Deployment", "privfed-coordinator"), _one(objects, "StatefulSet", "privfed-owner")):
        name = obj["metadata"]["name"]
        state = _state_volume(obj)
        (init,) = pod_spec(obj)["initContainers"]
        argv = init["command"] + init["args"]
        assert argv[:4] == ["python", "-m", "privfed.deploy.enroll", "request"]
        token_volumes = [n for n, v in _volumes(obj).items() if _secrets(v)]
        assert len(token_volumes) == 1
        (token,) = token_volumes
        tokens[name] = _secrets(_volumes(obj)[token])
        # the token only in the enrolment step; the key made under the pod's own volume
        assert _option(argv, "--token-file").startswith(_mounted(init, token) + "/")
        assert _option(argv, "--tls-dir").startswith(_mounted(init, state) + "/")
        for c in pod_spec(obj)["containers"]:
            assert _mounted(c, token) is None, f"{name}: {c['name']} mounts the token"
            certs = _option(c["args"], "--certs")
            assert certs == f"{_option(argv, '--tls-dir')}/{_option(argv, '--name')}"
    assert tokens == {"privfed-coordinator": {"privfed-coordinator-token"}, "privfed-owner": {"privfed-owner-tokens"}}


def test_tokens_from_privfed_certs_fit_the_secrets_the_pods_read(objects, tmp_path, capsys):
    assert main(["certs", "--out", str(tmp_path), "--tokens", "3"]) == 0
    signer = _volumes(_one(objects, "Deployment", "privfed-signer"))["ca"]["secret"]
    assert {i["key"] for i in signer["items"]} <= {f.name for f in (tmp_path / "ca").iterdir()}
    # `kubectl create secret generic NAME --from-file=DIR/tokens/<role>`: one key per file
    assert sorted(f.name for f in (tmp_path / "tokens" / "owner").iterdir()) == ["owner-0", "owner-1", "owner-2"]
    assert [f.name for f in (tmp_path / "tokens" / "coordinator").iterdir()] == ["coordinator"]
    coordinator = _one(objects, "Deployment", "privfed-coordinator")
    (init,) = pod_spec(coordinator)["initContainers"]
    assert Path(_option(init["args"], "--token-file")).name == "coordinator"
    owner = _expanded(_one(objects, "StatefulSet", "privfed-owner"), objects, 2)["enrol"]
    assert Path(_option(owner, "--token-file")).name == "owner-2" and _option(owner, "--name") == "owner-2"


# ---- network, probes, commands -----------------------------------------------------------


def _selects(policy: dict, component: str) -> bool:
    labels = policy["spec"]["podSelector"].get("matchLabels", {})
    return labels in ({}, {"app.kubernetes.io/component": component})


def test_owners_reach_only_the_coordinator_and_signer_ports(objects):
    policies = [o for o in objects.values() if o["kind"] == "NetworkPolicy"]
    deny = [p for p in policies if p["spec"]["podSelector"] == {}]
    assert len(deny) == 1 and set(deny[0]["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert not deny[0]["spec"].get("ingress") and not deny[0]["spec"].get("egress")
    allowed = set()
    for policy in policies:
        if not _selects(policy, "owner") or policy in deny:
            continue
        assert not policy["spec"].get("ingress"), "owner nodes accept no connection"
        for rule in policy["spec"].get("egress", []):
            peers = {
                p.get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/component")
                or p.get("podSelector", {}).get("matchLabels", {}).get("k8s-app")
                for p in rule["to"]
            }
            allowed |= {(peer, port["port"]) for peer in peers for port in rule["ports"]}
    assert allowed == {("coordinator", 50051), ("signer", SIGNER_PORT), ("kube-dns", 53)}
    signer = next(p for p in policies if _selects(p, "signer") and p not in deny)
    assert not signer["spec"].get("egress") and "Egress" in signer["spec"]["policyTypes"]


def test_probes_are_the_grpc_health_check_with_the_pod_s_own_certificate(objects):
    coordinator = _expanded(_one(objects, "Deployment", "privfed-coordinator"), objects, 0)
    owner = _expanded(_one(objects, "StatefulSet", "privfed-owner"), objects, 1)
    (main_c,) = pod_spec(_one(objects, "Deployment", "privfed-coordinator"))["containers"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert main_c[probe]["exec"]["command"] == HEALTHCHECK
    (owner_c,) = pod_spec(_one(objects, "StatefulSet", "privfed-owner"))["containers"]
    assert owner_c["readinessProbe"]["exec"]["command"] == HEALTHCHECK
    # the check's defaults come from the environment: each presents its own certificate
    env = coordinator["env:coordinator"]
    assert (
        env["PRIVFED_CERTS"] == _option(coordinator["coordinator"], "--certs")
        and env["PRIVFED_HEALTH_NAME"] == "coordinator"
    )
    assert env["PRIVFED_HEALTH_TARGET"].endswith(":50051")
    env = owner["env:owner"]
    assert env["PRIVFED_CERTS"] == _option(owner["owner"], "--certs") and env["PRIVFED_HEALTH_NAME"] == "owner-1"
    assert env["PRIVFED_HEALTH_TARGET"] == _option(owner["owner"], "--coordinator")
    # the coordinator's certificate carries the name owners dial it by
    signer = pod_spec(_one(objects, "Deployment", "privfed-signer"))["containers"][0]["args"]
    sans = [signer[i + 1] for i, a in enumerate(signer) if a == "--coordinator-san"]
    assert _option(owner["owner"], "--coordinator").split(":")[0] in sans
    assert _option(owner["enrol"], "--signer").split(":")[0] in [
        signer[i + 1] for i, a in enumerate(signer) if a == "--san"
    ]


def test_every_pod_runs_restricted(objects):
    for obj in _workloads(objects):
        spec = pod_spec(obj)
        assert spec["automountServiceAccountToken"] is False and spec["securityContext"]["runAsNonRoot"] is True
        for c in containers(obj):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]


def _option(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def _expanded(obj: dict, objects, ordinal: int) -> dict[str, object]:
    """Each container's argv (and environment, as ``env:<name>``) as the kubelet runs them in pod ``ordinal``:
    ``$(VAR)`` from the ConfigMaps and env, the pod-index label from the ordinal."""
    out: dict[str, object] = {}
    for c in containers(obj):
        env: dict[str, str] = {}
        for source in c.get("envFrom", []):
            env |= _one(objects, "ConfigMap", source["configMapRef"]["name"])["data"]
        for e in c.get("env", []):
            if "valueFrom" in e:
                assert e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['apps.kubernetes.io/pod-index']"
                env[e["name"]] = str(ordinal)
            else:
                env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], e["value"])
        argv = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in c["command"] + c.get("args", [])]
        out[c["name"]], out[f"env:{c['name']}"] = argv, env
    return out


def test_every_container_command_parses_with_privfed_s_parsers(objects):
    service_mode = {"serve", "submit"} <= set(next(a for a in build_parser()._actions if a.dest == "command").choices)
    checked = 0
    for obj in _workloads(objects):
        for name, argv in _expanded(obj, objects, 1).items():
            if name.startswith("env:"):
                continue
            if argv[:3] == ["python", "-m", "privfed.deploy.enroll"]:
                enroll._parser().parse_args(argv[3:])
            elif argv[:3] == ["python", "-m", "privfed.deploy.owner_entry"]:
                args, rest = parse_owner_entry(argv[3:])
                assert args.index == 1 and args.nodes == 3
                if service_mode:
                    build_parser().parse_args(owner_argv(1, range(1), args.ledger_dir, rest))
            elif argv[0] == "privfed":
                assert argv[1] == "serve"
                if service_mode:
                    build_parser().parse_args(argv[1:])
            else:
                pytest.fail(f"{obj['metadata']['name']}: unexpected command {argv}")
            checked += 1
    assert checked == 5  # signer; coordinator enrol + serve; owner enrol + daemon


# ---- the pods' commands as processes, one network namespace per pod ----------------------------


def _materialise(obj: dict, pod: str, objects, secrets: dict[str, Path], root: Path) -> Path:
    """The pod's volumes laid out under ``root/<pod>`` at their mount paths (the container's file
    system, as far as privfed's commands see it): Secrets and ConfigMaps as the kubelet writes them
    (one file per key, or the ``items``), claims and emptyDirs empty. Returns that root."""
    fs = root / pod
    claims = {t["metadata"]["name"] for t in obj["spec"].get("volumeClaimTemplates", [])}
    volumes = _volumes(obj)
    for name in {m["name"] for c in containers(obj) for m in c.get("volumeMounts", [])}:
        volume = volumes.get(name) if name not in claims else {}
        paths = {m["mountPath"] for c in containers(obj) for m in c.get("volumeMounts", []) if m["name"] == name}
        for path in paths:  # one directory per volume: a second mount of it is the same files
            d = fs / path.lstrip("/")
            d.mkdir(parents=True, exist_ok=True)
            source = volume.get("secret") or volume.get("configMap")
            if source is None:
                continue
            key = source.get("secretName") or source["name"]
            if key in secrets:
                files = {f.name: f.read_bytes() for f in secrets[key].iterdir()}
            else:
                files = {k: v.encode() for k, v in _one(objects, "ConfigMap", key)["data"].items()}
            for item in source.get("items") or [{"key": k, "path": k} for k in files]:
                (d / item["path"]).write_bytes(files[item["key"]])
    return fs


def _in_pod(values: list[str], fs: Path, mounts: set[str]) -> list[str]:
    """Container paths in ``values`` (at, below or above a mount path) as paths under the pod's root ``fs``."""

    def inside(v: str) -> bool:
        return any(v == m or v.startswith(m + "/") or m.startswith(v.rstrip("/") + "/") for m in mounts)

    return [str(fs) + v if v.startswith("/") and inside(v) else v for v in values]


def _readme_secrets(tmp_path: Path) -> dict[str, Path]:
    """`privfed certs --tokens 3`, and the Secrets and ConfigMap the README's kubectl lines make
    of it (name -> a directory with one file per key)."""
    pki = tmp_path / "pki"
    assert main(["certs", "--out", str(pki), "--tokens", "3"]) == 0
    (tmp_path / "ca-configmap").mkdir()
    shutil.copy(pki / "ca" / "ca.pem", tmp_path / "ca-configmap")
    return {
        "privfed-signer-ca": pki / "ca",
        "privfed-coordinator-token": pki / "tokens" / "coordinator",
        "privfed-owner-tokens": pki / "tokens" / "owner",
        "privfed-ca": tmp_path / "ca-configmap",
    }


class Pods:
    """The pods' containers as the kubelet would start them here: (argv, environment, container)
    by pod and container name. Without the service mode, the coordinator runs ``job`` once and
    owners run without a policy (``stackkit``)."""

    EXE = {"python": [sys.executable], "privfed": [sys.executable, "-m", "privfed.deploy.cli"]}

    def __init__(self, objects, workloads: dict[str, tuple[dict, int]], tmp_path: Path, job: SimulationConfig):
        secrets = _readme_secrets(tmp_path)
        self.job, self.full, self.pods = job, service_mode(), {}
        for pod, (obj, ordinal) in workloads.items():
            fs = _materialise(obj, pod, objects, secrets, tmp_path / "pods")
            expanded = _expanded(obj, objects, ordinal)
            self.pods[pod] = {}
            for c in containers(obj):
                env, mounts = expanded[f"env:{c['name']}"], {m["mountPath"] for m in c.get("volumeMounts", [])}
                cmd = _in_pod(expanded[c["name"]], fs, mounts)
                # nothing outside the test's directory: a path no volume stands for would be the host's own
                assert all(a.startswith(str(tmp_path)) for a in cmd if a.startswith("/")), cmd
                self.pods[pod][c["name"]] = (cmd, dict(zip(env, _in_pod(list(env.values()), fs, mounts))), c)

    def argv(self, pod: str, container: str) -> list[str]:
        cmd = self.pods[pod][container][0]
        if not self.full and cmd[:2] == ["privfed", "serve"]:
            cmd = one_job(cmd, self.job)
        if not self.full and "--policy" in cmd:
            cmd = without_policy(cmd)
        return [*self.EXE[cmd[0]], *cmd[1:]]

    def env(self, pod: str, container: str) -> dict[str, str]:
        return self.pods[pod][container][1]

    def probe(self, pod: str, container: str, kind: str) -> list[str]:
        command = self.pods[pod][container][2][kind]["exec"]["command"]
        return [*self.EXE[command[0]], *command[1:]]

    def run(self, stack: Stack, pod: str, container: str, name: str | None = None):
        return stack.start(
            name or f"{pod}-{container}", self.argv(pod, container), host=pod, env=self.env(pod, container)
        )


@pytest.mark.slow
@pytest.mark.netns
def test_the_pods_commands_run_each_in_its_own_network(objects, tmp_path):
    """The README's secrets from `privfed certs --tokens 3`, and every container's command and probe
    as the kubelet would run them (ordinal, ConfigMaps and $(VAR)s expanded, volumes as directories),
    each pod in a network namespace of its own where the Services' names resolve. Until the service
    mode lands, the coordinator runs today's one-job command (the compose demo job) and owners run
    without a policy."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"network namespaces: {reason}")
    job_file = ROOT / "deploy" / "compose" / "jobs" / "ncc.toml"
    job = SimulationConfig.from_toml(job_file.read_text(), source=str(job_file))
    owners = _one(objects, "StatefulSet", "privfed-owner")
    pods = Pods(
        objects,
        {
            "privfed-signer": (_one(objects, "Deployment", "privfed-signer"), 0),
            "privfed-coordinator": (_one(objects, "Deployment", "privfed-coordinator"), 0),
            **{f"privfed-owner-{i}": (owners, i) for i in range(3)},
        },
        tmp_path,
        job,
    )
    coordinator = "privfed-coordinator"
    with Lan(len(pods.pods), subnet="10.79.0.0/24") as lan:
        hosts = dict(zip(pods.pods, lan.hosts))
        lan.name({"privfed-signer": hosts["privfed-signer"], coordinator: hosts[coordinator]})
        stack = Stack(lan, hosts, tmp_path)
        pods.run(stack, "privfed-signer", "signer", name="signer")
        while "listening" not in stack.log("signer"):
            assert stack.procs["signer"].poll() is None, stack.logs()
            time.sleep(0.1)
        assert pods.run(stack, coordinator, "enrol").wait(timeout=WAIT) == 0, stack.logs()
        pods.run(stack, coordinator, "coordinator")
        for _ in range(WAIT):
            if (
                stack.check(
                    coordinator,
                    pods.probe(coordinator, "coordinator", "startupProbe"),
                    pods.env(coordinator, "coordinator"),
                )
                == 0
            ):
                break
            time.sleep(1)
        for kind in ("readinessProbe", "livenessProbe"):
            assert (
                stack.check(
                    coordinator, pods.probe(coordinator, "coordinator", kind), pods.env(coordinator, "coordinator")
                )
                == 0
            )
        ready = {}
        for pod in (f"privfed-owner-{i}" for i in range(3)):
            assert pods.run(stack, pod, "enrol").wait(timeout=WAIT) == 0, stack.logs()
            # enrolled, and the coordinator reachable with its own certificate under its Service name
            ready[pod] = stack.check(pod, pods.probe(pod, "owner", "readinessProbe"), pods.env(pod, "owner"))
            pods.run(stack, pod, "owner", name=pod)
        if pods.full:  # daemons: all stay up, connected
            time.sleep(3)
            assert all(p.poll() is None for n, p in stack.procs.items() if not n.endswith("-enrol")), stack.logs()
        else:
            names = [f"{coordinator}-coordinator", *(f"privfed-owner-{i}" for i in range(3))]
            assert [stack.wait(n) for n in names] == [0] * 4, stack.logs()
            store = Path(option(pods.pods[coordinator]["coordinator"][0], "--store"))
            report = json.loads(next(store.glob("*/report.json")).read_text())
            assert (report["owners"], report["lost_nodes"], report["answered"]) == (job.job.owners, [], job.job.owners)
        signer_log = stack.log("signer")
    assert ready == dict.fromkeys(ready, 0)
    assert sorted(re.findall(r"enroll: signed (\S+)", signer_log)) == ["coordinator", "owner-0", "owner-1", "owner-2"]
    assert "refused" not in signer_log
    for pod in pods.pods:
        reach = private_keys([tmp_path / "pods" / pod])
        party = "coordinator" if pod == coordinator else pod.removeprefix("privfed-")
        assert reach == ({"ca-key.pem", "privfed-signer-key.pem"} if pod == "privfed-signer" else {f"{party}-key.pem"})
