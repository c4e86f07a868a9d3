"""What an owner spent on one job, on every job but one, and in the last day
(``Ledger.spent_on``, read by an owner policy on every task): equal to ``fsum`` of exactly the
releases it names, and, counted in SQLite instructions, not growing with the owner's releases of
other jobs or days (issue 27: a long-lived node with a policy scanned its whole history per task)."""

import math

import pytest

from privfed.common.ledger import Budget, Debit, Ledger

from .test_ledger_history import work


def same(a: float, b: float) -> bool:
    return a.hex() == b.hex()


def test_each_question_is_fsum_of_the_releases_it_names(tmp_path, rng):
    jobs = ["j0", "j1", "j2", ""]
    picks = rng.integers(0, len(jobs), 400)
    eps = [float(x) for x in rng.choice([0.1, 1e-17, 0.3, 2.0**-53, 1e-9, 7.0], 400)]
    dlt = [float(x) for x in rng.choice([1e-12, 3e-13, 1e-17], 400)]
    with Ledger(tmp_path / "l.sqlite", epsilon_budget=math.inf, delta_budget=1.0) as ledger:
        ledger.debit_many(
            [Debit("n.a", e, d, "p", f"r{i}", job=jobs[j]) for i, (e, d, j) in enumerate(zip(eps, dlt, picks))]
        )
        ledger.debit("n.b", 5.0, purpose="p", release_id="other")  # another owner's release counts for none
        for name in jobs:
            mine = [i for i, j in enumerate(picks) if jobs[j] == name]
            rest = [i for i, j in enumerate(picks) if jobs[j] != name]
            for spent, kept in (
                (ledger.spent_on("n.a", job=name), mine),
                (ledger.spent_on("n.a", other_than=name), rest),
                (ledger.spent_on("n.a", other_than=name, since="-1 day"), rest),
                (ledger.spent_on("n.a", job=name, since="-1 day"), mine),
            ):
                assert same(spent.epsilon, math.fsum(eps[i] for i in kept)), name
                assert same(spent.delta, math.fsum(dlt[i] for i in kept)), name
        assert same(ledger.spent_on("n.a").epsilon, math.fsum(eps))
        assert ledger.spent_on("n.a", since="+1 day").epsilon == 0.0  # nothing is debited in the future
        assert ledger.spent_on("n.nobody", other_than="j0").epsilon == 0.0


def test_every_job_but_one_holding_an_infinite_release_is_the_other_jobs_sum(tmp_path):
    """A job of the non-private bypass (ε = ∞, an infinite budget) cannot be taken back out of the running
    sum (∞ − ∞ raised, and a policy refused every task of such an owner); the other jobs' releases are summed."""
    with Ledger(tmp_path / "l.sqlite", epsilon_budget=math.inf, delta_budget=1.0) as ledger:
        ledger.debit_many(
            [
                Debit("n.a", math.inf, 0.0, "p", "r0", job="bypass"),
                Debit("n.a", 0.5, 1e-6, "p", "r1", job="k"),
                Debit("n.a", 0.25, 0.0, "p", "r2", job="k"),
            ]
        )
        assert ledger.spent_on("n.a", other_than="bypass") == Budget(0.75, 1e-6)
        assert ledger.spent_on("n.a", other_than="k").epsilon == math.inf
        assert ledger.spent_on("n.a").epsilon == math.inf


@pytest.mark.parametrize(
    "question",
    [{"job": "now"}, {"other_than": "now"}, {"other_than": "now", "since": "-1 day"}],
    ids=["job", "other_than", "day"],
)
def test_a_policy_question_does_the_same_work_whatever_the_other_jobs_and_days_hold(tmp_path, question):
    steps = []
    for n, (older, when) in enumerate(((10, "-10 days"), (5000, "-10 days"))):
        with Ledger(tmp_path / f"l{n}.sqlite", epsilon_budget=1e9) as ledger:
            ledger.debit_many([Debit("n.a", 1e-6, 0.0, "p", f"h{i}", job=f"old{i % 50}") for i in range(older)])
            ledger._db().execute("UPDATE releases SET ts = datetime('now', ?)", (when,))  # last week's jobs
            ledger._db().commit()
            ledger.debit_many([Debit("n.a", 1e-3, 0.0, "p", f"now{i}", job="now") for i in range(5)])
            ledger.debit_many([Debit("n.a", 1e-3, 0.0, "p", "today", job="today")])
            ledger.spent_on("n.a", **question)  # the owner's first read: O(its history) once
            steps.append(work(ledger, lambda: ledger.spent_on("n.a", **question))[0])
    assert steps[0] == steps[1], steps
