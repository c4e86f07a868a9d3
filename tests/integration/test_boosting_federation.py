"""LDP boosting over real gRPC with mTLS and real owner processes: the ring total is the sum of
the owners' evaluation releases (exact ones at ε = ∞), owners release a share in at most one round
of a run, each evaluation is debited, and a node killed mid-ring is dropped."""

import math
import os
import signal
import threading
import time

import numpy as np
import pytest
from fedharness import Federation, coordinator_job, ledger_entries
from liveness import LivenessClock

from privfed.common.boosting.wire import empty_history, owner_weights, with_round
from privfed.common.ledger import Ledger
from privfed.common.mechanisms import clip_error_pairs
from privfed.common.tasks import BoostShareTask, Refusal, Task
from privfed.owner.data import build_owners, federation_split
from privfed.server.strategies import make_strategy

pytestmark = pytest.mark.slow

DATA = ["--dataset", "synthetic", "--n-samples", "600", "--seed", "3", "--test-fraction", "0.25"]


def bdt(eps, **kw):
    _, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)
    options = dict(
        mechanism="pm", epsilon=eps, n_classes=2, bounds=test.bounds, n_rounds=4, n_bins=4, weight_bound=4.0, seed=5
    )
    options.update(kw)
    return make_strategy("bdt", **options), test


def test_boosting_rounds_with_exact_ring_totals(tmp_path):
    strategy, test = bdt(math.inf)
    fed = Federation(tmp_path)
    try:
        fed.spawn("owner-0", n_owners=120, shards="0:60", budget=math.inf, dataset=DATA)
        fed.spawn("owner-1", n_owners=120, shards="60:120", budget=math.inf, dataset=DATA)
        outcome = fed.run(strategy, 120)
    finally:
        fed.close()
    rounds = outcome.result.rounds
    assert len(rounds) == 4 and all(r.secure_sum.attempts == 1 for r in rounds)
    assert outcome.answered == 4 * 30  # each owner of the four groups released once
    # Recompute every round's totals from the owners' rows: the ring over gRPC must match.
    train, _ = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)
    owners = {
        o.owner_id.split(".")[1]: o
        for node, shards in (("owner-0", range(60)), ("owner-1", range(60, 120)))
        for o in _build(train, node, shards)
    }
    history = empty_history()
    model = outcome.model
    kept = 0
    for rec in rounds:
        if rec.decision.step == "skip":
            continue
        learner = model.learners[kept]
        sums = []
        for oid in rec.evaluators:  # this round's evaluation group
            o = owners[oid.split(".")[1]]
            w = np.minimum(owner_weights(history, o.X, o.y), strategy.params.eval_row_bound)  # the row clip
            sums.append([float(np.dot(w, learner.predict(o.X) != o.y)), float(w.sum())])
        err, wsum = clip_error_pairs(sums).sum(axis=0)
        d = rec.decision
        assert math.isclose(d.err_total, err, abs_tol=1e-6) and math.isclose(d.weight_total, wsum, abs_tol=1e-6)
        history = with_round(history, learner, d.alpha, d.err_total, d.weight_total)
        kept += 1
    assert float(np.mean(model.predict(test.X) == test.y)) > 0.6


def _build(train, node, shards):
    return build_owners(train, node_id=node, n_owners=120, shards=shards, seed=3, rng_kind="seeded", rng_seed=3)


def test_evaluations_are_debited_once_per_run_and_totals_are_noisy(tmp_path):
    strategy, test = bdt(4.0)
    fed = Federation(tmp_path)
    try:
        fed.spawn("owner-0", n_owners=120, shards="0:60", budget=4.0, dataset=DATA)
        fed.spawn("owner-1", n_owners=120, shards="60:120", budget=4.0, dataset=DATA)
        outcome = fed.run(strategy, 120)
    finally:
        fed.close()
    fb, result = strategy.params, outcome.result
    assert (
        result.privacy.part("boost-eval").epsilon == fb.eval_epsilon
        and result.privacy.parameters["eval_noise_scale"] > 0
    )
    evaluated = {o for r in result.rounds for o in r.evaluators}
    assert len(evaluated) == 120 and not result.refused
    ledgers = sorted(tmp_path.rglob("owner-*.sqlite"))
    assert len(ledgers) == 2, list(tmp_path.iterdir())
    entries = []
    for path in ledgers:
        with Ledger(path, epsilon_budget=4.0) as ledger:
            entries += [h for o in evaluated for h in ledger.history(o)]
    evals = [h for h in entries if h["release_id"].startswith("boost-eval:")]
    assert len(evals) == 120 and all(math.isclose(h["epsilon"], fb.eval_epsilon) for h in evals)
    assert max(outcome.epsilon_by_owner.values()) <= 4.0 + 1e-9


