"""Audit 10: the float mechanisms' uniform takes the same work whatever it draws (common/mechanisms/snapping.py).

Every float release (Laplace, the Piecewise Mechanism, the Gaussian) draws its noise from
:func:`~privfed.common.mechanisms.snapping.full_uniform`, a uniform at full double precision: one 64-bit word per
value, whose low 11 bits give the binade. For the one value in 2048 whose 11 bits are all zero, ``U < 2^-11``,
it read further words in a branch of its own: ~60-80 us more for a release of one to eight values (18.5 against
100.9 us, medians of 300 000 calls at load 13). ``U < 2^-11`` is where the noise is largest (Laplace's
``|noise| = b ln(1/U) > 7.6 b``), so an answer's time told a coordinator that the value it received lies more
than 7.6 scales from the input, on a side its sign gives: a privacy loss without bound in that event, of
probability ~2^-11 per value (a δ of ~5e-4 per value, where the mechanisms claim ε alone).

Checked without clocks: the bit generator is wrapped to record every call of ``random_raw`` (the only source
``full_uniform`` reads), and draws of 4096 values with and without a value below ``2^-11`` must make the same
calls, alone and through the Laplace mechanism. Positive control: the old branch (further words for the short
values only) is told apart by the same check.
"""

from __future__ import annotations

import numpy as np
import pytest

from privfed.common.mechanisms import LaplaceMechanism, snapping
from privfed.common.mechanisms.snapping import full_uniform

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

SIZE = 4096  # ~2 values below 2^-11 a draw: some draws have none (e^-2), most have some
SEEDS = range(24)


class _Recording(np.random.PCG64):
    """PCG64 that records the size of every ``random_raw`` call."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.calls: list[object] = []

    def random_raw(self, size=None, output=True):
        self.calls.append(size)
        return super().random_raw(size, output)


def _draw(seed: int) -> tuple[int, list[object]]:
    """How many of a draw's 4096 uniforms lie below ``2^-11``, and the words it read (through the module, so that
    the positive control's replacement is the one called)."""
    rng = np.random.Generator(_Recording(seed))
    u, _ = snapping.full_uniform(rng, (SIZE,))
    return int(np.count_nonzero(u < 2.0**-11)), rng.bit_generator.calls


def _check_alike(draws: list[tuple[int, list[object]]]) -> None:
    shorts = [s for s, _ in draws]
    assert min(shorts) == 0 < max(shorts), shorts  # both kinds of draws were made
    assert all(calls == draws[0][1] for _, calls in draws), draws


def test_the_uniform_reads_the_same_words_whatever_it_draws():
    _check_alike([_draw(seed) for seed in SEEDS])


def test_a_laplace_release_reads_the_same_words_whatever_its_noise():
    mech = LaplaceMechanism(epsilon=1.0, d=1)
    draws = []
    for seed in SEEDS:
        rng = np.random.Generator(_Recording(seed))
        noise = mech.privatize(np.zeros((SIZE, 1)), rng)
        draws.append((int(np.count_nonzero(np.abs(noise) > 7.7 * mech.scale)), rng.bit_generator.calls))
    _check_alike(draws)


def _old_uniform(rng, shape, magnitude=1.0, work=None):
    """A uniform with the old shape of work: further words read for the short values only."""
    u, signs = _real_uniform(rng, shape, magnitude, work)
    short = np.flatnonzero(u < 2.0**-11)
    if short.size:
        rng.bit_generator.random_raw(short.size)
    return u, signs


_real_uniform = full_uniform


def test_positive_control_a_branch_for_the_short_values_is_seen(monkeypatch):
    monkeypatch.setattr(snapping, "full_uniform", _old_uniform)
    with pytest.raises(AssertionError, match="calls|\\["):
        _check_alike([_draw(seed) for seed in SEEDS])
