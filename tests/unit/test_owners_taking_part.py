"""Who took part in a job (walkthrough 9, W9-4): an owner with any release the job used and debited, an evaluation
too. A bdt job by shares over 36 owners and 8 rounds asks 32 for shares and the other 4 only to evaluate; they paid,
yet the listing said ``32/36`` and the report warned that the others "declined it, refused or were lost", though
nobody had. The report's ``answered`` still counts the owners whose contribution was used, ``took_part`` every owner
that released, and the warning names only the reasons some owner had."""

from __future__ import annotations

import json
import sys

from privfed.common.identity import owner_id
from privfed.deploy.service_cli import _owners_cell
from privfed.server.contracts import PublicLimits
from privfed.server.jobapi import JobApi
from privfed.server.jobstore import JobStore
from privfed.server.report import fewer_owners_warning
from privfed.server.rounds import JobBook

OWNERS = [owner_id(f"owner-{i // 3}", i) for i in range(9)]  # three nodes of three owners


def test_the_warning_is_not_given_when_every_owner_released_something():
    assert fewer_owners_warning(36, 36, {}) is None
    assert fewer_owners_warning(36, 40, {}) is None and fewer_owners_warning(None, 3, {}) is None


def test_the_warning_names_only_the_reasons_some_owner_had_and_the_lists_that_say_which():
    declined = fewer_owners_warning(30, 20, {"declined": 10})
    assert declined == (
        "warning: 20 owner(s) released for this job, fewer than the 30 it asked for: of the others, 10 declined it; "
        "the report's declined_owners says which; min_owners sets how many must take part"
    )
    assert "refused" not in declined and "lost" not in declined
    mixed = fewer_owners_warning(30, 25, {"refused": 1, "rejected": 2, "lost": 1, "not_released": 1})
    assert mixed is not None and "declined" not in mixed
    assert ": of the others, 1 refused it, 2 were rejected, 1 was on a lost node, 1 released nothing it used " in mixed
    assert "the report's refused, rejected_owners and lost_nodes say which" in mixed
    # nothing explains it (not in the report's lists): the warning blames nobody
    bare = fewer_owners_warning(36, 32, {})
    assert bare == (
        "warning: 32 owner(s) released for this job, fewer than the 36 it asked for; min_owners sets how many must "
        "take part"
    )


def test_the_book_says_why_each_owner_that_released_nothing_did_not():
    book = JobBook(PublicLimits(max_rows=20))
    book.begin(OWNERS, asked=9)
    book.took_part.update(OWNERS[:3])
    book.answered.update(OWNERS[:2])  # OWNERS[2] only evaluated: it took part all the same
    book.refused = {OWNERS[3]: "policy: epsilon_per_job 1 < 2", OWNERS[4]: "budget_exceeded: spent"}
    book.rejected = {OWNERS[5]: "bad_shape: 3 rows"}
    book.lost_nodes = {"owner-2"}  # OWNERS[6:9]; one of them answered before its node was lost
    book.took_part.add(OWNERS[8])
    assert book.absent() == {"declined": 1, "refused": 1, "rejected": 1, "lost": 2}
    assert book.absent({OWNERS[6]: "no_answer: dropped"}) == {"declined": 1, "refused": 1, "rejected": 2, "lost": 1}
    book.lost_nodes = set()
    assert book.absent() == {"declined": 1, "refused": 1, "rejected": 1, "not_released": 2}


