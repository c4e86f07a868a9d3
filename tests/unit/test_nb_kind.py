"""LDP naive Bayes as a task kind (issue 22 item 3): the owner's nb kind and the coordinator's strategy, in
process with the real owner core and in-memory ledgers.

* a task refused on its public fields is refused alike, with the same text, by owners whose rows differ,
  and nothing is debited;
* the debit is on the ledger before a row is read, and a second report of the same run is refused while a
  new run is debited again until the budget is spent;
* every report is in the derived oracle's output space (its contract holds; a report outside is rejected),
  and the strategy's folded counts are unbiased for the owners' (bin, class) histograms within the closed-form
  variance;
* the strategy over the in-process transport learns, and reports its refusals and its privacy split.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.naive_bayes import NaiveBayesEncoding
from privfed.common.ledger import Ledger
from privfed.common.tasks import NbReportReply, NbReportTask, Task, check_reply, nb_release_id
from privfed.common.tasks.contract import ContractViolation, PublicLimits
from privfed.deploy.inprocess import InProcessTransport
from privfed.owner.core import OwnerCore
from privfed.owner.kinds import naive_bayes as nb_kind
from privfed.owner.local import LocalOwner
from privfed.server.config import JobConfig
from privfed.server.strategies import make_strategy
from privfed.server.strategies.naive_bayes import NbStrategy

from ..run_releases import assert_one_release_per_run, assert_refused_alike, cores_with_different_rows

D, K = 3, 2
BOUNDS = Bounds.of(0.0, 10.0, D)
OWNERS = ["owner-0.o00000", "owner-0.o00001"]
LIMITS = PublicLimits(max_rows=10)


def core(X_rows: list[np.ndarray], y_rows: list[np.ndarray], budget: float = 3.0) -> OwnerCore:
    owners = [
        LocalOwner(o, X, y, np.random.Generator(np.random.PCG64(i)), K, BOUNDS)
        for i, (o, X, y) in enumerate(zip(OWNERS, X_rows, y_rows))
    ]
    return OwnerCore(owners, Ledger(":memory:", epsilon_budget=budget))


def task(task_id: str, owner: str, run: str = "run-1", **fields) -> Task:
    spec = dict(epsilon=1.0, n_bins=3, n_classes=K, bounds=BOUNDS)
    return Task(task_id, owner, run, NbReportTask(**(spec | fields)))


HOSTILE = {
    "other bounds": dict(bounds=Bounds.of(0.0, 20.0, D)),
    "another schema's features": dict(bounds=Bounds.of(0.0, 10.0, D + 1)),
    "other classes": dict(n_classes=3),
    "one bin": dict(n_bins=1),
    "bins beyond the public limit": dict(n_bins=10**6),
    "epsilon below the floor": dict(epsilon=1e-300),
    "over budget": dict(epsilon=5.0),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_refusal_is_the_same_for_owners_with_different_rows_and_debits_nothing(name):
    assert_refused_alike(
        cores_with_different_rows(core, D), [task(f"t{i}", o, **HOSTILE[name]) for i, o in enumerate(OWNERS)], name
    )


def test_the_debit_is_on_the_ledger_before_a_row_is_read(monkeypatch):
    c = core([np.full((2, D), 4.0), np.full((2, D), 6.0)], [np.array([0, 1]), np.array([1, 1])])
    seen = []
    real = nb_kind.share_owners

    def reading_rows(enc, owners, rng):
        seen.append([c.ledger.has_release_id(o, nb_release_id("run-1")) for o in OWNERS])
        return real(enc, owners, rng)

    monkeypatch.setattr(nb_kind, "share_owners", reading_rows)
    results = c.answer([task(f"t{i}", o) for i, o in enumerate(OWNERS)]).results
    assert all(isinstance(r.payload, NbReportReply) for r in results)
    assert seen and all(all(s) for s in seen)
    assert [h["purpose"] for h in c.ledger.history(OWNERS[0])] == ["nb-report:run-1"]


def test_one_report_per_run_and_a_new_run_is_debited_until_the_budget_is_spent():
    c = core([np.full((1, D), 4.0), np.full((1, D), 6.0)], [np.array([0]), np.array([1])], budget=2.5)

    def make(task_id: str, run: str, variant: int) -> Task:
        return task(task_id, OWNERS[0], run, **({"n_bins": 4} if variant else {}))

    assert_one_release_per_run(c, make, NbReportReply)


def _owners(n: int, seed: int, k: int = K, rows: int = 1) -> tuple[np.ndarray, np.ndarray, list[LocalOwner]]:
    """``n`` owners of ``rows`` rows on three nodes; feature j's value tells the class apart when ``j % k == y``."""
    rng = np.random.Generator(np.random.PCG64(seed))
    y = rng.integers(0, k, n * rows)
    X = np.clip(2.0 + 6.0 * (y[:, None] == np.arange(D)[None, :] % k) + rng.normal(0, 1.0, (n * rows, D)), 0.0, 10.0)
    owners = [
        LocalOwner(f"owner-{i % 3}.o{i:05d}", X[i * rows : (i + 1) * rows], y[i * rows : (i + 1) * rows],
                   np.random.Generator(np.random.PCG64(1000 + i)), k, BOUNDS)
        for i in range(n)
    ]  # fmt: skip
    return X, y, owners


