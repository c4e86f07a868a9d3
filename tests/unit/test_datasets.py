"""Data-set loaders, bounds parsing and partitioners (privfed.common.datasets)."""

import gzip
import json

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.dataset_files import load_file, parse_bounds
from privfed.common.datasets import (
    BUILTINS,
    Dataset,
    binary_subset,
    load_builtin,
    owner_rows,
    partition,
    train_test_split,
)
from privfed.common.errors import ConfigError
from privfed.common.tabular import breast_cancer_bounds


# ---------------------------------------------------------------- built-ins
@pytest.mark.parametrize(
    "name, shape, n_classes, lo, hi",
    [
        ("digits", (1797, 64), 10, 0.0, 16.0),
        ("synthetic", (10000, 20), 2, -10.0, 10.0),
        ("mnist5k", (5000, 784), 10, 0.0, 255.0),
    ],
)
def test_builtin_shapes_and_bounds(name, shape, n_classes, lo, hi):
    ds = load_builtin(name)
    assert ds.X.shape == shape and ds.X.dtype == np.float64
    assert ds.y.shape == (shape[0],) and ds.y.dtype == np.int64
    assert ds.n_classes == n_classes and set(np.unique(ds.y)) == set(range(n_classes))
    assert np.all(ds.bounds.lo == lo) and np.all(ds.bounds.hi == hi) and ds.bounds.d == shape[1]


def test_builtin_bounds_hold_for_bundled_data():
    # The published bounds are not computed from X; check they do contain the bundled rows.
    for name in ("digits", "mnist5k", "breast_cancer"):
        ds = load_builtin(name)
        assert ds.bounds.clip(ds.X)[1] == 0, name


def test_synthetic_clipping_fraction_as_documented():
    ds = load_builtin("synthetic")
    _, moved = ds.bounds.clip(ds.X)
    assert 0 < moved / ds.X.size < 0.01
    assert abs(ds.y.mean() - 0.5) < 0.02  # balanced classes, as in the paper


def test_breast_cancer_bounds_from_description():
    ds = load_builtin("breast_cancer")
    assert ds.X.shape == (569, 30) and ds.n_classes == 2
    assert np.bincount(ds.y).tolist() == [212, 357]
    b = breast_cancer_bounds()
    assert ds.feature_names[0] == "mean radius" and ds.feature_names[10] == "radius error"
    # radius (mean) printed as 6.981 .. 28.11 -> widened by half a unit of the last digit
    assert b.lo[0] == pytest.approx(6.9805) and b.hi[0] == pytest.approx(28.115)
    # concavity (mean) printed min 0.0 stays at 0 (non-negative feature)
    assert b.lo[6] == 0.0 and b.hi[6] == pytest.approx(0.4275)
    assert b.hi[23] == pytest.approx(4254.05)


def test_synthetic_seed_and_size():
    a = load_builtin("synthetic", n_samples=500, seed=3)
    b = load_builtin("synthetic", n_samples=500, seed=3)
    c = load_builtin("synthetic", n_samples=500, seed=4)
    assert a.X.shape == (500, 20)
    assert np.array_equal(a.X, b.X) and not np.array_equal(a.X, c.X)


def test_builtin_subsample():
    full = load_builtin("digits")
    sub = load_builtin("digits", n_samples=100, seed=7)
    again = load_builtin("digits", n_samples=100, seed=7)
    assert sub.X.shape == (100, 64) and np.array_equal(sub.X, again.X)
    assert sub.n_classes == 10
    # rows are real rows of the full set
    rows = {r.tobytes() for r in full.X}
    assert all(r.tobytes() in rows for r in sub.X)
    with pytest.raises(ConfigError):
        load_builtin("digits", n_samples=10**6)
    with pytest.raises(ConfigError):
        load_builtin("digits", n_samples=0)


def test_unknown_builtin_lists_choices():
    with pytest.raises(ConfigError) as info:
        load_builtin("cifar")
    assert all(name in str(info.value) for name in BUILTINS)


