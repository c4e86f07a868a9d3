"""Real tabular data sets available offline, with public bounds from each data set's documentation (issue 22).

Every set here ships inside a registry package (scikit-learn's own bundled sets, and sets bundled with
statsmodels); nothing is fetched at run time. Bounds and class values are written down below from the
set's documentation -- the ``DESCR`` / ``NOTE`` text printed by the package, or the codebook the
documentation cites -- never computed from the rows (STYLE rule 6; SPEC §4). Each :class:`TabularSpec`
says where its bounds come from (``bounds_source``). A feature whose documentation gives no range is
left out rather than bounded from its values (``star98``'s four cost and ratio columns).

========================  ======  ====  ===  ==========================================================
name                      rows    d     K    target (majority class share of all rows)
========================  ======  ====  ===  ==========================================================
``breast_cancer``         569     30    2    benign (0.627) -- WDBC, scikit-learn
``wine``                  178     13    3    cultivar (0.399) -- UCI wine, scikit-learn
``iris``                  150     4     3    species (0.333) -- Fisher's iris, scikit-learn
``fair``                  6366    8     2    any extramarital affair (0.678 none) -- Fair 1978, statsmodels
``anes96``                944     9     2    expected vote Clinton / Dole (0.584) -- ANES 1996, statsmodels
``star98``                303     8     2    more pupils above than below the national math median
                                             (0.647) -- California 1998 counties, statsmodels
========================  ======  ====  ===  ==========================================================

The loaders return :class:`~privfed.common.datasets.Dataset` (so ``privfed simulate --dataset fair``
works like the other built-ins); statsmodels is imported only when one of its sets is loaded.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError

#: Breast Cancer Wisconsin (Diagnostic): the per-feature "Min" and "Max" printed in the data set's
#: description (scikit-learn ``load_breast_cancer().DESCR``, "Summary Statistics", copied from the
#: UCI WDBC documentation), in feature order (10 means, 10 standard errors, 10 worst values).
#: The printed values are rounded, so each bound is widened outward by half a unit of its last
#: printed digit (a true value that rounds to the printed one lies within that); lower bounds stay
#: >= 0 because every WDBC feature is a non-negative length, area, ratio or count.
_WDBC_DESCR_MIN_MAX = (
    ("6.981", "28.11"),
    ("9.71", "39.28"),
    ("43.79", "188.5"),
    ("143.5", "2501.0"),
    ("0.053", "0.163"),
    ("0.019", "0.345"),
    ("0.0", "0.427"),
    ("0.0", "0.201"),
    ("0.106", "0.304"),
    ("0.05", "0.097"),
    ("0.112", "2.873"),
    ("0.36", "4.885"),
    ("0.757", "21.98"),
    ("6.802", "542.2"),
    ("0.002", "0.031"),
    ("0.002", "0.135"),
    ("0.0", "0.396"),
    ("0.0", "0.053"),
    ("0.008", "0.079"),
    ("0.001", "0.03"),
    ("7.93", "36.04"),
    ("12.02", "49.54"),
    ("50.41", "251.2"),
    ("185.2", "4254.0"),
    ("0.071", "0.223"),
    ("0.027", "1.058"),
    ("0.0", "1.252"),
    ("0.0", "0.291"),
    ("0.156", "0.664"),
    ("0.055", "0.208"),
)


def _half_unit(printed: str) -> float:
    """Half a unit of the last printed digit: '0.053' -> 0.0005, '2501.0' -> 0.05, '28' -> 0.5."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return 0.5 * 10.0**-decimals


def printed_range(lo: str, hi: str) -> tuple[float, float]:
    """A documented ``Min``/``Max`` pair widened outward by half a unit of its last printed digit (a true
    value that rounds to the printed one lies within), the lower end kept >= 0 (every such feature here is
    a non-negative measurement)."""
    return max(0.0, float(lo) - _half_unit(lo)), float(hi) + _half_unit(hi)


def breast_cancer_bounds() -> Bounds:
    """Public WDBC bounds from the published description (see ``_WDBC_DESCR_MIN_MAX``)."""
    lo, hi = zip(*(printed_range(a, b) for a, b in _WDBC_DESCR_MIN_MAX))
    return Bounds(np.array(lo), np.array(hi))


