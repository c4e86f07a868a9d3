"""Issue 9, item 10: private keys are never readable by others, not even briefly, and the CA key
is in no running service's directory.

* ``privfed certs`` (and the enrolment path, ``privfed.deploy.enroll``: CA and tokens, then the
  coordinator and an owner making their own keys and getting them signed) runs as a real process
  under a Python audit hook (PEP 578) with umask 022. At
  every audited event (each ``open``, ``os.chmod``, ``os.rename``/``os.replace``, ...) the hook
  records the mode of every file already opened for writing under the output directory. A key
  written first and chmod-ed after is caught at the ``os.chmod`` event, where its mode is still
  0644 (the window the issue measured). Every file that ends up as a ``*-key.pem`` (directly or by
  rename) must have been 0600 (no group/other bits) at every observation, and at the end.
* The directory each party is given (``DIR/<party>``) holds ``ca.pem`` and that party's pair only:
  no ``ca-key.pem``, not even by symlink; neither does the flat view ``DIR``. In the compose file,
  only the certificate services mount the CA volume.
"""

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import tls_dir

REPO = Path(__file__).resolve().parents[2]

HOOKED_CERTS = r"""
import json, os, sys
out, report = sys.argv[1], sys.argv[2]
root = os.path.abspath(out)
seen, renames = {}, []

def hook(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.abspath(os.fsdecode(args[0]))
        mode, flags = (args[1], args[2]) if len(args) > 2 else (None, 0)
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (flags or 0) & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        if path.startswith(root) and writing:
            seen.setdefault(path, [])
    if event in ("os.rename", "os.replace") and len(args) >= 2:
        renames.append((os.path.abspath(os.fsdecode(args[0])), os.path.abspath(os.fsdecode(args[1]))))
    for path, modes in list(seen.items()):   # the enrolling thread's hook may add paths meanwhile
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not (st.st_mode & 0o170000 == 0o120000):   # not a symlink
            modes.append(st.st_mode & 0o777)

sys.addaudithook(hook)
os.umask(0o022)
if sys.argv[3] == "certs":
    from privfed.deploy.cli import main
    code = main(["certs", "--out", out, "--owners", "2"])
else:   # the enrolment path: CA and tokens, then each party makes its own key and is signed
    from pathlib import Path
    from privfed.deploy import enroll
    from privfed.deploy.signer import SignerServer
    root_p = Path(out)
    enroll.init(root_p / "pki", ["owner-0"], public=root_p / "public")
    signer = SignerServer.start(root_p / "pki", root_p / "signer-state", "127.0.0.1:0")
    for name, role in (("coordinator", "coordinator"), ("owner-0", "owner")):
        enroll.request(f"127.0.0.1:{signer.port}", root_p / "public" / "ca.pem", root_p / "tls", name,
                       root_p / "pki" / "tokens" / role / name, timeout=60)
    signer.stop()
    code = 0
hook("end", ())
with open(report, "w") as f:
    json.dump({"code": code, "seen": seen, "renames": renames}, f)
"""


