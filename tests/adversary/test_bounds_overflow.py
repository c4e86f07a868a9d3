"""Bounds whose use overflows a float are refused where they are given (wt-redteam3).

``Bounds`` refused a range whose width overflows (``2 (hi - lo)``: ``to_unit`` gave NaN and every release
was the fallback with no word), but the other public maps of the same bounds overflow sooner:

* FedDPDR's ball scaling divides by the box's radius ``sqrt(Σ ((hi - lo) / 2)²)``, whose squares overflow
  once a half-range passes ~1.3e154: with ``[-1e200, 1e200]`` every row became the zero row (each
  owner's DP-PCA and SVM then read nothing of its rows), with no word;
* its centre ``(lo + hi) / 2`` overflows for ``[1e308, 1.7e308]``: the ball scaling gave NaN (every
  release the fallback) and the coordinator's ``from_unit`` infinite centroids. (A centre that overflows
  means a radius that does: two floats near 1e308 are at least ~1e292 apart.)

A schema, a ``--bounds`` flag or a served model's bounds (``privfed query``) with such bounds is now a
one-line ConfigError before any row is read; bounds just inside still scale rows apart.
"""

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.pca import scale_rows_to_unit_ball

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process


@pytest.mark.parametrize("lo, hi", [(-1e200, 1e200), (-1e154, 1e154), (1e308, 1.7e308), (-1.7e308, -1e308)])
def test_bounds_whose_centre_or_radius_overflows_are_refused(lo, hi):
    with pytest.raises(ConfigError, match="too far apart: the width of the bounds. box overflows a float"):
        Bounds.of(lo, hi, 3)


@pytest.mark.parametrize("lo, hi", [(-1e150, 1e150), (1e160, 1e160 + 1e153), (0.0, 1e153)])
def test_bounds_just_inside_scale_different_rows_apart(lo, hi):
    bounds = Bounds.of(lo, hi, 3)
    X = np.array([[lo + (hi - lo) * 0.25] * 3, [lo + (hi - lo) * 0.9] * 3])
    scaled = scale_rows_to_unit_ball(X, bounds)
    assert np.all(np.isfinite(scaled)) and np.all(np.isfinite(bounds.from_unit(np.zeros(3))))
    assert not np.allclose(scaled[0], scaled[1]), scaled  # the rows are read, not all mapped to one point