@pytest.mark.parametrize(("epsilon", "n_bins", "oracle"), [(2.0, 3, "krr"), (1.0, 16, "oue")])
def test_reports_meet_the_contract_and_the_folded_counts_are_unbiased(epsilon, n_bins, oracle):
    """3000 one-row owners on three nodes (the batched path): every reply meets the contract of the oracle the
    parameters derive, a report outside that oracle's output space is rejected, and the strategy's counts are
    within 5 closed-form standard deviations of the true (bin, class) histograms, cell by cell."""
    n = 3000
    X, y, owners = _owners(n, 3)
    strategy = NbStrategy(epsilon=epsilon, n_classes=K, bounds=BOUNDS, n_bins=n_bins)
    spec = strategy.spec()
    assert spec.encoding.oracle == oracle
    ledgers = {f"owner-{j}": Ledger(":memory:", epsilon_budget=epsilon) for j in range(3)}
    transport = InProcessTransport(owners, ledgers)
    replies: list[NbReportReply] = []
    real = transport.fold_tasks

    def keep(tasks, fold, timeout=None):  # every batch the strategy folds, kept here too
        def both(results):
            replies.extend(r.payload for r in results)
            fold(results)

        real(tasks, both, timeout)

    transport.fold_tasks = keep  # type: ignore[method-assign]
    result = strategy.run([o.owner_id for o in owners], transport)
    assert len(replies) == n and all(isinstance(r, NbReportReply) for r in replies)
    for r in replies[:200]:
        check_reply(spec, r, LIMITS)
    bad = replies[0].reports.copy()
    bad[0, -1] = spec.encoding.domain if oracle == "krr" else 2
    with pytest.raises(ContractViolation, match="out_of_range"):
        check_reply(spec, NbReportReply(replies[0].features, bad), LIMITS)
    with pytest.raises(ContractViolation, match="out_of_range"):
        check_reply(spec, NbReportReply(np.array([D]), replies[0].reports), LIMITS)
    enc = spec.encoding
    counts = sum(enc.counts(r.features, r.reports) for r in replies)
    truth = np.stack([np.bincount(c, minlength=enc.domain) for c in enc.cells(X, y).T]).reshape(D, n_bins, K)
    sd = np.sqrt(enc.count_variance(enc.cells(X, y)))
    assert np.all(np.abs(counts - truth) < 5 * sd)
    assert np.mean(result.model.predict(X) == y) > 0.8