def test_an_owner_releases_in_at_most_one_round_of_a_run(tmp_path):
    """Asked again in the same run, an owner sends the same share (a resumed coordinator lost the
    first answer): byte for byte, with no second debit."""
    strategy, _ = bdt(2.0)
    from privfed.common.boosting.wire import config_to_dict

    config = config_to_dict(strategy.params, "boost-run1")
    fed = Federation(tmp_path)
    try:
        fed.spawn("owner-0", n_owners=120, shards="0:2", budget=10.0, dataset=DATA)  # budget for five
        fed.server.dispatcher.wait_for_owners(2, 60)
        oid = sorted(fed.server.dispatcher.owners())[0]
        first = fed.server.dispatcher.run(
            [Task("t1", oid, "boost-run1", BoostShareTask(config, empty_history()))], timeout=30
        )
        again = fed.server.dispatcher.run(
            [Task("t2", oid, "boost-run1", BoostShareTask(config, empty_history()))], timeout=30
        )
        ledger = fed.tmp / "owner-0.sqlite"
    finally:
        fed.close()
    share, repeat = first.results["t1"].payload, again.results["t2"].payload
    assert not isinstance(share, Refusal) and not isinstance(repeat, Refusal), (share, repeat)
    np.testing.assert_array_equal(repeat.reports, share.reports)
    with Ledger(ledger, epsilon_budget=10.0) as book:
        assert [h["purpose"] for h in book.history(oid)] == ["boost-share:boost-run1"]


def test_a_node_killed_mid_ring_is_dropped_and_the_ring_rerun(tmp_path):
    strategy, test = bdt(4.0, ring_timeout=6.0)
    # Silence is measured on a liveness clock: a loaded box that starves a healthy node stops it.
    clock = LivenessClock(("owner-0", "owner-1", "owner-2"))
    fed = Federation(tmp_path, node_timeout=2.0, clock=clock)
    try:
        fed.spawn("owner-0", n_owners=300, shards="0:100", budget=4.0, dataset=DATA)
        fed.spawn("owner-1", n_owners=300, shards="100:200", budget=4.0, dataset=DATA)
        victim = fed.spawn("owner-2", n_owners=300, shards="200:300", budget=4.0, dataset=DATA)
        assert fed.server.dispatcher.wait_for_owners(300, 60) == 300

        def kill_mid_ring():
            while fed.server.dispatcher.relayed < 30:
                time.sleep(0.002)
            os.kill(victim.pid, signal.SIGKILL)
            clock.forget("owner-2")

        killer = threading.Thread(target=kill_mid_ring)
        killer.start()
        outcome = fed.run(strategy, 300)
        killer.join()
    finally:
        fed.close()
    result = outcome.result
    dropped = set(result.dropped)
    assert dropped and all(o.startswith("owner-2") for o in dropped)
    first = result.rounds[0]
    assert first.secure_sum.attempts == 2
    assert first.secure_sum.summed == tuple(o for o in first.evaluators if not o.startswith("owner-2"))
    assert len(result.rounds) == 4
    assert outcome.lost_nodes == ["owner-2"]
    assert len(outcome.model.learners) >= 1


def test_owners_that_only_evaluate_took_part_and_no_owner_is_said_to_have_declined(tmp_path):
    """Walkthrough 9, W9-4: a bdt job by shares over 36 owners and 8 rounds asks 32 for shares and 4 only to
    evaluate; those 4 paid for their evaluations, yet the listing said ``32/36`` and the report warned that the
    others "declined it, refused or were lost", though nobody had. Here ``privfed coordinator`` with two
    ``privfed owner`` processes: 18 owners over 4 rounds share in groups of 4, so 2 only evaluate (at ε = ∞: exact
    totals, so every round runs; the in-process run at ε = 4, resumed from its journal too, is in
    tests/unit/test_journal.py)."""
    owners, rounds = 18, 4
    nodes = {"owner-0": ("0:9", math.inf), "owner-1": ("9:18", math.inf)}
    flags = ["--task", "bdt", "--release", "shares", "--epsilon", "inf", "--rounds", str(rounds), "--n-bins", "4"]
    flags += ["--weight-bound", "4", "--max-owner-rows", "40"]
    report, _ = coordinator_job(tmp_path, flags, nodes, n_owners=owners, dataset=DATA)
    assert report["status"] == "ok" and report["config"]["release"] == "shares", report.get("error")
    assert len(report["rounds"]) == rounds, report["rounds"]  # every round ran: every owner was asked
    entries = ledger_entries(tmp_path, nodes, math.inf)
    sharers = {o for o, h in entries.items() if any(e["purpose"].startswith("boost-share:") for e in h)}
    evaluators_only = set(entries) - sharers
    assert len(entries) == owners and len(evaluators_only) == owners - rounds * (owners // rounds) == 2, entries
    assert all(e["purpose"].startswith("boost-eval:") for o in evaluators_only for e in entries[o])
    # nobody declined, refused or was lost, and no warning says the others did
    assert not report["declined_owners"] and not report["refused"] and not report["lost_nodes"]
    assert not any("fewer than the" in w for w in report["warnings"]), report["warnings"]
    assert "fewer than the" not in (tmp_path / "coordinator.log").read_text()
    # answered: the owners whose shares were used; took_part: every owner with a release the job used and debited
    assert (report["owners"], report["answered"], report["took_part"]) == (owners, len(sharers), owners), report
    assert all(float(report["epsilon_by_owner"][o]) > 0 for o in evaluators_only)
