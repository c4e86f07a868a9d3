"""The coordinator's journal (server/journal.py, issue 14 item 1): a boosting job interrupted at
any checkpoint and resumed from its journal ends with the same model as an uninterrupted run
with the same seeds, and no owner releases anything twice.

The coordinator's crash is an exception raised by its transport at a chosen call (the owner side
-- handlers, ring drivers, ledgers -- lives on, as owner nodes do when only the coordinator dies);
the resumed job is a new strategy object over a reopened journal. The process-level test
(kill -9 of a real ``privfed coordinator``) is in tests/integration/test_coordinator_resume.py.
"""

from __future__ import annotations

import contextlib
import sqlite3

import numpy as np
import pytest

from privfed.common.boosting.params import BoostingParams
from privfed.common.datasets import load_builtin
from privfed.common.errors import ConfigError
from privfed.deploy.inprocess import InProcessTransport
from privfed.server.contracts import PublicLimits
from privfed.server.journal import Journal
from privfed.server.rounds import JobBook
from privfed.server.strategies.boosting import BoostingStrategy

from ..owner_nodes import owners_over_nodes

N_OWNERS, N_NODES, ROUNDS, SEED = 40, 4, 4, 11


class Crash(Exception):
    """The coordinator process dies here."""


def crashing(owner_side: InProcessTransport, crash_at: int | None, after: bool = False) -> InProcessTransport:
    """``owner_side`` whose task batches (share batches, which the strategy folds as they come, and every
    ring attempt's batches alike: ``run_tasks`` goes through ``fold_tasks``) raise :class:`Crash` on the
    ``crash_at``-th -- before the owners see the batch, or ``after`` they answered it (their releases
    made, the answers lost with the coordinator); ``owner_side.batches`` counts them."""
    fold_tasks = type(owner_side).fold_tasks
    owner_side.batches = 0

    def fold(tasks, sink, timeout=None):
        owner_side.batches += 1
        if owner_side.batches == crash_at and not after:
            raise Crash(f"coordinator killed before task batch {owner_side.batches}")
        fold_tasks(owner_side, tasks, sink, timeout)
        if owner_side.batches == crash_at:
            raise Crash(f"coordinator killed after task batch {owner_side.batches}")

    owner_side.fold_tasks = fold
    return owner_side


@pytest.fixture(scope="module")
def data():
    return load_builtin("synthetic", n_samples=800, seed=5)


class BookedTransport(InProcessTransport):
    """The in-process owners with the job's book between them and the strategy, as a federation's
    :class:`~privfed.server.job.GrpcTransport` has: every answer is booked (:meth:`JobBook.take`) before the
    strategy sees it, and the journal keeps and replays the book's account."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.restarted()

    def restarted(self) -> BookedTransport:
        """The owners as a new coordinator reaches them: its own book, no crash."""
        self.fold_tasks = type(self).fold_tasks.__get__(self)
        self.book = JobBook(PublicLimits(max_rows=40))
        self.book.begin(sorted(self.owners))
        return self

    def fold_tasks(self, tasks, fold, timeout=None):
        by_id = {t.task_id: t for t in tasks}
        super().fold_tasks(tasks, lambda results: fold(self.book.take([(by_id[r.task_id], r) for r in results])))

    def account(self):
        return self.book.account()

    def replay(self, account):
        self.book.replay(account)


def _owner_side(ds, n_owners: int = N_OWNERS) -> BookedTransport:
    owners = owners_over_nodes(ds, n_owners=n_owners, n_nodes=N_NODES)
    return BookedTransport.with_ledgers(owners, epsilon_budget=8.0)


def _report(result, transport: BookedTransport) -> dict:
    """What a job's report says of its owners and rounds, timings aside: the resumed job's must be the uninterrupted's."""
    book = transport.book
    rounds = [r.to_report() | {"seconds": None, "from_journal": None} for r in result.rounds]
    for r in rounds:
        r.get("secure_sum", {}).pop("seconds", None)
    return {
        "answered": book.contributed(),
        "took_part": sorted(book.took_part),
        "absent": book.absent(result.rejected),
        "epsilon_by_owner": book.epsilon_by_owner,
        "refused": book.refused,
        "rejected": book.rejected | dict(result.rejected),
        "dropped": sorted(result.dropped),
        "rounds": rounds,
    }


