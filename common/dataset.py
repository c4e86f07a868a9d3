"""One data set's rows, labels and public bounds (:class:`Dataset`): what every loader returns
(:mod:`privfed.common.datasets`, :mod:`privfed.common.schema`), in a module of its own that imports
neither of them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError


@dataclass(frozen=True)
class Dataset:
    """Rows, labels and public bounds of one data set (or one split or owner share of it).

    Parameters
    ----------
    name : str
    X : ndarray of shape (n, d), float64, finite.
    y : ndarray of shape (n,), int64 class indices in ``0 .. K-1``.
    bounds : Bounds with ``d`` features (public; see module docstring).
    classes : ndarray of shape (K,) (or (K, L) for L label columns): the original label values;
        ``classes[y[i]]`` is row i's label.
    feature_names : tuple of d str, optional.

    ``X`` and ``y`` are stored as read-only views (the caller's arrays are not modified), so a
    data set shared by several splits or owners cannot be changed in place by one of them.
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    bounds: Bounds
    classes: np.ndarray
    feature_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        X = np.asarray(self.X, dtype=np.float64).view()
        y = np.asarray(self.y)
        classes = np.asarray(self.classes).view()
        if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
            raise ConfigError(f"data set {self.name!r}: X must be 2-D with at least one row and column, got {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ConfigError(f"data set {self.name!r}: X holds NaN or inf")
        if y.shape != (X.shape[0],) or y.dtype.kind not in "iu":
            raise ConfigError(
                f"data set {self.name!r}: y must be integer of shape ({X.shape[0]},), got {y.dtype} {y.shape}"
            )
        if classes.ndim not in (1, 2) or len(classes) < 1:
            raise ConfigError(f"data set {self.name!r}: classes must be a non-empty 1-D or 2-D array")
        if y.min() < 0 or y.max() >= len(classes):
            raise ConfigError(f"data set {self.name!r}: y must index classes (0..{len(classes) - 1})")
        if not isinstance(self.bounds, Bounds) or self.bounds.d != X.shape[1]:
            got = self.bounds.d if isinstance(self.bounds, Bounds) else type(self.bounds).__name__
            raise ConfigError(f"data set {self.name!r}: bounds must be Bounds for {X.shape[1]} features, got {got}")
        names = self.feature_names
        if names is not None:
            names = tuple(str(f) for f in names)
            if len(names) != X.shape[1]:
                raise ConfigError(f"data set {self.name!r}: {len(names)} feature names for {X.shape[1]} features")
        y = y.astype(np.int64, copy=False).view()
        for arr in (X, y, classes):
            arr.flags.writeable = False
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "feature_names", names)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def take(self, idx: np.ndarray, name: str | None = None) -> Dataset:
        """The rows ``idx`` (copied) with the same bounds, classes and feature names."""
        return Dataset(name or self.name, self.X[idx], self.y[idx], self.bounds, self.classes, self.feature_names)