def test_dataset_arrays_are_read_only():
    ds = load_builtin("digits")
    with pytest.raises(ValueError):
        ds.X[0, 0] = 1.0
    x = np.zeros((3, 2))
    Dataset("t", x, np.array([0, 1, 0]), Bounds.of(0, 1, 2), np.array([0, 1]))
    x[0, 0] = 1.0  # the caller's own array is not frozen


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(X=np.zeros((3, 2)), y=np.array([0, 1, 2])),  # y outside classes
        dict(X=np.zeros((3, 2)), y=np.array([0.0, 1.0, 0.0])),  # float labels
        dict(X=np.zeros((2, 2)), y=np.array([0, 1, 0])),  # length mismatch
        dict(X=np.array([[0.0, np.nan]] * 3), y=np.array([0, 1, 0])),
        dict(X=np.zeros((3, 3)), y=np.array([0, 1, 0])),  # bounds d mismatch
    ],
)
def test_dataset_invalid(kwargs):
    with pytest.raises(ConfigError):
        Dataset("t", bounds=Bounds.of(0, 1, 2), classes=np.array([0, 1]), **kwargs)


def test_binary_subset():
    ds = load_builtin("digits")
    b = binary_subset(ds, (4, 9))
    mask = (ds.y == 4) | (ds.y == 9)
    assert b.n == mask.sum() and b.classes.tolist() == [4, 9]
    assert np.array_equal(b.y, (ds.y[mask] == 9).astype(np.int64))
    assert np.array_equal(b.X, ds.X[mask])
    with pytest.raises(ConfigError, match="not a class"):
        binary_subset(ds, (4, 11))
    with pytest.raises(ConfigError):
        binary_subset(ds, (4, 4))


# ---------------------------------------------------------------- splits and partitions
def test_train_test_split_stratified():
    ds = load_builtin("breast_cancer")
    train, test = train_test_split(ds, test_fraction=0.25, seed=1)
    assert train.n + test.n == ds.n
    assert np.bincount(test.y).tolist() == [53, 89]  # round(0.25 * [212, 357])
    assert train.bounds is ds.bounds and np.array_equal(train.classes, ds.classes)
    together = np.concatenate([train.X, test.X])
    assert sorted(map(bytes, together)) == sorted(map(bytes, ds.X))
    again, _ = train_test_split(ds, test_fraction=0.25, seed=1)
    other, _ = train_test_split(ds, test_fraction=0.25, seed=2)
    assert np.array_equal(again.X, train.X) and not np.array_equal(other.X, train.X)
    for bad in (0, 1, 1.5, -0.1, "0.2"):
        with pytest.raises(ConfigError):
            train_test_split(ds, test_fraction=bad, seed=1)


def test_partition_even_disjoint_cover_deterministic():
    parts = partition(103, 10, seed=5)
    assert len(parts) == 10
    assert sorted(len(p) for p in parts) == [10] * 7 + [11] * 3
    allidx = np.concatenate(parts)
    assert np.array_equal(np.sort(allidx), np.arange(103))  # disjoint and covering
    assert all(p.dtype == np.int64 for p in parts)
    same = partition(103, 10, seed=5)
    assert all(np.array_equal(a, b) for a, b in zip(parts, same))
    other = partition(103, 10, seed=6)
    assert not all(np.array_equal(a, b) for a, b in zip(parts, other))


def test_partition_sizes():
    parts = partition(50, 3, seed=0, sizes=[5, 1, 30])
    assert [len(p) for p in parts] == [5, 1, 30]
    allidx = np.concatenate(parts)
    assert len(np.unique(allidx)) == 36 and allidx.min() >= 0 and allidx.max() < 50
    parts = partition(4, 4, seed=0)
    assert [len(p) for p in parts] == [1, 1, 1, 1]


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((5, 6), {}),  # more owners than rows
        ((5, 0), {}),
        ((0, 1), {}),
        ((10, 2), dict(sizes=[5, 6])),  # sum too large
        ((10, 2), dict(sizes=[5])),  # wrong count
        ((10, 2), dict(sizes=[5, 0])),  # empty owner
        ((10.0, 2), {}),
    ],
)
def test_partition_invalid(args, kwargs):
    with pytest.raises(ConfigError):
        partition(*args, seed=0, **kwargs)


def test_owner_rows_matches_partition():
    ds = load_builtin("breast_cancer")
    parts = partition(ds.n, 7, seed=11)
    shares = [owner_rows(ds, 7, i, seed=11) for i in range(7)]
    for (X, y), idx in zip(shares, parts):
        assert np.array_equal(X, ds.X[idx]) and np.array_equal(y, ds.y[idx])
    assert sum(len(y) for _, y in shares) == ds.n
    with pytest.raises(ConfigError):
        owner_rows(ds, 7, 7, seed=11)


