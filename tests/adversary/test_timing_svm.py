"""FedDPDR's SVM release does the same, public work for every owner's rows (common/mechanisms/amp.py, "Timing").

A coordinator times an owner's answer. The objective-perturbation solvers used to run L-BFGS until it
converged: one answer's time told separable or one-class rows from ordinary ones (``ovr-huber`` at ~0.7
accuracy, ``bench/timing_channels.py``). Now every fit runs Nesterov's method for a number of steps fixed by
public quantities (Bubeck 2015, Thm 3.18: ``mu``, the smoothness, a public bound on the start distance, AMP's
``r``), each step one gradient of the same shapes, with no subnormal in its arithmetic.

Checked without clocks: the learners' gradients are wrapped to count their calls (and look at every value
they get and give), over ordinary, separable, one-class, saturated and tiny-valued rows, for every model of
``SVM_MODELS``; a positive control counts what the old L-BFGS path did on the same objectives; and the solver's
point is compared with a tight L-BFGS reference optimum on varied rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import scipy.optimize

from privfed.common.bounds import Bounds, exp_nonpositive
from privfed.common.feddpdr import multiclass as mc
from privfed.common.feddpdr import svm
from privfed.common.feddpdr.choices import SVM_MODELS, ovr_epsilons
from privfed.common.feddpdr.release import owner_svm_release
from privfed.common.mechanisms import objective, objective_gaussian
from privfed.common.mechanisms.amp import AMP_RADIUS, FLOAT_SHARE, accelerated_steps
from privfed.common.work_rows import work_rows

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

N, D, BOUND, LAM = 300, 10, 4.0, 1e-3  # the timing bench's owner (bench/timing_channels.py)
SVM_ROWS = 290  # ovr-huber's public row count (the task's: a DP count near N)
BOUNDS = Bounds.of(-BOUND, BOUND, D)
SUBSPACE = np.eye(D)[:, :3]
TINY_NORMAL = np.finfo(np.float64).tiny


# ----------------------------------------------------------------------------- rows a coordinator may probe
def mixture(rng: np.random.Generator, K: int) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, K, N)
    X = rng.normal(size=(N, D)) + np.where(np.arange(D) % K == y[:, None], 0.8, -0.8)
    return np.clip(X, -BOUND, BOUND), y


def separable(rng: np.random.Generator, K: int) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, K, N)
    X = np.where(np.arange(D) % K == y[:, None], 3.5, -3.5) + 0.1 * rng.normal(size=(N, D))
    return np.clip(X, -BOUND, BOUND), y


def one_class(rng: np.random.Generator, K: int) -> tuple[np.ndarray, np.ndarray]:
    return mixture(rng, K)[0], np.zeros(N, dtype=np.int64)


def at_bounds(rng: np.random.Generator, K: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.choice([-3 * BOUND, 3 * BOUND], size=(N, D)), rng.integers(0, K, N)


def tiny_values(rng: np.random.Generator, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Entries near 1e-305 (scaled: ~6e-307): their products with the solver's values would be subnormal, unless zeroed."""
    return rng.choice([-1e-305, 1e-305, 0.0], size=(N, D)), rng.integers(0, K, N)


ROWS: dict[str, Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]] = {
    "mixture": mixture,
    "separable": separable,
    "one-class": one_class,
    "at-bounds": at_bounds,
    "tiny-values": tiny_values,
}
SOLVED = [m for m in SVM_MODELS if m != "centroid"]  # centroid: class sums, no solver


# ----------------------------------------------------------------------------- the wrappers
def _subnormal(a: np.ndarray) -> bool:
    a = np.asarray(a)
    return bool(np.any((a != 0) & (np.abs(a) < TINY_NORMAL)))