def _hooked(tmp, how):
    out, report = tmp / "pki", tmp / "report.json"
    proc = subprocess.run(
        [sys.executable, "-c", HOOKED_CERTS, str(out), str(report), how], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, json.loads(report.read_text())


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return _hooked(tmp_path_factory.mktemp("keys"), "certs")


@pytest.fixture(scope="module", params=["certs", "enroll"])
def written(request, tmp_path_factory):
    if request.param == "enroll":
        pytest.importorskip("privfed.deploy.enroll")
    return _hooked(tmp_path_factory.mktemp(f"keys-{request.param}"), request.param)


def test_private_keys_are_0600_from_creation(written):
    out, report = written
    final = {}
    for src, dst in report["renames"]:
        final[src] = dst
    keys = [p for p in out.rglob("*-key.pem") if not p.is_symlink()]
    assert len(keys) >= 3, f"expected the CA, coordinator and owner keys under {out}: {keys}"
    observed = 0
    for path, modes in report["seen"].items():
        name = final.get(path, path)
        if not name.endswith("-key.pem"):
            continue
        observed += len(modes)
        bad = sorted({oct(m) for m in modes if m & 0o077})
        assert not bad, f"{name} was {bad} at some point while privfed certs ran"
    assert observed >= len(keys), f"the audit hook saw too little to judge ({observed} observations)"
    for key in keys:
        assert stat.S_IMODE(key.stat().st_mode) & 0o077 == 0, f"{key} is {oct(stat.S_IMODE(key.stat().st_mode))}"


def test_ca_key_is_in_no_service_directory(made):
    out, _ = made
    ca_keys = [p for p in out.rglob("ca-key.pem")]
    assert ca_keys, "privfed certs wrote no CA key"
    for party in ("coordinator", "owner-0", "owner-1"):
        d = tls_dir(out, party)
        assert d != out, f"{party} has no directory of its own under {out}: a service would be given everything"
        present = {p.name for p in d.iterdir()}
        assert "ca-key.pem" not in present, f"{d} (given to {party}) holds the CA key"
        assert present <= {"ca.pem", f"{party}.pem", f"{party}-key.pem"}, f"{d} holds more than {party}'s own files"
    assert not (out / "ca-key.pem").exists(), "the flat view links the CA key"
    for key in ca_keys:
        assert stat.S_IMODE(key.parent.stat().st_mode) & 0o077 == 0, f"{key.parent} is readable by others"


def test_compose_mounts_the_ca_only_into_certificate_services():
    yaml = pytest.importorskip("yaml")
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    checked = []
    for name, service in compose.get("services", {}).items():
        command = " ".join(map(str, service.get("command") or []))
        if name in ("certs", "ca-signer") or not ("coordinator" in command or "owner" in command or "owner" in name):
            continue
        mounts = [
            str(v.get("source", "")) if isinstance(v, dict) else str(v).split(":")[0]
            for v in service.get("volumes") or []
        ]
        assert "pki" not in mounts and "certs" not in mounts, f"service {name} mounts {mounts}"
        checked.append(name)
    assert any("coordinator" in n for n in checked) and any("owner" in n for n in checked), checked


# ---- issue 20, item 9: ledgers and journals --------------------------------------------------
HOOKED_STORES = r"""
import json, os, sys
out, report = sys.argv[1], sys.argv[2]
os.umask(0o022)
from privfed.common.ledger import Ledger
from privfed.server.journal import Journal
seen, busy = {}, []

def hook(event, args):
    if busy:  # listing the directory raises audit events of its own
        return
    busy.append(1)
    try:
        for entry in os.scandir(out):
            seen.setdefault(entry.name, set()).add(entry.stat(follow_symlinks=False).st_mode & 0o777)
    except FileNotFoundError:  # a -journal file deleted while listing
        pass
    finally:
        busy.clear()

sys.addaudithook(hook)
with Ledger(os.path.join(out, "owner-0.sqlite"), epsilon_budget=1.0) as ledger:
    ledger.debit("owner-0.o00000", 0.1, purpose="test", release_id="r-0")
    hook("open", ())  # while open: the -wal and -shm files exist
with Journal(os.path.join(out, "journal.sqlite")) as journal:
    journal.begin(fingerprint="f", owner_ids=["owner-0.o00000"], run_id="run", resume=False)
    hook("open", ())
hook("end", ())
with open(report, "w") as f:
    json.dump({name: sorted(modes) for name, modes in seen.items()}, f)
"""


def test_ledger_and_journal_files_are_0600_from_creation(tmp_path):
    """A ledger records which releases an owner made and a journal the coordinator's rounds: with
    umask 022 SQLite would create both (and the ledger's -wal and -shm files) 0644."""
    out, report = tmp_path / "stores", tmp_path / "report.json"
    out.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", HOOKED_STORES, str(out), str(report)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(report.read_text())
    assert {"owner-0.sqlite", "owner-0.sqlite-wal", "owner-0.sqlite-shm", "journal.sqlite"} <= set(seen), seen
    readable = {name: [oct(m) for m in modes] for name, modes in seen.items() if any(m & 0o077 for m in modes)}
    assert not readable, f"readable by group or others at some point: {readable}"
