"""Issue 26, items 1-2, "Done when": one coordinator service and three owner daemons as real
processes (mTLS); jobs submitted in turn without restarting anything; a job over one owner's per-job
epsilon declined by that owner's policy with nothing debited; only data-user certificates submit;
a cancelled job stops and leaves a report; a job survives the service's restart."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest
from fedharness import DATASET, owner_cmd
from servicefleet import NODES, OWNERS_PER_NODE, ServiceFleet, toml

from privfed.common.identity import node_of
from privfed.common.ledger import read_accounts
from privfed.deploy.certs import make_certs
from privfed.owner.data import federation_split

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    # owner-2 accepts at most epsilon 2.5 per job; owner-0 and owner-1 at most 4
    limits = {"owner-2": {"max_epsilon_per_job": 2.5}}
    with ServiceFleet.running(tmp_path_factory.mktemp("service"), limits=limits, stalls=True) as f:
        yield f


def test_three_jobs_in_turn_then_one_declined_by_an_owner_policy_with_nothing_debited(fleet):
    owners = len(NODES) * OWNERS_PER_NODE
    jobs = {
        "ncc": dict(task="ncc", epsilon=2.0, owners=owners),
        "bdt": dict(task="bdt", epsilon=2.0, owners=owners, base="ncc", rounds=3, min_owners=1),
        "feddpdr": dict(task="feddpdr", epsilon=2.0, owners=owners),  # k = d: DP-PCA keeps every column
    }
    for task, settings in jobs.items():
        job_id = fleet.submit(**settings)
        job = fleet.wait(job_id)
        assert job["state"] == "done", (task, job, fleet.service_log()[-2000:])
        report = fleet.report(job_id)
        assert report["status"] == "ok" and report["config"]["task"] == task
        assert 0.0 <= report["accuracy"] <= 1.0 and report["declined_owners"] == []
        assert 0.0 <= report["reference_accuracy"] <= 1.0 and report["reference_learner"], report  # as a coordinator's
        assert (fleet.job_dir(job_id) / "model.json").is_file() and (fleet.job_dir(job_id) / "job.log").is_file()
        for node in NODES:  # every owner released under the job's id, within its announced epsilon
            spent = fleet.releases(node, job_id)
            assert spent and sum(r["epsilon"] for r in spent) <= OWNERS_PER_NODE * settings["epsilon"] + 1e-9
        assert fleet.jobs()[job_id]["delta"] == (1e-5 if task == "feddpdr" else 0.0)  # its task's default (W7-7)
        # what its settings left to a default that matters: in its report too, in job file terms (W8-10)
        said = [w for w in report["warnings"] if "DP-PCA reduces nothing" in w]  # feddpdr at k = d (W8-7)
        assert len(said) == (task == "feddpdr") and "--basis identity" not in str(said), report["warnings"]
        if said:  # and its log line names the job (W8-10: "bdt: neither ..." named none)
            assert any(f"WARNING job {job_id}: feddpdr: k = " in line for line in _log_lines(fleet, "reduces nothing"))
        for node in NODES:  # each daemon is told its job is done (walkthrough 7, W7-11: it never heard)
            _wait_for_line(fleet, node, f"job {job_id} done at the coordinator; node {node} answered ")
    listed = fleet.jobs()  # `privfed jobs` shows them all, done
    assert [j["state"] for j in listed.values()] == ["done"] * 3
    listed_ids = list(listed)
    last = fleet.cli("jobs", "--last", "1")  # the table of the last job, and a line for the two before it
    assert last.returncode == 0, last.stderr
    assert listed_ids[-1] in last.stdout and not any(i in last.stdout for i in listed_ids[:-1])
    assert "2 earlier job(s) not shown; --all lists every job" in last.stdout

    over = fleet.submit(task="ncc", epsilon=3.0, owners=owners)  # over owner-2's 2.5, within the others' 4
    job = fleet.wait(over)
    report = fleet.report(over)
    declined = {f"owner-2.o{i:05d}" for i in range(2 * OWNERS_PER_NODE, 3 * OWNERS_PER_NODE)}
    assert set(report["declined_owners"]) == declined, report
    assert all(
        report["refused"][o].startswith("policy") and "epsilon_per_job" in report["refused"][o] for o in declined
    )
    assert job["state"] == "done" and report["answered"] == 2 * OWNERS_PER_NODE
    assert fleet.releases("owner-2", over) == []  # nothing debited by the owner that declined
    assert len(fleet.releases("owner-0", over)) > 0  # the others took part
    shown = subprocess.run(
        [sys.executable, "-m", "privfed.deploy.cli", "ledger", "show", "--ledger", str(fleet.ledger("owner-2"))],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "by job" in shown.stdout and over not in shown.stdout and listed_ids[0] in shown.stdout
    table = fleet.cli("jobs", "--last", "1").stdout  # who refused it, and why, in the refused by column
    assert f"owner-2 ({OWNERS_PER_NODE} policy)" in table.splitlines()[1], table
    # and that fewer owners took part than it asked for: in its owners column, a line under the table, its log
    # (walkthrough 6, W6-9 and W6-2: the listing said the owners asked for, and warnings were in the report only)
    took_part = f"{2 * OWNERS_PER_NODE}/{owners}"
    assert f"  {took_part}  " in table.splitlines()[1], table
    fewer = f"{2 * OWNERS_PER_NODE} owner(s) released for this job, fewer than the {owners} it asked for"
    assert f"{over} done: {fewer}" in table and any(fewer in w for w in report["warnings"]), table
    assert f"WARNING job {over}: {fewer}" in (fleet.job_dir(over) / "job.log").read_text()


def test_only_a_data_user_certificate_submits(fleet, tmp_path):
    job = tmp_path / "job.toml"
    job.write_text('task = "ncc"\nepsilon = 1.0\nowners = 30\n')
    for name in ("owner-0", "coordinator"):
        done = fleet.cli("submit", str(job), name=name)
        assert done.returncode == 2 and "data-user" in done.stderr and "PERMISSION_DENIED" not in done.stderr
    assert fleet.cli("jobs", name="owner-1").returncode == 2
    # a data user of another federation's CA is refused at the TLS handshake, and the service logs who tried
    foreign = make_certs(tmp_path / "foreign", owners=1, data_users=["alice"])
    assert fleet.cli("jobs", certs=foreign).returncode == 2
    deadline = time.monotonic() + 20
    while "TLS handshake from" not in fleet.service_log() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert re.search(r"TLS handshake from ipv4:127\.0\.0\.1:\d+ rejected", fleet.service_log()), fleet.service_log()[
        -2000:
    ]
    # nor does a data user's certificate serve as an owner node
    node = subprocess.run(
        owner_cmd(fleet.port, "alice", n_owners=1, shards="0:1", ledger=tmp_path / "alice.sqlite", budget=1.0,
                  certs=fleet.certs, extra=["--connect-timeout", "5"]),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert node.returncode == 2 and "data-user certificate" in node.stderr, node.stderr[-500:]
    assert "ncc" not in {j["task"] for j in fleet.jobs().values() if j["state"] == "queued"}


@pytest.fixture
def browser():
    """Headless Chromium driven by selenium (Debian's chromium and chromium-driver: .ci/install-system-deps.sh)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.skip("needs Debian's chromium and chromium-driver (.ci/install-system-deps.sh)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    chrome = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver))
    try:
        yield chrome
    finally:
        chrome.quit()