def _booster(ds) -> BoostingParams:
    return BoostingParams(
        epsilon=4.0, n_classes=2, bounds=ds.bounds, n_rounds=ROUNDS, n_bins=4, weight_bound=40.0, max_owner_rows=40
    )


def _run(ds, transport, journal=None, resume=False):
    strategy = BoostingStrategy(
        _booster(ds), np.random.Generator(np.random.PCG64(SEED)), journal=journal, resume=resume, seed=SEED
    )
    return strategy.run(sorted(transport.owners), transport)


def _debits(owner_side: InProcessTransport) -> dict[str, list[tuple[str, float]]]:
    """Per owner: (what was released, ε) in debit order; the run id (random per job) left out."""
    return {
        o: [(h["purpose"].split(":")[0], h["epsilon"]) for h in owner_side.ledgers[o.split(".")[0]].history(o)]
        for o in sorted(owner_side.owners)
    }


def test_a_restarted_owner_node_refuses_to_release_again_and_the_job_goes_on_without_it(tmp_path, data):
    """Owners whose node restarted lost the shares they sent to the dead coordinator: they refuse
    (``already_released``) rather than release twice, and the resumed round learns from the rest."""
    owner_side = _owner_side(data)
    with Journal(tmp_path / "j.sqlite") as journal, pytest.raises(Crash):
        _run(data, crashing(owner_side, 1, after=True), journal)
    restarted_node = "owner-1"  # loses what it kept in memory: the shares it sent, its cached pairs
    for oid, owner in owner_side.owners.items():
        if oid.startswith(restarted_node + "."):
            owner.released.clear()
            owner.boost_applied.clear()
    owner_side.restarted()
    survivors = owner_side
    with Journal(tmp_path / "j.sqlite") as journal:
        result = _run(data, survivors, journal, resume=True)
    first = result.rounds[0]
    assert first.released < first.asked
    assert result.refused and all(c == "already_released" for c in result.refused.values())
    assert {o.split(".")[0] for o in result.refused} == {restarted_node}
    for o, entries in _debits(survivors).items():
        assert len(entries) == len(set(entries)), f"{o} released something twice: {entries}"


@pytest.fixture(scope="module")
def uninterrupted(data):
    owner_side = _owner_side(data)
    result = _run(data, owner_side)
    batches = crashing(_owner_side(data), None)
    _run(data, batches)
    return result.model, _debits(owner_side), batches.batches, _report(result, owner_side)


def test_uninterrupted_runs_are_reproducible(data, uninterrupted):
    model, debits, _, _ = uninterrupted
    again = _run(data, _owner_side(data)).model
    np.testing.assert_array_equal(again.predict(data.X), model.predict(data.X))
    np.testing.assert_allclose(again.alphas, model.alphas)


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
@pytest.mark.parametrize("crash_at", range(1, 13))  # the job has 12 task batches (checked below)
def test_a_job_killed_at_any_task_batch_resumes_to_the_same_model(tmp_path, data, uninterrupted, crash_at, after):
    model, clean_debits, n_batches, clean_report = uninterrupted
    if crash_at > n_batches:
        pytest.skip(f"the job has {n_batches} task batches")
    owner_side = _owner_side(data)
    journal_path = tmp_path / "journal.sqlite"
    with Journal(journal_path) as journal, pytest.raises(Crash):
        _run(data, crashing(owner_side, crash_at, after), journal)
    owner_side.restarted()  # the new coordinator's calls, and its book
    with Journal(journal_path) as journal:
        result = _run(data, owner_side, journal, resume=True)
    resumed = result.model
    # Nothing is released twice and nothing is lost: a recorded step is never asked again; a
    # share batch whose answers died with the coordinator is answered again with the same shares
    # (no new debit); a ring re-run reuses its members' cached noisy pairs.
    np.testing.assert_array_equal(resumed.predict(data.X), model.predict(data.X))
    np.testing.assert_allclose(resumed.alphas, model.alphas)
    assert _debits(owner_side) == clean_debits
    taken = [r.from_journal for r in result.rounds if r.from_journal is not None]
    assert taken or crash_at == 1
    assert all(r.seconds is None for r in result.rounds if r.from_journal)
    # Its report counts the owners of the steps it took from the journal as the uninterrupted job's does: a
    # walkthrough's resumed job said 64 answered where its owners' ledgers held 80 releases.
    report = _report(result, owner_side)
    assert report == clean_report
    assert report["answered"] == sum(r.released for r in result.rounds)


