"""Walkthrough 13, W13-1 and W13-3: what a job on owners' own files is told at submission. W13-1: a bdt job submitted to a service of owners' own files is told, at submission, which
release it will run and how to get the other. The service cannot know how many rows each owner's file gives an
owner, so the default release is the paper's shares (and a Laplace evaluation), never the marginal release that
the README's "Real tabular data" table measures for one row per owner; the walkthrough's anes96 federation (755
one-row owners in 3 nodes) got 0.66 at eps 3 by default and 0.88 with `max_owner_rows = 1`, and breast cancer's
eps 1 job failed after its owners paid, with nothing in the submission, the listing or the report naming the key.

W13-3: a feddpdr job whose schema has a feature of a range so wide that the others lie near the centre of the
unit ball its rows are scaled into (anes96's population in thousands beside 1-7 scales: every job at eps 1-8 answered
one class, and the job's own non-private reference, 0.508, was below the majority class, 0.582).

A coordinator service of own files (`privfed serve --schema`) as a real process (mTLS) and the data user's
`privfed submit`; no owner node is needed: the jobs stay queued."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from servicefleet import free_port, toml

from privfed.deploy.certs import make_certs

pytestmark = pytest.mark.slow

SCHEMA = """features = ["age", "income"]
classes = ["no", "yes"]
label = "answer"
test = "public_test.csv"
[bounds]
lo = [18, 0]
hi = [99, 24]
"""


@contextmanager
def _service_of_own_files(tmp: Path, name: str, schema: str, certs: Path) -> Iterator[int]:
    """``privfed serve --schema`` (mTLS, its store ``store-NAME``) on a free port, stopped on leaving: yields the port."""
    (tmp / "schema.toml").write_text(schema)
    port, log = free_port(), tmp / f"serve-{name}.log"
    serve = subprocess.Popen(
        [
            *(sys.executable, "-m", "privfed.deploy.cli", "serve", "--listen", f"127.0.0.1:{port}"),
            *("--certs", str(certs), "--store", str(tmp / f"store-{name}"), "--status-listen", "none"),
            *("--schema", str(tmp / "schema.toml")),
        ],
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while "serving on port" not in log.read_text():
            assert serve.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield port
    finally:
        serve.terminate()
        serve.wait(timeout=20)


def _submit(tmp: Path, port: int, certs: Path, job: dict) -> str:
    """alice's ``privfed submit`` of ``job``: what it told her (its stderr), once it was submitted."""
    path = tmp / f"job-{len(list(tmp.glob('job-*.toml')))}.toml"
    path.write_text(toml(job))
    done = subprocess.run(
        [
            *(sys.executable, "-m", "privfed.deploy.cli", "submit", str(path)),
            *("--coordinator", f"127.0.0.1:{port}", "--certs", str(certs), "--name", "alice"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "submitted job" in done.stdout, done.stderr
    return done.stderr


def test_a_bdt_job_on_own_files_is_told_its_release_and_the_key_for_one_row_owners(tmp_path):
    certs = make_certs(tmp_path / "certs", owners=1, data_users=["alice"])
    rows = "".join(f"{20 + i},{i % 24},{'yes' if i % 3 else 'no'}\n" for i in range(30))
    (tmp_path / "public_test.csv").write_text("age,income,answer\n" + rows)
    with _service_of_own_files(tmp_path, "bdt", SCHEMA, certs) as port:
        bdt = {"task": "bdt", "epsilon": 3.0, "owners": 100}
        told = _submit(tmp_path, port, certs, bdt)
        assert "release shares" in told and "max_owner_rows = 1" in told, told
        assert "marginal" in told, told
        for settled in ({"max_owner_rows": 1}, {"release": "shares"}, {"rows_per_owner": 20}):
            assert "max_owner_rows = 1" not in _submit(tmp_path, port, certs, bdt | settled), settled


WIDE = """features = ["popul", "selfLR", "PID", "educ"]
classes = ["Clinton", "Dole"]
label = "vote"
test = "public_test.csv"
[bounds]
lo = [0, 1, 0, 1]
hi = [7400, 7, 6, 7]
"""


def test_a_feddpdr_job_is_told_when_one_feature_s_range_drowns_the_others(tmp_path):
    certs = make_certs(tmp_path / "certs", owners=1, data_users=["alice"])
    rows = "".join(f"{i * 37},{1 + i % 7},{i % 7},{1 + i % 7},{'Dole' if i % 3 else 'Clinton'}\n" for i in range(30))
    (tmp_path / "public_test.csv").write_text("popul,selfLR,PID,educ,vote\n" + rows)
    told = {}
    for name, schema in (("wide", WIDE), ("even", WIDE.replace("hi = [7400,", "hi = [9,"))):
        with _service_of_own_files(tmp_path, name, schema, certs) as port:
            told[name] = _submit(
                tmp_path,
                port,
                certs,
                {"task": "feddpdr", "epsilon": 8.0, "owners": 100, "delta": 1e-5, "scaling": "ball"},
            )
    assert "feddpdr:" in told["wide"] and "popul" in told["wide"], told["wide"]
    assert "reference_accuracy" in told["wide"], told["wide"]
    assert "feddpdr:" not in told["even"], told["even"]
