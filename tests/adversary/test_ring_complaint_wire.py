"""Audit 33, A33-2, over the real wire: a ring member that seals garbage to its successor, in a real ``privfed owner``
process (``garble_owner.py``: the owner CLI, its ring machine flipping the last bit of every hop one owner seals), in a
boosting job of a real ``privfed coordinator`` process with an honest node beside it. The successor complains through
the coordinator's relay, naming its sender (``COMPLAINT``), and the coordinator drops both ends of that hop: the job
completes, the hostile owner is dropped from each ring it was in with at most one honest owner, and no ring is
blamed on a slow link. Before the fix, the successor's silence read as a stall and every honest owner after the
hostile one was dropped in turn, at doubling deadlines, until the sum failed (the in-process tests of
``test_audit33_ring_framed_successor.py`` show the mechanics; this is the same through gRPC, mTLS aside)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from fedharness import coordinator_job  # noqa: E402

HOSTILE = "owner-1.o00010"
EPSILON = 4.0
DATA = ["--dataset", "synthetic", "--n-samples", "800", "--seed", "3", "--test-fraction", "0.25"]


def test_a_hostile_ring_member_over_the_real_wire_is_dropped_with_at_most_one_honest_owner(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVFED_TEST_GARBLE", HOSTILE)
    flags = ["--task", "bdt", "--release", "shares", "--epsilon", str(EPSILON), "--rounds", "3", "--n-bins", "4"]
    flags += ["--weight-bound", "4", "--max-owner-rows", "20", "--secure-sum", "ring", "--eval-groups", "all"]
    nodes = {"owner-0": ("0:10", EPSILON), "owner-1": ("10:20", EPSILON)}
    garble = Path(__file__).resolve().parents[1] / "integration" / "garble_owner.py"
    report, _ = coordinator_job(tmp_path, flags, nodes, n_owners=20, dataset=DATA, scripts={"owner-1": garble})
    assert report["status"] == "ok", report.get("error")
    sums = [r["secure_sum"] for r in report["rounds"]]
    with_hostile = [s for s in sums if HOSTILE in s["dropped"]]
    assert with_hostile, sums  # it was in a ring, sealed garbage, and was dropped
    for s in sums:
        honest = [o for o in s["dropped"] if o != HOSTILE]
        assert len(honest) <= (HOSTILE in s["dropped"]), s  # its one recipient at most, and none in a ring without it
        assert s["summed"] >= 2 and s["protocol"] == "ring", s  # the re-formed ring summed the rest
    log = (tmp_path / "coordinator.log").read_text()
    assert "slow link" not in log, log[-3000:]
