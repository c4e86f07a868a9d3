"""The federation schema: the public description of the data every owner must hold.

One TOML or JSON file, written once for a federation and given to the coordinator
(``privfed coordinator --schema FILE``), which sends it to every owner node at registration
(``RegisterNodeResponse.schema``; it is public configuration, as the task parameters are)::

    # schema.toml
    features = ["f1", "f2", "f3"]   # feature names, in column order (or a count: features = 3)
    classes = [-1, 3, 7]            # the label VALUES as they appear in owners' files
    test = "public_test.csv"        # optional: a public test file the coordinator evaluates on

    [bounds]                        # public bounds (SPEC §4): one number for every feature,
    lo = 0.0                        # or one per feature
    hi = [16.0, 16.0, 100.0]

An owner maps its labels BY VALUE to class indices (``classes[k]`` is class ``k``), so an owner
whose file holds only 3 and 7 sends classes 1 and 2 of ``[-1, 3, 7]``, not 0 and 1; a label the
schema does not list, or a row with another number of features, is refused when the file is loaded.

Pure (STYLE rule 1): parses given text, no I/O. The canonical form (:meth:`FederationSchema.to_json`)
is what travels and what :meth:`FederationSchema.digest` hashes, so two parties holding the same
schema, however each file was written, agree on its digest.
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.datasets import Dataset
from privfed.common.errors import ConfigError
from privfed.common.validation import check_int

#: The keys a schema document may hold.
KEYS = ("features", "classes", "bounds", "test")

ClassValue = int | str


@dataclass(frozen=True)
class FederationSchema:
    """Features, their public bounds and the class values of a federation.

    Parameters
    ----------
    features : tuple of d str
        Feature names in column order (distinct, non-empty).
    lo, hi : tuple of d float
        Public bounds per feature, ``lo < hi``, finite.
    classes : tuple of K >= 2 distinct labels, all int or all str
        The label values as owners' files hold them; class index ``k`` is ``classes[k]``.
    test : str or None
        A public test file (for the coordinator; a path relative to the schema file).
    """

    features: tuple[str, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]
    classes: tuple[ClassValue, ...]
    test: str | None = None

    def __post_init__(self) -> None:
        d = len(self.features)
        if d < 1 or any(not isinstance(f, str) or not f.strip() for f in self.features):
            raise ConfigError(f"schema: features must be at least one non-empty name, got {list(self.features)!r}")
        if len(set(self.features)) != d:
            raise ConfigError("schema: feature names must be distinct")
        if len(self.lo) != d or len(self.hi) != d:
            raise ConfigError(f"schema: bounds have {len(self.lo)} lo and {len(self.hi)} hi values for {d} features")
        Bounds(np.array(self.lo, dtype=np.float64), np.array(self.hi, dtype=np.float64))  # finite, lo < hi
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

    @property
    def d(self) -> int:
        return len(self.features)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def bounds(self) -> Bounds:
        return Bounds(np.array(self.lo, dtype=np.float64), np.array(self.hi, dtype=np.float64))

    @classmethod
    def shorthand(cls, bounds: Bounds, n_classes: int) -> FederationSchema:
        """The schema the old flags describe (``--bounds`` and ``--classes K``): features
        ``x0 .. x{d-1}`` and class values ``0 .. K-1``."""
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
            raise ConfigError(f"{source}: {what}; a schema has features, classes, bounds and optionally test")
        features = doc["features"]
        if isinstance(features, int) and not isinstance(features, bool):
            features = [f"x{j}" for j in range(check_int(features, name=f"{source}: features", minimum=1))]
        if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
            raise ConfigError(f"{source}: features must be a list of names or a count, got {features!r}")
        bounds = doc["bounds"]
        if not isinstance(bounds, dict) or set(bounds) != {"lo", "hi"}:
            raise ConfigError(f"{source}: bounds must be a table with lo and hi, got {bounds!r}")
        lo, hi = (_per_feature(bounds[k], len(features), f"{source}: bounds.{k}") for k in ("lo", "hi"))
        classes = doc["classes"]
        if not isinstance(classes, list) or any(isinstance(c, (bool, float)) for c in classes):
            raise ConfigError(
                f"{source}: classes must be a list of label values (integers or strings), got {classes!r}"
            )
        test = doc.get("test")
        try:
            return cls(tuple(features), lo, hi, tuple(classes), test)
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

    def to_json(self) -> str:
        """The canonical form: sorted keys, no spaces, bounds per feature. What is sent and hashed."""
        doc: dict[str, Any] = {
            "features": list(self.features),
            "bounds": {"lo": list(self.lo), "hi": list(self.hi)},
            "classes": list(self.classes),
        }
        if self.test is not None:
            doc["test"] = self.test
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        """SHA-256 of :meth:`to_json` (hex): equal for equal schemas, whatever their files looked like."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def differences(self, other: FederationSchema, *, names: bool = True) -> list[str]:
        """What differs between two schemas, one phrase each (``names=False``: ignore feature names
        and the test file, as for a schema built from ``--bounds`` and ``--classes``)."""
        out = []
        if self.d != other.d:
            out.append(f"{self.d} features here, {other.d} there")
        elif names and self.features != other.features:
            out.append("feature names differ")
        if self.d == other.d and (self.lo != other.lo or self.hi != other.hi):
            out.append("bounds differ")
        if self.classes != other.classes:
            out.append(f"classes {list(self.classes)} here, {list(other.classes)} there")
        if names and self.test != other.test:
            out.append("test files differ")
        return out

    def dataset(
        self,
        name: str,
        X: np.ndarray,
        labels: np.ndarray,
        where: Callable[[int], str],
        feature_names: tuple[str, ...] | None = None,
    ) -> Dataset:
        """Rows read from file ``name`` as a data set of this schema: labels mapped BY VALUE to
        class indices (``classes[y[i]]`` is row i's label), bounds and classes from the schema.
        ``where(i)`` names row i in the file ("line 7").

        Raises
        ------
        ConfigError
            One line naming the file and line: the rows have another number of features than the
            schema, or a label that is not one of its class values.
        """
        if X.shape[1] != self.d:
            raise ConfigError(
                f"{name}: {where(0)}: {X.shape[1]} feature column(s) before the label, but the federation "
                f"schema has {self.d} features"
            )
        y, bad = self.class_indices(labels)
        if bad is not None:
            text = _label_text(np.asarray(labels).reshape(-1)[bad])
            shown = text if _is_numeral(text) else repr(text)
            raise ConfigError(
                f"{name}: {where(bad)}: label {shown} is not a class of the federation schema "
                f"(classes {list(self.classes)})"
            )
        names = feature_names if feature_names is not None else self.features
        return Dataset(name, X, y, self.bounds, np.array(self.classes), names)

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
            indices = np.array([lookup.get(_label_text(v), -1) for v in labels], dtype=np.int64)
            found = indices >= 0
        bad = np.flatnonzero(~found)
        return np.where(found, indices, 0).astype(np.int64), (int(bad[0]) if bad.size else None)


def _label_text(value: object) -> str:
    """A label as the text class values are matched against: a number that is an integer as
    its integer ("3.0" -> "3", 3.0 -> "3"), anything else as its stripped text."""
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() and abs(number) <= 2.0**53 else text


def _is_numeral(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _per_feature(value: object, d: int, name: str) -> tuple[float, ...]:
    """One number for every feature, or a list of ``d`` numbers (finite; ``lo < hi`` is Bounds' check)."""
    items = [value] * d if not isinstance(value, list) else value
    if len(items) != d or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        raise ConfigError(f"{name} must be a number or a list of {d} numbers (one per feature), got {value!r}")
    numbers = tuple(float(v) for v in items if isinstance(v, (int, float)))
    if not all(math.isfinite(v) for v in numbers):
        raise ConfigError(f"{name} must be finite, got {value!r}")
    return numbers