def test_the_status_page_shows_a_submitted_job_progress_in_headless_chromium(fleet, browser):
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def row(job_id: str) -> dict[str, str] | None:
        """The job's row as the page shows it now (the page reloads itself every few seconds)."""
        try:
            tr = browser.find_element(By.CSS_SELECTOR, f'tr.job[data-job="{job_id}"]')
            cells = {c: tr.find_element(By.CLASS_NAME, c).text for c in ("state", "epsilon", "progress", "accuracy")}
            return cells
        except WebDriverException:  # not there yet, or the page reloaded under the read (stale, or the
            return None  # "node does not belong to the document" chromium raises mid-reload)

    blocker = fleet.submit(task="ncc", epsilon=1.0, owners=31)  # waits for an owner that never comes
    fleet.wait(blocker, ("running",))
    job_id = fleet.submit(task="ncc", epsilon=1.5, owners=len(NODES) * OWNERS_PER_NODE)
    browser.get(f"http://127.0.0.1:{fleet.status_port}/")
    wait = WebDriverWait(browser, 30, poll_frequency=0.2)
    queued = wait.until(lambda _: (r := row(job_id)) is not None and r["state"] == "queued" and r)
    assert queued["epsilon"] == "1.5" and queued["progress"] == "0%" and queued["accuracy"] == ""

    def online() -> str | None:
        try:
            return browser.find_element(By.ID, "online").text
        except WebDriverException:
            return None

    assert wait.until(lambda _: online() == str(len(NODES)))  # the daemons register within seconds of the fleet
    assert fleet.cli("job", "cancel", blocker).returncode == 0
    done = wait.until(lambda _: (r := row(job_id)) is not None and r["state"] == "done" and r)
    assert done["progress"] == "100%" and 0.0 <= float(done["accuracy"]) <= 1.0
    assert row(blocker)["state"] == "cancelled"
    bars = browser.find_elements(By.CSS_SELECTOR, "#accuracy-plot rect.bar title")
    assert any(job_id in b.get_attribute("textContent") for b in bars)


