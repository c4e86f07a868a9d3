"""``privfed query``: the box the rows are cleaned into is not a channel (audit 18).

The model's bounds in the GetModel answer are the box ``projection`` keeps every cleaned row inside. They are
the coordinator's word (under the owner's ``--schema``, the schema's own). The tool clipped the raw query rows
to that box before projecting, so the row sent was a function of ``A_dᵀ clip(x)``, not of ``A_dᵀx``: a box
narrowed around a threshold on two features told pairs of rows of equal scores apart by which side of it each
lay (26 of 39 pairs went out differently, advantage 0.69 from one row sent; ten such threshold bits per row
with a rank-1 stage 2^j). Now the rows sent are a function of ``A_dᵀx`` and public values whatever box is
announced (``common.nullspace.projection.box_row``), and under ``--schema`` a model whose bounds are not the
schema's is refused, nothing sent.

Real ``privfed query`` processes against the hostile coordinator: two query files whose rows, pair by pair,
have the same scores under the announced rank-1 stage; the rows received must be the same. Control: a stage
that reads the pairs' difference makes them differ, so the comparison can fail.
"""

import numpy as np
import pytest
from hostile import GRID_BITS, matrix, pb
from test_query_model_attack import _query

from privfed.common.schema import FederationSchema

F = 4
FEATURES = tuple(f"f{j}" for j in range(F))
SCHEMA = FederationSchema(FEATURES, (0.0,) * F, (1.0,) * F, (0, 1), header=True, label="label")
HONEST = (np.zeros(F), np.ones(F))
NARROW = (np.array([0.45, 0.45, 0.0, 0.0]), np.array([0.55, 0.55, 1.0, 1.0]))  # the hostile box
SUM = np.array([[1.0], [1.0], [0.0], [0.0]])  # reads f0 + f1, which the pairs share
DIFFERENCE = np.array([[1.0], [-1.0], [0.0], [0.0]])  # reads f0 - f1 (control)


def _pairs() -> tuple[np.ndarray, np.ndarray]:
    """Rows inside [0, 1]^4 and their partners moved by t·(1, −1, 0, 0): the same f0 + f1, row by row."""
    rng = np.random.Generator(np.random.PCG64(18))
    X0 = rng.uniform(0.05, 0.95, (60, F))
    X1 = X0 + (rng.uniform(0.1, 0.3, 60) * rng.choice([-1.0, 1.0], 60))[:, None] * np.array([1.0, -1.0, 0.0, 0.0])
    inside = np.all((X1 > 0) & (X1 < 1), axis=1)
    return X0[inside], X1[inside]


def _sent(coordinator, certs, tmp_path, name, rows, *extra):
    """The rows the coordinator received from one ``privfed query`` run (None: it exited non-zero)."""
    path = tmp_path / f"{name}.csv"
    path.write_text(",".join(FEATURES) + "\n" + "".join(",".join(repr(float(v)) for v in r) + "\n" for r in rows))
    since = len(coordinator.predicts)
    proc = _query(coordinator, certs, tmp_path, path, path, *extra)
    if proc.returncode != 0:
        assert "nothing sent" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        return None
    got = [np.frombuffer(r.rows.data, dtype="<i8").reshape(tuple(r.rows.shape)) for r in coordinator.predicts[since:]]
    return np.concatenate(got) * 2.0**-GRID_BITS


def _model(box, stage, schema=None):
    return pb.GetModelResponse(
        model_id="m",
        kind="lr",
        bounds=matrix(np.stack(box)),
        linear_stage=matrix(stage),
        schema="" if schema is None else schema.to_json(),
    )


@pytest.mark.parametrize("box", ["narrow", "honest"])
def test_rows_of_equal_scores_go_out_alike_whatever_box_the_coordinator_announces(coordinator, certs, tmp_path, box):
    coordinator.model = _model(NARROW if box == "narrow" else HONEST, SUM)
    X0, X1 = _pairs()
    sent0 = _sent(coordinator, certs, tmp_path, "q0", X0)
    sent1 = _sent(coordinator, certs, tmp_path, "q1", X1)
    assert sent0 is not None and sent1 is not None and sent0.shape == X0.shape
    assert np.max(np.abs(sent0 - sent1)) <= 2.0**-GRID_BITS, "rows of equal scores went out differently"
    lo, hi = NARROW if box == "narrow" else HONEST
    assert np.all((sent0 >= lo - 2.0**-GRID_BITS) & (sent0 <= hi + 2.0**-GRID_BITS))  # inside the box announced


def test_control_a_stage_that_reads_the_difference_tells_the_pairs_apart(coordinator, certs, tmp_path):
    coordinator.model = _model(HONEST, DIFFERENCE)
    X0, X1 = _pairs()
    sent0 = _sent(coordinator, certs, tmp_path, "q0", X0)
    sent1 = _sent(coordinator, certs, tmp_path, "q1", X1)
    assert np.all(np.max(np.abs(sent0 - sent1), axis=1) > 0.1)


def test_under_the_owners_schema_a_model_with_other_bounds_is_refused(coordinator, certs, tmp_path):
    schema = tmp_path / "schema.json"
    schema.write_text(SCHEMA.to_json())
    X0, _ = _pairs()
    coordinator.model = _model(NARROW, SUM, SCHEMA)
    assert _sent(coordinator, certs, tmp_path, "q0", X0, "--schema", str(schema)) is None
    assert coordinator.predicts == [], "rows went to a model whose bounds are not the owner's schema's"
    coordinator.model = _model(HONEST, SUM, SCHEMA)  # control: the schema's own bounds are answered
    assert _sent(coordinator, certs, tmp_path, "q0", X0, "--schema", str(schema)) is not None
