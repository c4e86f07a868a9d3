"""An owner node's rows against the federation schema, the decision on its ledger (issue 20,
finding 5), and the row digests the ledger's row accounts are keyed by (finding 4).

The first schema a node without a local schema is sent is checked and recorded; after a restart,
another schema is refused without reading the rows -- even one the rows would fit -- so a
coordinator learns nothing new per start; the operator's own schema (``--schema``) is checked."""

from __future__ import annotations

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.ledger import Ledger
from privfed.common.schema import FederationSchema
from privfed.owner import data as owner_data
from privfed.owner.data import read_owner_rows, row_digests
from privfed.owner.main import checked_rows


def _schema(classes) -> FederationSchema:
    return FederationSchema(features=("a", "b"), lo=(0.0, 0.0), hi=(1.0, 1.0), classes=tuple(classes))


@pytest.fixture
def rows(tmp_path):
    (tmp_path / "rows.csv").write_text("0.2,0.4,7\n0.6,0.1,3\n")
    return read_owner_rows(str(tmp_path / "rows.csv"))


@pytest.fixture
def ledger(tmp_path):
    with Ledger(tmp_path / "node.sqlite", epsilon_budget=1.0) as led:
        yield led


def test_the_first_schema_is_checked_and_recorded_and_a_later_other_one_refused_unread(rows, ledger, monkeypatch):
    first, fitting = _schema([3, 7]), _schema([3, 7, 9])
    assert checked_rows(rows, first, ledger, pinned=False).n == 2
    assert ledger.schema_decision() == (first.digest(), True)
    reads = []
    real = owner_data.check_owner_rows
    monkeypatch.setattr("privfed.owner.main.check_owner_rows", lambda *a, **kw: reads.append(a) or real(*a, **kw))
    with pytest.raises(ConfigError, match="refused without reading the rows"):
        checked_rows(rows, fitting, ledger, pinned=False)  # the rows would fit: still refused
    assert reads == [] and ledger.schema_decision() == (first.digest(), True)
    assert checked_rows(rows, first, ledger, pinned=False).n == 2  # the recorded one again: served
    assert reads


def test_a_schema_the_rows_do_not_fit_is_recorded_refused_and_stays_so(rows, ledger):
    bad = _schema([1, 2])
    with pytest.raises(ConfigError, match="label"):
        checked_rows(rows, bad, ledger, pinned=False)
    assert ledger.schema_decision() == (bad.digest(), False)
    with pytest.raises(ConfigError, match="refused without reading the rows"):
        checked_rows(rows, _schema([3, 7]), ledger, pinned=False)  # no second bit


def test_the_operators_own_schema_is_checked_and_becomes_the_record(rows, ledger):
    checked_rows(rows, _schema([3, 7]), ledger, pinned=False)
    new = _schema([3, 7, 11])
    assert checked_rows(rows, new, ledger, pinned=True).n == 2
    assert ledger.schema_decision() == (new.digest(), True)


def test_row_digests_tell_identical_rows_apart_and_do_not_depend_on_the_partition():
    X = np.array([[0.5, 0.5], [0.1, 0.9], [0.5, 0.5]])
    y = np.array([1, 0, 1])
    keys = row_digests(X, y)
    assert len(set(keys)) == 3  # the two identical rows: first and second occurrence
    assert row_digests(X[:2], y[:2]) == keys[:2]
    assert row_digests(X, np.array([0, 0, 1]))[0] != keys[0]  # the label is part of the row
