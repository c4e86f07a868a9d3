"""``privfed experiment select-map`` (issue 21 item 5): a public map is chosen without reading a
reported test row. The map step is spied on (the real one runs) to see which rows each candidate
is scored on; two candidates keep the runs short."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privfed.common.datasets import Dataset, binary_subset, load_builtin, train_test_split
from privfed.deploy.cli import main
from privfed.deploy.experiments import map_selection


def _two_candidates(monkeypatch: pytest.MonkeyPatch, task: str) -> list[str]:
    names = list(map_selection.CANDIDATES[task])
    keep = [map_selection.BEFORE[task], next(n for n in names if n != map_selection.BEFORE[task])]
    monkeypatch.setitem(map_selection.CANDIDATES, task, {n: map_selection.CANDIDATES[task][n] for n in keep})
    return keep


def test_validation_never_reads_a_reported_test_row(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = binary_subset(load_builtin("mnist5k"), (4, 9))
    seen: list[Dataset] = []
    real = map_selection._mapped

    def spy(ds: Dataset, name: str, m: map_selection.Map) -> Dataset:
        seen.append(ds)  # the unmapped rows each candidate is scored on
        return real(ds, name, m)

    monkeypatch.setattr(map_selection, "_mapped", spy)
    cands = _two_candidates(monkeypatch, "bdt")
    out = map_selection.nested(raw, "bdt", runs=2, val_splits=1, seed=0, test_fraction=0.2)

    assert len(out["picked"]) == 2 and set(out["picked"]) <= set(cands)
    per_seed = len(cands) + 2  # every candidate on validation splits, then the pick and BEFORE on the test split
    assert len(seen) == 2 * per_seed
    for s in (0, 1):
        train, test = train_test_split(raw, test_fraction=0.2, seed=s)
        test_rows = {row.tobytes() for row in test.X}
        for ds in seen[s * per_seed : s * per_seed + len(cands)]:
            rows = {row.tobytes() for row in ds.X}
            assert rows == {row.tobytes() for row in train.X} and not rows & test_rows
        assert all(ds is raw for ds in seen[s * per_seed + len(cands) : (s + 1) * per_seed])  # the reported split


def test_the_selection_report_gives_before_and_after_with_intervals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _two_candidates(monkeypatch, "ncc")
    argv = ["experiment", "select-map", "--task", "ncc", "--runs", "2", "--val-splits", "1", "--out", str(tmp_path)]
    assert main(argv) == 0
    res = json.loads((tmp_path / "report.json").read_text())["results"]
    nested = res["nested"]
    assert res["before"] == map_selection.BEFORE["ncc"] and len(nested["picked"]) == 2
    for key in ("test_picked_interval", "test_before_interval", "test_picked_minus_before"):
        iv = nested[key]
        assert iv["n"] == 2 and iv["lo"] <= iv["mean"] <= iv["hi"]
    assert set(nested["validation"]) == set(map_selection.CANDIDATES["ncc"]) and len(nested["validation"]) == 2
    assert all(0.0 <= v <= 1.0 for vals in nested["validation"].values() for v in vals)
    assert np.isfinite(nested["test_picked_minus_before"]["mean"])
