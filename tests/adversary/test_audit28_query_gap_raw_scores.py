"""Audit 28, A28-6b: the gap between ``GetModel`` and ``Predict`` (the time a coordinator measures) must not take the
floating-point slow path by a query value the rows sent do not show.

Walkthrough 8, W8-8 made ``privfed query`` log the e_utility the model sees: ``_log_cleaning`` squares the difference of
the model's scores of the rows sent and of the raw query rows, before the first ``Predict``. The coordinator picks the
stage and the bounds: bounds around 0 (the centre is 0, so a raw value is not absorbed by centring) and a stage that
reads column 0 with weight 1e-80 (above ``TINY``, not flushed). A raw value of 1e-80 in column 0 then has the score
1e-160, on the grid 0, the same row sent as for a 0; its square, 1e-320, is subnormal: the slow path, in the gap, for
that owner only. Two owners, one query file each, differing only there; the CPU's own flags (``fpstatus``), no clock.
"""

from __future__ import annotations

import numpy as np
import pytest
from fpstatus import X86_64, slow_path
from test_timing_query import BOUND, N_QUERIES, F, _csv, _query

pytestmark = pytest.mark.skipif(not X86_64, reason="reads the x86 MXCSR register (tests/adversary/fpstatus.py)")


@pytest.mark.parametrize("value", [0.0, 1e-80], ids=["zero", "tiny"])
def test_a_tiny_raw_value_the_rows_sent_do_not_show_takes_the_gap_to_no_slow_path(
    coordinator, certs, tmp_path, monkeypatch, value
):
    from privfed.owner import query_client
    from privfed.proto import privfed_pb2 as pb
    from privfed.proto.serde import matrix_to_proto

    rng = np.random.Generator(np.random.PCG64(28))
    table = np.clip(rng.normal(size=(N_QUERIES, F)), -BOUND, BOUND)
    table[:, 0] = value
    queries = _csv(tmp_path / "q.csv", table)
    coordinator.model = pb.GetModelResponse(
        model_id="m", kind="lr", bounds=matrix_to_proto(np.stack([np.full(F, -BOUND), np.full(F, BOUND)])),
        linear_stage=matrix_to_proto(np.array([[1e-80], [0.0], [0.0], [0.0]])),
    )  # fmt: skip
    go = _query(coordinator, certs, tmp_path, queries)
    seen = slow_path(go, monkeypatch, between=(query_client.ModelClient, "get_model", "predict"))
    assert coordinator.predicts, "no Predict was sent"
    assert seen == set(), value
