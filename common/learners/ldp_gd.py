"""Logistic regression by LDP gradient descent: learns when owners hold one row each (issue 22 item 4).

Wang, Xiao, Yang, Zhao, Hui, Shin, Shin, Yu, "Collecting and Analyzing Multidimensional Data with Local
Differential Privacy", ICDE 2019, §V (empirical risk minimisation by stochastic gradient descent, each
user's gradient perturbed once by Algorithm 4 with PM or HM); the same scheme with Duchi's mechanism is
the minimax-optimal LDP stochastic gradient method of Duchi, Jordan, Wainwright (JASA 2018, §4-5).

The perturbed local models of :mod:`privfed.common.learners.logistic` (seed 002 §3.5.2) need owners with
enough rows to fit a model each; with one row per owner a local model is a single point's fit, and the
average of N noisy such models barely moves (issue 22: lr at or below the majority class at ε <= 3 on
real sets). Gradient descent spends each owner's ε on one *gradient* at the current model instead:

* coordinator: owners are split into T disjoint groups, one per iteration (each owner reports once per
  run, so the run is ε-LDP for every owner, as the paper's "each user participates in one iteration");
  iteration t sends the current parameters θ_t (public) to group t;
* owner (:func:`gradient_shares`): the mean over its rows of the logistic-loss gradient at θ_t,
  ``g = (σ(θ·t̃) - y) t̃`` (two classes) or ``(softmax_k(Θ t̃) - [y = k]) t̃`` (K classes; ``t̃ = (t, 1)``
  with ``t = bounds.to_unit(x)`` in ``[-1, 1]^d``): every coordinate lies in ``[-1, 1]`` whatever the row,
  so the vector goes straight into an ε-LDP mechanism on ``[-1, 1]^p`` (Alg. 4 with PM by default,
  ``p = K'(d + 1)``), released once;
* coordinator (:meth:`LdpGradientDescent.step`): ``θ_{t+1} = Π(θ_t - η_t (ĝ + λ θ_t))`` with ``ĝ`` the
  mean of the group's reports (unbiased for the group's mean gradient), ``η_t = η / sqrt(t + 1)`` and
  ``Π`` the clip to the public box ``|θ_j| <= param_bound`` (post-processing). The model returned is the
  average of the iterates after the first (Polyak-Ruppert averaging: it halves the noise of the last
  steps).

Over the network this is ``privfed coordinator --task lr --solver gd``: the task kind ``lr_gradient``
(:mod:`privfed.common.tasks.gradient`; the owner's side in ``privfed.owner.kinds.gradient`` calls
:func:`gradient_shares`) and the strategy ``privfed.server.strategies.ldp_gd``, which runs
:meth:`LdpGradientDescent.descend`, the loop :meth:`LdpGradientDescent.fit` runs in process.

Privacy: an owner's report is a function of its rows and of public θ_t only, passed once through an
ε-LDP mechanism whose input domain is all of ``[-1, 1]^p``: ε-LDP for the owner's whole data set. Groups
are drawn independently of the data. Everything after is post-processing.

Defaults were chosen on validation splits of six real tabular sets (``privfed experiment tabular --validate
--learners lr``; :mod:`privfed.deploy.experiments.tabular_validate`), scored by the fraction of the
majority-to-non-private gap closed over ε = 1, 3, 5, 8. First (6 splits): at least 25 owners per iteration
(at most 8 iterations) and η = 3 scored 0.39, against 0.31 for 100 owners and η = 2 (the first guess), 0.38
for 10 owners and η = 3, 0.23-0.34 for the other 15 settings of {10, 25, 50} x {1, 2, 3} x {PM, HM}; Alg. 4
with PM beat HM at every setting. Then (issue 22's lr goal at ε = 5, missed on wine, star98 and fair), on 24
splits (``--validate --learners lr --splits 24``: {10, 25, 50} owners x η {min(ε, 8), 3, 5} x attributes
{1, the paper's}; 0.34-0.43) and with the same noise draws for each setting (throwaway scripts, 12-24 splits):

* Alg. 4 reports one attribute at the whole ε (:data:`GRADIENT_ATTRIBUTES`), not the paper's
  ``floor(ε/2.5)`` (2 at ε = 5, 3 at ε = 8; the same 1 below ε = 5). A gradient coordinate is a residual
  times a feature, mostly far below 1, where Alg. 4's sampling term ``(p/k - 1) g_j^2`` is small and PM's
  noise at ε/k dominates: a report of the first step's gradients has about half the variance
  (``tests/unit/test_ldp_gd.py``). The nine settings with one attribute close 0.40 of the gap on average, those
  with the paper's rule 0.36; with the same noise draws, 0.42 against 0.38 (wine at ε = 5: 0.60 against 0.55).
* η grows with ε, ``min(ε, 8)`` (3 at ε = ∞, as before): noisier reports want smaller steps. With one
  attribute it scores 0.415 on average over the group sizes, against 0.400 for η = 3 and 0.386 for 5; with the
  same noise draws the best fixed η is 1 at ε = 1 (gap closed -0.003; 3: -0.028), 3 at ε = 3 (0.440; 5:
  0.431), 5-8 at ε = 5 (0.603 / 0.598; 3: 0.571) and 8 at ε = 8 (0.696; 3: 0.650).
* Kept: 25 owners per group (10 scores 0.012 higher on average, within the noise of this score, as before)
  and at most 8 groups (16 or 32 groups for the large sets, or 50-100 owners per group: 0.30-0.41 against
  0.415, 12 splits); the iterate average (the last iterate, all iterates, the second half: 0.38-0.42); all
  K softmax rows in a report (dropping the reference class's row, fewer coordinates, lost on 30 splits of
  wine and iris: 0.35 against 0.42).

Gradient descent against the perturbed local models (``--solver gd|local``), both through the federation's
code, on the same validation splits (``--validate --learners lr --splits 6``, the ``lr-solver`` rows; owners
of 1, 10, 50 rows): on the six real sets gd closes 0.41 of the gap with one row per owner against -0.19 for
local, 0.03 against -0.05 with 10 rows, -0.29 against -0.21 with 50 (a few owners: both near or below the
majority class); on the synthetic set (``--datasets synthetic``) 0.50 against 0.09 with one row, 0.19
against 0.33 with 10 and -0.01 against 0.42 with 50. So gd is the default (one row per owner is the target
setting) and local is the choice for owners of many rows each.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.bounds import Bounds, exp_nonpositive, flush_tiny
from privfed.common.errors import ConfigError, RoundFailed
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.newton import expit
from privfed.common.mechanisms import Mechanism, make_mechanism
from privfed.common.mechanisms.piecewise_multidim import PiecewiseMultidim
from privfed.common.validation import check_choice, check_int, check_positive

#: Mechanisms for the gradient: Alg. 4 with PM (default) or HM, Duchi's d-dimensional, Laplace.
GD_MECHANISMS = ("pm", "hm", "duchi", "laplace")
#: Default iterations: at most this many, and at least :data:`MIN_GROUP` owners per iteration.
MAX_ITERATIONS = 8
MIN_GROUP = 25
#: Iterations at ε = ∞ (no noise: more steps only help), at most one per owner.
NOISELESS_ITERATIONS = 100
#: Default step size η (iteration t uses ``η / sqrt(t + 1)``): ``η = min(ε, MAX_LEARNING_RATE)``, a larger step
#: where the reports are less noisy (module docstring); :data:`NOISELESS_LEARNING_RATE` at ε = ∞. L2 weight λ,
#: in unit space.
MAX_LEARNING_RATE = 8.0
NOISELESS_LEARNING_RATE = 3.0
L2 = 1e-3
#: Default public clip of every parameter (unit-space rows: |θ_j| <= 4 moves a logit by at most 4 per feature).
GD_PARAM_BOUND = 4.0
#: Attributes Alg. 4 reports per gradient (``k``), each at ε/k: one. A gradient coordinate is a residual
#: times a feature, mostly far below 1 in magnitude, where Alg. 4's sampling term ``(p/k - 1) g_j^2`` is small
#: and the PM noise of ε/k dominates: k = 1 has the least variance there (the paper's ``floor(ε/2.5)`` is
#: best at ``|g_j| = 1``). Chosen on validation splits (module docstring).
GRADIENT_ATTRIBUTES = 1


def n_outputs(n_classes: int) -> int:
    """Rows of Θ: 1 (the class-1 logit) for two classes, K (softmax) otherwise."""
    return 1 if check_int(n_classes, name="n_classes", minimum=2) == 2 else n_classes


def logistic_gradients(theta: ArrayLike, t: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """Per-row gradients of the logistic loss at ``theta`` (K', d + 1), flattened: (n, K'(d + 1)) in ``[-1, 1]``.

    Two classes: ``(σ(w·t + b) - y) (t, 1)``; K classes: ``(softmax_k - [y = k]) (t, 1)`` for each k.
    ``t`` are unit-space rows (``|t_j| <= 1``), so every coordinate is in ``[-1, 1]``.

    No operation underflows, whatever ``theta`` (the coordinator's, audit 9): its entries below ``2^-300`` are
    read as 0 (``t_j θ_j`` of ``θ_j = 2^-1021`` underflowed exactly for the rows with ``|t_j| < 1/2``, a count
    the answer's time showed), and ``exp`` is 0 below ``-300`` (:func:`~privfed.common.bounds.exp_nonpositive`;
    a softmax of scores 708-745 apart was subnormal: 1000 rows placed there took 1.9x the time of 1000 rows
    outside). ``tests/adversary/test_underflow_parameters.py``.
    """
    theta = flush_tiny(np.atleast_2d(theta))  # the coordinator's: products with rows underflowed (below)
    t1 = np.hstack([t, np.ones((t.shape[0], 1))])
    scores = t1 @ theta.T  # (n, K')
    if n_classes == 2:
        residual = expit(scores) - (y == 1)[:, None]
    else:
        z = exp_nonpositive(scores - scores.max(axis=1, keepdims=True))
        residual = z / z.sum(axis=1, keepdims=True) - np.eye(n_classes)[y]
    return (residual[:, :, None] * t1[:, None, :]).reshape(t.shape[0], -1)


def gd_mechanism(name: str, *, epsilon: float, p: int, attributes: int | None = GRADIENT_ATTRIBUTES) -> Mechanism:
    """The ε-LDP mechanism of one gradient report of ``p`` coordinates: Alg. 4 with PM (``"pm"``) or HM
    (``"hm"``) reporting ``attributes`` attributes at ε/attributes each (None: the paper's ``floor(ε/2.5)``);
    Duchi's or Laplace otherwise. The owners' side (the task kind) builds it at the default."""
    check_choice(name, name="mechanism", allowed=GD_MECHANISMS)
    if name in ("pm", "hm") and math.isfinite(epsilon):
        return PiecewiseMultidim(epsilon=epsilon, d=p, base=name, attributes=attributes)
    return make_mechanism("pm" if name == "hm" else name, epsilon=epsilon, d=p)


def gradient_shares(
    theta: ArrayLike,
    X: ArrayLike,
    y: ArrayLike,
    *,
    bounds: Bounds,
    n_classes: int,
    mechanism: Mechanism,
    rng: np.random.Generator,
    counts: ArrayLike | None = None,
) -> np.ndarray:
    """Owner side, for ``m`` owners of ``n`` rows each: each owner's mean gradient at the public ``theta``,
    perturbed once (module docstring); one independent draw per owner.

    Parameters
    ----------
    X, y : arrays (m, n, d), (m, n)
        Each owner's rows and class indices (``n = 0``: owners without rows report the gradient 0
        through the same mechanism).
    counts : array (m,) of ints in ``[0, n]``, optional
        How many of each owner's ``n`` rows are its own (the first ones); the rest pad it to a public count
        (:func:`~privfed.common.work_rows.pad_rows`) and are masked out of its mean: the gradient works on ``n``
        rows, whatever the owner's count (audit 10, ``tests/adversary/test_timing_gradient_rows.py``). An
        owner of no own rows reports the gradient 0. None: all ``n``.

    Returns
    -------
    ndarray (m, p)
        The reports, in the owners' order.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if X.ndim != 3 or X.shape[2] != bounds.d or y.shape != X.shape[:2]:
        raise ConfigError(f"X must be (owners, rows, {bounds.d}) and y (owners, rows), got {X.shape} and {y.shape}")
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise ConfigError(f"y must be class indices in 0..{n_classes - 1}")
    m, n = y.shape
    own = np.full(m, n, dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
    if own.shape != (m,) or np.any(own < 0) or np.any(own > n):
        raise ConfigError(f"counts must be {m} row counts in [0, {n}], got {own}")
    p = n_outputs(n_classes) * (bounds.d + 1)
    if mechanism.d != p:
        raise ConfigError(f"mechanism has d={mechanism.d}, the gradient {p} coordinates; build it with d={p}")
    if n == 0:
        g = np.zeros((m, p))
    else:
        rows = logistic_gradients(theta, bounds.to_unit(X.reshape(m * n, -1)), y.reshape(-1), n_classes)
        live = (np.arange(n)[None, :] < own[:, None])[..., None]  # (m, n, 1): the same work for every count
        g = np.where(live, rows.reshape(m, n, p), 0.0).sum(axis=1) / np.maximum(own, 1)[:, None]
    return np.asarray(mechanism.privatize(np.clip(g, -1.0, 1.0), rng), dtype=np.float64)


#: What a descent asks of a group: ``(t, θ_t, group)`` -> the group's reports (r, p), r >= 0.
Gradients = Callable[[int, np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True, kw_only=True)
class LdpGradientDescent:
    """The coordinator's plan and update rule of LDP gradient descent (module docstring).

    Parameters
    ----------
    epsilon : float > 0 or math.inf
        Each owner's budget for its one gradient report.
    n_classes : int >= 2
    bounds : Bounds
        Public feature bounds (rows are mapped to ``[-1, 1]^d`` by them).
    mechanism : {"pm", "hm", "duchi", "laplace"}
    n_iterations : int or None
        T; None: ``min(MAX_ITERATIONS, max(1, n_owners // min_group))`` (``NOISELESS_ITERATIONS`` at
        ε = ∞), never more than the owners.
    learning_rate : float > 0 or None
        η; iteration t steps by ``η / sqrt(t + 1)``. None: :meth:`step_size`'s rule from ε.
    l2 : float >= 0
        λ, applied by the coordinator (no privacy cost).
    param_bound : float > 0
        Public clip of every parameter (post-processing).
    min_group : int >= 1
        Fewest owners per iteration when T is chosen by default.
    attributes : int >= 1 or None
        Attributes of Alg. 4 per report (:func:`gd_mechanism`); in process only (validation), the federation's
        owners use :data:`GRADIENT_ATTRIBUTES`.
    """

    epsilon: float
    n_classes: int
    bounds: Bounds
    mechanism: str = "pm"
    n_iterations: int | None = None
    learning_rate: float | None = None
    l2: float = L2
    param_bound: float = GD_PARAM_BOUND
    min_group: int = MIN_GROUP
    attributes: int | None = GRADIENT_ATTRIBUTES

    def __post_init__(self) -> None:
        check_positive(self.epsilon, name="epsilon", allow_inf=True, fix="math.inf: no noise")
        check_int(self.n_classes, name="n_classes", minimum=2)
        check_choice(self.mechanism, name="mechanism", allowed=GD_MECHANISMS)
        if self.n_iterations is not None:
            check_int(self.n_iterations, name="n_iterations", minimum=1)
        if self.learning_rate is not None:
            check_positive(self.learning_rate, name="learning_rate")
        check_positive(self.param_bound, name="param_bound")
        check_int(self.min_group, name="min_group", minimum=1)
        if self.attributes is not None:
            check_int(self.attributes, name="attributes", minimum=1)
        if not (isinstance(self.l2, (int, float)) and 0.0 <= self.l2 < math.inf):
            raise ConfigError(f"l2 must be a finite number >= 0, got {self.l2!r}")
        if not isinstance(self.bounds, Bounds):
            raise ConfigError("bounds must be a Bounds (public configuration)")

    @property
    def p(self) -> int:
        return n_outputs(self.n_classes) * (self.bounds.d + 1)

    def report_mechanism(self) -> Mechanism:
        return gd_mechanism(self.mechanism, epsilon=self.epsilon, p=self.p, attributes=self.attributes)

    def step_size(self) -> float:
        """η: ``learning_rate`` if given, else ``min(ε, MAX_LEARNING_RATE)`` (``NOISELESS_LEARNING_RATE`` at ε = ∞)."""
        if self.learning_rate is not None:
            return float(self.learning_rate)
        return NOISELESS_LEARNING_RATE if math.isinf(self.epsilon) else min(self.epsilon, MAX_LEARNING_RATE)

    def iterations(self, n_owners: int) -> int:
        """T for ``n_owners`` owners (public)."""
        n_owners = check_int(n_owners, name="n_owners", minimum=1)
        if self.n_iterations is not None:
            t = self.n_iterations
        elif math.isinf(self.epsilon):  # no noise to average: many small steps (the non-private reference)
            t = NOISELESS_ITERATIONS
        else:
            t = min(MAX_ITERATIONS, max(1, n_owners // self.min_group))
        return min(t, n_owners)

    def plan(self, n_owners: int, rng: np.random.Generator) -> list[np.ndarray]:
        """Disjoint groups of owner indices, one per iteration, covering every owner once."""
        return [np.sort(g) for g in np.array_split(rng.permutation(n_owners), self.iterations(n_owners))]

    def initial(self) -> np.ndarray:
        return np.zeros((n_outputs(self.n_classes), self.bounds.d + 1))

    def step(self, theta: np.ndarray, reports: ArrayLike, t: int) -> np.ndarray:
        """Coordinator side: ``Π(θ - η_t (mean(reports) + λ θ))`` (module docstring)."""
        reports = np.atleast_2d(np.asarray(reports, dtype=np.float64))
        if reports.shape[1] != self.p or reports.shape[0] == 0:
            raise ConfigError(f"reports must have shape (n >= 1, {self.p}), got {reports.shape}")
        grad = reports.mean(axis=0).reshape(theta.shape) + self.l2 * theta
        eta = self.step_size() / math.sqrt(t + 1.0)
        return np.clip(theta - eta * grad, -self.param_bound, self.param_bound)

    def model(self, iterates: list[np.ndarray]) -> LinearModel:
        """The averaged iterates (after the first step) as a :class:`LinearModel` on the public bounds."""
        theta = np.mean(iterates[1:] if len(iterates) > 1 else iterates, axis=0)
        return LinearModel(theta[:, :-1], theta[:, -1], self.bounds)

    def descend(self, n_owners: int, gradients: Gradients, rng: np.random.Generator) -> LinearModel:
        """The whole descent over ``n_owners`` owners: :meth:`plan` the groups (``rng``: public), then for
        each iteration t ask group t for its reports at θ_t (``gradients(t, θ_t, group)``), :meth:`step`,
        and return :meth:`model` of the iterates. A group without a report (every owner refused or
        silent) leaves θ where it was. The in-process :meth:`fit` and the federation's strategy
        (``privfed.server.strategies.ldp_gd``) both run this loop.

        Raises
        ------
        RoundFailed
            No group gave a single report.
        """
        theta, iterates, reported = self.initial(), [], 0
        for t, group in enumerate(self.plan(n_owners, rng)):
            reports = np.asarray(gradients(t, theta, group), dtype=np.float64).reshape(-1, self.p)
            if reports.shape[0]:
                theta = self.step(theta, reports, t)
                reported += reports.shape[0]
            iterates.append(theta)
        if not reported:
            raise RoundFailed("no owner released a gradient: cannot fit logistic regression")
        return self.model(iterates)

    def fit(
        self, X: ArrayLike, y: ArrayLike, *, owners: list[np.ndarray] | None = None, rng: np.random.Generator
    ) -> LinearModel:
        """Every owner in this process (one row each by default; ``owners``: row indices of each); owners
        of a group holding as many rows report together (:func:`gradient_shares`)."""
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        y = np.asarray(y, dtype=np.int64)
        owners = [np.array([i]) for i in range(X.shape[0])] if owners is None else owners
        mech = self.report_mechanism()

        def gradients(t: int, theta: np.ndarray, group: np.ndarray) -> np.ndarray:
            reports = []
            for n in sorted({len(owners[o]) for o in group}):
                rows = np.stack([owners[o] for o in group if len(owners[o]) == n])
                reports.append(
                    gradient_shares(theta, X[rows], y[rows], bounds=self.bounds, n_classes=self.n_classes,
                                    mechanism=mech, rng=rng)
                )  # fmt: skip
            return np.concatenate(reports)

        return self.descend(len(owners), gradients, rng)