# ---------------------------------------------------------------- files
def _write(path, text):
    path.write_text(text)
    return path


def test_csv_round_trip_with_header(tmp_path, rng):
    X = np.round(rng.uniform(-3, 3, size=(20, 4)), 6)
    y = rng.integers(0, 3, size=20) * 5 + 1  # labels 1, 6, 11
    lines = ["a,b,c,d,label"] + [",".join(map(repr, row.tolist())) + f",{lab}" for row, lab in zip(X, y)]
    path = _write(tmp_path / "rows.csv", "\n".join(lines) + "\n\n")
    ds = load_file(path, bounds="-3:3")
    assert np.array_equal(ds.X, X) and ds.feature_names == ("a", "b", "c", "d")
    assert np.array_equal(ds.classes[ds.y], y) and ds.classes.tolist() == sorted(set(y.tolist()))
    assert ds.bounds.d == 4 and ds.name == "rows.csv"
    gz = tmp_path / "rows.csv.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    ds2 = load_file(gz, bounds=Bounds.of(-3, 3, 4))
    assert np.array_equal(ds2.X, X) and np.array_equal(ds2.y, ds.y)


def test_csv_without_header_and_two_label_columns(tmp_path):
    path = _write(tmp_path / "onehot.csv", "0.5,1,0\r\n0.25,0,1\r\n1.0,1,0\r\n")
    ds = load_file(path, bounds="0:1", n_label_columns=2)
    assert ds.X.shape == (3, 1) and ds.feature_names is None
    assert ds.classes.tolist() == [[0, 1], [1, 0]] and ds.y.tolist() == [1, 0, 1]


def test_npz_round_trip(tmp_path, rng):
    X = rng.normal(size=(15, 3))
    y = rng.integers(0, 2, size=15)
    path = tmp_path / "rows.npz"
    np.savez(path, X=X, y=y)
    ds = load_file(path, bounds=Bounds.of(-5, 5, 3))
    assert np.array_equal(ds.X, X) and np.array_equal(ds.classes[ds.y], y)


def test_bounds_required_before_reading(tmp_path):
    path = _write(tmp_path / "rows.csv", "1,0\n2,1\n")
    with pytest.raises(ConfigError) as info:
        load_file(path)
    msg = str(info.value)
    assert "rows.csv" in msg and "--bounds" in msg and "never computed" in msg
    with pytest.raises(ConfigError, match="2 features"):
        load_file(path, bounds=Bounds.of(0, 1, 2))


@pytest.mark.parametrize(
    "text, line, what",
    [
        ("1,2,0\n3,4,1\n5,nan,0\n", 3, "not finite"),
        ("x1,x2,y\n1,2,0\n3,inf,1\n", 3, "not finite"),
        ("1,2,0\n\n3,4\n", 3, "columns"),
        ("1,2,0\n3,4,1,7\n", 2, "columns"),
        ("x1,x2,y\n1,2,3,0\n", 2, "columns"),
        ("1,2,0\n3,abc,1\n", 2, "non-numeric"),
        ("1,2,0\n3,,1\n", 2, "non-numeric"),
        ("1,2,0\n3,1_0,1\n", 2, "non-numeric"),
        ("1,2,0\n3,4,0.5\n", 2, "not an integer"),
        ("1,2,0\n3,4,nan\n", 2, "not an integer"),
        ("1,2,label\n3,4,1\n", 1, "non-numeric"),
        ("x1,x2,y\n", 1, "no data rows"),
    ],
)
def test_malformed_csv_one_line_error(tmp_path, text, line, what):
    path = _write(tmp_path / "bad_rows.csv", text)
    with pytest.raises(ConfigError) as info:
        load_file(path, bounds="0:10")
    msg = str(info.value)
    assert "bad_rows.csv" in msg and f"line {line}" in msg and what in msg and "\n" not in msg


def test_empty_and_missing_file(tmp_path):
    for text in ("", "\n  \n"):
        path = _write(tmp_path / "empty.csv", text)
        with pytest.raises(ConfigError, match="empty.csv: empty file"):
            load_file(path, bounds="0:1")
    with pytest.raises(ConfigError, match="nothere.csv: file not found"):
        load_file(tmp_path / "nothere.csv", bounds="0:1")


