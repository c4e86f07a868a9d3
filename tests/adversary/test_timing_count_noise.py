"""Audit 10: the row count's noise does not show in the time its sampler takes (common/mechanisms/geometric.py).

A FedDPDR owner releases its row count as ``n + Z``, ``Z`` two-sided geometric at ``count_epsilon``
(:func:`~privfed.common.mechanisms.geometric.discrete_laplace`, Canonne, Kamath and Steinke's exact sampler).
As written, the sampler loops ``V + 1`` times for ``V = floor(|Z| eps)``-ish and each Bernoulli draw until a
failure, so the time of a ``pca_share`` answer told a coordinator ``|Z|``'s bucket: at ε = 0.1, 126 us for
``|Z| < 10``, 190 us for ``10 <= |Z| < 20``, 246, 296, 350 us beyond (medians of 20 000 draws, load 10-13), ~60 us
per bucket. With the released ``n + Z`` that narrows ``n`` to two windows of width ``1/eps`` and breaks ε at
their edges (Jin, McMurtry, Rubinstein, Ohrimenko, IEEE S&P 2022, the same attack on the same sampler).

Checked without clocks: the generator the sampler draws from is wrapped to record every call (which method,
the shape and value of its bounds, the size asked), and the calls of 600 single draws at ε = 0.1 must be one
fixed round of calls repeated once per rejection round (whose number is independent of the value kept), while
``|Z|`` spans many buckets. Positive control: with one Bernoulli(e^-1) trial drawn at once instead of 40 (so
``V`` is drawn trial by trial, as before), the same check fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from privfed.common.mechanisms import geometric
from privfed.common.mechanisms.geometric import discrete_laplace

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

EPSILON = 0.1
DRAWS = 600


class _Recorder:
    """A Generator's ``integers``, recording each call's public shape: bounds and size."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self.calls: list[tuple] = []

    def integers(self, low, high=None, size=None, dtype=np.int64):
        bounds = (np.asarray(low).tolist(), np.asarray(high).tolist())
        self.calls.append((bounds, size, np.dtype(dtype).str))
        return self._rng.integers(low, high, size=size, dtype=dtype)


def _traces() -> list[tuple[int, list[tuple]]]:
    out = []
    for seed in range(DRAWS):
        rec = _Recorder(seed)
        (z,) = discrete_laplace((1,), epsilon=EPSILON, sensitivity=1, rng=rec)  # type: ignore[arg-type]
        out.append((int(z), rec.calls))
    return out


def _one_round_repeated(traces: list[tuple[int, list[tuple]]]) -> bool:
    """Whether every trace is one fixed round of calls, repeated."""
    shortest = min((calls for _, calls in traces), key=len)
    return all(
        len(calls) % len(shortest) == 0 and calls == shortest * (len(calls) // len(shortest)) for _, calls in traces
    )


def test_the_count_noise_sampler_does_the_same_work_whatever_it_draws():
    traces = _traces()
    buckets = {int(abs(z) * EPSILON) for z, _ in traces}
    assert {0, 1, 2, 3} <= buckets, buckets  # |Z| spans buckets the old sampler's time told apart
    assert _one_round_repeated(traces)


def test_positive_control_v_drawn_trial_by_trial_shows_in_the_calls(monkeypatch):
    monkeypatch.setattr(geometric, "GEOMETRIC_STEPS", 1)
    assert not _one_round_repeated(_traces())