def test_a_cancelled_job_stops_and_leaves_a_report(fleet):
    waiting = fleet.submit(task="ncc", epsilon=1.0, owners=31)  # one owner more than there are: it waits
    fleet.wait(waiting, ("running",))
    assert fleet.cli("job", "cancel", waiting, name="owner-0").returncode == 2  # not a data user
    done = fleet.cli("job", "cancel", waiting, name="alice")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"job {waiting}: stopping (it was running; its report will say so)"
    job = fleet.wait(waiting)
    assert job["state"] == "cancelled" and job["error"] == "cancelled by alice"
    again = fleet.cli("job", "cancel", waiting, name="alice")
    assert again.stdout.strip() == f"job {waiting}: already cancelled: nothing to cancel", again.stderr
    second = fleet.submit(task="ncc", epsilon=1.0, owners=31)
    fleet.wait(second, ("running",))
    assert fleet.cli("job", "cancel", second, name="alice").returncode == 0
    assert fleet.wait(second)["state"] == "cancelled"
    listed = fleet.cli("jobs", "--all").stdout.splitlines()
    # a note said already is named, not repeated (walkthrough 14, W14-14: 50 identical 400-character lines): the
    # module's first job cancelled by alice says it, the others name that job
    (first,) = [line.split()[0] for line in listed if line.endswith(" cancelled: cancelled by alice")]
    for job_id in (waiting, second):
        assert {f"{job_id} cancelled: cancelled by alice", f"{job_id} cancelled: as {first}"} & set(listed), listed
    assert f"{second} cancelled: as {first}" in listed, listed
    report = fleet.report(waiting)
    assert report["status"] == "cancelled" and report["job_id"] == waiting
    shown = fleet.cli("job", "logs", waiting)
    assert shown.returncode == 0 and waiting in shown.stdout
    out = fleet.tmp / f"model-{waiting}.json"
    none = fleet.cli("job", "model", waiting, "--out", str(out))
    assert none.returncode == 2 and not out.exists(), none.stderr
    assert f"job {waiting} has no model: it is cancelled (privfed job show ID says why)" in none.stderr


def test_a_boosting_job_survives_a_restart_of_the_service_and_resumes_from_its_journal(fleet):
    """The job asks for fewer owners than are registered, so it runs on them all; after the restart its last
    node comes back late. The resumed job waits for every owner it ran over: it began as soon as it had as many as
    its job file asked for, and failed for good on its journal's owner list (walkthrough 5)."""
    owners = len(NODES) * OWNERS_PER_NODE
    asked = owners - OWNERS_PER_NODE
    job_id = fleet.submit(task="bdt", epsilon=2.0, owners=asked, base="ncc", rounds=10, min_owners=1)
    journal = fleet.job_dir(job_id) / "journal.sqlite"
    deadline = time.monotonic() + 60
    while not journal.exists() or _journal_rounds(journal) < 2:
        assert time.monotonic() < deadline and fleet.wait(job_id, ("queued", "running", "done"))["state"] != "done"
        time.sleep(0.02)
    started = fleet.wait(job_id, ("running",))["started"]
    for node in fleet.procs:  # the job waits for these nodes: the service stops mid-job, restarts without them
        node.send_signal(signal.SIGSTOP)
    try:
        # progress is rounds done of rounds planned (a walkthrough saw 99 % at round 29 of 40: batches counted)
        before = fleet.jobs()[job_id]
        assert before["planned"] == 10 and 2 <= before["done"] <= _journal_rounds(journal), before
        assert before["progress"] == pytest.approx(before["done"] / 10), before
        fleet.stop_service()
        assert fleet.wait(job_id, ("running",))["restarts"] == 0
        assert fleet.report(job_id)["status"] == "interrupted"  # it goes on: not failed (walkthrough 6, W6-7)
        fleet.start_service()
        # waiting for its owners again, the job keeps its start time and shows the rounds its journal holds done
        # (a walkthrough saw it start over at 0 %, started anew)
        deadline = time.monotonic() + 30
        while (shown := fleet.jobs()[job_id])["restarts"] != 1 or shown["progress"] == 0:
            assert time.monotonic() < deadline, shown
            time.sleep(0.3)
        assert shown["state"] == "running" and shown["started"] == started, shown
        # from the rounds its journal holds, not backwards (a walkthrough saw 0.2875 become 0.1875 at a restart)
        assert shown["done"] == _journal_rounds(journal) and shown["planned"] == 10, shown
        assert before["progress"] <= shown["progress"] == pytest.approx(shown["done"] / 10), (before, shown)
        for node in fleet.procs[:-1]:  # as many owners as the job asked for come back first
            node.send_signal(signal.SIGCONT)
        time.sleep(4.0)  # the daemons retry every few seconds: these have registered again by now
        assert fleet.jobs()[job_id]["state"] == "running", fleet.service_log()[-3000:]
    finally:
        for node in fleet.procs:
            node.send_signal(signal.SIGCONT)
    job = fleet.wait(job_id)
    assert job["state"] == "done" and job["restarts"] == 1 and job["started"] == started, job
    report = fleet.report(job_id)
    rounds = report["rounds"]
    assert sum(1 for r in rounds if r.get("from_journal")) >= 2  # recorded rounds are not asked again
    # and count as the owners' ledgers do (a walkthrough's resumed job said 64 answered where they held 80 shares)
    spent: Counter[str] = Counter()  # owner -> its ledger's epsilon for the job
    shared = set()  # owners that released a share (their ledger's entries other than the evaluation's)
    for account in (a for node in NODES for a in read_accounts(fleet.ledger(node))):
        for r in (r for r in account.releases if r["job"] == job_id):
            spent[account.owner_id] += r["epsilon"]
            if r["purpose"].split(":")[0] != "boost-eval":
                shared.add(account.owner_id)
    assert report["answered"] == len(shared), (report["answered"], len(shared))
    assert sum(r["released"] for r in rounds) == len(shared), rounds  # the rounds taken from the journal too
    assert {o: e for o, e in report["epsilon_by_owner"].items() if e} == pytest.approx(dict(spent))
    shown = fleet.jobs()[job_id]  # a finished job's steps, as its report records them
    assert (shown["done"], shown["planned"], shown["progress"]) == (len(rounds), 10, 1.0), shown
    # the nodes that registered again did so in the job's log; its data user reads it without their addresses
    operator = (fleet.job_dir(job_id) / "job.log").read_text()
    assert re.search(r"registered \d+ owner\(s\) from ipv4:127\.0\.0\.1:\d+", operator), operator[-3000:]
    resumed = re.search(
        r"job \S+ starts again after 1 restart\(s\) of the service, from its journal's (\d+) ", operator
    )
    assert resumed and int(resumed.group(1)) >= 2, operator[-3000:]  # the log says it resumed, and from where
    shown = fleet.cli("job", "logs", job_id, name="alice").stdout
    assert "registered 10 owner(s) from <address>" in shown and "ipv4:" not in shown, shown[-3000:]
    # each round's shares by its number, not the run's id ten times; the nodes' calls the restarted service refused
    # before they registered again stay in its own log (walkthrough 7, W7-12)
    assert re.search(r"round boost-\w+ \(shares of round 10 of 10\): \d+ of \d+ task\(s\) answered", shown), shown
    assert "rejecting call" not in shown, shown[-3000:]  # (the service's log has them when the daemons' calls race)
    assert str(fleet.store) not in shown
    shown = fleet.cli("job", "show", job_id, name="alice").stdout  # nor the operator's settings (W6-10)
    config = json.loads(shown)["report"]["config"]
    assert "host" not in json.loads(shown)["report"] and "host" in fleet.report(job_id)  # the machine: the operator's
    assert config["task"] == "bdt" and not {"journal", "listen", "out", "schema"} & set(config), config
    assert str(fleet.store) not in shown and "ipv4:" not in shown, shown[-3000:]
    after = fleet.submit(task="ncc", epsilon=1.0, owners=owners)  # the daemons came back for the next job
    assert fleet.wait(after)["state"] == "done"