@dataclass
class Recorder:
    """Counts the learners' gradient calls and keeps what the solver was given (real functions, wrapped)."""

    calls: int = 0
    subnormals: int = 0
    shapes: set[tuple[int, ...]] = field(default_factory=set)
    rows: tuple[Any, ...] = ()
    solves: list[dict[str, Any]] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for module, name in ((svm, "_huber_gradient"), (mc, "_loss_gradient")):
            monkeypatch.setattr(module, name, self._counting(getattr(module, name)))
        real_solve = objective.minimise_perturbed

        def solve(gradient: Callable[[np.ndarray], np.ndarray], noise: np.ndarray, **kw: float) -> np.ndarray:
            point = real_solve(gradient, noise, **kw)
            self.solves.append({"noise": noise, "point": point, **kw})
            return point

        for module in (objective, objective_gaussian):  # the Laplace and the Gaussian mechanisms' solver
            monkeypatch.setattr(module, "minimise_perturbed", solve)

    def _counting(self, gradient: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        def counted(F: np.ndarray, X: np.ndarray, *rest: Any) -> np.ndarray:
            self.calls += 1
            self.shapes.add(F.shape)
            self.rows = (X, *rest)
            out = gradient(F, X, *rest)
            self.subnormals += _subnormal(F) + _subnormal(X) + _subnormal(out)
            return out

        return counted


def release(model: str, K: int, X: np.ndarray, y: np.ndarray, seed: int, epsilon: float = 1.0) -> np.ndarray:
    delta = 0.0 if model == "ovr-huber" else 1e-5
    W, _, _ = owner_svm_release(
        X,
        y,
        BOUNDS,
        SUBSPACE,
        K,
        epsilon,
        LAM,
        np.random.default_rng(seed),
        delta=delta,
        model=model,
        scaling="ball",
        rows=SVM_ROWS,
    )
    return W


def public_steps(model: str, K: int, epsilon: float = 1.0) -> int:
    """The step count from the public parameters alone (Bubeck Thm 3.18 via accelerated_steps), at the row
    count's public grid cell (common/work_rows.py): ``(lo, hi] = (256, 512]`` for N = 300."""
    target = (1.0 - FLOAT_SHARE) * AMP_RADIUS
    hi = work_rows(N)
    if model == "ovr-huber":
        c = 1.0 / (2.0 * svm.HUBER_H)
        problems = 1 if K == 2 else K
        mech = objective.ObjectivePerturbation(
            epsilon=ovr_epsilons(epsilon, K)[0], lam=LAM, curvature=c, d=4, rows=SVM_ROWS, problems=problems
        )
        return accelerated_steps((mech.reg + c * hi / SVM_ROWS) / mech.reg, hi / SVM_ROWS / mech.reg, target)
    mech = mc.mechanism(epsilon, 1e-5, K, model)
    smooth = mech.Lambda + hi * mc.CURVATURE_BOUND[model]
    return accelerated_steps(smooth / mech.Lambda, hi * math.sqrt(mech.gradient_norm_sq) / mech.Lambda, target)


# ----------------------------------------------------------------------------- the tests
@pytest.mark.parametrize("K", [2, 3])
@pytest.mark.parametrize("model", SVM_MODELS)
def test_every_fit_runs_the_public_step_count_whatever_the_rows(monkeypatch, model, K):
    """Same public parameters and row count, different rows and noise: the same gradient calls on the same
    shapes, exactly the public count, and no subnormal in or out of any of them."""
    counts = {}
    for name, rows in ROWS.items():
        for seed in (1, 2):
            rec = Recorder()
            rec.install(monkeypatch)
            W = release(model, K, *rows(np.random.default_rng(seed + 10), K), seed)
            assert W.shape[0] == K and np.all(np.isfinite(W))
            assert rec.subnormals == 0, f"{model} on {name} rows: a subnormal reached the solver's arithmetic"
            counts[name, seed] = (rec.calls, frozenset(rec.shapes))
    assert len(set(counts.values())) == 1, counts
    calls, _ = next(iter(counts.values()))
    assert calls == (0 if model == "centroid" else public_steps(model, K))
    assert model == "centroid" or calls > 50  # a real fit, not a shortcut


@pytest.mark.parametrize("model", ["ovr-huber", "mc-huber"])
def test_positive_control_the_old_lbfgs_path_counted_differently(monkeypatch, model):
    """L-BFGS to convergence (the old solver, its options) on the very objectives the releases solve: its
    evaluation count depends on the rows, so the counting above can see a data-dependent solver."""
    counts = {}
    for name in ("mixture", "separable", "one-class"):
        rec = Recorder()
        rec.install(monkeypatch)
        release(model, 2, *ROWS[name](np.random.default_rng(11), 2), seed=1)
        J = _objective(model, rec.rows, rec.solves[0])
        result = scipy.optimize.minimize(
            J, np.zeros(rec.solves[0]["noise"].size), jac=True, method="L-BFGS-B",
            options={"gtol": 1e-12, "ftol": 0.0, "maxiter": 20000, "maxcor": 20},
        )  # fmt: skip
        counts[name] = int(result.nfev)
    assert len(set(counts.values())) > 1, counts


def _objective(model: str, rows: tuple[Any, ...], solve: dict[str, Any]) -> objective.FlatObjective:
    """``J`` of a recorded solve from the learners' own value-and-gradient functions."""
    noise, reg, divisor = solve["noise"], solve["reg"], solve["divisor"]
    if model == "ovr-huber":
        X, Y, h, _ = rows  # the learner's summed gradient; the mechanism divides it by the public m (divisor)
        return objective.perturbed(
            lambda F: svm._huber_loss(F, X, Y, h, divisor), noise.shape, reg=reg, noise=noise, divisor=divisor
        )
    X, Y, loss = rows
    real = np.any(X != 0, axis=1)  # the padding's zero rows (common/work_rows.py) add a constant only: the rows'
    X, Y = X[real], Y[:, real]  # own objective, as the old solver saw it (its bias feature is never 0)
    y = np.argmax(Y, axis=0) if Y.size else np.zeros(0, dtype=np.intp)  # one_hot is class-major
    return objective.perturbed(lambda F: mc._loss(F, X, y, loss), noise.shape, reg=reg, noise=noise, divisor=divisor)


@pytest.mark.parametrize("model", SOLVED)
@pytest.mark.parametrize(
    "name, epsilon", [("mixture", 1.0), ("separable", 0.2), ("one-class", 5.0), ("at-bounds", math.inf)]
)
def test_the_solver_lands_within_r_of_a_tight_reference_optimum(monkeypatch, model, name, epsilon):
    """The point the solver hands to AMP's output noise is within r of the exact minimiser: a reference
    optimum (L-BFGS from 0, then a root of the gradient: no function values, whose rounding stops a line
    search), certified by strong convexity (``||ref - x*|| <= ||grad J(ref)|| / mu``)."""
    rec = Recorder()
    rec.install(monkeypatch)
    release(model, 3, *ROWS[name](np.random.default_rng(5), 3), seed=3, epsilon=epsilon)
    (solve,) = rec.solves
    J, mu = _objective(model, rec.rows, solve), solve["reg"]
    ref = scipy.optimize.minimize(
        J, np.zeros(solve["noise"].size), jac=True, method="L-BFGS-B",
        options={"gtol": 1e-14, "ftol": 0.0, "maxiter": 50000, "maxcor": 30},
    ).x  # fmt: skip
    ref = scipy.optimize.root(lambda f: J(f)[1], ref, method="hybr", options={"xtol": 1e-15}).x  # grad J = 0, no f
    point = solve["point"]
    ref = ref.reshape(point.shape)
    gradient = J(ref.ravel())[1].reshape(point.shape)
    if model != "ovr-huber":  # one problem; one-vs-rest: separable problems, r is each one's radius
        point, ref, gradient = point.reshape(1, -1), ref.reshape(1, -1), gradient.reshape(1, -1)
    certificate = np.linalg.norm(gradient, axis=1) / mu
    assert np.all(certificate < 0.05 * AMP_RADIUS)
    assert np.all(np.linalg.norm(point - ref, axis=1) + certificate <= AMP_RADIUS)


@pytest.mark.parametrize("loss", mc.LOSSES)
def test_score_gradients_take_no_subnormal_on_extreme_scores(loss):
    """The multiclass gradients' ``exp`` never returns a subnormal (its argument is clamped, EXP_FLOOR), and
    neither do the gradients, on scores from 0 to far beyond the floor (a separable owner's)."""
    rng = np.random.default_rng(0)
    S = rng.standard_normal((400, 4)) * np.repeat([0.1, 10.0, 300.0, 3000.0], 100)[:, None]
    y = rng.integers(0, 4, 400)
    values, G = mc.score_gradients(S, y, loss)
    assert not _subnormal(G) and np.all(np.isfinite(values)) and np.all(np.isfinite(G))
    a = -np.geomspace(1e-3, 1e4, 2000)
    assert not _subnormal(exp_nonpositive(a)) and _subnormal(np.exp(a))  # the clamp is what prevents them


@pytest.mark.parametrize("scaling", ["ball", "box", "normalise"])
def test_extreme_finite_rows_do_not_make_the_svm_or_pca_release_raise(scaling):
    """A computation that raises part-way answers with its fallback sooner. Finite raw values far outside
    narrow public bounds overflowed the ball scaling (inf, then NaN rows) and the SVM and DP-PCA releases
    raised; now every model and the PCA release compute to the end on them."""
    from privfed.common.feddpdr.pca import owner_pca_release

    bounds = Bounds.of(0.0, 0.2, 3)
    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 0.2, (40, 3))
    X[:4] = [[1.7e308, 0.1, 0.1], [-1.7e308, 1.7e308, 0.0], [5e-324, 1e300, -1e300], [1e200, 1e200, 1e200]]
    y = rng.integers(0, 2, 40)
    for model in SVM_MODELS:
        delta = 0.0 if model == "ovr-huber" else 1e-5
        W, _, _ = owner_svm_release(X, y, bounds, None, 2, 1.0, 0.01, rng, delta=delta, model=model, scaling=scaling)
        assert np.all(np.isfinite(W))
    U, n = owner_pca_release(X, bounds, 2, 1.0, 1e-5, rng, scaling=scaling)
    assert n == 40 and np.all(np.isfinite(U))
