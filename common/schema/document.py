"""The federation schema document: what every owner's file holds, as public configuration.

One TOML or JSON file, written once for a federation and given to the coordinator
(``privfed coordinator --schema FILE``), which sends it to every owner node at registration
(``RegisterNodeResponse.schema``)::

    # schema.toml
    features = ["age", "sex", "bmi"]   # feature names: the files' header names them, in any order
    classes = ["benign", "malignant"]  # the label VALUES as they appear in owners' files
    label = "diagnosis"                # optional: the label column's name in the header
    header = true                      # default: true for named features, false for a count
    test = "public_test.csv"           # optional: a public test file the coordinator evaluates on

    [bounds]                           # public bounds (SPEC §4) of the numeric features:
    lo = [0, 10]                       # one number for all of them, or a list in feature order
    hi = [120, 60]

    [categories]                       # categorical features: their public categories, one-hot
    sex = ["f", "m"]                   # encoded (bounds [0, 1] implied)

    [fill]                             # public values for missing cells (empty, NA, NaN, ?)
    bmi = 25.0

``header``: with ``true`` the first line of every file names its columns, which are matched to the
features BY NAME (reordered as needed; a missing or unknown column is refused, naming it); with
``false`` files have no header and hold the features in this order, then the label. A file
without a header is accepted only when the schema says so. ``features = 3`` (a count) names the
features ``x0 .. x2`` and means ``header = false`` unless it says otherwise.

Labels map BY VALUE to class indices (``classes[k]`` is class ``k``): an owner whose file holds only
``malignant`` sends class 1, whatever else its file lacks.

Pure (STYLE rule 1): parses given text, no I/O. The canonical form (:meth:`FederationSchema.to_json`)
is what travels and what :meth:`FederationSchema.digest` hashes, so two parties holding the same
schema, however each file was written, agree on its digest.
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.schema.values import value_text
from privfed.common.validation import check_int

if TYPE_CHECKING:
    from privfed.common.dataset import Dataset
    from privfed.common.schema.table import LoadedRows, RawTable

#: The keys a schema document may hold.
KEYS = ("features", "classes", "bounds", "test", "categories", "fill", "header", "label")

ClassValue = int | str
FillValue = float | str


@dataclass(frozen=True)
class FederationSchema:
    """Features, their public bounds, categories and fill values, and the class values of a federation.

    Parameters
    ----------
    features : tuple of d str
        Feature names (distinct, non-empty), in the order the model reads them.
    lo, hi : tuple of float
        Public bounds of each NUMERIC feature, in feature order (categorical ones are left out:
        their one-hot columns are bounded by [0, 1]); ``lo < hi``, finite.
    classes : tuple of K >= 2 distinct labels, all int or all str
        The label values as owners' files hold them; class index ``k`` is ``classes[k]``.
    test : str or None
        A public test file (for the coordinator; a path relative to the schema file).
    categories : tuple of (feature, tuple of str)
        Categorical features and their public categories, in feature order.
    fill : tuple of (feature, float or str)
        Public fill values for missing cells, in feature order (a category for a categorical feature).
    header : bool or None
        True: files start with a header matched by name; False: no header, columns in order;
        None (built-in data sets and ``--bounds``): a first line of names is a header matched by name
        (as for True), a file without one is read in order; a header naming none of the features of a
        schema without names (:attr:`named`) is skipped, the columns read in order.
    label : str or None
        The label column's name in a header (None: the one column that is not a feature).
    """

    features: tuple[str, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]
    classes: tuple[ClassValue, ...]
    test: str | None = None
    categories: tuple[tuple[str, tuple[str, ...]], ...] = ()
    fill: tuple[tuple[str, FillValue], ...] = ()
    header: bool | None = None
    label: str | None = None

    def __post_init__(self) -> None:
        d = len(self.features)
        if d < 1 or any(not isinstance(f, str) or not f.strip() for f in self.features):
            raise ConfigError(f"schema: features must be at least one non-empty name, got {list(self.features)!r}")
        if len(set(self.features)) != d:
            raise ConfigError("schema: feature names must be distinct")
        known = set(self.features)
        for table, entries in (("categories", self.categories), ("fill", self.fill)):
            if unknown := [name for name, _ in entries if name not in known]:
                raise ConfigError(f"schema: {table}: {unknown} not among the features {list(self.features)}")
        for name, cats in self.categories:
            if len(cats) < 1 or len(set(cats)) != len(cats) or not all(isinstance(c, str) and c for c in cats):
                raise ConfigError(f"schema: categories of {name!r} must be distinct non-empty values, got {list(cats)}")
        n_numeric = d - len(self.categories)
        if len(self.lo) != n_numeric or len(self.hi) != n_numeric:
            raise ConfigError(
                f"schema: bounds have {len(self.lo)} lo and {len(self.hi)} hi values for {n_numeric} numeric features"
            )
        if n_numeric:
            Bounds(np.array(self.lo, dtype=np.float64), np.array(self.hi, dtype=np.float64))  # finite, lo < hi
        self._check_fill()
        kinds = {type(c) for c in self.classes}
        if len(self.classes) < 2 or not (kinds <= {int} or kinds <= {str}):
            raise ConfigError(
                f"schema: classes must list at least two label values, all integers or all strings, "
                f"got {list(self.classes)!r}"
            )
        if len(set(self.classes)) != len(self.classes):
            raise ConfigError(f"schema: class values must be distinct, got {list(self.classes)!r}")
        if self.test is not None and (not isinstance(self.test, str) or not self.test.strip()):
            raise ConfigError(f"schema: test must be a file path, got {self.test!r}")
        if self.header not in (True, False, None):
            raise ConfigError(f"schema: header must be true or false, got {self.header!r}")
        if self.label is not None and (
            not isinstance(self.label, str) or not self.label.strip() or self.label in known
        ):
            raise ConfigError(f"schema: label must name the label column (not a feature), got {self.label!r}")

    def _check_fill(self) -> None:
        cats = dict(self.categories)
        numeric = self.numeric_bounds
        for name, value in self.fill:
            if name in cats:
                if value not in cats[name]:
                    raise ConfigError(f"schema: fill of {name!r} must be one of its categories {list(cats[name])}")
            elif (
                isinstance(value, str) or not math.isfinite(value) or not numeric[name][0] <= value <= numeric[name][1]
            ):
                lo, hi = numeric[name]
                raise ConfigError(f"schema: fill of {name!r} must be a number within its bounds [{lo}, {hi}]")

    # ------------------------------------------------------------------ the model's view
    @property
    def numeric_bounds(self) -> dict[str, tuple[float, float]]:
        """(lo, hi) of each numeric feature by name."""
        cats = dict(self.categories)
        numeric = [f for f in self.features if f not in cats]
        return {f: (lo, hi) for f, lo, hi in zip(numeric, self.lo, self.hi)}

    @property
    def encoded_features(self) -> tuple[str, ...]:
        """The columns a model reads: numeric features as named, each categorical feature as one
        one-hot column per category (``sex=f``, ``sex=m``), in feature order."""
        cats = dict(self.categories)
        out: list[str] = []
        for f in self.features:
            out.extend([f"{f}={c}" for c in cats[f]] if f in cats else [f])
        return tuple(out)

    @property
    def d(self) -> int:
        """The number of columns a model reads (:attr:`encoded_features`)."""
        return len(self.encoded_features)

    @property
    def named(self) -> bool:
        """Whether the features have names a file's header gives: not the ``x0 .. x{d-1}`` of a count, of
        ``--bounds`` (:meth:`shorthand`) or of a built-in data set without feature names."""
        return self.features != tuple(f"x{j}" for j in range(len(self.features)))

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def bounds(self) -> Bounds:
        """Public bounds of the encoded columns: the numeric features' own, [0, 1] for one-hot columns."""
        cats, numeric = dict(self.categories), self.numeric_bounds
        lo: list[float] = []
        hi: list[float] = []
        for f in self.features:
            k = len(cats[f]) if f in cats else 1
            a, b = numeric.get(f, (0.0, 1.0))
            lo, hi = lo + [a] * k, hi + [b] * k
        return Bounds(np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64))

    # ------------------------------------------------------------------ construction
    @classmethod
    def shorthand(cls, bounds: Bounds, n_classes: int) -> FederationSchema:
        """The schema the old flags describe (``--bounds`` and ``--classes K``): features
        ``x0 .. x{d-1}`` and class values ``0 .. K-1``; columns in order."""
        k = check_int(
            n_classes,
            name="--classes",
            minimum=2,
            fix="the number of classes is public configuration, never read from the private rows",
        )
        return cls(
            features=tuple(f"x{j}" for j in range(bounds.d)),
            lo=tuple(float(v) for v in bounds.lo),
            hi=tuple(float(v) for v in bounds.hi),
            classes=tuple(range(k)),
        )

    @classmethod
    def of_dataset(cls, ds: Dataset) -> FederationSchema:
        """The public schema of a built-in data set (its feature names, bounds and class values)."""
        return cls(
            features=ds.feature_names or tuple(f"x{j}" for j in range(ds.d)),
            lo=tuple(float(v) for v in ds.bounds.lo),
            hi=tuple(float(v) for v in ds.bounds.hi),
            classes=tuple(int(c) for c in ds.classes),
        )

    @classmethod
    def from_mapping(cls, doc: object, *, source: str = "schema") -> FederationSchema:
        """A schema from a parsed TOML or JSON document (see the module docstring for the keys)."""
        if not isinstance(doc, dict):
            raise ConfigError(f"{source}: a schema is a table of {', '.join(KEYS)}, got {type(doc).__name__}")
        unknown = sorted(set(doc) - set(KEYS))
        missing = [k for k in ("features", "classes", "bounds") if k not in doc]
        if unknown or missing:
            what = f"unknown key(s) {unknown}" if unknown else f"missing key(s) {missing}"
            raise ConfigError(
                f"{source}: {what}; a schema has features, classes, bounds and optionally test, categories, "
                "fill, header, label"
            )
        features = doc["features"]
        counted = isinstance(features, int) and not isinstance(features, bool)
        if counted:
            features = [f"x{j}" for j in range(check_int(features, name=f"{source}: features", minimum=1))]
        if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
            raise ConfigError(f"{source}: features must be a list of names or a count, got {features!r}")
        categories = _categories(doc.get("categories", {}), source)
        cat_names = dict(categories)
        bounds = doc["bounds"]
        if not isinstance(bounds, dict) or set(bounds) != {"lo", "hi"}:
            raise ConfigError(f"{source}: bounds must be a table with lo and hi, got {bounds!r}")
        n_numeric = sum(f not in cat_names for f in features)
        lo, hi = (_per_feature(bounds[k], n_numeric, f"{source}: bounds.{k}") for k in ("lo", "hi"))
        classes = doc["classes"]
        if not isinstance(classes, list) or any(isinstance(c, (bool, float)) for c in classes):
            raise ConfigError(
                f"{source}: classes must be a list of label values (integers or strings), got {classes!r}"
            )
        header = doc.get("header", not counted)
        if header is not None and not isinstance(header, bool):
            raise ConfigError(f"{source}: header must be true or false, got {header!r}")
        order = {f: j for j, f in enumerate(features)}
        try:
            fill = _fill(doc.get("fill", {}), cat_names, source)
            return cls(
                features=tuple(features),
                lo=lo,
                hi=hi,
                classes=tuple(classes),
                test=doc.get("test"),
                categories=tuple(sorted(categories, key=lambda e: order.get(e[0], -1))),
                fill=tuple(sorted(fill, key=lambda e: order.get(e[0], -1))),
                header=header,
                label=doc.get("label"),
            )
        except ConfigError as exc:
            raise ConfigError(f"{source}: {str(exc).removeprefix('schema: ')}") from None

    @classmethod
    def parse(cls, text: str, *, source: str = "schema") -> FederationSchema:
        """A schema from the text of a JSON document (starting with ``{``) or a TOML document."""
        try:
            doc: Any = json.loads(text) if text.lstrip().startswith("{") else tomllib.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{source}: line {exc.lineno}: invalid JSON ({exc.msg})") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: invalid TOML ({exc})") from None
        return cls.from_mapping(doc, source=source)

    def to_dict(self) -> dict[str, Any]:
        """The canonical document: bounds per numeric feature, header always stated, optional keys only when set."""
        doc: dict[str, Any] = {
            "features": list(self.features),
            "bounds": {"lo": list(self.lo), "hi": list(self.hi)},
            "classes": list(self.classes),
            "header": self.header,
        }
        optional = {
            "test": self.test,
            "label": self.label,
            "categories": {f: list(c) for f, c in self.categories} or None,
            "fill": dict(self.fill) or None,
        }
        return doc | {k: v for k, v in optional.items() if v is not None}

    def to_json(self) -> str:
        """The canonical form: sorted keys, no spaces (:meth:`to_dict`). What is sent and hashed."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        """SHA-256 of :meth:`to_json` (hex): equal for equal schemas, whatever their files looked like."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def differences(self, other: FederationSchema, *, names: bool = True) -> list[str]:
        """What differs between two schemas, one phrase each (``names=False``: ignore feature names,
        the header rule and the test file, as for a schema built from ``--bounds`` and ``--classes``)."""
        out = []
        if self.d != other.d:
            out.append(f"{self.d} features here, {other.d} there")
        elif names and self.encoded_features != other.encoded_features:
            out.append("feature names or categories differ")
        if self.d == other.d and not (
            np.array_equal(self.bounds.lo, other.bounds.lo) and np.array_equal(self.bounds.hi, other.bounds.hi)
        ):
            out.append("bounds differ")
        if self.classes != other.classes:
            out.append(f"classes {list(self.classes)} here, {list(other.classes)} there")
        if names and self.fill != other.fill:
            out.append("fill values differ")
        if names and (self.header, self.label) != (other.header, other.label):
            out.append("header rules differ")
        if names and self.test != other.test:
            out.append("test files differ")
        return out

    # ------------------------------------------------------------------ files
    def load(self, table: RawTable, *, labels: bool | None | Literal["past"] = True, slow: bool = False) -> LoadedRows:
        """The rows of ``table`` as this schema reads them (:func:`privfed.common.schema.table.load_rows`)."""
        from privfed.common.schema.table import load_rows

        return load_rows(self, table, labels=labels, slow=slow)

    def dataset(self, table: RawTable) -> Dataset:
        """``table``'s rows as a data set of this schema: columns matched, missing cells filled, categories
        one-hot encoded, labels mapped BY VALUE to class indices (:meth:`load`)."""
        return self.load(table).dataset(self)

    def class_indices(self, labels: np.ndarray) -> tuple[np.ndarray, int | None]:
        """``(indices, first)``: each label's class index by value, and the position of the first
        label that is not a class value (None if every label is one). Labels may be numbers or
        the text of a file's label field: integer class values match the numbers and texts that
        equal them (3, 3.0, "3", "3.0"); string class values match texts exactly."""
        labels = np.asarray(labels).reshape(-1)
        if labels.dtype.kind in "iuf" and not isinstance(self.classes[0], str):
            values = np.array(self.classes, dtype=np.float64)
            order = np.argsort(values)
            pos = np.searchsorted(values[order], labels).clip(0, len(values) - 1)
            found = values[order][pos] == labels
            indices = order[pos]
        else:
            lookup = {str(v): k for k, v in enumerate(self.classes)}
            indices = np.array([lookup.get(value_text(v), -1) for v in labels], dtype=np.int64)
            found = indices >= 0
        bad = np.flatnonzero(~found)
        return np.where(found, indices, 0).astype(np.int64), (int(bad[0]) if bad.size else None)


