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

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.learners.ncc_model import NCC_VARIANCE, NearestCentroidModel, class_priors
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


def make_certs(out: Path, *sans: str, owners: int = 2) -> Path:
    cmd = [*CLI, "certs", "--out", str(out), "--owners", str(owners)] + [a for s in sans for a in ("--san", s)]
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
    10.77.0.1, so the owner's TLS check fails and it stops with the cause (exit 2)."""
    certs = make_certs(tmp_path / "certs")  # no --san 10.77.0.1
    with Lan(2, subnet="10.77.0.0/24") as lan:
        coord_host, host_a = lan.hosts
        coord = coordinator(lan, coord_host, certs, tmp_path)
        node = owner(lan, host_a, 0, "0:20", coord_host.address, certs, tmp_path, connect_timeout=5)
        code = node.wait(timeout=WAIT)
        assert coord.poll() is None  # still waiting for owners: nobody got through
    assert code == 2, logs(tmp_path)
    # at once, with the cause: a name the certificate lacks never heals by retrying (stop 48)
    assert "does not name the address dialled" in (tmp_path / "owner-0.log").read_text()


# ------------------------------------------------------------------ owners' own files, one schema
SCHEMA = """# the federation's public schema: given to the coordinator, sent to every owner
features = ["a", "b", "c"]
classes = [-1, 3, 7]
test = "public_test.csv"

[bounds]
lo = 0.0
hi = 16.0
"""
CENTRES = {-1: (3.0, 3.0, 3.0), 3: (9.0, 4.0, 8.0), 7: (4.0, 10.0, 12.0)}