@pytest.mark.parametrize(
    ("settings", "entries", "kill"),
    [
        ({"task": "bdt", "release": "marginals"}, 1, False),
        ({"task": "feddpdr", "k": 2}, 2, False),  # DP-PCA: subspace and count
        ({"task": "feddpdr", "k": 2}, 2, True),
    ],
    ids=["bdt-marginals", "feddpdr", "feddpdr-sigkill"],
)
def test_a_job_without_a_journal_stopped_mid_batch_is_not_asked_again_after_the_restart(fleet, settings, entries, kill):
    """Only a boosting job by shares keeps a journal: the owners of any other may have paid for its first batch,
    so the restarted service fails the job with the reason instead of running it again (which would ask them
    twice: a walkthrough's FedDPDR owners paid for DP-PCA twice before the job failed). Killed (SIGKILL), the
    service writes nothing more: the report it wrote before the batch went out names who may pay for it."""
    owners = len(NODES) * OWNERS_PER_NODE
    _wait_for_all_nodes(fleet)
    stalled = fleet.procs[2]
    # it takes part in the job's accept round, then stops: its owners never answer the first batch, which waits
    fleet.stall(NODES[2])
    try:
        job_id = fleet.submit(epsilon=2.0, owners=owners, **settings)
        deadline = time.monotonic() + 60
        while sum(len(fleet.releases(n, job_id)) for n in NODES[:2]) < 2 * OWNERS_PER_NODE * entries:
            assert time.monotonic() < deadline, fleet.service_log()[-3000:]
            time.sleep(0.1)
        fleet.stop_service(kill=kill)
    finally:
        stalled.send_signal(signal.SIGCONT)
    fleet.start_service()
    job = fleet.wait(job_id)
    assert (job["state"], job["restarts"]) == ("failed", 1) and "not run again" in job["error"], job
    report = fleet.report(job_id)
    assert (report["status"], report["config"]["task"]) == ("failed", settings["task"])
    # failed at the start, in one line, with the progress it had reached (walkthrough 6, W6-7: "queued again", then
    # failed when it started, its report and progress those of a run that never began)
    restarted = fleet.service_log().rsplit("serving on port", 1)[0].rsplit("privfed serve", 1)[-1]
    assert f"job {job_id} was running when the service stopped: failed, the service stopped during" in restarted
    assert f"job {job_id} was running when the service stopped: queued again" not in fleet.service_log()
    per_owner = Counter(
        a.owner_id
        for node in NODES
        for a in read_accounts(fleet.ledger(node))
        for r in a.releases
        if r["job"] == job_id
    )  # the stalled node may answer the tasks it was sent before the stop, once; nobody is asked twice
    assert set(per_owner.values()) == {entries} and len(per_owner) >= 2 * OWNERS_PER_NODE, per_owner
    # the report accounts for every owner that paid: counted, or named as asked with no answer come (walkthrough 10,
    # W10-3: the stalled node's owners were given nothing, their ledgers holding the debits)
    counted = {o for o, e in report.get("epsilon_by_owner", {}).items() if e > 0}
    unanswered = report.get("epsilon_unanswered_by_owner", {})
    assert set(per_owner) <= counted | set(unanswered), (per_owner, counted, unanswered)
    assert not counted & set(unanswered), (counted, unanswered)
    # the stalled node's owners never answered; the others' answers may have been on their way when the service
    # stopped (their ledgers debit first), and then they are named too
    assert Counter(node_of(o) for o in unanswered)[NODES[2]] == OWNERS_PER_NODE, unanswered
    if kill:  # its report is the one written before the batch went out (walkthrough 10, W10-3: a killed service's
        assert not counted and len(unanswered) == owners, (counted, unanswered)  # report had no word of the batch)
    # the daemons that paid for it hear that it failed, as a node of one job does (walkthrough 7, W7-11: a daemon's
    # log never mentioned the job again)
    for node in NODES[:2]:
        line = _wait_for_line(fleet, node, f"job {job_id} ended without its result at the coordinator")
        assert f"after node {node} answered {OWNERS_PER_NODE} task(s)" in line and "WARNING" in line, line