def test_a_journal_carries_who_took_part_and_one_of_older_code_is_read_from_its_debits():
    """A resumed bdt job books again, from its journal, the rounds it does not ask again (:meth:`JobBook.account`,
    :meth:`JobBook.replay`): who took part too. An account of older code has no ``took_part``: its contributors
    and the owners it debited took part."""
    book = JobBook(PublicLimits(max_rows=20))
    book.begin(OWNERS)
    book.took_part.update(OWNERS[:3])
    book.answered.update(OWNERS[:2])
    book._booked.update(OWNERS[:3])
    account = json.loads(json.dumps(book.account()))  # as the journal keeps it
    assert account["took_part"] == sorted(OWNERS[:3]) and account["answered"] == sorted(OWNERS[:2])
    resumed = JobBook(PublicLimits(max_rows=20))
    resumed.begin(OWNERS)
    resumed.replay(account)
    assert resumed.took_part == set(OWNERS[:3]) and resumed.contributed() == 2
    older = JobBook(PublicLimits(max_rows=20))
    older.begin(OWNERS)
    older.replay({"epsilon": {OWNERS[1]: 0.6, OWNERS[2]: 0.4, OWNERS[3]: 0.0}, "answered": [OWNERS[0], OWNERS[1]]})
    assert older.took_part == set(OWNERS[:3])


def test_the_owners_column_counts_the_owners_that_took_part():
    assert _owners_cell({"owners": 36, "answered": 32, "took_part": 36}) == "36/36"
    assert _owners_cell({"owners": 30, "answered": 20, "took_part": 20}) == "20/30"
    assert _owners_cell({"owners": 8, "answered": 16, "took_part": 18}) == "18 (8+ asked)"
    assert _owners_cell({"owners": 30, "answered": 20}) == "20/30"  # a service of older code: its answered


def test_the_job_listing_carries_each_finished_jobs_took_part_from_its_report(tmp_path):
    from privfed.server.service import CoordinatorService, ServiceConfig

    store = JobStore(tmp_path / "store")
    job_id = store.submit(
        {"task": "bdt", "release": "shares", "epsilon": 0.5, "owners": 36, "rounds": 8}, "alice"
    ).job_id
    store.transition(job_id, "queued", state="running")
    store.update(job_id, state="done")
    report = {"status": "ok", "owners": 36, "answered": 32, "took_part": 36, "warnings": []}
    (store.job_dir(job_id) / "report.json").write_text(json.dumps(report))
    service = CoordinatorService(
        ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, dataset="synthetic"), tls=None
    )
    api = JobApi(service, require_role=False)
    for listing in (api.list({}, "alice"), api.operator_list({})):
        (job,) = listing["jobs"]
        assert (job["answered"], job["took_part"], _owners_cell(job)) == (32, 36, "36/36"), job


def test_a_failed_jobs_listing_counts_the_owners_its_report_says_were_debited(tmp_path):
    """Walkthrough 13, W13-6: the listing of a job that failed after 452 of its 455 owners had paid showed ``455``, as
    if nobody had: a failed job's report has no took_part, only epsilon_by_owner (what the job received)."""
    from privfed.server.service import CoordinatorService, ServiceConfig

    store = JobStore(tmp_path / "store")
    job_id = store.submit({"task": "nb", "epsilon": 1.0, "owners": 5}, "alice").job_id
    store.transition(job_id, "queued", state="running")
    store.update(job_id, state="failed", error="no model")
    spent = {o: (1.0 if i < 3 else 0.0) for i, o in enumerate(OWNERS[:5])}
    report = {"status": "failed", "error": "no model", "epsilon_by_owner": spent}
    (store.job_dir(job_id) / "report.json").write_text(json.dumps(report))
    service = CoordinatorService(
        ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, dataset="synthetic"), tls=None
    )
    (job,) = JobApi(service, require_role=False).list({}, "alice")["jobs"]
    assert (job["took_part"], _owners_cell(job)) == (3, "3/5"), job


def test_privfed_simulate_says_how_many_owners_took_part(capsys):
    from privfed.deploy.simulate import _point, _print_point

    runs = [{"accuracy": 0.8, "answered": 32, "took_part": 36, "owners": 36, "timings": {"rounds_s": 1.0}}] * 2
    point = _point(0.5, runs)
    assert (point["answered"], point["took_part"]) == (32, 36)
    _print_point(point, 0.9, 0.5, 0.6, sys.stdout)
    assert "; 36/36 owners released," in capsys.readouterr().out
