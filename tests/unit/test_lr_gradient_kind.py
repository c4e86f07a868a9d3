"""LDP gradient descent as a task kind (issue 22 item 4): the owner's lr_gradient kind and the coordinator's
strategy, in process with the real owner core and SQLite-free in-memory ledgers.

* a task refused on its public fields is refused alike, with the same text, by owners whose rows differ,
  and nothing is debited;
* the debit is on the ledger before a row is read, and a second gradient of the same run is refused
  while a new run is debited again until the budget is spent;
* a report lies in the mechanism's public output range and is unbiased for the owner's mean gradient;
* the strategy over the in-process transport runs the same descent as the in-process learner (the same
  model at ε = ∞), and reports its rounds, refusals and dropped owners.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.learners.ldp_gd import LdpGradientDescent, gd_mechanism, logistic_gradients
from privfed.common.ledger import Ledger
from privfed.common.tasks import LrGradientReply, LrGradientTask, Task, gradient_release_id
from privfed.deploy.inprocess import InProcessTransport
from privfed.owner.core import OwnerCore
from privfed.owner.local import LocalOwner
from privfed.server.config import JobConfig
from privfed.server.strategies import make_strategy
from privfed.server.strategies.ldp_gd import LdpGdStrategy

from ..run_releases import assert_one_release_per_run, assert_refused_alike, cores_with_different_rows

D, K = 3, 2
BOUNDS = Bounds.of(0.0, 10.0, D)
OWNERS = ["owner-0.o00000", "owner-0.o00001"]


def core(X_rows: list[np.ndarray], y_rows: list[np.ndarray], budget: float = 3.0, k: int = K) -> OwnerCore:
    owners = [
        LocalOwner(o, X, y, np.random.Generator(np.random.PCG64(i)), k, BOUNDS)
        for i, (o, X, y) in enumerate(zip(OWNERS, X_rows, y_rows))
    ]
    return OwnerCore(owners, Ledger(":memory:", epsilon_budget=budget))


def task(task_id: str, owner: str, run: str = "run-1", **fields) -> Task:
    spec = dict(mechanism="pm", epsilon=1.0, theta=np.zeros((1, D + 1)), param_bound=4.0, n_classes=K, bounds=BOUNDS)
    return Task(task_id, owner, run, LrGradientTask(**(spec | fields)))


HOSTILE = {
    "outside the box": dict(theta=np.full((1, D + 1), 4.5)),
    "not finite": dict(theta=np.array([[0.0, np.nan, 0.0, 0.0]])),
    "another schema's shape": dict(theta=np.zeros((1, D + 2))),
    "three classes' shape for two": dict(theta=np.zeros((3, D + 1))),
    "other bounds": dict(bounds=Bounds.of(0.0, 20.0, D)),
    "other classes": dict(n_classes=3, theta=np.zeros((3, D + 1))),
    "param bound beyond the public range": dict(param_bound=1e30, theta=np.zeros((1, D + 1))),
    "epsilon below the floor": dict(epsilon=1e-300),
    "over budget": dict(epsilon=5.0),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_refusal_is_the_same_for_owners_with_different_rows_and_debits_nothing(name):
    assert_refused_alike(
        cores_with_different_rows(core, D), [task(f"t{i}", o, **HOSTILE[name]) for i, o in enumerate(OWNERS)], name
    )


def test_the_debit_is_on_the_ledger_before_a_row_is_read(monkeypatch):
    from privfed.owner.kinds import gradient

    c = core([np.full((2, D), 4.0), np.full((2, D), 6.0)], [np.array([0, 1]), np.array([1, 1])])
    seen = []
    real = gradient.gradient_shares

    def reading_rows(theta, X, y, **kw):
        seen.append([c.ledger.has_release_id(o, gradient_release_id("run-1")) for o in OWNERS])
        return real(theta, X, y, **kw)

    monkeypatch.setattr(gradient, "gradient_shares", reading_rows)
    results = c.answer([task(f"t{i}", o) for i, o in enumerate(OWNERS)]).results
    assert all(isinstance(r.payload, LrGradientReply) for r in results)
    assert seen and all(all(s) for s in seen)
    assert [h["purpose"] for h in c.ledger.history(OWNERS[0])] == ["lr-gradient:run-1"]


def test_one_gradient_per_run_and_a_new_run_is_debited_until_the_budget_is_spent():
    c = core([np.full((1, D), 4.0), np.full((1, D), 6.0)], [np.array([0]), np.array([1])], budget=2.5)

    def make(task_id: str, run: str, variant: int) -> Task:
        return task(task_id, OWNERS[0], run, **({"theta": np.full((1, D + 1), 0.5)} if variant else {}))

    assert_one_release_per_run(c, make, LrGradientReply)


@pytest.mark.parametrize("mechanism", ["pm", "hm", "duchi", "laplace"])
def test_reports_lie_in_the_mechanisms_output_range_and_are_unbiased(mechanism):
    """2000 one-row owners of one node answer θ together (the batched path); their mean report is within
    5 standard errors of their mean gradient in every coordinate, and no report leaves the public range."""
    rng = np.random.Generator(np.random.PCG64(7))
    n, eps = 2000, 2.0
    X, y = rng.uniform(0.0, 10.0, (n, D)), rng.integers(0, K, n)
    owners = [LocalOwner(f"owner-0.o{i:05d}", X[i : i + 1], y[i : i + 1], rng, K, BOUNDS) for i in range(n)]
    c = OwnerCore(owners, Ledger(":memory:", epsilon_budget=eps))
    theta = np.array([[0.5, -1.0, 0.25, 0.1]])
    tasks = [Task(f"t{i}", o.owner_id, "run", LrGradientTask(mechanism, eps, theta, 4.0, K, BOUNDS)) for i, o in enumerate(owners)]  # fmt: skip
    reports = np.concatenate([r.payload.reports for r in c.answer(tasks).results])
    mech = gd_mechanism(mechanism, epsilon=eps, p=D + 1)
    assert reports.shape == (n, D + 1) and np.max(np.abs(reports)) <= mech.max_abs_output + 2**-21
    truth = logistic_gradients(theta, BOUNDS.to_unit(X), y, K)
    se = reports.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(reports.mean(axis=0) - truth.mean(axis=0)) < 5 * se)


def _federation(n: int, seed: int, *, budgets: tuple[float, float, float], silent=(), k: int = K):
    rng = np.random.Generator(np.random.PCG64(seed))
    y = rng.integers(0, k, n)
    X = np.clip(2.0 + 6.0 * (y[:, None] == np.arange(D)[None, :] % k) + rng.normal(0, 1.0, (n, D)), 0.0, 10.0)
    owners = [
        LocalOwner(f"owner-{i % 3}.o{i:05d}", X[i : i + 1], y[i : i + 1], np.random.Generator(np.random.PCG64(i)), k, BOUNDS)
        for i in range(n)
    ]  # fmt: skip
    ledgers = {f"owner-{j}": Ledger(":memory:", epsilon_budget=b) for j, b in enumerate(budgets)}
    return X, y, owners, InProcessTransport(owners, ledgers, silent_nodes=silent)


def test_the_strategy_runs_the_learners_descent_the_same_model_at_epsilon_inf():
    X, y, owners, transport = _federation(300, 1, budgets=(math.inf,) * 3)
    strategy = make_strategy(JobConfig(task="lr", epsilon=math.inf, seed=4), n_classes=K, bounds=BOUNDS)
    assert isinstance(strategy, LdpGdStrategy)
    result = strategy.run([o.owner_id for o in owners], transport)
    local = LdpGradientDescent(epsilon=math.inf, n_classes=K, bounds=BOUNDS).fit(
        X, y, rng=np.random.Generator(np.random.PCG64(4))
    )
    np.testing.assert_allclose(result.model.coef_, local.coef_, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(result.model.intercept_, local.intercept_, rtol=1e-12, atol=1e-15)
    assert len(result.rounds) == 100 and sum(r.released for r in result.rounds) == 300
    assert np.mean(result.model.predict(X) == y) > 0.9


def test_the_strategy_reports_rounds_refusals_and_dropped_owners():
    X, y, owners, transport = _federation(400, 2, budgets=(1.0, 2.0, 2.0), silent=["owner-2"])
    strategy = make_strategy(JobConfig(task="lr", epsilon=2.0, seed=0), n_classes=K, bounds=BOUNDS)
    seen: list[tuple[int, int]] = []
    transport.progressed = lambda done, planned: seen.append((done, planned))
    result = strategy.run([o.owner_id for o in owners], transport)
    on = {n: {o.owner_id for o in owners if o.owner_id.startswith(n)} for n in ("owner-0", "owner-1", "owner-2")}
    assert len(result.rounds) == 8 and all(r.phase == "gradient" for r in result.rounds)
    # progress is gradient steps done of those planned (a service showed 99 % after step 1 of 4)
    assert seen == [(t, 8) for t in range(1, 9)]
    assert set(result.refused) == on["owner-0"]  # budget 1 < epsilon 2
    assert set(result.refused.values()) == {"budget_exceeded"}
    assert set(result.dropped) == on["owner-2"]  # a silent node: its owners of group 1 asked, then none
    assert sum(r.released for r in result.rounds) == len(on["owner-1"])
    assert sum(r.asked for r in result.rounds) < 400
    assert np.mean(result.model.predict(X) == y) > 0.6
    assert result.privacy.part("lr-gradient").releases == 1 and result.privacy.epsilon == 2.0
