"""Approximate Minima Perturbation (AMP): a total minimiser for the strongly convex objectives of
objective perturbation, and its output noise (SPEC §8).

Objective perturbation (Chaudhuri, Monteleoni, Sarwate 2011; Kifer, Smith, Thakurta 2012) is private
for the *exact* minimiser of ``J``. A solver in floating point returns an approximate one, and one that
gives up (L-BFGS does when huge noise makes the objective too big for its line search) must not turn
into a refusal that depends on the rows (issue 20, finding 2). Approximate Minima Perturbation (AMP,
Iyengar et al. 2019, Alg. 1) closes both gaps:

1. the solver returns a point within a public radius ``r`` of the exact minimiser, **always**:
   :func:`nesterov_within` runs Nesterov's accelerated gradient method for a number of steps that provably
   reaches the radius (:func:`accelerated_steps`, Bubeck 2015 Thm 3.18), from a start point whose distance
   to the minimiser has a public bound (the caller's: :mod:`.objective` starts at the minimiser of the
   regulariser plus the noise, within ``(loss's gradient bound) / mu`` of ``x*``);
2. the mechanism adds output noise calibrated to L2 sensitivity ``2 r``: given the exact minimiser
   ``x*`` (the objective-perturbation release), any point within ``r`` of it differs by at most ``2 r``
   between neighbouring data sets, so the noised point is a further ``epsilon_out``-DP release, and the
   pair composes (adaptive composition) to the budget of the objective perturbation plus
   ``epsilon_out``.

Timing (``privfed.owner.compute``, "Timing"): the step count is a function of public quantities only
(``mu``, the smoothness, the start distance's bound, ``r``), so every fit of the same shape does the same
work: no stopping test, no line search, no branch on the iterates. (Before, L-BFGS stopped when it converged:
one answer's time told an owner of separable or one-class rows from one of ordinary rows at ~0.7 accuracy.)
The gradients the solver calls are the learners' branch-free ones (:mod:`privfed.common.feddpdr.svm`,
:mod:`privfed.common.feddpdr.multiclass`): ``clip`` and ``where``, an ``exp`` whose argument is clamped so
that it never returns a subnormal, and rows whose tiny entries :func:`~privfed.common.bounds.flush_tiny` has
zeroed; products of such values stay normal, so no float takes a slow path whatever the rows.

The objective-perturbation mechanisms (:mod:`.objective`, used by :mod:`privfed.common.feddpdr.svm` and
:mod:`privfed.common.feddpdr.multiclass`) give ``epsilon_out`` a small public share of their budget
(:data:`AMP_FRACTION`) and add the noise, :class:`AmpOutputNoise`.

The noise of density proportional to ``exp(-(epsilon/2) ||v||)`` on R^d (:func:`norm_laplace_noise`:
a uniform direction times a Gamma(d, 2/epsilon) radius) is the L2 analogue of Laplace noise for L2
sensitivity 2 (Chaudhuri, Monteleoni, Sarwate 2011, Alg. 1): for two centres ``a, a'`` at distance at
most 2 the densities of ``a + v`` and ``a' + v`` differ by a factor at most
``exp((epsilon/2) ||a - a'||) <= e^epsilon``. Scaled by ``r``, it protects a point known to within ``2 r``;
Chaudhuri's objective perturbation draws its ``b`` from it too.

Floating point (SPEC §12; Mironov, CCS 2012): the direction and the radius come from the float-safe samplers
of :mod:`.gaussian` (full-precision uniforms, no gaps in the tails), and the released vector, the solver's
point plus the noise, is clamped and rounded to a grid that grows with the noise (:class:`AmpOutputNoise`).
Unrounded, ``F + r V`` kept the solver point's low bits: for ``d = 1`` the small noise values
``-(2r/eps) ln U``, ``U`` near 1, lie on a lattice of step ``(2r/eps) 2^-53``, coarser than the doubles
near ``F``, so replaying the sampler ruled out a point ``F'`` within ``2r`` of ``F`` in 46 % of releases
(``tests/adversary/test_float_mechanisms.py``).

References
----------
R. Iyengar, J. P. Near, D. Song, O. Thakkar, A. Thakurta, L. Wang, "Towards practical differentially
private convex optimization", IEEE S&P 2019 (Algorithm 1, AMP).
S. Bubeck, "Convex optimization: algorithms and complexity", FnT ML 8(3-4), 2015 (Theorem 3.18,
Nesterov's method for strongly convex smooth functions).
B. Andrysco et al., "On subnormal floating point and abnormal timing", IEEE S&P 2015.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.gaussian import gamma_integer_shape, standard_normal
from privfed.common.mechanisms.snapping import OutputGrid
from privfed.common.validation import check_int, check_positive, check_rng

Gradient = Callable[[np.ndarray], np.ndarray]
"""``x -> grad J(x)``, of ``x``'s shape."""

