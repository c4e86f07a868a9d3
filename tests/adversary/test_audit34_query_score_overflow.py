"""Audit 34, A34-1: ``privfed query``'s scores overflow under a stage of huge weights, and the rows sent (or whether any
is sent) then depend on more of a row than its scores ``A_dᵀ(x − c)``.

The README promises that a row sent is a function of ``A_dᵀ(x − c)`` on the public score grid and public values, so
two query rows of the same scores go out alike. The coordinator picks the stage's weights and the bounds (without
``--schema``, both; with it, the weights): the scores were computed as ``(x − c) @ A_d`` in doubles, so a weight near
the largest double makes a product of a row outside the box overflow while the row's real score is small. Rows of the
same real score then differ: one whose two large terms cancel makes ``inf − inf = NaN`` and the whole query is refused
("X has 2 non-finite value(s)"), nothing sent, where its partner goes out; one whose first term alone overflows is sent
with the grid's top score instead of its own. So the refusal tells the coordinator whether some row has ``x0`` above
and ``x1`` below thresholds it chose, and the value tells it, row by row, whether ``x0`` is above one: neither is a
function of the scores.

Real ``privfed query`` processes against the hostile coordinator (real certificates, real sockets): two query files
whose rows, pair by pair, have the same real scores under the announced rank-1 stage ``M·(e_0 + e_1)``, ``M`` near
the largest double, and bounds of width 1 whose centre puts the overflows at 0.5 of x0 and x1 (the rows themselves
all lie in [0, 1]^4, and the scores' range over the box, ``±M``, is finite). Everything that leaves the owner must
be the same: the exit status, the Predict calls and the rows received. Control: a stage that reads ``x0 − x1``, of
ordinary weights over the box [0, 1]^4, tells the pairs apart, so the comparison can fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from hostile import GRID_BITS, matrix, pb
from test_query_model_attack import _query

F = 4
FEATURES = tuple(f"f{j}" for j in range(F))
M, K = 2.0**996, 2.0**28  # M times a value of 2^28 or more overflows (the largest double is just below 2^1024)
SUM = np.array([[M], [M], [0.0], [0.0]])  # reads M·(x0 + x1 − 1) (below): the pairs share it
DIFFERENCE = np.array([[1.0], [-1.0], [0.0], [0.0]])  # reads x0 − x1 (control)
#: Bounds of width 1 centred at c = (0.5 − K, 0.5 + K, 0.5, 0.5): a score is M·(x0 + x1 − 1), and its range over the
#: box ±M is finite, but M·(x0 − c0) overflows (+inf) exactly when x0 ≥ 0.5 and M·(x1 − c1) (−inf) when x1 < 0.5.
CENTRE = np.array([0.5 - K, 0.5 + K, 0.5, 0.5])
BOX = (CENTRE - 0.5, CENTRE + 0.5)


def _rows(arm: str) -> tuple[np.ndarray, np.ndarray]:
    """Query rows in [0, 1]^4 with x0 < 0.5 < x1 (no term overflows) and, pair by pair, rows of the same x0 + x1 that
    cross the thresholds: "value", x0 and x1 above 0.5 (the score overflows to +inf, the real one inside ±M);
    "refusal", the second file as the first but for one row, moved to x0 > 0.5 > x1 (inf − inf = NaN)."""
    rng = np.random.Generator(np.random.PCG64(34))
    n = 24
    r = rng.uniform(0.05, 0.3, n)  # x0 + x1 - 1: the real score over M
    X0 = rng.uniform(0.3, 0.7, (n, F))
    X0[:, 0] = rng.uniform(r + 0.05, 0.45)
    X0[:, 1] = 1.0 + r - X0[:, 0]  # in (0.55, 0.95]
    X1 = X0.copy()
    if arm == "value":
        d = rng.uniform(-0.4, 0.4, n) * r
        X1[:, 0], X1[:, 1] = 0.5 + r / 2 + d, 0.5 + r / 2 - d  # both above 0.5, the same sum
        return X0, X1
    X1[0, 0], X1[0, 1] = 0.5 + r[0] + 0.3, 0.2  # x0 above 0.5, x1 below it, the same sum
    return X0, X1


def _outcome(coordinator, certs, tmp_path, name: str, rows: np.ndarray) -> tuple[int, int, np.ndarray | None]:
    """(exit status, Predict calls, rows received) of one ``privfed query`` run."""
    path = tmp_path / f"{name}.csv"
    path.write_text(",".join(FEATURES) + "\n" + "".join(",".join(repr(float(v)) for v in r) + "\n" for r in rows))
    since = len(coordinator.predicts)
    proc = _query(coordinator, certs, tmp_path, path, path)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    got = [np.frombuffer(r.rows.data, dtype="<i8").reshape(tuple(r.rows.shape)) for r in coordinator.predicts[since:]]
    sent = np.concatenate(got) * 2.0**-GRID_BITS if got else None
    return proc.returncode, len(got), sent


def _model(stage: np.ndarray, box: tuple[np.ndarray, np.ndarray] = BOX) -> pb.GetModelResponse:
    return pb.GetModelResponse(model_id="m", kind="lr", bounds=matrix(np.stack(box)), linear_stage=matrix(stage))


@pytest.mark.parametrize("arm", ["value", "refusal"])
def test_rows_of_equal_scores_go_out_alike_under_a_stage_of_huge_weights(coordinator, certs, tmp_path, arm):
    X0, X1 = _rows(arm)
    assert len(X0) >= 8
    coordinator.model = _model(SUM)
    code0, calls0, sent0 = _outcome(coordinator, certs, tmp_path, "q0", X0)
    code1, calls1, sent1 = _outcome(coordinator, certs, tmp_path, "q1", X1)
    assert code0 == 0 and sent0 is not None and sent0.shape == X0.shape  # the rows inside the box are answered
    assert (code1, calls1) == (code0, calls0), "rows of equal scores: one query was refused, its partner sent"
    assert sent1 is not None and np.max(np.abs(sent0 - sent1)) <= 2.0**-GRID_BITS, (
        "rows of equal scores went out differently: "
        f"{int(np.count_nonzero(np.any(np.abs(sent0 - sent1) > 2.0**-GRID_BITS, axis=1)))} of {len(X0)} pairs"
    )


def test_control_a_stage_that_reads_the_difference_tells_the_pairs_apart(coordinator, certs, tmp_path):
    X0, X1 = _rows("value")
    coordinator.model = _model(DIFFERENCE, (np.zeros(F), np.ones(F)))
    _, _, sent0 = _outcome(coordinator, certs, tmp_path, "q0", X0)
    _, _, sent1 = _outcome(coordinator, certs, tmp_path, "q1", X1)
    assert sent0 is not None and sent1 is not None
    assert np.all(np.any(np.abs(sent0 - sent1) > 2.0**-GRID_BITS, axis=1))


#: The same through the rows' own magnitudes, with an honest-looking centre (0): weights 2^999 overflow a product for a
#: value of 2^25 (~3.4e7: an income, a population) or more, and bounds of ±2^23 keep the scores' range finite. Since
#: A34-3 the scores are read as ``A_dᵀx − A_dᵀc``, which the construction above no longer reaches through the centre;
#: this one checks the column scaling alone (it fails with :func:`~privfed.owner.query_cleaning.unit_columns` made
#: the identity).
BIG = np.array([[2.0**999], [2.0**999], [0.0], [0.0]])
WIDE = (np.array([-(2.0**23), -(2.0**23), 0.0, 0.0]), np.array([2.0**23, 2.0**23, 1.0, 1.0]))


def _large_rows(arm: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows of x0 + x1 in [1e6, 4e6] (no product overflows) and partners of the same sum: "value", x0 = 3.5e7 (its
    product inf) and x1 = sum − 3.5e7 (above −2^25: finite), so inf; "refusal", one row x0 = 4e7, x1 = sum − 4e7 (below
    −2^25): inf − inf."""
    rng = np.random.Generator(np.random.PCG64(3434))
    X0 = np.column_stack([rng.uniform(5e5, 2e6, (24, 2)), rng.uniform(0.2, 0.8, (24, F - 2))])
    X1 = X0.copy()
    total = X0[:, 0] + X0[:, 1]
    if arm == "value":
        X1[:, 0], X1[:, 1] = 3.5e7, total - 3.5e7
    else:
        X1[0, 0], X1[0, 1] = 4e7, total[0] - 4e7
    return X0, X1


