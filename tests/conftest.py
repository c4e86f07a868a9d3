"""Shared fixtures: seeded generators only (STYLE rule 5).

The tests start many owner node processes on one host (the CI machine has two cores): each gets one
BLAS/OpenMP thread through the environment it inherits (``privfed owner --threads`` defaults to it;
``privfed.deploy.threads``), as ``privfed simulate`` gives its nodes. Set here, before numpy loads.
"""

import os

from privfed.deploy.threads import thread_env

for _name, _value in thread_env(1).items():
    os.environ.setdefault(_name, _value)

import numpy as np  # noqa: E402  (after the thread environment: OpenBLAS reads it when it loads)
import pytest  # noqa: E402


@pytest.fixture
def rng():
    """A fresh seeded generator per test; tests needing several streams spawn from it."""
    return np.random.Generator(np.random.PCG64(20261122))
