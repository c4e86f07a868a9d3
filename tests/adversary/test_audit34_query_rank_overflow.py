"""Audit 34, A34-4: a linear stage whose singular values overflow passed ``privfed query``'s rank bound as rank 0.

``check_linear_stage`` refuses a stage of numerical rank above ``--max-rank`` (default 1) before any row is read: the
bound on how many directions of each row the model reads. Its rank was :func:`numpy.linalg.matrix_rank`'s, whose SVD
of a stage with entries near the largest double gives an infinite singular value; the tolerance is then infinite and
the rank 0, so a two-direction stage (``1.7e308`` times two unit columns and a third entry) passed under
``--max-rank 1``. No row leaked: the projection's own SVD collapsed the same way and every row went out as the centre,
labelled as the centre (a silent wrong answer). The owner's bound must not rest on that: such a stage is refused, nothing
sent, as one of a non-finite entry is.

A real ``privfed query`` process against the hostile coordinator. Control: the same stage at 1e300 (finite singular
values) is refused by the rank bound itself, before and after the fix.
"""

from __future__ import annotations

import numpy as np
import pytest
from hostile import matrix, pb
from test_query_model_attack import _csv, _query

F = 4


def _stage(m: float) -> np.ndarray:
    A = np.zeros((F, 2))
    A[0, 0], A[1, 1], A[2, 0] = m, m, m  # rank 2: reads x0 + x2 and x1
    return A


@pytest.mark.parametrize("m", [1.7e308, 1e300], ids=["overflowing", "control"])
def test_a_stage_of_two_directions_is_refused_under_max_rank_one_whatever_its_scale(coordinator, certs, tmp_path, m):
    coordinator.model = pb.GetModelResponse(
        model_id="m",
        kind="lr",
        bounds=matrix(np.stack([np.zeros(F), np.ones(F)])),
        linear_stage=matrix(_stage(m)),
    )
    queries = _csv(tmp_path / "q.csv", np.random.Generator(np.random.PCG64(344)).uniform(0.1, 0.9, (10, F)))
    since = len(coordinator.predicts)
    proc = _query(coordinator, certs, tmp_path, queries, queries)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(coordinator.predicts) == since, "rows were sent through a stage of rank 2 under --max-rank 1"
    assert proc.returncode != 0 and "nothing sent" in proc.stderr, proc.stderr[-2000:]