@dataclass(frozen=True)
class TabularSpec:
    """One documented tabular data set: where its rows, classes and bounds come from.

    Attributes
    ----------
    name : str
    features : tuple of (column, lo, hi)
        The features used, in order, each with its public bounds.
    target : str
        What the class is, in words (and how it is derived from the documented columns).
    class_names : tuple of str
        Class values 0..K-1 in words.
    source : str
        The package and loader that ship the rows.
    bounds_source : str
        Where the bounds were read (the documentation, never the rows).
    """

    name: str
    features: tuple[tuple[str, float, float], ...]
    target: str
    class_names: tuple[str, ...]
    source: str
    bounds_source: str

    @property
    def bounds(self) -> Bounds:
        return Bounds(np.array([f[1] for f in self.features]), np.array([f[2] for f in self.features]))

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(f[0] for f in self.features)


_WINE = (  # scikit-learn load_wine().DESCR, "Summary Statistics" (Min, Max), UCI wine documentation
    ("alcohol", "11.0", "14.8"),
    ("malic_acid", "0.74", "5.80"),
    ("ash", "1.36", "3.23"),
    ("alcalinity_of_ash", "10.6", "30.0"),
    ("magnesium", "70.0", "162.0"),
    ("total_phenols", "0.98", "3.88"),
    ("flavanoids", "0.34", "5.08"),
    ("nonflavanoid_phenols", "0.13", "0.66"),
    ("proanthocyanins", "0.41", "3.58"),
    ("color_intensity", "1.3", "13.0"),
    ("hue", "0.48", "1.71"),
    ("od280/od315_of_diluted_wines", "1.27", "4.00"),
    ("proline", "278", "1680"),
)
_IRIS = (  # scikit-learn load_iris().DESCR, "Summary Statistics" (Min, Max), in cm
    ("sepal length (cm)", "4.3", "7.9"),
    ("sepal width (cm)", "2.0", "4.4"),
    ("petal length (cm)", "1.0", "6.9"),
    ("petal width (cm)", "0.1", "2.5"),
)

#: The 1990 US census population of its largest place (New York City, 7,322,564), in thousands: the
#: upper end of anes96's ``popul`` ("Census place population in 1000s").
_LARGEST_US_PLACE_1990 = 7323.0

