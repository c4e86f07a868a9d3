"""A coordinator's ``lam`` at Chaudhuri et al.'s branch boundary cannot make the SVM release refuse for one
row count of a grid cell and not the others (wt-redteam5).

``privacy_adjustment`` took the ``Delta`` branch when ``eps' < eps/2`` and returned ``Delta = c/(n(e^{eps/4}
- 1)) - lam``. The two are the same condition in exact arithmetic, not in floating point: a coordinator that
picks ``lam = c/(n0 (e^{eps/4} - 1))`` (give or take a few ulps) for a guessed row count ``n0`` finds a ``lam``
whose ``eps'`` rounds below ``eps/2`` while ``Delta`` rounds to ``-ulp(lam)``. Then ``lam + Delta`` lies below
``public_reg``'s lower end (``lam``, from the cell's top, where ``Delta = 0``) and ``minimise_perturbed``
raises -- for an owner of exactly ``n0`` rows and none other in the cell: a refusal that reads the private
row count exactly, where the padded fits promise no more than its cell (``privfed.common.work_rows``).

Since audit 14 no row count of the owner's enters the calibration (a public ``m``, the task's ``rows``), so the
boundary is the coordinator's own ``(lam, m)``; the test keeps its ulp neighbours and checks that ``Delta`` is
never negative there and that owners of every count of the cell release (the solver's bounds hold).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.feddpdr.svm import HUBER_H, _huber_gradient
from privfed.common.mechanisms.objective import ObjectivePerturbation
from privfed.common.work_rows import work_rows

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

C = 1.0 / (2.0 * HUBER_H)
D = 2


def _boundary_lams(epsilon: float, m: int) -> list[float]:
    """The coordinator's candidates: ``lam`` at the branch boundary for the public count ``m``, and its ulp
    neighbours."""
    e_obj = ObjectivePerturbation(epsilon=epsilon, lam=1.0, curvature=C, d=D, rows=m).objective_epsilon
    lam0 = C / (m * math.expm1(e_obj / 2.0))
    return [lam0 + k * math.ulp(lam0) for k in range(-4, 5)]


def _rows(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    X = rng.normal(size=(n, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True) * 1.01
    return X, np.where(X[:, 0] > 0.0, 1.0, -1.0)[None, :]


@pytest.mark.parametrize(
    ("epsilon", "n0"), [(3.254673698024204, 122), (3.617852096041175, 1460), (0.658493726680331, 2705)]
)
def test_no_lam_makes_one_row_count_of_the_cell_refuse(epsilon, n0):
    rng = np.random.Generator(np.random.PCG64(7))
    hi = work_rows(n0)
    lo = hi // 2 + 1
    for lam in _boundary_lams(epsilon, n0):
        mech = ObjectivePerturbation(epsilon=epsilon, lam=lam, curvature=C, d=D, rows=n0)
        rate, Delta = mech.adjustment
        assert Delta >= 0.0, f"lam={lam!r}: Delta={Delta!r} < 0 (under-regularised)"
        assert rate >= mech.objective_epsilon / 2 * (1 - 1e-12)
        for n in sorted({lo, n0 - 1, n0, n0 + 1, hi}):
            X, Y = _rows(n, rng)
            F = mech.privatize(lambda F, X=X, Y=Y: _huber_gradient(F, X, Y, HUBER_H, 1.0), hi, rng)
            assert F.shape == (1, D) and np.all(np.isfinite(F))