def test_a_journal_is_not_overwritten_or_resumed_with_another_job(tmp_path, data):
    path = tmp_path / "journal.sqlite"
    with Journal(path) as journal:
        journal.begin(fingerprint="a", owner_ids=["x"], run_id="boost-1", resume=False)
    with Journal(path) as journal, pytest.raises(ConfigError, match="--resume"):
        journal.begin(fingerprint="a", owner_ids=["x"], run_id="boost-2", resume=False)
    with Journal(path) as journal, pytest.raises(ConfigError, match="another configuration"):
        journal.begin(fingerprint="b", owner_ids=["x"], run_id="boost-2", resume=True)
    with Journal(path) as journal, pytest.raises(ConfigError, match="other owners"):
        journal.begin(fingerprint="a", owner_ids=["y"], run_id="boost-2", resume=True)
    with Journal(path) as journal:
        assert journal.begin(fingerprint="a", owner_ids=["x"], run_id="boost-2", resume=True) == "boost-1"
        journal.finish()
    with Journal(path) as journal:  # a finished job's journal is replaced by the next job
        assert journal.begin(fingerprint="b", owner_ids=["y"], run_id="boost-3", resume=True) == "boost-3"
        assert journal.recorded_rounds() == 0


def _progress_seen(owner_side: InProcessTransport) -> list[tuple[int, int]]:
    """What the strategy tells ``owner_side`` of its progress (:meth:`Transport.progressed`), in order."""
    seen: list[tuple[int, int]] = []
    owner_side.progressed = lambda done, planned: seen.append((done, planned))
    return seen


def test_a_boosting_job_counts_its_progress_in_rounds_and_a_resumed_one_from_its_journals_rounds(tmp_path, data):
    """A service showed a 40-round job at 99 % at round 29 (every ring hop and secure-sum step counted against two
    batches a round), and a restarted one went backwards (its journal counted two steps a round): progress is rounds
    done of rounds planned, and a resumed job goes on from the rounds its journal holds done."""
    owner_side = _owner_side(data)
    seen = _progress_seen(owner_side)
    rounds = _run(data, owner_side).rounds
    assert seen == [(r.round, ROUNDS) for r in rounds]
    journal_path = tmp_path / "journal.sqlite"
    owner_side = _owner_side(data)
    before = _progress_seen(owner_side)
    with Journal(journal_path) as journal, pytest.raises(Crash):
        _run(data, crashing(owner_side, 7), journal)  # mid-job: after some rounds, before the last
    with Journal(journal_path) as journal:
        held = journal.evaluated_rounds()
    assert before and held == before[-1][0] < ROUNDS, (before, held)
    owner_side.restarted()
    after = _progress_seen(owner_side)
    with Journal(journal_path) as journal:
        _run(data, owner_side, journal, resume=True)
    assert after[:held] == before and [d for d, _ in after] == list(range(1, len(after) + 1)), after


