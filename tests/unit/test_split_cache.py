"""federation_split's cache: what a process reads back equals what another computed, and a cached
split is read with numpy alone (no scikit-learn import in the reading process)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from privfed.common.datasets import SPLIT_CACHE_ENV, federation_split


def test_cached_split_equals_the_computed_one(tmp_path, monkeypatch):
    monkeypatch.delenv(SPLIT_CACHE_ENV, raising=False)  # computed, not read from the session's cache (conftest)
    fresh = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=400)
    written = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=400, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    read = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=400, cache_dir=tmp_path)
    for a, b, c in zip(fresh, written, read):
        for ds in (b, c):
            assert ds.name == a.name
            np.testing.assert_array_equal(ds.X, a.X)
            np.testing.assert_array_equal(ds.y, a.y)
            np.testing.assert_array_equal(ds.classes, a.classes)
            np.testing.assert_array_equal(ds.bounds.lo, a.bounds.lo)
            np.testing.assert_array_equal(ds.bounds.hi, a.bounds.hi)
            assert ds.feature_names == a.feature_names


def test_other_settings_get_their_own_file(tmp_path):
    a = federation_split("synthetic", seed=0, test_fraction=0.2, n_samples=300, cache_dir=tmp_path)
    b = federation_split("synthetic", seed=1, test_fraction=0.2, n_samples=300, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 2
    assert not np.array_equal(a[0].X, b[0].X)


def test_a_cached_split_is_read_without_scikit_learn(tmp_path):
    federation_split("synthetic", seed=0, test_fraction=0.2, n_samples=300, cache_dir=tmp_path)
    code = (
        "import sys; from privfed.common.datasets import federation_split; "
        "tr, te = federation_split('synthetic', seed=0, test_fraction=0.2, n_samples=300); "
        "print(tr.n + te.n, 'sklearn' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={SPLIT_CACHE_ENV: str(tmp_path)}, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["300", "False"]
