"""Audit 29, A29-1: the gap between ``GetModel`` and ``Predict`` (the time a coordinator measures) takes the
floating-point slow path by a raw query value the rows sent do not show, in ``on_score_grid``.

Audit 28 (A28-6b) moved ``_log_cleaning``'s squares of raw scores after the first ``Predict``. But the score grid
(``owner/query_cleaning.py`` :func:`on_score_grid`, "Digits") still reads the raw rows in the gap:
``np.clip(centred @ A_d, ...)``. The coordinator picks the stage and the bounds: bounds around 0 (centre 0, so the raw
value is not absorbed by centring) and a stage reading column 0 with weight 1e-85 (above ``TINY`` = 2^-300, not
flushed). A raw value of 1e-80 (above ``TINY`` too, kept by ``read_queries``) has the score 1e-320: subnormal, the
matmul's slow path, in the gap, for that owner only; on the grid it is 0, the same rows sent as for a 0. Two owners,
one query file each, differing only there; the CPU's own flags (``fpstatus``), no clock.

Fixed in ``on_score_grid`` (a score below a quarter step is set to 0 before the division). The fix makes true: the gap's arithmetic on raw rows makes no subnormal operand or result whatever stage and
bounds the coordinator serves, for raw values the rows sent do not show (here both arms see no slow path).
"""

from __future__ import annotations

import numpy as np
import pytest
from fpstatus import X86_64, slow_path
from test_timing_query import BOUND, N_QUERIES, F, _csv, _query

pytestmark = pytest.mark.skipif(not X86_64, reason="reads the x86 MXCSR register (tests/adversary/fpstatus.py)")


def _run(coordinator, certs, tmp_path, monkeypatch, value):
    from privfed.owner import query_client
    from privfed.proto import privfed_pb2 as pb
    from privfed.proto.serde import matrix_to_proto

    rng = np.random.Generator(np.random.PCG64(29))
    table = np.clip(rng.normal(size=(N_QUERIES, F)), -BOUND, BOUND)
    table[:, 0] = value
    table[:, 1] = 0.0  # a column the owner's rows hold at 0 (a one-hot or sparse feature)
    tmp_path.mkdir()
    queries = _csv(tmp_path / "q.csv", table)
    # column 0 read with a weight above TINY; column 1's huge weight makes the score grid's step ~1e296
    coordinator.model = pb.GetModelResponse(
        model_id="m", kind="lr", bounds=matrix_to_proto(np.stack([np.full(F, -BOUND), np.full(F, BOUND)])),
        linear_stage=matrix_to_proto(np.array([[1e-85], [1e300], [0.0], [0.0]])),
    )  # fmt: skip
    go = _query(coordinator, certs, tmp_path, queries)
    before = len(coordinator.predicts)
    with monkeypatch.context() as m:
        seen = slow_path(go, m, between=(query_client.ModelClient, "get_model", "predict"))
    sent = [p.SerializeToString() for p in coordinator.predicts[before:]]
    assert sent, "no Predict was sent"
    return seen, sent


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_tiny_raw_value_the_rows_sent_do_not_show_takes_the_score_grid_to_no_slow_path(
    coordinator, certs, tmp_path, monkeypatch
):
    zero_seen, zero_sent = _run(coordinator, certs, tmp_path / "zero", monkeypatch, 0.0)
    tiny_seen, tiny_sent = _run(coordinator, certs, tmp_path / "tiny", monkeypatch, 1e-80)
    assert zero_sent == tiny_sent  # the coordinator's bytes cannot tell the two owners apart ...
    assert zero_seen == set()
    assert tiny_seen == set()  # ... nor may the gap's CPU work
