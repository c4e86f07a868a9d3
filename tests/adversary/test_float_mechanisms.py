"""Floating-point exclusion attacks on the mechanisms beyond Laplace and PM (``test_float_exclusion.py``):
a hostile coordinator who knows the code replays the owner's sampler and asks, for each candidate input,
whether the release it saw is reachable (Mironov, CCS 2012; DESIGN "Release discipline" rule 3).

In process: the channel is the sampler itself, the same functions the owner runs.
"""

from __future__ import annotations

import math

import numpy as np

from privfed.common.mechanisms.amp import AMP_FRACTION, AMP_RADIUS, AmpOutputNoise
from privfed.common.mechanisms.snapping import cell_probabilities


def amp_replay(amp: AmpOutputNoise, F: float):
    """AMP's release of the solver point ``F`` (d = 1) as a function of the Gamma radius's full-precision
    uniform and the direction's sign (``g / |g| = +-1``): what :meth:`AmpOutputNoise.privatize` computes."""

    def release(u: np.ndarray, sign: np.ndarray) -> np.ndarray:
        radius = -(2.0 / amp.epsilon) * np.log(u)  # gamma_integer_shape with shape 1
        return amp.release(np.full(u.shape, F), amp.radius * (sign * radius))

    return release


def test_amp_output_keeps_no_low_bits_of_the_solver_point():
    """Finding (AMP output noise, ``fit_dp_svm`` on one feature): the solver point ``F`` plus ``r V`` was
    released unrounded. With ``d = 1`` a small noise value ``-(2r/eps) ln U`` (U near 1) lies on a lattice of
    step ``(2r/eps) 2^-53``, coarser than the doubles near ``F``, so replaying the sampler ruled out a point
    ``F'`` within AMP's ``2r`` of ``F`` in 184 of 400 releases at eps = 1 (before the fix). The release
    is now rounded to a grid of the noise: no report rules out a neighbour."""
    amp = AmpOutputNoise(epsilon=AMP_FRACTION * 1.0, radius=AMP_RADIUS, d=1)
    rng = np.random.default_rng(35)
    F = 0.3e-4  # a coefficient of the noise's size, where the lattice shows
    neighbours = np.array([F, F + 1e-7, F - 2 * AMP_RADIUS, F + 2 * AMP_RADIUS])
    observed = np.array([amp.privatize(np.array([F]), rng)[0] for _ in range(60)])
    outputs = np.repeat(observed, neighbours.size)
    candidates = np.tile(neighbours, observed.size)
    probs = np.empty(outputs.size)
    for i, (o, c) in enumerate(zip(outputs, candidates)):
        probs[i] = cell_probabilities(amp_replay(amp, c), np.array([o]))[0]
    probs = probs.reshape(observed.size, neighbours.size)
    assert np.all(probs[:, 0] > 0), "the replay does not reproduce the sampler"
    excluded = int(np.count_nonzero(probs[:, 1:] == 0))
    assert excluded == 0, f"{excluded} (report, neighbour) pairs ruled out: the release keeps F's low bits"
    ratio = np.max(np.abs(np.log(probs[:, 1:] / probs[:, :1])))
    assert ratio <= amp.epsilon * (1 + 1e-6), f"log probability ratio {ratio:.3g} beyond eps for points 2 r apart"
    assert math.isfinite(ratio)
