"""``privfed coordinator --task lr --solver gd`` with real ``privfed owner`` processes (issue 22 item 4).

A coordinator process and two owner node processes over gRPC, one row per owner (755 owners of the
anes96 survey): LDP gradient descent learns well above the majority class at ε = 8; the report has one
round per group, every owner asked once; each owner's ledger holds exactly one gradient at ε; the
model is saved and served as ``--solver local``'s is (a linear model).
"""

from __future__ import annotations

from pathlib import Path

from fedharness import coordinator_job, ledger_entries

from privfed.common.learners.exported import TrainedClassifier

EPSILON, OWNERS = 8.0, 755
DATA = ["--dataset", "anes96", "--seed", "1", "--test-fraction", "0.2"]


def test_gradient_descent_learns_over_the_wire_one_gradient_per_owner(tmp_path: Path):
    half = OWNERS // 2
    nodes = {"owner-0": (f"0:{half}", EPSILON), "owner-1": (f"{half}:{OWNERS}", EPSILON)}
    flags = ["--task", "lr", "--solver", "gd", "--epsilon", str(EPSILON)]
    report, path = coordinator_job(tmp_path, flags, nodes, n_owners=OWNERS, dataset=DATA)
    assert report["status"] == "ok" and report["config"]["solver"] == "gd"
    assert report["accuracy"] > report["baselines"]["majority_class"] + 0.15, report["accuracy"]

    rounds = report["rounds"]
    assert len(rounds) == 8 and all(r["phase"] == "gradient" and r["released"] == r["asked"] for r in rounds)
    assert sum(r["asked"] for r in rounds) == OWNERS and not report["refused"]
    (part,) = report["privacy"]["releases"]
    assert part == {"purpose": "lr-gradient", "epsilon": EPSILON, "delta": 0.0, "releases": 1}

    entries = ledger_entries(tmp_path, nodes, EPSILON)
    assert len(entries) == OWNERS
    for history in entries.values():
        (entry,) = history
        assert entry["purpose"].startswith("lr-gradient:") and entry["epsilon"] == EPSILON

    from privfed.common.learners.logistic import LinearModel

    model = TrainedClassifier.from_file(str(path.parent / "model.json"))
    assert isinstance(model.model_, LinearModel) and model.model_.coef_.shape[0] == 1  # as --solver local's