AMP_RADIUS = 1e-6
"""Public radius ``r`` around the exact minimiser within which the released point lies (AMP)."""
AMP_FRACTION = 0.01
"""Share of a release's epsilon that pays for the output noise of AMP (its sensitivity is ``2 r``)."""
FLOAT_SHARE = 0.5
"""Share of ``r`` left to floating point: :func:`nesterov_within` reaches ``(1 - FLOAT_SHARE) r`` in real
arithmetic (its rounding errors, relative ~1e-16 per step, stay far below the other half; the tests compare
with a reference minimiser on varied rows). It costs ``2 sqrt(kappa) ln 2`` more steps."""
#: The released parameters are clamped to ``+-(PARAMETER_LIMIT + TAIL_SCALES s)`` (:class:`AmpOutputNoise`): far
#: beyond any fit of rows of norm <= 1, and a coordinate-wise clamp brings two points no further apart.
PARAMETER_LIMIT = 2.0**31
TAIL_SCALES = 40.0


def accelerated_steps(kappa: float, start_distance: float, radius: float) -> int:
    """Gradient steps of Nesterov's method after which ``||y - x*|| <= radius`` (Bubeck 2015, Thm 3.18).

    From ``y_1 = x_1``, ``f(y_t) - f* <= (mu + L)/2 ||x_1 - x*||^2 exp(-(t - 1)/sqrt(kappa))``, and
    ``mu``-strong convexity gives ``||y_t - x*||^2 <= (2/mu)(f(y_t) - f*)``, so after ``t - 1`` steps
    ``||y_t - x*|| <= sqrt(1 + kappa) ||x_1 - x*|| exp(-(t - 1)/(2 sqrt(kappa)))``: at most ``radius`` for
    ``t - 1 >= 2 sqrt(kappa) ln(sqrt(1 + kappa) start_distance / radius)`` steps, the count returned.
    """
    if not (kappa >= 1 and radius > 0 and start_distance >= 0 and math.isfinite(kappa * start_distance)):
        raise ConfigError(f"need kappa >= 1, radius > 0, distance >= 0; got {kappa}, {radius}, {start_distance}")
    if start_distance <= radius:
        return 0
    ratio = math.sqrt(1.0 + kappa) * start_distance / radius
    return math.ceil(2.0 * math.sqrt(kappa) * math.log(ratio))


