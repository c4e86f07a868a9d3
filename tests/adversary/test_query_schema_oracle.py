"""``privfed query``: whether the query is sent must not tell the coordinator what the rows hold (wt-redteam3).

Without ``--schema`` a query file is read by the schema of the GetModel answer, the coordinator's word.
A schema that one-hot encodes a column (``categories``) refuses a file holding any other value in it,
and one without a fill value refuses a missing cell: ``privfed query`` then exits with nothing sent.
So a hostile coordinator chose, per query run, a set of values and learned from whether ``Predict``
came whether every query row's value in that column lay in it -- of a column its model does not read
(``A_d`` reads f0 only here), outside the ``A_dᵀx`` the cleaning bounds what it learns to. A
numeric column declared categorical with one category asks "is x_j exactly v?".

Differential: two query files that differ in one cell of the unread column, against the same hostile
model. Now a schema of the coordinator's that encodes or fills columns is refused before the file is
read (data-independent), as a label column is ("Columns" in ``privfed.owner.query_files``); the owner
pins the federation schema it holds with ``--schema`` (control: then the query is answered).
"""

import numpy as np
from hostile import matrix, pb
from test_query_model_attack import _query

from privfed.common.schema import FederationSchema


def _schema(categories) -> FederationSchema:
    return FederationSchema(("f0", "f1"), (0.0,), (1.0,), (0, 1), header=True, categories=(("f1", categories),))


def _model(schema: FederationSchema) -> pb.GetModelResponse:
    d = 1 + len(schema.categories[0][1])  # f0 and f1's one-hot columns
    stage = np.zeros((d, 1))
    stage[0, 0] = 1.0  # the model reads f0 only
    return pb.GetModelResponse(
        model_id="m",
        kind="lr",
        bounds=matrix(np.stack([np.zeros(d), np.ones(d)])),
        linear_stage=matrix(stage),
        schema=schema.to_json(),
    )


def test_the_coordinators_categories_do_not_turn_the_query_into_an_oracle(coordinator, certs, tmp_path):
    files = {}
    for name, last in (("all-a", "a"), ("one-b", "b")):
        files[name] = tmp_path / f"{name}.csv"
        files[name].write_text(f"f0,f1\n0.3,a\n0.6,{last}\n")
    train = tmp_path / "t.csv"
    train.write_text("0.3,1,0\n0.6,0,1\n")  # _query passes --train-data to a null-space method only
    coordinator.model = _model(_schema(("a",)))  # "does every row hold a in f1?"
    seen = {}
    for name, path in files.items():
        before = len(coordinator.predicts)
        proc = _query(coordinator, certs, tmp_path, path, train)
        seen[name] = (proc.returncode, len(coordinator.predicts) - before)
        assert "Traceback" not in proc.stderr, proc.stderr[-1500:]
    assert seen["all-a"] == seen["one-b"], f"the coordinator reads f1 from whether the query came: {seen}"
    assert seen["one-b"] == (2, 0) and "--schema" in proc.stderr, (seen, proc.stderr[-1500:])
    own = tmp_path / "schema.json"  # the owner's own federation schema, which the model's must equal
    own.write_text(_schema(("a", "b")).to_json())
    coordinator.model = _model(_schema(("a", "b")))
    proc = _query(coordinator, certs, tmp_path, files["one-b"], train, "--schema", str(own))
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert tuple(coordinator.predicts[-1].rows.shape) == (2, 3)