def test_a_journal_of_older_code_without_accounts_resumes_and_counts_what_it_can(tmp_path, data, uninterrupted):
    """A journal written before the checkpoints kept their accounts (no such columns) is given them, NULL in its
    rounds: the job resumes to the same model, and its report counts the rounds it ran again."""
    model, _, _, clean_report = uninterrupted
    owner_side, path = _owner_side(data), tmp_path / "journal.sqlite"
    with Journal(path) as journal, pytest.raises(Crash):
        _run(data, crashing(owner_side, 7), journal)
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("ALTER TABLE rounds DROP COLUMN learner_account")
        db.execute("ALTER TABLE rounds DROP COLUMN sum_account")
        db.commit()
    with Journal(path) as journal:
        result = _run(data, owner_side.restarted(), journal, resume=True)
    np.testing.assert_array_equal(result.model.predict(data.X), model.predict(data.X))
    taken = [r for r in result.rounds if r.from_journal]
    assert taken and all(r.released is None and r.secure_sum is None for r in taken)
    ran = sum(r.released for r in result.rounds if not r.from_journal)
    assert owner_side.book.contributed() == ran < clean_report["answered"]


def test_a_resumed_job_runs_over_the_owners_its_journal_recorded_in_their_order(tmp_path):
    """The journal records the owners a job is planned over (those that took part in its accept round); a resumed
    job runs over them again, in that order, whoever is registered beside them, and says which are missing."""
    from privfed.common.errors import RoundFailed
    from privfed.server.job import _resumed_plan
    from privfed.server.journal import resumed_owners

    path = tmp_path / "journal.sqlite"
    assert resumed_owners(path) == []  # no journal: a fresh job
    taking_part = ["owner-1.o00003", "owner-0.o00001", "owner-2.o00007"]
    with Journal(path) as journal:
        journal.begin(fingerprint="f", owner_ids=taking_part, run_id="boost-1", resume=False)
    assert resumed_owners(path) == taking_part
    registered = sorted([*taking_part, "owner-0.o00000", "owner-2.o00008"])
    assert _resumed_plan(resumed_owners(path), registered) == taking_part
    with pytest.raises(
        RoundFailed,
        match=r"3 owners its journal ran over, and 1 of them are not registered "
        r"\(owner-2\.o00007\): nodes owner-2 \(1 owner\(s\)\); start those nodes again",
    ):
        _resumed_plan(taking_part, registered[:-2])


@pytest.mark.parametrize(("crash_at", "after"), [(2, True), (5, False), (7, True), (10, True)])
def test_a_resumed_job_counts_the_owners_that_only_evaluated_as_its_uninterrupted_one_does(
    tmp_path, data, crash_at, after
):
    """Walkthrough 9, W9-4: 36 owners over 8 rounds share in groups of 4, so 4 owners only evaluate; they pay for
    their evaluations, yet the job said 32 of 36 released. Here 43 owners over 4 rounds: 40 share, 3 only evaluate,
    and all 43 took part; a job resumed from its journal books the steps it takes from it (the journal carries the
    book's took_part) and says the same."""
    n_owners = N_OWNERS + 3
    clean_side = _owner_side(data, n_owners)
    clean = _report(_run(data, clean_side), clean_side)
    debited = {o for o, e in clean["epsilon_by_owner"].items() if e > 0}
    assert clean["answered"] == N_OWNERS and len(clean["took_part"]) == n_owners, clean
    assert set(clean["took_part"]) == debited and clean["absent"] == {}
    owner_side = _owner_side(data, n_owners)
    with Journal(tmp_path / "journal.sqlite") as journal, pytest.raises(Crash):
        _run(data, crashing(owner_side, crash_at, after), journal)
    owner_side.restarted()
    with Journal(tmp_path / "journal.sqlite") as journal:
        result = _run(data, owner_side, journal, resume=True)
    assert any(r.from_journal for r in result.rounds)
    assert _report(result, owner_side) == clean