def nesterov_within(
    gradient: Gradient,
    start: np.ndarray,
    *,
    mu: float,
    smooth: float,
    start_distance: float,
    radius: float = AMP_RADIUS,
) -> np.ndarray:
    """A point within ``radius`` of the minimiser of ``J``, by a fixed, public amount of work (module docstring).

    Nesterov's accelerated gradient method with constant momentum for a ``mu``-strongly convex,
    ``smooth``-smooth function (Bubeck 2015, §3.7.1): ``y' = x - grad J(x) / smooth``,
    ``x' = y' + m (y' - y)``, ``m = (sqrt(kappa) - 1)/(sqrt(kappa) + 1)``, for exactly
    ``accelerated_steps(smooth/mu, start_distance, (1 - FLOAT_SHARE) radius)`` steps (Thm 3.18), one
    ``gradient`` call each: no test on the iterates, whatever they are.

    The iteration is linear in the gradient, so on a separable ``J`` (one independent problem per row of
    ``start``, as one-vs-rest) it runs each row's own method: then ``start_distance`` and ``radius`` may be
    read per row (each row's distance bound, each row's radius).

    Parameters
    ----------
    gradient : ``x -> grad J(x)``, ``x`` of ``start``'s shape.
    start : the start point ``x_1``.
    mu, smooth : public bounds on the curvature, ``0 < mu <= smooth < inf``.
    start_distance : a public bound on ``||start - argmin J||`` (for every input).
    radius : the public ``r`` of AMP.

    Returns
    -------
    x : ndarray of ``start``'s shape with ``||x - argmin J|| <= radius``.
    """
    if not (0 < mu <= smooth and math.isfinite(smooth)):
        raise ConfigError(f"need 0 < mu <= smooth < inf, got mu={mu!r}, smooth={smooth!r}")
    kappa = smooth / mu
    steps = accelerated_steps(kappa, start_distance, (1.0 - FLOAT_SHARE) * radius)
    q = math.sqrt(kappa)
    momentum, step = (q - 1.0) / (q + 1.0), 1.0 / smooth
    x = y = np.array(start, dtype=np.float64)
    for _ in range(steps):
        y_next = x - step * gradient(x)
        x = (1.0 + momentum) * y_next - momentum * y
        y = y_next
    return y


