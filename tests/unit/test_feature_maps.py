"""Public feature maps for MNIST (deploy/experiments/feature_maps.py): shapes, bounds, and data independence."""

from __future__ import annotations

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.deploy.experiments.feature_maps import block_pool, ink_blocks, mnist_box_pool, mnist_top_ink


def _images(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, 784)).astype(np.float64)


def test_block_pool_mean_and_max_of_known_blocks() -> None:
    img = np.zeros((1, 4, 4))
    img[0, :2, :2] = [[0, 4], [8, 12]]  # top-left block
    img[0, 2:, 2:] = 255.0
    X = img.reshape(1, 16)
    np.testing.assert_array_equal(block_pool(X, block=2, side=4), [[6.0, 0.0, 0.0, 255.0]])
    np.testing.assert_array_equal(block_pool(X, block=2, side=4, how="max"), [[12.0, 0.0, 0.0, 255.0]])
    np.testing.assert_array_equal(block_pool(X, block=2, side=4, window=(2, 4, 0, 4)), [[0.0, 255.0]])


def test_ink_blocks_marks_a_block_with_one_pixel_above_the_level() -> None:
    X = np.zeros((2, 16))
    X[0, 5] = 128.0  # row 1, column 1: top-left 2x2 block
    X[1, 5] = 127.0  # below the midpoint: no ink
    np.testing.assert_array_equal(ink_blocks(X, block=2, side=4), [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])


@pytest.mark.parametrize(("fmap", "d", "lo", "hi"), [(mnist_top_ink, 30, 0.0, 1.0), (mnist_box_pool, 100, 0.0, 255.0)])
def test_mnist_maps_shapes_and_public_bounds(fmap, d: int, lo: float, hi: float) -> None:
    X = _images(50)
    F = fmap(X)
    assert F.shape == (50, d)
    assert F.min() >= lo and F.max() <= hi
    assert np.all(fmap(np.zeros((1, 784))) == lo) and np.all(fmap(np.full((1, 784), 255.0)) == hi)


@pytest.mark.parametrize("fmap", [mnist_top_ink, mnist_box_pool])
def test_a_rows_features_depend_on_that_row_alone(fmap) -> None:
    """Data independence: mapping a row alone, or among any other rows, gives the same features."""
    X = _images(20, seed=1)
    together = fmap(X)
    alone = np.vstack([fmap(X[i : i + 1]) for i in range(X.shape[0])])
    np.testing.assert_array_equal(together, alone)
    others = np.vstack([_images(30, seed=2), X[3:4]])
    np.testing.assert_array_equal(fmap(others)[-1], together[3])


def test_mnist_top_ink_reads_only_its_window() -> None:
    """Ink outside rows 4..13 x columns 8..19 changes nothing; ink inside sets exactly its block."""
    X = np.zeros((1, 28, 28))
    X[0, 20:, :] = 255.0
    X[0, :, :8] = 255.0
    assert not mnist_top_ink(X.reshape(1, -1)).any()
    X[0, 4, 8] = 255.0  # first block of the window
    F = mnist_top_ink(X.reshape(1, -1))
    assert F[0, 0] == 1.0 and F.sum() == 1.0


@pytest.mark.parametrize(
    "kwargs", [{"block": 3, "side": 4}, {"block": 2, "side": 4, "window": (0, 3, 0, 4)}, {"block": 2, "how": "median"}]
)
def test_block_pool_refuses_ragged_windows_and_unknown_pooling(kwargs: dict) -> None:
    side = kwargs.get("side", 28)
    with pytest.raises(ConfigError):
        block_pool(np.zeros((1, side * side)), **kwargs)


def test_maps_refuse_rows_that_are_not_images() -> None:
    with pytest.raises(ConfigError, match="784 columns"):
        mnist_top_ink(np.zeros((2, 100)))