SPECS: dict[str, TabularSpec] = {
    "breast_cancer": TabularSpec(
        "breast_cancer",
        (),  # breast_cancer_bounds (the WDBC description)
        "0 = malignant, 1 = benign",
        ("malignant", "benign"),
        "sklearn.datasets.load_breast_cancer",
        "load_breast_cancer().DESCR, 'Summary Statistics' Min/Max (UCI WDBC documentation), widened by half a "
        "printed unit; lengths, areas and ratios are >= 0",
    ),
    "wine": TabularSpec(
        "wine",
        tuple((n, *printed_range(lo, hi)) for n, lo, hi in _WINE),
        "cultivar 0, 1, 2",
        ("class_0", "class_1", "class_2"),
        "sklearn.datasets.load_wine",
        "load_wine().DESCR, 'Summary Statistics' Min/Max, widened by half a printed unit",
    ),
    "iris": TabularSpec(
        "iris",
        tuple((n, *printed_range(lo, hi)) for n, lo, hi in _IRIS),
        "species 0 = setosa, 1 = versicolour, 2 = virginica",
        ("setosa", "versicolor", "virginica"),
        "sklearn.datasets.load_iris",
        "load_iris().DESCR, 'Summary Statistics' Min/Max, widened by half a printed unit",
    ),
    "fair": TabularSpec(
        "fair",
        (
            ("rate_marriage", 1.0, 5.0),  # NOTE: 1 = very poor .. 5 = very good
            ("age", 17.5, 42.0),  # Fair's coded age groups: 17.5 (under 20) .. 42 (40 or over)
            ("yrs_married", 0.5, 23.0),  # coded intervals: 0.5 (under a year) .. 23 (over 20 years)
            ("children", 0.0, 5.5),  # coded: 0 .. 5.5 (5 or more)
            ("religious", 1.0, 4.0),  # NOTE: 1 = not .. 4 = strongly
            ("educ", 9.0, 20.0),  # NOTE: 9 = grade school .. 20 = advanced degree
            ("occupation", 1.0, 6.0),  # NOTE: 1 = student .. 6 = professional with advanced degree
            ("occupation_husb", 1.0, 6.0),  # NOTE: same codes
        ),
        "1 if the answer to 'time spent in extramarital affairs' is > 0, else 0 (Fair 1978: having any affair)",
        ("none", "some"),
        "statsmodels.datasets.fair (Redbook magazine survey of married women, 1974)",
        "statsmodels fair NOTE (rate_marriage, religious, educ, occupation codes); age, yrs_married and children "
        "are interval codes whose end points are those of Fair (1978), 'A Theory of Extramarital Affairs', the "
        "source the NOTE cites for them",
    ),
    "anes96": TabularSpec(
        "anes96",
        (
            ("popul", 0.0, _LARGEST_US_PLACE_1990),  # census place population in 1000s
            ("TVnews", 0.0, 7.0),  # times per week
            ("selfLR", 1.0, 7.0),  # 1 = extremely liberal .. 7 = extremely conservative
            ("ClinLR", 1.0, 7.0),
            ("DoleLR", 1.0, 7.0),
            ("PID", 0.0, 6.0),  # 0 = strong Democrat .. 6 = strong Republican
            ("age", 18.0, 99.0),  # voting-age respondents; 99 the top of a two-digit age field
            ("educ", 1.0, 7.0),  # 1 = grades 1-8 .. 7 = PhD
            ("income", 1.0, 24.0),  # 1 = under $3,000 .. 24 = $105,000 and over
        ),
        "expected vote: 0 = Clinton, 1 = Dole",
        ("Clinton", "Dole"),
        "statsmodels.datasets.anes96 (American National Election Study 1996)",
        "statsmodels anes96 NOTE (the codebook's scales); TVnews 0..7 times a week and age >= 18 by definition; "
        "popul up to the largest US census place of 1990 (New York City, 7,322,564)",
    ),
    "star98": TabularSpec(
        "star98",
        tuple(
            (c, 0.0, 100.0)
            for c in ("LOWINC", "PERASIAN", "PERBLACK", "PERHISP", "PERMINTE", "PCTAF", "PCTCHRT", "PCTYRRND")
        ),
        "1 if more pupils scored above the national math median than below (NABOVE > NBELOW), else 0",
        ("not above", "above"),
        "statsmodels.datasets.star98 (California STAR test 1998, 303 counties)",
        "statsmodels star98 NOTE: every column kept is a percentage (0..100); AVYRSEXP, AVSALK, PERSPENK and "
        "PTRATIO have no documented range and are left out",
    ),
}
TABULAR = tuple(SPECS)


def _sklearn(name: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets

    loader: Callable = getattr(datasets, f"load_{name}")
    b = loader()
    return b.data, b.target


def _statsmodels(name: str) -> tuple[np.ndarray, np.ndarray]:
    import importlib

    try:
        module = importlib.import_module(f"statsmodels.datasets.{name}")
    except ImportError:
        raise ConfigError(f"data set {name!r} ships with statsmodels: pip install statsmodels") from None
    frame = module.load_pandas().data
    spec = SPECS[name]
    X = frame[list(spec.feature_names)].to_numpy(dtype=np.float64)
    if name == "fair":
        y = frame["affairs"].to_numpy() > 0
    elif name == "anes96":
        y = frame["vote"].to_numpy()
    else:  # star98
        y = frame["NABOVE"].to_numpy() > frame["NBELOW"].to_numpy()
    return X, np.asarray(y, dtype=np.int64)


@functools.cache
def tabular_raw(name: str) -> tuple[np.ndarray, np.ndarray, Bounds, tuple[str, ...]]:
    """Rows (read-only), class indices, public bounds and feature names of tabular set ``name``."""
    if name not in SPECS:
        raise ConfigError(f"unknown tabular data set {name!r}; choose one of {', '.join(TABULAR)}")
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        b = load_breast_cancer()
        X, y = b.data, b.target
        bounds, names = breast_cancer_bounds(), tuple(str(f) for f in b.feature_names)
    else:
        spec = SPECS[name]
        X, y = _sklearn(name) if spec.source.startswith("sklearn") else _statsmodels(name)
        bounds, names = spec.bounds, spec.feature_names
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    X.flags.writeable = False
    y.flags.writeable = False
    return X, y, bounds, names