def test_a_resumed_boosting_job_names_the_owners_of_a_node_that_did_not_come_back_which_paid(fleet):
    """Walkthrough 14, W14-2: a boosting job by shares was stopped with the service mid-round, one node stopped
    meanwhile and did not come back, and the job resumed from its journal over the others. The releases that node's
    owners made in the round the journal had not recorded (seven evaluators' boost-eval at epsilon 0.4 in the
    walkthrough) were in their ledgers but in no field of the finished report: not in epsilon_by_owner, not in
    epsilon_unanswered_by_owner, the round's secure sum saying dropped []. README ("What survives what", W10-3):
    every owner asked for a release whose answer never came is named, also across an interrupted job."""
    owners = len(NODES) * OWNERS_PER_NODE
    _wait_for_all_nodes(fleet)
    stalled, leaving = fleet.procs[2], fleet.procs[1]
    fleet.stall(NODES[2])  # holds the job's first release batch open, with the other two nodes' releases made
    try:
        job_id = fleet.submit(
            task="bdt", epsilon=2.0, owners=owners, release="shares", rounds=3, min_owners=1, register_timeout=20
        )
        deadline = time.monotonic() + 60
        while not (fleet.releases(NODES[0], job_id) and fleet.releases(NODES[1], job_id)):
            assert time.monotonic() < deadline, fleet.service_log()[-3000:]
            time.sleep(0.05)
        leaving.terminate()  # stopped for good while the service is down: it never comes back for this job
        assert leaving.wait(timeout=30) == 0
        fleet.stop_service()
    finally:
        stalled.send_signal(signal.SIGCONT)
    try:
        fleet.start_service()
        job = fleet.wait(job_id, timeout=120)
        assert job["restarts"] == 1, job
        paid = {
            a.owner_id
            for node in NODES
            for a in read_accounts(fleet.ledger(node))
            for r in a.releases
            if r["job"] == job_id
        }
        assert any(node_of(o) == NODES[1] for o in paid), paid
        report = fleet.report(job_id)
        counted = {o for o, e in report.get("epsilon_by_owner", {}).items() if e > 0}
        unanswered = set(report.get("epsilon_unanswered_by_owner", {}))
        assert paid <= counted | unanswered, sorted(paid - counted - unanswered)
        # its data user's listing says it lost the node (walkthrough 14, W14-13: only the accuracy note did)
        assert report["lost_nodes"] == [NODES[1]], report["lost_nodes"]
        assert f"lost node(s) {NODES[1]} while it ran" in (fleet.jobs()[job_id]["note"] or ""), fleet.jobs()[job_id]
    finally:  # the node back for the module's other tests
        fleet.procs[1] = subprocess.Popen(
            leaving.args,
            stdout=open(fleet.tmp / f"{NODES[1]}.log", "a"),
            stderr=subprocess.STDOUT,
            env=os.environ | {"PRIVFED_TEST_STALL": str(fleet.tmp / f"stall-{NODES[1]}")},
        )


def _log_lines(fleet, text: str) -> list[str]:
    return [line for line in fleet.service_log().splitlines() if text in line]


def _wait_for_line(fleet, node: str, text: str, timeout: float = 30) -> str:
    """The line of ``node``'s log holding ``text``, once it is there."""
    deadline = time.monotonic() + timeout
    while not (lines := [line for line in fleet.node_log(node).splitlines() if text in line]):
        assert time.monotonic() < deadline, (text, fleet.node_log(node)[-3000:])
        time.sleep(0.1)
    return lines[-1]