def test_malformed_npz(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, X=np.array([[1.0, 2.0], [np.inf, 0.0]]), y=np.array([0, 1]))
    with pytest.raises(ConfigError, match=r"bad.npz: row 2, column 1 of X"):
        load_file(path, bounds="0:1")
    np.savez(path, X=np.zeros((2, 2)), y=np.array([0.0, 0.5]))
    with pytest.raises(ConfigError, match=r"bad.npz: row 2.*not an integer"):
        load_file(path, bounds="0:1")
    np.savez(path, features=np.zeros((2, 2)))
    with pytest.raises(ConfigError, match="'X' and 'y'"):
        load_file(path, bounds="0:1")
    np.savez(path, X=np.zeros((2, 2)), y=np.array([0, 1, 1]))
    with pytest.raises(ConfigError, match="bad.npz"):
        load_file(path, bounds="0:1")


def test_binary_garbage_is_config_error(tmp_path):
    path = tmp_path / "garbage.csv"
    path.write_bytes(b"1,2,0\n\xff\xfe\x00\x01\n")
    with pytest.raises(ConfigError, match="garbage.csv: line 2"):
        load_file(path, bounds="0:1")
    path.write_bytes(b"\x1f\x8b\x08\x00broken")
    with pytest.raises(ConfigError, match="garbage.csv: corrupt gzip"):
        load_file(path, bounds="0:1")


# ---------------------------------------------------------------- parse_bounds
def test_parse_bounds_scalar_form():
    b = parse_bounds("-5:5", 3)
    assert b.d == 3 and b.lo.tolist() == [-5.0] * 3 and b.hi.tolist() == [5.0] * 3
    assert parse_bounds("0:2.5e2", 1).hi.tolist() == [250.0]
    for bad in ("5", "1:2:3", "a:b", "5:1", "1:1", "", "0:inf"):
        with pytest.raises(ConfigError):
            parse_bounds(bad, 3)


def test_parse_bounds_json_form(tmp_path):
    path = tmp_path / "bounds.json"
    path.write_text(json.dumps({"lo": [0, -1, 2], "hi": [1, 1, 3], "source": "codebook"}))
    b = parse_bounds(str(path), 3)
    assert b.lo.tolist() == [0, -1, 2] and b.hi.tolist() == [1, 1, 3]
    path.write_text(json.dumps({"lo": 0, "hi": 255}))
    assert parse_bounds(str(path), 4).hi.tolist() == [255.0] * 4
    cases = [
        ({"lo": [0, 0], "hi": [1, 1]}, "2 values"),
        ({"lo": [0, 0, 0]}, "bounds file"),
        ({"low": [0, 0, 0], "lo": [0, 0, 0], "hi": [1, 1, 1]}, "bounds file"),
        ({"lo": [0, 2, 0], "hi": [1, 1, 1]}, "lo < hi"),
        ({"lo": ["0", 0, 0], "hi": [1, 1, 1]}, "numbers"),
    ]
    for doc, what in cases:
        path.write_text(json.dumps(doc))
        with pytest.raises(ConfigError, match=what):
            parse_bounds(str(path), 3)
    path.write_text('{"lo": [0,\n 1,,]}')
    with pytest.raises(ConfigError, match="bounds.json: line 2"):
        parse_bounds(str(path), 3)
    with pytest.raises(ConfigError, match="not found"):
        parse_bounds(str(tmp_path / "missing.json"), 3)


def test_load_file_with_json_bounds(tmp_path):
    bounds = tmp_path / "b.json"
    bounds.write_text(json.dumps({"lo": [0, 0], "hi": [10, 20]}))
    path = _write(tmp_path / "rows.csv", "1,2,0\n3,4,1\n")
    ds = load_file(path, bounds=str(bounds))
    assert ds.bounds.hi.tolist() == [10.0, 20.0]


def test_federation_split_is_a_pure_function_of_public_name_and_seed():
    """Launcher, coordinator and nodes each compute the split; they must agree row for row."""
    from privfed.common.datasets import federation_split
    from privfed.owner import data

    assert data.federation_split is federation_split  # the owner package re-exports the common one
    (tr1, te1), (tr2, te2) = (
        federation_split("synthetic", seed=4, test_fraction=0.25, n_samples=120) for _ in range(2)
    )
    np.testing.assert_array_equal(tr1.X, tr2.X)
    np.testing.assert_array_equal(te1.y, te2.y)
    assert (tr1.X.shape[0], te1.X.shape[0]) == (90, 30)
