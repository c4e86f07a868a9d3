"""Audit 8: ``privfed query`` takes no subnormal into the work a coordinator times (owner/query.py, "Timing").

Between ``GetModel``'s answer and the first ``Predict`` the owner cleans its query rows against the served
stage (and, with a null-space method, fits its confidential map on its training rows' moments). A query or
training value of 1e-310 is sent as the 0 it rounds to on the wire's 2^-20 grid, but its arithmetic takes the
CPU's slow path (``test_subnormal_rows.py``), so the gap's time told whether the owner's files hold one.
Checked without a clock over real sockets (the hostile coordinator, ``privfed query``'s own code in this
process): no array holding a subnormal is passed to or returned by any project function in the gap.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_subnormal_rows import SUBNORMAL, subnormal_operands
from test_timing_query import BOUND, N_QUERIES, N_TRAIN, PLAIN, SUBSPACE, F, _csv, _query, _serve

from privfed.owner import query_client


def _files(tmp_path, header: bool):
    rng = np.random.Generator(np.random.PCG64(3))
    queries = np.clip(rng.normal(size=(N_QUERIES, F)), -BOUND, BOUND)
    queries[::3, 1] = SUBNORMAL
    X = np.clip(rng.normal(size=(N_TRAIN, F)), -BOUND, BOUND)
    X[:, 2] = SUBNORMAL * rng.integers(1, 4, N_TRAIN)  # a column of subnormals: its moments are subnormal too
    labels = (X @ np.array([1.0, -2.0, 0.5, 0.0]) > 0)[:, None]
    return _csv(tmp_path / "q.csv", queries, header=header), _csv(tmp_path / "t.csv", np.column_stack([X, labels]))


@pytest.mark.parametrize(
    "schema, flags",
    [(None, {}), (None, {"confidential_labels": (0,), **SUBSPACE}), (PLAIN, {})],
    ids=["projection", "subspace", "their-schema"],  # their-schema: the model's schema reads the text in the gap
)
def test_the_gap_takes_no_subnormal(coordinator, certs, tmp_path, monkeypatch, schema, flags):
    queries, train = _files(tmp_path, header=schema is not None)
    _serve(coordinator, schema)
    gap = {"open": False}
    get_model, predict = query_client.ModelClient.get_model, query_client.ModelClient.predict

    def answered(self, *args, **kwargs):
        reply = get_model(self, *args, **kwargs)
        gap["open"] = True
        return reply

    def asked(self, *args, **kwargs):
        gap["open"] = False
        return predict(self, *args, **kwargs)

    monkeypatch.setattr(query_client.ModelClient, "get_model", answered)
    monkeypatch.setattr(query_client.ModelClient, "predict", asked)
    go = _query(coordinator, certs, tmp_path, queries, **({**flags, "train_data": train} if flags else {}))
    seen = subnormal_operands(go, recording=lambda: gap["open"])
    assert coordinator.predicts, "no Predict was sent"
    assert not seen, seen[:8]