def test_a_journal_lists_the_reports_of_its_unfinished_jobs_earlier_runs_for_a_resumed_one(tmp_path):
    """Walkthrough 14, W14-2, for ``privfed coordinator --resume``: the resumed run reads what the killed runs'
    reports (written ahead of each batch) say the owners may have spent; the journal says where they are."""
    run = [tmp_path / f"run{i}" / "report.json" for i in range(5)]
    with Journal(tmp_path / "journal.sqlite") as journal:
        assert journal.note_run(run[0], resume=False) == []  # a fresh job: nothing before it
        journal.begin(fingerprint="f", owner_ids=["a", "b"], run_id="r", resume=False)
        assert journal.note_run(run[1], resume=False) == []  # begin will refuse it: not recorded
        assert journal.note_run(run[2], resume=True) == [run[0].resolve()]
        assert journal.note_run(run[3], resume=True) == [run[0].resolve(), run[2].resolve()]
        journal.finish()
        assert journal.note_run(run[4], resume=True) == []  # a finished job's runs are not the next job's
        journal.begin(fingerprint="g", owner_ids=["a"], run_id="s", resume=True)
        assert journal.note_run(run[0], resume=True) == [run[4].resolve()]


def test_a_resumed_coordinator_carries_the_most_each_earlier_report_names_and_marks_a_killed_one(tmp_path):
    import json

    from privfed.server.main import _spent_in_earlier_runs
    from privfed.server.report import JobReport

    killed, failed = tmp_path / "killed" / "report.json", tmp_path / "failed" / "report.json"
    for path, fields in (
        (killed, {"status": "running", "epsilon_by_owner": {"a": 1.0}, "epsilon_unanswered_by_owner": {"b": 2.0}}),
        (failed, {"status": "failed", "error": "x", "epsilon_by_owner": {"a": 0.5, "c": 1.5}}),
    ):
        path.parent.mkdir()
        path.write_text(json.dumps(fields))
    journal = tmp_path / "journal.sqlite"
    with Journal(journal) as book:
        book.note_run(killed, resume=False)
        book.begin(fingerprint="f", owner_ids=["a", "b", "c"], run_id="r", resume=False)
        book.note_run(failed, resume=True)
        book.note_run(tmp_path / "lost" / "report.json", resume=True)  # a run whose report was never written
    now = JobReport(tmp_path, {}, run_dir=tmp_path / "now")
    assert _spent_in_earlier_runs(journal, now, resume=True) == {"a": {"": 1.0}, "b": {"": 2.0}, "c": {"": 1.5}}
    marked = json.loads(killed.read_text())
    assert marked["status"] == "failed"
    assert marked["error"] == f"interrupted; a later run of its journal started in {tmp_path / 'now'}"
    assert json.loads(failed.read_text())["error"] == "x"  # a report its run finished is left as it is
    assert _spent_in_earlier_runs(journal, now, resume=False) == {}  # begin refuses it: it carries nothing


def test_a_finished_journal_reopened_rebuilds_the_model_asking_no_owner_for_anything(tmp_path, data, uninterrupted):
    """Audit 38, A38-3: a service killed after a boosting job's journal was finished, before its ok report, ran the
    job again as a new run (every owner paid twice). The service now reopens such a journal (``reopen_finished``):
    the next run replays every round from it, debits nothing, and ends with the same model."""
    from privfed.server.journal import reopen_finished

    model, clean_debits, _, _ = uninterrupted
    owner_side = _owner_side(data)
    journal_path = tmp_path / "journal.sqlite"
    assert not reopen_finished(journal_path)  # no journal: nothing to reopen
    with Journal(journal_path) as journal:
        _run(data, owner_side, journal)  # finished: the process dies before the report
    assert _debits(owner_side) == clean_debits
    assert reopen_finished(journal_path) and not reopen_finished(journal_path)  # once: it is unfinished now
    owner_side.restarted()
    with Journal(journal_path) as journal:
        result = _run(data, owner_side, journal, resume=True)
    np.testing.assert_array_equal(result.model.predict(data.X), model.predict(data.X))
    assert _debits(owner_side) == clean_debits  # no owner paid again
    assert all(r.from_journal is not None for r in result.rounds)
