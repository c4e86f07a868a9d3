"""``privfed query --schema``: the null-space methods read ``--train-data`` by the owner's schema too.

A federation whose schema one-hot encodes a column served its owners' own files, but ``--train-data``
was read as plain numbers, so an owner had to one-hot encode its training file by hand. Now, under the
owner's ``--schema``, the training file is read as its rows are (columns by the header's names, categories
one-hot, missing cells filled) and its other columns are the label columns ``--confidential-labels``
indexes, in the file's order.

What is checked, on what the (stub, honest) coordinator received from a real ``privfed query`` process: the
rows sent hide the confidential column from the owner's least-squares map fitted on the *encoded* training
rows (its guess is one constant, up to the wire grid), while on the raw queries the same map's guesses
differ (so the check can fail).
"""

import numpy as np
from hostile import GRID_BITS, matrix, pb
from test_query_model_attack import _query

from privfed.common.nullspace import fit_linear_map
from privfed.common.schema import FederationSchema

SCHEMA = FederationSchema(
    ("age", "sex", "income"),
    (0.0, 0.0),
    (100.0, 1e4),
    ("no", "yes"),
    categories=(("sex", ("f", "m")),),
    header=True,
    label="owns",
)
LO, HI = np.array([0.0, 0.0, 0.0, 0.0]), np.array([100.0, 1.0, 1.0, 1e4])  # age, sex=f, sex=m, income
N_TRAIN, N_QUERIES = 60, 12


def _rows(rng, n):
    age = rng.uniform(20, 80, n).round(1)
    male = rng.integers(0, 2, n)
    income = rng.uniform(500, 9000, n).round(2)
    encoded = np.column_stack([age, 1 - male, male, income])
    smoker = (0.03 * age + 0.8 * male + rng.normal(0, 0.3, n) > 1.8).astype(int)
    cells = [[f"{a}", "m" if m else "f", f"{i}"] for a, m, i in zip(age, male, income)]
    return encoded, smoker, cells


def test_null_space_cleaning_reads_the_training_file_by_the_owners_schema(coordinator, certs, tmp_path):
    rng = np.random.Generator(np.random.PCG64(2026))
    X_train, smoker, cells = _rows(rng, N_TRAIN)
    owns = rng.integers(0, 2, N_TRAIN)
    train = tmp_path / "train.csv"  # another column order, the label between the two other columns
    train.write_text(
        "id,sex,owns,income,age,smoker\n"
        + "".join(
            f"{k},{sex},{'yes' if o else 'no'},{inc},{age},{s}\n"
            for k, ((age, sex, inc), o, s) in enumerate(zip(cells, owns, smoker))
        )
    )
    X_query, _, query_cells = _rows(rng, N_QUERIES)
    queries = tmp_path / "queries.csv"
    queries.write_text("age,sex,income\n" + "".join(",".join(row) + "\n" for row in query_cells))
    schema = tmp_path / "schema.json"
    schema.write_text(SCHEMA.to_json())
    coordinator.model = pb.GetModelResponse(
        model_id="m",
        kind="lr",
        bounds=matrix(np.stack([LO, HI])),
        linear_stage=matrix(np.array([[0.02], [1.0], [-1.0], [1e-4]])),
        schema=SCHEMA.to_json(),
    )
    proc = _query(
        coordinator, certs, tmp_path, queries, train,
        "--schema", str(schema), "--method", "subspace", "--allow-confidential-map-leak",
        "--confidential-labels", "2",  # smoker: 0 id, 1 owns, 2 smoker (the last flag given wins)
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "0 id, 1 owns (the schema's label, as its class index), 2 smoker" in proc.stderr
    (request,) = coordinator.predicts
    sent = np.frombuffer(request.rows.data, dtype="<i8").reshape(tuple(request.rows.shape)) * 2.0**-GRID_BITS
    assert sent.shape == (N_QUERIES, 4)
    A_c = fit_linear_map(X_train, smoker[:, None])
    centre = (LO + HI) / 2
    guesses_raw = (X_query - centre) @ A_c
    guesses_sent = (sent - centre) @ A_c
    slack = np.abs(A_c).sum() * 2.0 ** -(GRID_BITS + 1)
    assert np.ptp(guesses_raw) > 0.3, "the confidential map tells the raw queries apart"
    assert np.max(np.abs(guesses_sent)) <= slack, guesses_sent.ravel()
