"""Shared fixtures: seeded generators only (STYLE rule 5)."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    """A fresh seeded generator per test; tests needing several streams spawn from it."""
    return np.random.Generator(np.random.PCG64(20261122))