def _categories(value: object, source: str) -> list[tuple[str, tuple[str, ...]]]:
    """``[categories]``: feature -> its list of public categories (strings or integers, kept as text)."""
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: categories must be a table of feature = [category, ...], got {value!r}")
    out = []
    for name, cats in value.items():
        if not isinstance(cats, list) or not cats or any(isinstance(c, (bool, float, list, dict)) for c in cats):
            raise ConfigError(
                f"{source}: categories.{name} must be a non-empty list of category names or integer codes, got {cats!r}"
            )
        out.append((name, tuple(value_text(c) for c in cats)))
    return out


def _fill(value: object, categories: dict[str, tuple[str, ...]], source: str) -> list[tuple[str, FillValue]]:
    """``[fill]``: feature -> the public value of its missing cells (a number, or a category)."""
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: fill must be a table of feature = value, got {value!r}")
    out: list[tuple[str, FillValue]] = []
    for name, v in value.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ConfigError(f"{source}: fill.{name} must be a number or a category, got {v!r}")
        out.append((name, value_text(v) if name in categories else (v if isinstance(v, str) else float(v))))
    return out


def _per_feature(value: object, d: int, name: str) -> tuple[float, ...]:
    """One number for every numeric feature, or a list of ``d`` numbers (finite; ``lo < hi`` is Bounds' check)."""
    items = [value] * d if not isinstance(value, list) else value
    if len(items) != d or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        raise ConfigError(
            f"{name} must be a number or a list of {d} numbers (one per numeric feature; categorical features' "
            f"bounds are implied), got {value!r}"
        )
    numbers = tuple(float(v) for v in items if isinstance(v, (int, float)))
    if not all(math.isfinite(v) for v in numbers):
        raise ConfigError(f"{name} must be finite, got {value!r}")
    return numbers