def _journal_rounds(path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        try:
            return int(conn.execute("SELECT COUNT(*) FROM rounds WHERE err_total IS NOT NULL").fetchone()[0])
        except sqlite3.Error:
            return 0


def test_a_data_user_lists_and_queries_only_their_own_jobs_and_models(fleet, tmp_path):
    """The owners' policies serve alice; bob, another data user of the federation, neither lists
    alice's jobs nor queries or inspects their models: a model answers as if it did not exist.
    Alice and an owner node query it."""
    job_id = fleet.submit(task="feddpdr", epsilon=2.0, owners=len(NODES) * OWNERS_PER_NODE, k=2)  # reads 2 of 20
    assert fleet.wait(job_id)["state"] == "done"
    _, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)
    queries = tmp_path / "queries.csv"
    np.savetxt(queries, test.X[:3], delimiter=",")

    listed = fleet.cli(
        "jobs", "--json", "--all", name="bob"
    )  # (show, logs, cancel: tests/adversary/test_hostile_data_user.py)
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stdout
    query = ("query", "--model-id", job_id, "--queries", str(queries), "--max-rank", "2")
    refused = fleet.cli(*query, name="bob")
    assert refused.returncode == 2 and f"no model '{job_id}'" in refused.stderr, refused.stderr
    assert job_id not in refused.stderr.split("served models:")[-1]  # the list names none of alice's
    for name in ("alice", "owner-0"):
        answered = fleet.cli(*query, name=name)
        assert answered.returncode == 0 and len(answered.stdout.strip().splitlines()) >= 3, (name, answered.stderr)
    assert fleet.cli("job", "show", job_id).returncode == 0
    # alice downloads her model (any kind: a query serves only a linear first stage) and uses it without the network
    saved = tmp_path / "alices.json"
    refused = fleet.cli("job", "model", job_id, "--out", str(saved), name="bob")
    assert refused.returncode == 2 and f"no job {job_id!r}" in refused.stderr and not saved.exists(), refused.stderr
    got = fleet.cli("job", "model", job_id, "--out", str(saved))
    assert got.returncode == 0 and f"wrote {saved}: the feddpdr model of job {job_id}" in got.stdout, got.stderr
    assert json.loads(saved.read_text()) == json.loads((fleet.job_dir(job_id) / "model.json").read_text())
    again = fleet.cli("job", "model", job_id, "--out", str(saved))
    assert again.returncode == 2 and "exists" in again.stderr, again.stderr  # nothing overwritten
    pickled = tmp_path / "alices.pkl"
    exported = subprocess.run(
        [sys.executable, "-m", "privfed.deploy.cli", "export", "--model", str(saved), "--out", str(pickled)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    with pickled.open("rb") as f:
        assert len(pickle.load(f).predict(test.X[:3])) == 3


def test_a_revoked_data_user_is_refused_at_once_and_let_back_when_the_operator_says(fleet):
    """Walkthrough 7, W7-9: a data user's certificate (a leaked key, a user who left) could be stopped only by
    replacing the whole CA, re-keying every owner node. The operator lists the name in --revoked-data-users; the
    file is read again when it changes, with no restart."""
    assert fleet.cli("jobs", name="bob").returncode == 0
    fleet.revoked.write_text("bob  # left the project\n")
    refused = fleet.cli("jobs", name="bob")
    assert refused.returncode == 2, refused.stdout
    assert "data user 'bob' is revoked by this service's operator (privfed serve --revoked-data-users)" in (
        refused.stderr
    )
    assert fleet.cli("jobs", name="alice").returncode == 0  # the others are not
    fleet.revoked.write_text("")
    assert fleet.cli("jobs", name="bob").returncode == 0
    assert "job API List refused for 'bob'" in fleet.service_log() and "revoked" in fleet.service_log()


def test_a_running_job_of_a_data_user_revoked_meanwhile_is_cancelled(fleet):
    """Audit 27, A27-3: a job whose data user the operator revoked while it ran went on to its end, its owners
    paying for every round of a model its data user would be refused. It is cancelled within a second, here while
    its first batch waits for a node that stopped."""
    owners = len(NODES) * OWNERS_PER_NODE
    _wait_for_all_nodes(fleet)
    fleet.stall(NODES[2])  # it takes part in the accept round, then stops before its first release
    try:
        job_id = fleet.submit(task="ncc", epsilon=2.0, owners=owners)
        deadline = time.monotonic() + 60
        while not fleet.releases(NODES[0], job_id):
            assert time.monotonic() < deadline, (fleet.jobs()[job_id]["error"], fleet.service_log()[-3000:])
            time.sleep(0.05)
        fleet.revoked.write_text("alice\n")
        job = fleet.wait(job_id, ("done", "failed", "cancelled"), timeout=10)  # not the node timeout's 15 s
    finally:
        fleet.revoked.write_text("")
        fleet.procs[2].send_signal(signal.SIGCONT)
    assert job["state"] == "cancelled" and "'alice' is revoked" in job["error"], job
    assert fleet.report(job_id)["status"] == "cancelled"
    for node in NODES:  # its daemons hear it ended without its result
        _wait_for_line(fleet, node, f"job {job_id} ended without its result at the coordinator")


def test_a_job_waits_no_longer_than_the_service_lets_it_and_a_revoked_users_waiting_job_is_cancelled(fleet):
    """Walkthrough 8, W8-14: a job with register_timeout = 1e12 was accepted and held the queue, every other data
    user's jobs behind it, for as long as it liked, and revoking its data user did not stop it while it waited for
    owners. A job may ask at most --max-job-wait (3600 s by default), and a revoked data user's job is cancelled
    within a second, waiting or not, with nothing debited."""
    owners = len(NODES) * OWNERS_PER_NODE
    path = fleet.tmp / "long-wait.toml"
    path.write_text(toml(dict(task="ncc", epsilon=0.5, owners=owners, register_timeout=1e12)))
    refused = fleet.cli("submit", str(path))
    assert refused.returncode == 2, refused.stdout
    assert "register_timeout 1e+12 s is longer than this service lets a job wait (3600 s" in refused.stderr
    job_id = fleet.submit(task="ncc", epsilon=0.5, owners=owners + 50, register_timeout=3000)  # more than exist
    deadline = time.monotonic() + 30
    while "waiting for owners" not in (fleet.jobs()[job_id].get("note") or ""):
        assert time.monotonic() < deadline, fleet.jobs()[job_id]
        time.sleep(0.1)
    behind = fleet.submit(task="ncc", epsilon=0.5, owners=owners)  # what it waits behind (walkthrough 8, W8-12)
    note = fleet.jobs()[behind]["note"]
    assert note == "queued behind 1 job(s); the running one waits for its owners, up to its register_timeout", note
    assert fleet.cli("job", "cancel", behind).returncode == 0
    try:
        fleet.revoked.write_text("alice\n")
        job = fleet.wait(job_id, timeout=20)
    finally:
        fleet.revoked.write_text("")
    assert job["state"] == "cancelled" and "'alice' is revoked" in job["error"], job
    assert all(fleet.releases(node, job_id) == [] for node in NODES)


def test_the_operator_lists_and_cancels_any_data_users_job_with_the_services_own_certificate(fleet):
    """Walkthrough 8, W8-14: a data user's job held the queue and the operator could only revoke the user and restart
    the service; `privfed job cancel` was the data user's alone. The service's own certificate (the operator's) lists
    and cancels any job; another data user's or a node's certificate does not."""
    job_id = fleet.submit(task="ncc", epsilon=0.5, owners=len(NODES) * OWNERS_PER_NODE + 50, register_timeout=3000)
    deadline = time.monotonic() + 30
    while "waiting for owners" not in (fleet.jobs()[job_id].get("note") or ""):
        assert time.monotonic() < deadline, fleet.jobs()[job_id]
        time.sleep(0.1)
    assert fleet.cli("job", "cancel", job_id, name="bob").returncode == 2  # another data user: no such job
    node = fleet.cli("job", "cancel", job_id, name="owner-0")
    assert node.returncode == 2 and "holds no data-user certificate" in node.stderr, node.stderr
    listed = fleet.cli("jobs", "--json", "--all", name="coordinator")
    assert listed.returncode == 0 and job_id in {j["job_id"] for j in json.loads(listed.stdout)}, listed.stderr
    cancelled = fleet.cli("job", "cancel", job_id, name="coordinator")
    assert cancelled.returncode == 0, cancelled.stderr
    job = fleet.wait(job_id, timeout=20)
    assert job["state"] == "cancelled" and job["error"] == "cancelled by the operator", job
    assert "job API Cancel by the operator" in fleet.service_log()


def test_after_a_restart_the_first_job_waits_for_the_nodes_of_the_last_run(fleet):
    """Walkthrough 8, W8-13: a job queued across a restart started 25 ms after the service, on whichever node dialled
    back first (one that declined its data user), 2 s before the node that serves them; a job runs on every owner
    registered when it starts, so it ran on another federation than the one it was queued for. The service now
    waits (up to its node timeout) for the nodes it had before the first job."""
    owners = len(NODES) * OWNERS_PER_NODE
    _wait_for_all_nodes(fleet)
    late = fleet.procs[2]
    late.send_signal(signal.SIGSTOP)  # this node will be slow to come back
    try:
        fleet.stop_service()
        fleet.start_service()
        job_id = fleet.submit(task="ncc", epsilon=0.5, owners=OWNERS_PER_NODE)  # one node's owners would do
        time.sleep(3.0)  # the other two nodes are back by now
        assert fleet.jobs()[job_id]["state"] == "queued", fleet.service_log()[-2000:]
    finally:
        late.send_signal(signal.SIGCONT)
    job = fleet.wait(job_id)
    assert job["state"] == "done", job
    assert fleet.report(job_id)["answered"] == owners  # over the whole federation it was queued for
    restarted = fleet.service_log().rsplit("serving on port", 1)[-1]
    assert f"waiting up to 15 s for the {len(NODES)} node(s) of the last run to register again" in restarted


def _wait_for_all_nodes(fleet) -> None:
    deadline = time.monotonic() + 60
    while not all(f"node {n} registered" in fleet.service_log().rsplit("serving on port", 1)[-1] for n in NODES):
        assert time.monotonic() < deadline, fleet.service_log()[-3000:]  # the daemons came back after a restart
        time.sleep(0.1)


def test_a_job_file_error_names_the_job_file_keys_not_flags(fleet, tmp_path):
    """A data user wrote a job file, not a command line: what ``privfed submit`` refuses, checked on the user's side
    or by the service, names the file's keys (a walkthrough was told to fix ``--labels rr``, ``--rounds``)."""
    owners = len(NODES) * OWNERS_PER_NODE
    for job, said in [
        ({"task": "lr", "epsilon": 1.0, "owners": owners, "labels": "rr"}, "labels is a parameter of task ncc and bdt"),
        (  # infeasible with the service's owners: refused by the service, not by the user's command
            {"task": "bdt", "epsilon": 1.0, "owners": owners, "rounds": owners + 10},
            f"task bdt cannot run with {owners} owners",
        ),
    ]:
        path = tmp_path / "job.toml"
        path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in job.items()))
        done = fleet.cli("submit", str(path))
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert "--" not in done.stderr.partition("error:")[2], done.stderr
    assert "use rounds " in done.stderr and "share_groups all" in done.stderr, done.stderr


