"""Issue 14, item 3: an honest owner node refuses every malformed task and keeps serving.

A hostile coordinator (tests/adversary/hostile.py: the real schema and certificates) sends a real
``privfed owner`` process batches of tasks of every kind of the registry, mutated field by field
(:mod:`mutate`: NaN/inf, huge, negative and zero numbers, unknown enum values, oversized strings,
repeated fields and matrices of wrong shapes and lengths), with ring envelopes of random bytes
mixed in. After every batch:

* the node process is alive, and every task addressed to an owner it hosts was answered (a
  refusal or a release: nothing is lost);
* every release that left (a share, a subspace, a model) has a debit in that owner's ledger
  whose release id is the task's -- or is a boosting share sent again, byte for byte the debited
  share of its run;

and at the end no owner's ledger is over its budget and a normal task gets a normal answer.
"""

from __future__ import annotations

import math
import os
import secrets

import numpy as np
import pytest
from hostile import (
    BUDGET,
    assert_still_serving,
    boost_config,
    boost_evaluate,
    boost_share,
    bounds_matrix,
    empty_history,
    grid_stump,
    kind,
    ledger_history,
    matrix,
    ncc_task,
    pb,
    spent_epsilon,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutate import mutated

from privfed.common.tasks import KINDS, gradient_release_id, nb_release_id

D = 3
X = np.array([[0.1, 0.2, 0.9], [0.3, 0.4, 0.5], [0.5, 0.6, 0.1], [0.7, 0.8, 0.3], [0.9, 0.15, 0.6]])
Y = np.array([0, 1, 0, 1, 0])
EXAMPLES = int(os.environ.get("PRIVFED_FUZZ_EXAMPLES", "25"))
BATCH = 6
#: Kinds a node does not answer task by task: a ring envelope gets no result of its own, and a ring
#: evaluation's answer depends on the rest of a ring the mutation may have broken.
UNANSWERED = {"ring_message", "boost_evaluate"}
RELEASES = {"ncc_share", "lr_share", "pca_share", "svm_share", "boost_share", "lr_gradient", "nb"}


def _seed_tasks(owner_id: str, peer: str) -> dict[str, pb.Task]:
    """One valid task of every kind (``common.tasks.KINDS``), by kind name: an evaluation in a ring
    with ``peer`` (its answer waits for the ring, which mutations break), a ring envelope of its own."""
    bounds = bounds_matrix(D)
    mech = pb.MechanismSpec(name=pb.MECHANISM_PM, epsilon=0.01)
    config = boost_config(D, "boost-fuzz", epsilon=0.02)
    ring = pb.RingSpec(session_id="fz-ring", ring=[owner_id, peer], frac_bits=24, n_parties=2, max_abs=8.0)
    seeds = {
        "ncc_share": ncc_task("seed", owner_id, d=D, epsilon=0.01, label_epsilon=0.01),
        "lr_share": pb.Task(
            lr_share=pb.LrShareTask(mechanism=mech, param_bound=1.0, c=1.0, n_classes=2, bounds=bounds)
        ),
        "pca_share": pb.Task(
            round_id="pca",
            pca_share=pb.PcaShareTask(
                epsilon=0.01, delta=1e-6, k=2, bounds=bounds, count_epsilon=0.01, scaling=pb.ROW_SCALING_BALL
            ),
        ),
        "svm_share": pb.Task(
            round_id="svm",
            svm_share=pb.SvmShareTask(
                epsilon=0.01,
                lam=0.01,
                n_classes=2,
                bounds=bounds,
                subspace=matrix(np.eye(D)[:, :2]),
                model=pb.SVM_MODEL_OVR_HUBER,
                scaling=pb.ROW_SCALING_BALL,
                rows=8,
            ),
        ),
        "boost_share": boost_share("seed", owner_id, "boost-fuzz", config),
        "boost_evaluate": boost_evaluate(
            "seed", owner_id, "boost-fuzz", config, empty_history(), grid_stump(0, 1, 2), ring
        ),
        "ring_message": pb.Task(round_id="ring", ring_message=pb.RingMessageTask(data=b"\x01not-a-sealed-envelope")),
        "secagg_keys": pb.Task(
            round_id="sa", secagg_keys=pb.SecAggKeysTask(session_id="fz-sa", frac_bits=24, n_parties=4, max_abs=8.0)
        ),
        "lr_gradient": pb.Task(
            round_id="gd-fuzz",
            lr_gradient=pb.LrGradientTask(
                mechanism=pb.GRADIENT_MECHANISM_PM,
                epsilon=0.01,
                theta=matrix(np.full((1, D + 1), 0.25)),
                param_bound=1.0,
                n_classes=2,
                bounds=bounds,
            ),
        ),
        "nb": pb.Task(round_id="nb-fuzz", nb=pb.NbReportTask(epsilon=0.01, n_bins=3, n_classes=2, bounds=bounds)),
        "join": pb.Task(round_id="accept", join=pb.JoinTask()),
        "secagg_unmask": pb.Task(
            round_id="sa", secagg_unmask=pb.SecAggUnmaskTask(session_id="fz-sa", round=0, survivors=[owner_id])
        ),
    }
    for task in seeds.values():
        task.task_id, task.owner_id, task.round_id = "seed", owner_id, task.round_id or "r"
    return seeds


def test_every_kind_has_a_seed():
    assert set(_seed_tasks("owner-0.o00000", "owner-0.o00001")) == {k.name for k in KINDS}


@pytest.fixture
def node(coordinator, owners):
    proc = owners("owner-0", X, Y)
    yield proc
    assert proc.alive(), proc.log()[-3000:]


def test_mutated_tasks_are_refused_and_nothing_is_lost(coordinator, node):
    hosted = node.owner_ids
    seeds = list(_seed_tasks(hosted[0], hosted[1]).values())
    answered: dict[str, pb.Result] = {}
    run_of: dict[str, str] = {}  # task id -> round id as sent (a gradient is debited under its run's id)

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(data=st.data())
    def batch(data):
        tasks, awaited = [], {}
        for _ in range(BATCH):
            seed = data.draw(st.sampled_from(seeds))
            task = mutated(seed, data)
            if data.draw(st.integers(0, 4)) > 0:  # mostly: a fresh id for an owner it hosts
                task.task_id = f"fz-{secrets.token_hex(6)}"
                task.owner_id = data.draw(st.sampled_from(hosted))
                if task.WhichOneof("kind") not in UNANSWERED:
                    awaited[task.task_id] = task.owner_id
            tasks.append(task)
            run_of[task.task_id] = task.round_id
        if data.draw(st.booleans()):  # an opaque ring envelope nobody asked for
            tasks.append(
                pb.Task(
                    task_id=f"fz-{secrets.token_hex(6)}",
                    owner_id=hosted[1],
                    round_id="ring",
                    ring_message=pb.RingMessageTask(data=data.draw(st.binary(max_size=300))),
                )
            )
        since = len(coordinator.results)
        coordinator.send(tasks, node="owner-0")
        got = coordinator.wait_results(list(awaited), since=since)
        assert node.alive(), f"a task batch killed the node:\n{node.log()[-3000:]}"
        missing = set(awaited) - {r.task_id for r in got}
        assert not missing, f"tasks lost (no answer): {missing}\n{node.log()[-2000:]}"
        for r in got:
            answered[r.task_id] = r
            assert r.owner_id == awaited[r.task_id]

    batch()
    assert_still_serving(coordinator, node, hosted[2], d=D)  # also lets results still in flight arrive
    releases = {tid: r for tid, r in answered.items() if kind(r) in RELEASES}
    # Every boosting share that reached the coordinator, awaited or not: a share first released
    # under a task nobody awaited (a mutated seed task) is the debited original a later task gets again.
    every_share = [r for r in coordinator.results if kind(r) == "boost_share"]
    for owner_id in hosted:
        history = ledger_history(node.ledger, owner_id)
        debited = {h["release_id"].split("#")[0].split(":")[0] for h in history}

        def is_debited(tid: str) -> bool:
            if kind(answered.get(tid)) == "lr_gradient":  # debited under its run's id, one per run
                return gradient_release_id(run_of.get(tid, "")) in {h["release_id"] for h in history}
            if kind(answered.get(tid)) == "nb":  # the same: one report per run
                return nb_release_id(run_of.get(tid, "")) in {h["release_id"] for h in history}
            return tid in debited or any(h["release_id"].startswith(tid) for h in history)

        # a boosting run's share, by its bytes: a repeat must be the debited one
        first_shares = {
            r.boost_share.SerializeToString() for r in every_share if r.owner_id == owner_id and is_debited(r.task_id)
        }
        for tid, r in releases.items():
            if r.owner_id != owner_id or is_debited(tid):
                continue
            # not debited under its own id: only a boosting share sent again (the same bytes as
            # the debited share of its run; owner.local.LocalOwner.released) may be that
            assert kind(r) == "boost_share", f"release {tid} ({kind(r)}) left without a debit: {history}"
        for tid, r in releases.items():
            if r.owner_id == owner_id and kind(r) == "boost_share" and tid not in debited:
                assert r.boost_share.SerializeToString() in first_shares, f"share {tid} is a new draw, never debited"
        assert spent_epsilon(history) <= BUDGET * (1 + 1e-9), (owner_id, history)
        assert all(math.isfinite(h["epsilon"]) for h in history if not h["nonprivate"])
    refused = sum(kind(r) == "refusal" for r in answered.values())
    assert refused > 0, "no mutated task was refused: the fuzzer is not reaching validation"
