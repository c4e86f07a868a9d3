"""Audit 11: the same rows written another way keep their row accounts (README, "Budgets follow the rows").

A node's ledger keys a row's account on the row as the schema reads it (:func:`privfed.owner.data.row_digests`).
An honest operator re-exports the same rows between jobs in ways that do not change a value: CSV or NPZ, another
row order, the columns in another order under a header, numbers printed with other digits, exponents, a sign on
zero, spaces, quotes, an integer label written as a float. Each is read here by the node's own path (the file
read as text, the schema applied, the digests bound) and must give every row the account it had; a row that
gets a new digest here would spend a fresh budget. (A row whose values change is a new row: rows exported as
float32 are other numbers, and a new row.)
"""

import numpy as np
import pytest

from privfed.common.schema import FederationSchema
from privfed.owner.data import check_owner_rows, read_owner_rows, row_digests

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

X = np.array([[0.1 + 0.2, 1e-5, 0.0], [0.5, 0.123456789012345, 1.0], [0.5, 0.123456789012345, 1.0], [0.25, 0.0, 0.75]])
Y = np.array([1, 0, 0, 1])
POSITIONAL = FederationSchema(features=("a", "b", "c"), lo=(0.0,) * 3, hi=(1.0,) * 3, classes=(0, 1))
HEADER = FederationSchema(
    features=("a", "b", "c"), lo=(0.0,) * 3, hi=(1.0,) * 3, classes=(0, 1), header=True, label="y"
)


def _csv(rows, labels, cell=repr, label=str, sep=","):
    return "\n".join(sep.join(cell(float(v)) for v in r) + sep + label(int(lab)) for r, lab in zip(rows, labels)) + "\n"


def _digests(path, schema):
    return row_digests(*_read(path, schema))


def _read(path, schema):
    data = check_owner_rows(read_owner_rows(str(path)), schema)
    return data.X, data.y


VARIANTS = {
    "csv, %.17g, float labels": lambda p: p.write_text(_csv(X, Y, lambda v: f"{v:.17g}", lambda v: f"{v}.0")),
    "csv, exponents and spaces": lambda p: p.write_text(_csv(X, Y, lambda v: f" {v:.20e} ", lambda v: f" {v} ", ", ")),
    "csv, quoted cells": lambda p: p.write_text(_csv(X, Y, lambda v: f'"{v!r}"', lambda v: f'"{v}"')),
    "csv, -0 for zero": lambda p: p.write_text(_csv(X, Y, lambda v: "-0" if v == 0 else repr(v))),
    "npz, float64": lambda p: np.savez(p, X=X, y=Y),
    "npz, integer labels as float": lambda p: np.savez(p, X=X, y=Y.astype(float)),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_same_rows_in_another_file_format_keep_their_accounts(tmp_path, variant):
    base = tmp_path / "base.csv"
    base.write_text(_csv(X, Y))
    other = tmp_path / ("other.npz" if variant.startswith("npz") else "other.csv")
    VARIANTS[variant](other)
    assert _digests(other, POSITIONAL) == _digests(base, POSITIONAL)


def test_rows_reordered_and_columns_reordered_under_a_header_keep_their_accounts(tmp_path):
    base = tmp_path / "base.csv"
    base.write_text("a,b,c,y\n" + _csv(X, Y))
    order = [3, 1, 0, 2]  # the two identical rows (1 and 2) keep their order: they are told apart by it
    moved = tmp_path / "moved.csv"
    moved.write_text(
        "y,c,a,b\n" + "".join(f"{Y[i]},{float(X[i, 2])!r},{float(X[i, 0])!r},{float(X[i, 1])!r}\n" for i in order)
    )
    before, after = _digests(base, HEADER), _digests(moved, HEADER)
    assert after == [before[i] for i in order]