def norm_laplace_noise(d: int, epsilon: float, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
    """Noise with density proportional to ``exp(-(epsilon/2) ||v||)`` on R^d (module docstring; SPEC §8).

    Direction ``g / ||g||`` with ``g ~ N(0, I_d)``; radius ``~ Gamma(shape=d, scale=2/epsilon)``, both from
    the float-safe samplers of :mod:`.gaussian`. Returns shape (d,), or (size, d) when ``size`` is given;
    zeros when ``epsilon = inf``. Per coordinate ``E v_j = 0`` and ``Var v_j = (d + 1) (2/epsilon)^2``
    (:func:`norm_laplace_variance`).
    """
    d = check_int(d, name="d", minimum=1)
    epsilon = check_positive(epsilon, name="epsilon", allow_inf=True)
    shape = (d,) if size is None else (int(size), d)
    if epsilon == math.inf:
        return np.zeros(shape)
    g = standard_normal(rng, shape)
    radius = gamma_integer_shape(rng, d, 2.0 / epsilon, shape[:-1])
    return g / np.linalg.norm(g, axis=-1, keepdims=True) * np.asarray(radius)[..., None]


def norm_laplace_variance(d: int, epsilon: float) -> float:
    """``Var v_j`` of :func:`norm_laplace_noise`: ``E ||v||^2 / d = d (d + 1) theta^2 / d``, ``theta = 2/epsilon``
    (the second moment of Gamma(d, theta)); 0 at ``epsilon = inf``."""
    return 0.0 if math.isinf(epsilon) else (d + 1) * (2.0 / epsilon) ** 2


@dataclass(frozen=True, kw_only=True)
class AmpOutputNoise:
    """AMP's output perturbation (Iyengar et al. 2019, Alg. 1 line 6): ``F + r V`` for a point ``F`` known to
    lie within ``r`` of an exact minimiser, ``V`` of density proportional to ``exp(-(epsilon/2) ||V||)``.

    Privacy: ``F`` lies within ``r`` of ``x*``, so two neighbouring data sets' points are at most ``2 r``
    apart, and ``r V`` is the L2 Laplace noise of sensitivity ``2 r`` (module docstring): the release is an
    ``epsilon``-DP function of the data given ``x*``, and composes with the objective perturbation that
    made ``x*`` (adaptive composition).

    Parameters
    ----------
    epsilon : float > 0, or inf (no noise)
    radius : float > 0, the public ``r`` (:data:`AMP_RADIUS`)
    d : int, coordinates of one noise vector; ``privatize`` draws one per row of ``F``'s ``(rows, d)``.

    Notes
    -----
    Float-safe release (SPEC §12; Mironov CCS 2012; :mod:`.snapping`): with ``s = 2 r / epsilon`` the scale
    of the radius, the output is ``clamp_M(round_L(F + r V))`` per coordinate on the grid
    ``L = 2^(ceil(log2 s) - 12)`` (at least ``2^-20``), ``F`` split on the grid exactly
    (:meth:`~.snapping.OutputGrid.add`), ``M = 2^31 + 40 s`` rounded down to the grid.

    * Reachable outputs: every grid point within the noise's reach of ``F`` (the radius is gap-free at
      ``L`` out to 700 scales; a lone small noise value ``-(2 r/eps) ln U`` steps by ``s 2^-53``, ``2^-41``
      of a cell), so two points within ``2 r`` of each other reach the same cells except at the far tail.
    * Privacy: rounding and clamping are post-processing of ``F + r V``, which is ``epsilon``-DP given the
      exact minimiser (class docstring). A noise coordinate within ``T`` scales of 0 errs by a few ulp,
      at most ``2^-(37 - log2 T)`` of a cell; for ``d <= 2^10`` parameters the radius passes ``2^11``
      scales with probability below ``e^-300`` (a δ), so each cell's probability moves by a factor within
      ``1 +- 2^-23`` and the release is ``(epsilon + 2^-21)``-DP given the minimiser (the argument of
      :mod:`.snapping`).
    * Bias: the rounding moves a coordinate's mean by at most ``L/2`` (far less for the smooth noise; ``bias``
      reports the exact mechanism's 0); the clamp binds only for parameters beyond ``2^31``.
    """

    epsilon: float
    radius: float = AMP_RADIUS
    d: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive(self.epsilon, name="epsilon", allow_inf=True))
        object.__setattr__(self, "radius", check_positive(self.radius, name="radius"))
        object.__setattr__(self, "d", check_int(self.d, name="d", minimum=1))
        if math.isfinite(self.epsilon):
            self.output_grid  # noqa: B018 - built from public parameters before any release

    @property
    def scale(self) -> float:
        """``s = 2 r / epsilon``: the scale of the noise's Gamma radius (0 at ``epsilon = inf``)."""
        return 2.0 * self.radius / self.epsilon

    @cached_property
    def output_grid(self) -> OutputGrid:
        """The public grid and clamp of the released parameters (class docstring)."""
        return OutputGrid.for_noise(self.scale, PARAMETER_LIMIT + TAIL_SCALES * self.scale)

    def release(self, F: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """``clamp(round(F + noise))`` on :attr:`output_grid`, for the noise ``r V`` (same shape), written into it."""
        return self.output_grid.add(np.asarray(F, dtype=np.float64), noise)

    def privatize(self, F: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``F + r V`` on the grid: one noise vector of length ``d`` per row of ``F`` (shape (rows, d) or (d,));
        ``F`` itself at ``epsilon = inf``."""
        check_rng(rng)
        if math.isinf(self.epsilon):
            return F
        rows = None if np.ndim(F) == 1 else int(np.shape(F)[0])
        noise = norm_laplace_noise(self.d, self.epsilon, rng, size=rows)
        noise *= self.radius
        return self.release(F, noise)

    def variance(self, F: np.ndarray | None = None) -> float:
        """Per coordinate ``r^2 (d + 1) (2/epsilon)^2``, whatever ``F`` (the rounding adds at most ``L^2 / 4``)."""
        return self.radius**2 * norm_laplace_variance(self.d, self.epsilon)

    def bias(self, F: np.ndarray | None = None) -> float:
        """0: the noise is symmetric."""
        return 0.0

    @property
    def output_bounds(self) -> tuple[float, float]:
        """The public clamp ``(-M, M)`` (unbounded at ``epsilon = inf``)."""
        if math.isinf(self.epsilon):
            return (-math.inf, math.inf)
        return (-self.output_grid.bound, self.output_grid.bound)


__all__ = [
    "AMP_FRACTION",
    "AMP_RADIUS",
    "PARAMETER_LIMIT",
    "AmpOutputNoise",
    "FLOAT_SHARE",
    "Gradient",
    "accelerated_steps",
    "nesterov_within",
    "norm_laplace_noise",
    "norm_laplace_variance",
]