@pytest.mark.parametrize("arm", ["value", "refusal"])
def test_rows_of_equal_scores_go_out_alike_when_their_own_values_overflow_a_product(coordinator, certs, tmp_path, arm):
    X0, X1 = _large_rows(arm)
    coordinator.model = _model(BIG, WIDE)
    code0, calls0, sent0 = _outcome(coordinator, certs, tmp_path, "q0", X0)
    code1, calls1, sent1 = _outcome(coordinator, certs, tmp_path, "q1", X1)
    assert code0 == 0 and sent0 is not None and sent0.shape == X0.shape
    assert (code1, calls1) == (code0, calls0), "rows of equal scores: one query was refused, its partner sent"
    # the rows sent lie in the box, at the wire's grid: equal up to a step of it and the rounding of the sums
    assert sent1 is not None and np.max(np.abs(sent0 - sent1)) <= 2.0**-GRID_BITS + 1e-9 * 2.0**23


def test_a_stage_whose_score_range_overflows_is_refused_whatever_the_rows(coordinator, certs, tmp_path):
    """Weights 2^1000 over bounds of width 2^30: the scores' range, ``±2^1030``, overflows. The code before audit 34 made
    every row NaN (the grid's step infinite), refused alike; the column scaling of A34-1 made the grid finite and only
    the grid values beyond 2^1024, scaled back, infinite, so a query was refused or sent by whether one of its rows'
    scores lay near the range's edge. Such a stage is refused whatever the rows: two files, one of small values, one
    holding a row at the edge."""
    coordinator.model = _model(
        np.array([[2.0**1000], [2.0**1000], [0.0], [0.0]]),
        (np.array([-(2.0**29), -(2.0**29), 0.0, 0.0]), np.array([2.0**29, 2.0**29, 1.0, 1.0])),
    )
    X0 = np.random.Generator(np.random.PCG64(3435)).uniform(0.2, 0.8, (8, F))
    X1 = X0.copy()
    X1[0, :2] = 2.0**28 * 1.9  # its score is near the range's edge
    outcomes = [_outcome(coordinator, certs, tmp_path, name, X)[:2] for name, X in (("q0", X0), ("q1", X1))]
    assert outcomes[0] == outcomes[1], f"the rows decided whether the query was sent: {outcomes}"
    assert outcomes[0][1] == 0 and outcomes[0][0] != 0  # refused, nothing sent