def test_the_strategy_learns_and_reports_refusals_and_its_privacy():
    X, y, owners = _owners(600, 4, rows=2)
    ledgers = {"owner-0": Ledger(":memory:", epsilon_budget=1.0)} | {
        f"owner-{j}": Ledger(":memory:", epsilon_budget=3.0) for j in (1, 2)
    }
    strategy = make_strategy(JobConfig(task="nb", epsilon=3.0), n_classes=K, bounds=BOUNDS)
    assert isinstance(strategy, NbStrategy) and JobConfig(task="nb", epsilon=3.0, owners=600).quorum == 300
    result = strategy.run([o.owner_id for o in owners], InProcessTransport(owners, ledgers))
    on_0 = {o.owner_id for o in owners if o.owner_id.startswith("owner-0.")}
    assert set(result.refused) == on_0 and set(result.refused.values()) == {"budget_exceeded"}
    assert result.rounds[0].released == 600 - len(on_0)
    assert result.privacy.part("nb-report").releases == 1 and result.privacy.epsilon == 3.0
    assert result.privacy.parameters == {"oracle": "krr", "n_bins": 3, "smoothing": 1.0}
    majority = max(np.mean(y), 1 - np.mean(y))
    assert np.mean(result.model.predict(X) == y) > majority + 0.2


def test_the_exact_cell_at_epsilon_inf_and_an_owner_without_rows():
    """ε = ∞ reports the sampled row's exact cell (the contract's range is the cells); an owner of no row
    answers a uniformly drawn cell through the same oracle."""
    c = core([np.array([[9.9, 9.9, 9.9]]), np.zeros((0, D))], [np.array([1]), np.zeros(0, int)], budget=math.inf)
    exact, empty = (r.payload for r in c.answer([task(f"t{i}", o, epsilon=math.inf) for i, o in enumerate(OWNERS)]).results)  # fmt: skip
    assert exact.reports.tolist() == [[2 * K + 1]]  # the top bin of whichever feature, class 1
    check_reply(task("x", OWNERS[0], epsilon=math.inf).spec, empty, LIMITS)
    with pytest.raises(ContractViolation):
        check_reply(task("x", OWNERS[0], epsilon=math.inf).spec, NbReportReply(np.array([0]), np.array([[6]])), LIMITS)


def test_olh_reports_outside_its_output_space_break_the_contract():
    """OLH is never the least-variance choice (its variance is at least OUE's), but a contract checks what
    the oracle named can output: coefficients below the hash prime, a bucket below g."""
    spec = NbReportTask(epsilon=3.0, n_bins=3, n_classes=K, bounds=BOUNDS)
    spec.__dict__["encoding"] = NaiveBayesEncoding(epsilon=3.0, bounds=BOUNDS, n_classes=K, oracle="olh")
    honest = spec.encoding.frequency_oracle.privatize(np.array([4]), np.random.Generator(np.random.PCG64(0)))
    check_reply(spec, NbReportReply(np.array([1]), honest), LIMITS)
    g = spec.encoding.frequency_oracle.g  # type: ignore[attr-defined]
    for j, value in ((3, g), (0, 2**31 - 1), (1, -1)):
        bad = honest.copy()
        bad[0, j] = value
        with pytest.raises(ContractViolation, match="out_of_range"):
            check_reply(spec, NbReportReply(np.array([1]), bad), LIMITS)


@pytest.mark.parametrize("epsilon", [2.0, math.inf])
def test_share_owners_draws_the_reports_share_draws_from_the_rows_stacked(epsilon):
    """The kind's path (each owner's row drawn by its index, only that row read: audit 12) releases, for a fixed seed,
    what ``NaiveBayesEncoding.share`` of the stacked rows with their owner indices releases, draw for draw."""
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1.0, 11.0, (60, D)), rng.integers(0, K, 60)
    enc = NaiveBayesEncoding(epsilon=epsilon, bounds=BOUNDS, n_classes=K)
    sizes = [1, 7, 2, 33, 17]
    edges = np.cumsum([0, *sizes])
    owners = [(X[a:b], y[a:b]) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    for seed in range(20):
        expected = enc.share(X, y, np.random.default_rng(seed), owner_of_row=np.repeat(np.arange(5), sizes))
        got = nb_kind.share_owners(enc, owners, np.random.default_rng(seed))
        for e, g in zip(expected, got, strict=True):
            np.testing.assert_array_equal(g, e)
    with pytest.raises(ConfigError):
        nb_kind.share_owners(enc, [(X[:0], y[:0])], np.random.default_rng(0))