def write_rows(path: Path, labels: list[int], n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows with labels drawn from ``labels`` around fixed centres, written as a CSV with a header."""
    y = rng.choice(labels, size=n)
    X = np.clip(np.array([CENTRES[int(v)] for v in y]) + rng.normal(0.0, 2.0, (n, 3)), 0.0, 16.0)
    lines = ["a,b,c,label"] + [",".join(f"{v:.4f}" for v in row) + f",{int(label)}" for row, label in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")
    return X, y


def test_owners_own_files_checked_against_the_coordinators_schema(tmp_path):
    """Three machines hold their own CSV files: labels {3, 7} on one, {-1, 3, 7} on another (mapped
    by value, not renumbered per file), and a file with an unknown label on line 5 on the third,
    which exits 2 naming file and line and reaches the coordinator as schema_mismatch refusals.
    At ε = ∞ the federated nearest centroid matches the pooled non-private model."""
    from sklearn.neighbors import NearestCentroid

    rng = np.random.default_rng(11)
    Xa, ya = write_rows(tmp_path / "a.csv", [3, 7], 150, rng)
    Xb, yb = write_rows(tmp_path / "b.csv", [-1, 3, 7], 150, rng)
    Xt, yt = write_rows(tmp_path / "public_test.csv", [-1, 3, 7], 300, rng)
    write_rows(tmp_path / "c.csv", [3, 7], 40, rng)
    lines = (tmp_path / "c.csv").read_text().splitlines()
    lines[4] = lines[4].rsplit(",", 1)[0] + ",5"
    (tmp_path / "c.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "schema.toml").write_text(SCHEMA)
    certs = make_certs(tmp_path / "certs", "10.77.0.1", owners=3)
    with Lan(4, subnet="10.77.0.0/24") as lan:
        coord_host, *hosts = lan.hosts
        common = ["--certs", str(certs), "--epsilon-budget", "inf", "--rng", "seeded", "--connect-timeout", "60"]
        coord = lan.popen(
            coord_host,
            [*CLI, "coordinator", "--listen", f"{coord_host.address}:{PORT}", "--certs", str(certs), "--owners", "30"]
            + ["--epsilon", "inf", "--task", "ncc", "--schema", str(tmp_path / "schema.toml")]
            + ["--out", str(tmp_path / "runs"), "--register-timeout", "60"],
            stdout=open(tmp_path / "coordinator.log", "w"),
            stderr=subprocess.STDOUT,
        )
        nodes = []
        for i, (host, name, extra) in enumerate(
            zip(hosts, "abc", (["--schema", str(tmp_path / "schema.toml")], [], [])),
        ):
            cmd = [*CLI, "owner", "--coordinator", f"{coord_host.address}:{PORT}", "--name", f"owner-{i}"]
            cmd += ["--data", str(tmp_path / f"{name}.csv"), "--shards", "10", "--ledger", str(tmp_path / f"{i}.db")]
            log = open(tmp_path / f"owner-{i}.log", "w")
            nodes.append(lan.popen(host, cmd + common + extra, stdout=log, stderr=subprocess.STDOUT))
        codes = [p.wait(timeout=WAIT) for p in [coord, *nodes]]
    assert codes == [0, 0, 0, 2], logs(tmp_path)
    assert (tmp_path / "owner-2.log").read_text().strip().splitlines()[-1] == (
        "privfed owner: error: c.csv: line 5: label 5 is not a class of the federation schema (classes [-1, 3, 7])"
    )
    report = json.loads(next((tmp_path / "runs").glob("*/report.json")).read_text())
    assert report["status"] == "ok" and (report["owners"], report["answered"]) == (30, 20)
    assert set(report["refused"]) == {owner_id("owner-2", i) for i in range(10)}
    assert report["refusal_summary"].startswith("10/30 owners refused: schema_mismatch")
    X, y = np.vstack([Xa, Xb]), np.concatenate([ya, yb])
    assert float(np.mean(NearestCentroid().fit(X, y).predict(Xt) == yt)) > 0.8  # the task is learnable
    # the pooled non-private model as --task ncc serves it: the class priors beside the centroids (issue 22)
    classes = np.array([-1, 3, 7])
    counts = np.array([np.sum(y == c) for c in classes], dtype=np.float64)
    centroids = np.array([X[y == c].mean(axis=0) for c in classes])
    bounds = Bounds(np.zeros(3), np.full(3, 16.0))
    pooled = NearestCentroidModel(
        centroids, classes, bounds, priors=class_priors(counts, counts), variance=NCC_VARIANCE
    )
    reference = float(np.mean(pooled.predict(Xt) == yt))
    assert reference > 0.8  # renumbered labels ({3, 7} -> {0, 1}) would break it
    assert abs(report["accuracy"] - reference) <= 0.01, (report["accuracy"], reference)


# ------------------------------------------------------------------ the README's own-data walkthrough
README = Path(__file__).resolve().parents[2] / "README.md"


def walkthrough() -> tuple[str, list[str]]:
    """The README's own-data walkthrough: the Python that writes the example files, and each shell
    command (continuation lines joined, comments dropped) in order."""
    import re

    block = re.search(r"<!-- own-data-walkthrough -->\n```sh\n(.*?)```", README.read_text(), re.S)
    assert block is not None, "README lost its own-data walkthrough"
    script, _, rest = block.group(1).partition("\nPY\n")
    python = script.split("\n", 1)[1]  # after the `python3 - <<'PY'` line
    commands = [c.split("#")[0].strip() for c in rest.replace("\\\n", " ").splitlines()]
    return python, [c for c in commands if c]


def test_the_readme_own_data_walkthrough_runs_across_machines(tmp_path):
    """The walkthrough's commands as written, each on its machine: the coordinator on one, each
    hospital on its own (its --name), the query from hospital-a's machine; 127.0.0.1 becomes the
    coordinator's address, and its certificate names that address (--san). The files have their
    columns in different orders, text labels, a categorical column and a missing value; the query
    prints label values, the ones the exported scikit-learn classifier gives."""
    import pickle
    import shlex

    import pandas as pd

    python, commands = walkthrough()
    subprocess.run([sys.executable, "-c", python], cwd=tmp_path, check=True, timeout=WAIT)
    with Lan(3, subnet="10.77.0.0/24") as lan:
        coord_host, *hospitals = lan.hosts
        machine = {"hospital-a": hospitals[0], "hospital-b": hospitals[1]}
        background: list[subprocess.Popen] = []
        query = None
        for command in commands:
            argv = shlex.split(command.replace("127.0.0.1", coord_host.address).rstrip("&"))
            if argv[0] != "privfed":
                if argv[:2] == ["kill", "%1"]:
                    background[0].terminate()  # the coordinator, serving until SIGTERM
                    assert background[0].wait(timeout=WAIT) == 0, logs(tmp_path)
                else:
                    subprocess.run(command, shell=True, cwd=tmp_path, check=True, timeout=WAIT)
                continue
            argv = CLI + argv[1:] + (["--san", coord_host.address] if argv[1] == "certs" else [])
            if argv[len(CLI)] in ("certs", "export", "ledger"):  # run where the files are: this host
                argv = [str(next(tmp_path.glob(a))) if "*" in a else a for a in argv]  # as the shell would
                subprocess.run(argv, cwd=tmp_path, check=True, timeout=WAIT, capture_output=True)
                continue
            name = argv[argv.index("--name") + 1] if "--name" in argv else "coordinator"
            host = machine.get(name, coord_host)
            if argv[len(CLI)] == "query":
                query = lan.popen(host, argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                out, err = query.communicate(timeout=WAIT)
                assert query.returncode == 0, err + logs(tmp_path)
                continue
            log = open(tmp_path / f"{name}.log", "w")
            proc = lan.popen(host, argv, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
            if command.endswith("&"):
                background.append(proc)
            else:
                assert proc.wait(timeout=WAIT) == 0, logs(tmp_path)
        assert [p.wait(timeout=WAIT) for p in background] == [0, 0], logs(tmp_path)
    assert query is not None
    labels = out.split()
    estimator = pickle.loads((tmp_path / "model.pkl").read_bytes())
    assert labels == estimator.predict(pd.read_csv(tmp_path / "queries.csv")).tolist()
    assert len(labels) == 10 and set(labels) <= {"malignant", "benign"}
    b_log = (tmp_path / "hospital-b.log").read_text()
    assert "b.csv: columns matched to the schema's features by the header's names" in b_log
    assert "b.csv: filled 1 missing value(s) with the schema's public fill values (concavity 1)" in b_log
    report = json.loads(next((tmp_path / "runs").glob("*/report.json")).read_text())
    assert (report["status"], report["model_id"], report["owners"], report["answered"]) == ("ok", "lr-eps4", 400, 400)
    assert report["reference_accuracy"] > report["baselines"]["majority_class"]
    assert "cross-validated on the public test file" in report["reference_learner"]
    coordinator_line = (tmp_path / "coordinator.log").read_text()
    assert f"accuracy={report['accuracy']:.4f} (non-private reference {report['reference_accuracy']:.4f}" in (
        coordinator_line
    )
