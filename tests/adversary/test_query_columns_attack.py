"""``privfed query``: which columns of the query file are features is not the coordinator's to say.

A query file may keep labels after its features (README: "a label column is read past"), here a
desired label and a confidential one, as tests/integration/test_query.py's does. The GetModel answer
told the tool how to read it: its schema (columns by header name) or, without one, its feature
count F. A hostile coordinator answers with F + 2 features (or a schema naming the confidential
column a feature) and a rank-1 stage ``A_d = e_last``: the rank bound holds, and projection sends
the confidential column exactly. ``--schema FILE`` pins the federation schema the owner holds: such
a model is refused with a one-line error before any row is sent; an honest model of that schema is
answered (control), its label columns read past. Without ``--schema`` a query file holds the
features only: one with label columns is refused even by an honest model, so a file that passes
has nothing else a hostile model could name.
"""

import numpy as np
import pytest
from hostile import matrix, pb
from test_query_model_attack import _query

from privfed.common.schema import FederationSchema

F, N = 4, 12
FEATURES = tuple(f"f{j}" for j in range(F))


def _model(d: int, stage: np.ndarray, schema: FederationSchema | None = None) -> pb.GetModelResponse:
    return pb.GetModelResponse(
        model_id="m",
        kind="lr",
        bounds=matrix(np.stack([np.zeros(d), np.ones(d)])),
        linear_stage=matrix(stage),
        schema="" if schema is None else schema.to_json(),
    )


def _schema(features, label: str) -> FederationSchema:
    d = len(features)
    return FederationSchema(tuple(features), (0.0,) * d, (1.0,) * d, (0, 1), header=True, label=label)


@pytest.fixture
def files(tmp_path):
    rng = np.random.Generator(np.random.PCG64(5))
    table = np.column_stack([rng.uniform(0.1, 0.9, (N, F)), rng.integers(0, 2, (N, 2))])  # label, secret
    header = ",".join([*FEATURES, "label", "secret"])
    queries = tmp_path / "q.csv"
    queries.write_text(header + "\n" + "\n".join(",".join(repr(float(v)) for v in row) for row in table) + "\n")
    schema = tmp_path / "schema.json"
    schema.write_text(_schema(FEATURES, "label").to_json())
    train = tmp_path / "t.csv"  # _query passes --train-data to a null-space method only
    train.write_text("\n".join(",".join(repr(float(v)) for v in row) for row in table) + "\n")
    return queries, schema, train, table


def _last(d: int) -> np.ndarray:
    stage = np.zeros((d, 1))
    stage[-1, 0] = 1.0
    return stage


HOSTILE = {
    "two-more-features": lambda: _model(F + 2, _last(F + 2)),  # no schema: F + 2 columns read in order
    "schema-names-the-secret": lambda: _model(F, _last(F), _schema((*FEATURES[:-1], "secret"), "label")),
}


@pytest.mark.parametrize("model", list(HOSTILE))
def test_a_model_that_reads_other_columns_than_the_owners_schema_is_refused(coordinator, certs, tmp_path, files, model):
    queries, schema, train, _ = files
    coordinator.model = HOSTILE[model]()
    proc = _query(coordinator, certs, tmp_path, queries, train, "--schema", str(schema))
    assert proc.returncode == 2 and "nothing sent" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert coordinator.get_models and coordinator.predicts == [], "rows went to a model reading other columns"


def test_an_honest_model_of_the_owners_schema_is_answered_and_the_labels_stay(coordinator, certs, tmp_path, files):
    queries, schema, train, table = files
    stage = np.array([[1.0], [0.5], [0.0], [0.0]])
    coordinator.model = _model(F, stage, _schema(FEATURES, "label"))
    proc = _query(coordinator, certs, tmp_path, queries, train, "--schema", str(schema))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (request,) = coordinator.predicts
    assert tuple(request.rows.shape) == (N, F)  # the four features, neither label column


def test_without_the_owners_schema_a_query_file_holds_the_features_only(coordinator, certs, tmp_path, files):
    """An honest model refuses a file with labels (the owner drops them); the features-only file then
    holds nothing a hostile model could name: both are refused, nothing is sent."""
    queries, _, train, table = files
    coordinator.model = _model(F, np.array([[1.0], [0.5], [0.0], [0.0]]), _schema(FEATURES, "label"))
    proc = _query(coordinator, certs, tmp_path, queries, train)
    assert proc.returncode == 2 and "besides the model's 4 features" in proc.stderr and "--schema" in proc.stderr
    features_only = tmp_path / "features.csv"
    features_only.write_text(
        ",".join(FEATURES) + "\n" + "\n".join(",".join(repr(float(v)) for v in row[:F]) for row in table) + "\n"
    )
    for model in HOSTILE:
        coordinator.model = HOSTILE[model]()
        proc = _query(coordinator, certs, tmp_path, features_only, train)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, f"{model}: {proc.stderr[-1500:]}"
    assert coordinator.predicts == []
