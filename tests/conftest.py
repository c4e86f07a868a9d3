"""Shared fixtures: seeded generators only (STYLE rule 5).

The tests start many owner node processes on one host (the CI machine has two cores): each gets one
BLAS/OpenMP thread through the environment it inherits (``privfed owner --threads`` defaults to it;
``privfed.deploy.threads``), as ``privfed simulate`` gives its nodes. Set here, before numpy loads.

Those processes (owner nodes, coordinators) also share one split cache for the session
(``PRIVFED_SPLIT_CACHE``, :func:`privfed.common.datasets.federation_split`), as ``privfed simulate``
gives its nodes: a built-in data set's split is computed once, and every later process reads it with
numpy alone instead of importing scikit-learn and regenerating it (about 2 s of CPU per process). The
cached split equals the computed one (``tests/unit/test_split_cache.py``); a test of what a process
imports or computes without the cache removes the variable.
"""

import os
import shutil
import tempfile

from privfed.deploy.threads import thread_env

for _name, _value in thread_env(1).items():
    os.environ.setdefault(_name, _value)

import numpy as np  # noqa: E402  (after the thread environment: OpenBLAS reads it when it loads)
import pytest  # noqa: E402

from privfed.common.datasets import SPLIT_CACHE_ENV  # noqa: E402

#: The split cache this session made (None if the environment named one already: a parent's, kept).
_OWN_SPLIT_CACHE = None if SPLIT_CACHE_ENV in os.environ else tempfile.mkdtemp(prefix="privfed-split-cache-")
if _OWN_SPLIT_CACHE is not None:
    os.environ[SPLIT_CACHE_ENV] = _OWN_SPLIT_CACHE


@pytest.fixture
def rng():
    """A fresh seeded generator per test; tests needing several streams spawn from it."""
    return np.random.Generator(np.random.PCG64(20261122))


def pytest_unconfigure(config):
    if _OWN_SPLIT_CACHE is not None:
        shutil.rmtree(_OWN_SPLIT_CACHE, ignore_errors=True)
