"""Issue 27 item 4: a node computes its owners' shares together (``TaskKind.compute_many``).

The batched path must give each owner the release it would get alone: the same fitted model
(LR), its own rows' reports (NCC), an unbiased draw of the same mechanism per owner, one debit per
task in one transaction before anything is read, and the fallback per release when a value is
not sendable.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.learners.logistic import clip_parameters, fit_local_logistic, fit_local_logistic_many
from privfed.common.ledger import Ledger
from privfed.common.mechanisms import make_mechanism
from privfed.common.tasks import LrShareTask, NccShareTask, Task
from privfed.owner.core import OwnerCore
from privfed.owner.kinds.shares import LrShareKind
from privfed.owner.local import LocalOwner

D = 3
BOUNDS = Bounds.of(0.0, 1.0, D)


def _owners(n: int, rows: int, k: int = 2, seed: int = 0) -> list[LocalOwner]:
    rng = np.random.Generator(np.random.PCG64(seed))
    return [
        LocalOwner(
            f"owner-0.o{i:06d}",
            rng.uniform(0, 1, (rows, D)),
            rng.integers(0, k, rows),
            np.random.Generator(np.random.PCG64([seed, i])),
            k,
            BOUNDS,
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("k, rows", [(2, 1), (2, 7), (4, 5)])
def test_owners_fitted_together_get_the_model_each_would_fit_alone(k, rows):
    owners = _owners(40, rows, k)
    X, y = np.stack([o.X for o in owners]), np.stack([o.y for o in owners])
    together = fit_local_logistic_many(X, y, bounds=BOUNDS, n_classes=k, C=2.0)
    alone = np.stack([fit_local_logistic(o.X, o.y, bounds=BOUNDS, n_classes=k, C=2.0) for o in owners])
    np.testing.assert_allclose(together, alone, atol=1e-9)


@pytest.mark.parametrize("k", [2, 3])
def test_owners_of_other_counts_in_one_batch_get_the_model_each_would_fit_alone(k):
    """Padding rows beyond an owner's ``n_rows`` weigh nothing: owners of 5, 7 and 8 rows fitted as one batch
    of 8-row problems (their public cell) get their own models; whatever the padding holds does not matter."""
    counts = (5, 7, 8)
    owners = [o for i, n in enumerate(counts) for o in _owners(1, n, k, seed=i)]
    X = np.stack([np.vstack([o.X, np.full((8 - o.n_rows, D), 0.9)]) for o in owners])
    y = np.stack([np.concatenate([o.y, np.full(8 - o.n_rows, k - 1)]) for o in owners])
    together = fit_local_logistic_many(X, y, bounds=BOUNDS, n_classes=k, C=2.0, n_rows=counts)
    alone = np.stack([fit_local_logistic(o.X, o.y, bounds=BOUNDS, n_classes=k, C=2.0) for o in owners])
    np.testing.assert_allclose(together, alone, atol=1e-9)
    unweighted = fit_local_logistic_many(X, y, bounds=BOUNDS, n_classes=k, C=2.0)  # positive control
    assert not np.allclose(unweighted[:2], alone[:2], atol=1e-3)


def test_an_lr_batch_is_one_transaction_and_each_owner_an_unbiased_draw_around_its_own_model():
    n = 3000
    owners = _owners(n, 3)
    ledger = Ledger(":memory:", epsilon_budget=1.0)
    core = OwnerCore(owners, ledger)
    spec = LrShareTask("pm", 1.0, 4.0, 1.0, 2, BOUNDS)
    results = core.answer([Task(f"t{i}", o.owner_id, "r", spec) for i, o in enumerate(owners)]).results
    assert [r.owner_id for r in results] == [o.owner_id for o in owners]
    reports = np.concatenate([r.payload.reports for r in results])
    t = np.stack([clip_parameters(fit_local_logistic(o.X, o.y, bounds=BOUNDS, n_classes=2), 4.0) / 4.0 for o in owners])
    mechanism = make_mechanism("pm", epsilon=1.0, d=D + 1)
    lo, hi = mechanism.output_bounds
    assert np.all((reports >= lo) & (reports <= hi))
    # unbiased around each owner's own t: the mean error is within 4 standard errors (closed form)
    se = np.sqrt(mechanism.variance(t).sum(axis=0)) / n
    assert np.all(np.abs((reports - t).mean(axis=0)) < 4 * se)
    # each owner's error has the mechanism's closed-form variance (to 15 %: 3000 draws)
    np.testing.assert_allclose((reports - t).var(axis=0), mechanism.variance(t).mean(axis=0), rtol=0.15)
    for o in owners:
        assert [h["epsilon"] for h in ledger.history(o.owner_id)] == [1.0]


def test_an_ncc_batch_gives_each_owner_its_own_rows():
    owners = _owners(50, 1, seed=1) + _owners(30, 4, seed=2)
    owners = [LocalOwner(f"owner-0.o{i:06d}", o.X, o.y, o.rng, 2, BOUNDS) for i, o in enumerate(owners)]
    core = OwnerCore(owners, Ledger(":memory:", epsilon_budget=math.inf))
    spec = NccShareTask("pm", math.inf, "clear", math.inf, 2, BOUNDS)  # no noise: the rows themselves
    core.policy = type(core.policy)(allow_clear_labels=True)
    results = core.answer([Task(f"t{i}", o.owner_id, "r", spec) for i, o in enumerate(owners)]).results
    for o, r in zip(owners, results, strict=True):
        np.testing.assert_allclose(r.payload.reports, BOUNDS.to_unit(o.X), atol=1e-6)
        np.testing.assert_array_equal(r.payload.labels, o.y)


def test_a_release_the_batch_cannot_send_is_its_fallback_not_a_second_draw(monkeypatch):
    """A non-finite value from the batch leaves nothing: that owner releases its fallback, and nothing
    is drawn again from its rows (a redraw conditioned on the first draw is rejection sampling)."""
    real = LrShareKind.compute_many
    computed, fallbacks = [], []
    monkeypatch.setattr(LrShareKind, "compute", lambda self, task, spec, owner: computed.append(task.task_id))
    real_fallback = LrShareKind.fallback

    def fallback(self, spec, public, n_rows, rng):
        fallbacks.append(n_rows)
        return real_fallback(self, spec, public, n_rows, rng)

    monkeypatch.setattr(LrShareKind, "fallback", fallback)
    monkeypatch.setattr(LrShareKind, "fallback_many", lambda self, tasks, owners: None)  # one by one: counted

    def one_bad(self, tasks, owners):
        out = real(self, tasks, owners)
        out[1] = type(out[1])(reports=np.full_like(out[1].reports, np.nan))
        return out

    monkeypatch.setattr(LrShareKind, "compute_many", one_bad)
    owners = _owners(4, 2)
    core = OwnerCore(owners, Ledger(":memory:", epsilon_budget=1.0))
    spec = LrShareTask("pm", 1.0, 4.0, 1.0, 2, BOUNDS)
    results = core.answer([Task(f"t{i}", o.owner_id, "r", spec) for i, o in enumerate(owners)]).results
    assert all(np.all(np.isfinite(r.payload.reports)) for r in results)
    assert computed == [] and fallbacks == [2] * 4  # each release draws its fallback (owner.compute, "Timing")
