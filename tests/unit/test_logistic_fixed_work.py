"""The local logistic fit does the same work whatever the rows (common.learners.newton, "Timing").

A coordinator times an owner's LR share; the fit's work must be a function of public things (the row
count, ``C``, the shapes), not of the rows. Counted without clocks: the Newton steps the solver takes
(``_newton_step`` calls, each over every problem) and the line-search halvings below its fixed ladder
(``_halve_on``, the data-dependent tail), for owners whose rows differ the most: a mixture, separable
classes far apart, one class only, every value at a bound; alone and batched (issue 27).
"""

from __future__ import annotations

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.learners import newton
from privfed.common.learners.logistic import fit_local_logistic, fit_local_logistic_many
from privfed.common.learners.newton import newton_steps

D = 4
BOUNDS = Bounds.of(-4.0, 4.0, D)


def _rows(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 3, n)
    if kind == "mixture":
        X = rng.normal(size=(n, D)) + np.where(np.arange(D) % 3 == y[:, None], 0.8, -0.8)
    elif kind == "separable":
        X = np.where(y[:, None] >= 1, 3.5, -3.5) + 0.1 * rng.normal(size=(n, D))
    elif kind == "one-class":
        X, y = rng.normal(size=(n, D)), np.zeros(n, dtype=np.int64)
    else:  # every value beyond a bound, clipped to it
        X = rng.choice([-12.0, 12.0], size=(n, D))
    return X, y


KINDS = ("mixture", "separable", "one-class", "at-bounds")


class _Counts:
    """Counts the solver's steps and its tail halvings (monkeypatched around the real functions)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.steps = self.tail = 0
        step, halve = newton._newton_step, newton._halve_on

        def counted_step(*args, **kw):
            self.steps += 1
            return step(*args, **kw)

        def counted_halve(*args, **kw):
            self.tail += 1
            return halve(*args, **kw)

        monkeypatch.setattr(newton, "_newton_step", counted_step)
        monkeypatch.setattr(newton, "_halve_on", counted_halve)

    def take(self) -> tuple[int, int]:
        out, self.steps, self.tail = (self.steps, self.tail), 0, 0
        return out


@pytest.mark.parametrize("n, C, n_classes", [(1, 1.0, 2), (20, 1.0, 3), (300, 1.0, 2), (300, 100.0, 3), (2000, 1e3, 2)])
def test_a_fit_takes_the_same_steps_whatever_the_rows(monkeypatch, n, C, n_classes):
    counts = _Counts(monkeypatch)
    rng = np.random.default_rng(n)
    work = {}
    for kind in KINDS:
        X, y = _rows(kind, n, rng)
        fit_local_logistic(X, y % n_classes, bounds=BOUNDS, n_classes=n_classes, C=C)
        work[kind] = counts.take()
    assert set(work.values()) == {(newton_steps(n, C), 0)}, work


def test_a_batch_of_owners_takes_the_same_steps_whatever_their_rows(monkeypatch):
    counts = _Counts(monkeypatch)
    rng = np.random.default_rng(1)
    work = []
    for mix in (KINDS, KINDS[::-1], ("at-bounds",) * 4, ("separable",) * 4):
        rows = [_rows(kind, 30, rng) for kind in mix]
        X, y = np.stack([r[0] for r in rows]), np.stack([r[1] % 2 for r in rows])
        fit_local_logistic_many(X, y, bounds=BOUNDS, n_classes=2)
        work.append(counts.take())
    assert work == [(newton_steps(30, 1.0), 0)] * 4


def test_the_count_catches_a_solver_that_stops_when_the_rows_let_it(monkeypatch):
    """Positive control: with the fixed step count taken away (the solver stops once every problem
    converged, as before), the counts differ between the rows; the optimum is the same."""
    rng = np.random.default_rng(2)
    data = {kind: _rows(kind, 300, rng) for kind in KINDS}
    fixed = {kind: fit_local_logistic(X, y % 2, bounds=BOUNDS, n_classes=2) for kind, (X, y) in data.items()}
    counts = _Counts(monkeypatch)
    monkeypatch.setattr(newton, "newton_steps", lambda n_rows, C: 0)
    steps = {}
    for kind, (X, y) in data.items():
        theta = fit_local_logistic(X, y % 2, bounds=BOUNDS, n_classes=2)
        np.testing.assert_allclose(theta, fixed[kind], rtol=0, atol=1e-12)
        steps[kind] = counts.take()[0]
    assert len(set(steps.values())) > 1, steps
    assert max(steps.values()) < newton_steps(300, 1.0)


def test_softplus_and_expit_are_the_branchy_formulas_values():
    """The branch-free forms give numpy's values, subnormal-free (the clamped tail is below any rounding)."""
    z = np.concatenate([np.linspace(-50, 50, 1001), [-800.0, -710.0, 0.0, 710.0, 800.0]])
    np.testing.assert_allclose(newton.softplus(z), np.logaddexp(0.0, z), rtol=1e-15, atol=1e-300)
    expected = np.where(z >= 0, 1 / (1 + np.exp(-np.abs(z))), np.exp(-np.abs(z)) / (1 + np.exp(-np.abs(z))))
    np.testing.assert_allclose(newton.expit(z), expected, rtol=1e-15, atol=1e-300)
    tiny = np.finfo(np.float64).tiny
    assert not np.any((newton._exp_neg_abs(z) > 0) & (newton._exp_neg_abs(z) < tiny))


@pytest.mark.parametrize("n", [1, 3, 11, 40])
def test_the_newton_system_is_solved_alike_for_few_and_many_rows(n):
    """With fewer rows than parameters the Newton system is solved through the Woodbury identity (one-row
    owners at scale); it gives the direct solve of ``T' diag(c) T + I``, whichever form the shapes pick."""
    rng = np.random.default_rng(n)
    b, p = 50, 11
    t1 = rng.uniform(-1.0, 1.0, size=(b, n, p))
    curvature = rng.uniform(0.0, 3.0, size=(b, n)) * (rng.random((b, n)) < 0.8)  # some rows at zero curvature
    g = rng.normal(size=(b, p))
    hessian = np.einsum("bni,bn,bnj->bij", t1, curvature, t1) + np.eye(p)
    np.testing.assert_allclose(
        newton._solve_hessian(t1, curvature, g), np.linalg.solve(hessian, g[..., None])[..., 0], rtol=1e-10, atol=1e-12
    )
