"""Audit 34, A34-5: a query file with a missing (or other non-numeric) cell was refused after ``GetModel``, so the
coordinator learned from a ``GetModel`` with no ``Predict`` after it that the owner's query rows hold a missing value.

Without ``--schema`` the query file is read after ``GetModel`` (the model's schema, or else as numbers): a cell
``read_table`` cannot read as a number is refused under every model there is (a model's schema that fills or encodes
columns is refused before it reads anything; one that does not refuses a missing cell; a non-feature column is refused
unless the schema is pinned), but only once the model was asked for. Whether a query row has a missing value (a test
not done, a field left empty) is the owner's data: that refusal must come before the coordinator is contacted, where
it tells the coordinator nothing (it cannot tell the run from one never made).

Real ``privfed query`` processes against the hostile coordinator, with a model of no schema and one whose schema
names the four features: two files that differ in one cell (0.5, or empty, or ``NA``); the coordinator must see
either the whole exchange or nothing at all. Control: the complete file is answered under both models.
"""

from __future__ import annotations

import numpy as np
import pytest
from hostile import matrix, pb
from test_query_model_attack import _query

from privfed.common.schema import FederationSchema

F = 4
FEATURES = tuple(f"f{j}" for j in range(F))
SCHEMA = FederationSchema(FEATURES, (0.0,) * F, (1.0,) * F, (0, 1), header=True)


@pytest.mark.parametrize("named", [False, True], ids=["no-schema", "model-schema"])
@pytest.mark.parametrize("cell", ["0.5", "", "NA"], ids=["complete", "empty", "NA"])
def test_a_missing_cell_is_refused_before_the_coordinator_is_asked(coordinator, certs, tmp_path, named, cell):
    coordinator.model = pb.GetModelResponse(
        model_id="m",
        kind="lr",
        bounds=matrix(np.stack([np.zeros(F), np.ones(F)])),
        linear_stage=matrix(np.array([[1.0], [0.0], [0.0], [0.0]])),  # reads f0, not the cell's column
        schema=SCHEMA.to_json() if named else "",
    )
    path = tmp_path / "q.csv"
    path.write_text(",".join(FEATURES) + "\n0.1,0.2,0.3,0.4\n0.2," + cell + ",0.3,0.4\n")
    asked, sent = len(coordinator.get_models), len(coordinator.predicts)
    proc = _query(coordinator, certs, tmp_path, path, path)
    asked, sent = len(coordinator.get_models) - asked, len(coordinator.predicts) - sent
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    if cell == "0.5":  # control: answered
        assert (proc.returncode, asked, sent) == (0, 1, 1), proc.stderr[-2000:]
    else:
        assert proc.returncode != 0 and "nothing sent" in proc.stderr, proc.stderr[-2000:]
        assert (asked, sent) == (0, 0), "the coordinator was asked for the model, then sent nothing: a missing cell"
