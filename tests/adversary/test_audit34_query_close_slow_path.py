"""Audit 34, A34-2: between ``privfed query``'s last ``Predict`` answer and the end of its connection, the owner squared
raw scores that the rows sent do not show: the floating-point slow path, timed by the coordinator.

Audit 28 (A28-6b) moved ``_log_cleaning`` (the e_utility the model sees: the squared difference of the model's scores of
the rows sent and of the raw query rows) out of the gap between ``GetModel`` and the first ``Predict``. It moved it to
just after the last ``Predict``, still inside the ``with channel(...)`` block: the channel, so the HTTP/2 connection,
closes only once it is done, and the coordinator sees that close (the client's GOAWAY and TCP FIN reach its host right
after) as it sees its own answer go: a second gap it times. The coordinator picks the stage and the bounds as audit 28's
test does: bounds around 0, a stage reading column 0 with weight 1e-80. A raw value of 1e-80 then has the score 1e-160,
on the grid 0 (the same rows sent as for a 0), and its square, 1e-320, is subnormal: the slow path between the last
answer and the close, for that owner only.

In process, over the real socket to the hostile coordinator: two owners, one query file each, differing only in that
column; the CPU's own flags (``fpstatus``), no clock, read from the return of ``ModelClient.predict`` to the channel's
close. The rows the coordinator receives are the same for both; the window must take no slow path for either.
Control: the zero arm sees none, and the same instrument over ``_log_cleaning`` alone sees the tiny arm's.
"""

from __future__ import annotations

import numpy as np
import pytest
from fpstatus import _FLAGS, DE, X86_64, _functions
from test_timing_query import BOUND, N_QUERIES, F, _csv, _query

pytestmark = pytest.mark.skipif(not X86_64, reason="reads the x86 MXCSR register (tests/adversary/fpstatus.py)")


class _Window:
    """The CPU's slow-path record (subnormal operand: MXCSR DE; underflow: numpy's report) from ``open()`` to
    ``close()`` (:mod:`fpstatus`)."""

    def __init__(self) -> None:
        self.get, self.set = _functions()
        self.inside = False
        self.seen: set[str] = set()

    def open(self) -> None:
        self.set(self.get() & ~_FLAGS)
        self.inside = True

    def close(self) -> None:
        if self.inside and self.get() & DE:
            self.seen.add("denormal")
        self.inside = False

    def underflow(self, kind, flag) -> None:
        if self.inside:
            self.seen.add("underflow")


def _run(coordinator, certs, tmp_path, monkeypatch, value, over: str) -> tuple[set[str], list[bytes]]:
    """Run one owner's query; ``over``: "close" reads the window from Predict's return to the channel's close,
    "log" over ``_log_cleaning`` alone (the control)."""
    from privfed.owner import query, query_client
    from privfed.proto import privfed_pb2 as pb
    from privfed.proto.serde import matrix_to_proto

    rng = np.random.Generator(np.random.PCG64(34))
    table = np.clip(rng.normal(size=(N_QUERIES, F)), -BOUND, BOUND)
    table[:, 0] = value
    tmp_path.mkdir()
    queries = _csv(tmp_path / "q.csv", table)
    coordinator.model = pb.GetModelResponse(
        model_id="m", kind="lr", bounds=matrix_to_proto(np.stack([np.full(F, -BOUND), np.full(F, BOUND)])),
        linear_stage=matrix_to_proto(np.array([[1e-80], [0.0], [0.0], [0.0]])),
    )  # fmt: skip
    window = _Window()
    with monkeypatch.context() as m:
        if over == "close":
            predict, make_channel = query_client.ModelClient.predict, query_client.channel

            def predicted(*args, **kwargs):
                answers = predict(*args, **kwargs)
                window.open()
                return answers

            class Closing:
                def __init__(self, *args):
                    self.channel = make_channel(*args)

                def __enter__(self):
                    return self.channel.__enter__()

                def __exit__(self, *exc):
                    window.close()
                    return self.channel.__exit__(*exc)

            m.setattr(query_client.ModelClient, "predict", predicted)
            m.setattr(query_client, "channel", Closing)
        else:
            log_cleaning = query._log_cleaning

            def logged(*args, **kwargs):
                window.open()
                try:
                    return log_cleaning(*args, **kwargs)
                finally:
                    window.close()

            m.setattr(query, "_log_cleaning", logged)
        before = len(coordinator.predicts)
        old = np.seterrcall(window.underflow)
        try:
            with np.errstate(under="call"):
                _query(coordinator, certs, tmp_path, queries)()
        finally:
            np.seterrcall(old)
    sent = [p.SerializeToString() for p in coordinator.predicts[before:]]
    assert sent, "no Predict was sent"
    return window.seen, sent


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_tiny_raw_value_takes_the_last_answer_to_the_close_to_no_slow_path(coordinator, certs, tmp_path, monkeypatch):
    zero_seen, zero_sent = _run(coordinator, certs, tmp_path / "zero", monkeypatch, 0.0, "close")
    tiny_seen, tiny_sent = _run(coordinator, certs, tmp_path / "tiny", monkeypatch, 1e-80, "close")
    assert zero_sent == tiny_sent  # the coordinator's bytes cannot tell the two owners apart ...
    assert zero_seen == set()
    assert tiny_seen == set(), "the owner squared a raw score the rows sent do not show before its connection closed"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_control_the_log_of_the_cleaning_takes_the_slow_path_for_the_tiny_value(
    coordinator, certs, tmp_path, monkeypatch
):
    assert _run(coordinator, certs, tmp_path / "zero", monkeypatch, 0.0, "log")[0] == set()
    assert _run(coordinator, certs, tmp_path / "tiny", monkeypatch, 1e-80, "log")[0] != set()