def test_a_second_service_on_the_same_store_is_refused_and_leaves_the_first_alone(fleet):
    """Walkthrough 5: a second `privfed serve` on the same --store (a systemd unit and a manual run) started without
    a word, failed the first service's running job at its start-up recovery, and left a job every view called
    failed that could not be cancelled while it held the first service's queue. It is now refused, naming the
    first service's pid, before it reads the store."""
    owners = len(NODES) * OWNERS_PER_NODE
    waiting = fleet.submit(task="ncc", epsilon=1.0, owners=owners + 5, register_timeout=60)  # running: waits
    fleet.wait(waiting, ("running",))
    second = subprocess.run(
        [sys.executable, "-m", "privfed.deploy.cli", "serve", "--listen", "127.0.0.1:0", "--certs", str(fleet.certs),
         "--store", str(fleet.store), "--status-listen", "none", *DATASET],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 2, second.stderr
    last = second.stderr.strip().splitlines()[-1]
    assert f"job store {fleet.store / 'service'} is in use by another privfed serve (pid {fleet.service.pid})" in last
    assert fleet.jobs()[waiting]["state"] == "running"  # not failed by the second one's recovery
    assert fleet.cli("job", "cancel", waiting).returncode == 0  # the first service cancels it: nothing held up
    assert fleet.wait(waiting)["state"] == "cancelled"


def test_a_job_stopped_while_it_waited_for_its_owners_runs_again_after_the_restart(fleet):
    """Walkthrough 5: the service's stop said such a job "runs again at the next start", and the next start failed
    it ("its owners may have spent their budget on it") though no owner had been asked anything. A job that asked
    nothing yet is queued again as it was; one that asked keeps failing at the restart (the test above)."""
    owners = len(NODES) * OWNERS_PER_NODE
    waiting = fleet.submit(task="nb", epsilon=1.0, owners=owners + 5, register_timeout=60)  # more than registered
    fleet.wait(waiting, ("running",))
    fleet.stop_service()
    assert "stopped before it asked its owners anything: queued again" in fleet.service_log()
    fleet.start_service()
    job = fleet.wait(waiting, ("running", "failed"))
    assert job["state"] == "running" and job["restarts"] == 0 and not job.get("error"), job
    assert fleet.cli("job", "cancel", waiting).returncode == 0
    assert fleet.wait(waiting)["state"] == "cancelled"


def test_a_data_user_deletes_a_finished_job_and_its_model_is_served_no_more(fleet, tmp_path):
    """``privfed job delete``: a service that stays up across jobs kept every job's record, log, report and model
    for good. A data user deletes their own finished jobs; a running one is kept until it ends (it still writes its
    log and report), another data user's answers as one that does not exist, and owners' ledgers keep what they
    released for it."""
    waiting = fleet.submit(task="ncc", epsilon=1.0, owners=31)  # one owner more than there are: it waits, running
    fleet.wait(waiting, ("running",))
    kept = fleet.cli("job", "delete", waiting)
    assert kept.returncode == 2 and f"job {waiting} is running: only a finished job can be deleted" in kept.stderr
    assert fleet.cli("job", "cancel", waiting).returncode == 0 and fleet.wait(waiting)["state"] == "cancelled"

    job_id = fleet.submit(task="feddpdr", epsilon=2.0, owners=len(NODES) * OWNERS_PER_NODE, k=2)
    assert fleet.wait(job_id)["state"] == "done"
    released = {n: len(fleet.releases(n, job_id)) for n in NODES}
    assert all(released.values()), released
    bobs = fleet.cli("job", "delete", job_id, name="bob")
    assert bobs.returncode == 2 and f"no job {job_id!r}" in bobs.stderr and fleet.job_dir(job_id).exists()
    _, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)
    queries = tmp_path / "queries.csv"
    np.savetxt(queries, test.X[:3], delimiter=",")
    query = ("query", "--model-id", job_id, "--queries", str(queries), "--max-rank", "2")
    assert fleet.cli(*query).returncode == 0  # served until deleted

    deleted = fleet.cli("job", "delete", job_id)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.startswith(f"job {job_id} (done) deleted: its record, log, report and model are removed")
    assert not fleet.job_dir(job_id).exists() and job_id not in fleet.jobs()
    shown = fleet.cli("job", "show", job_id)
    assert shown.returncode == 2 and f"no job {job_id!r}" in shown.stderr, shown.stderr
    served = fleet.cli(*query)
    assert served.returncode == 2 and f"no model '{job_id}'" in served.stderr, served.stderr
    assert {n: len(fleet.releases(n, job_id)) for n in NODES} == released  # the owners' accounts are theirs
    assert fleet.cli("job", "delete", waiting).returncode == 0 and waiting not in fleet.jobs()
