"""Issue 9, item 6: no exact row count leaves an owner.

* ``RegisterNode`` carries no row count: the wire schema has no such field, and what the honest
  node actually sent holds nothing beyond the owner id and its signed ring key.
* FedDPDR weights use a DP count (contract 7): four owners with the SAME number of rows report
  counts that are noisy (not all equal to the true n), each count is a ledger entry of its own,
  and the SVM share carries no count at all. A coordinator asking for the count at ε = ∞ (the
  exact count) or without a count ε is refused, and nothing is debited for it.
"""

import math

import numpy as np
from hostile import assert_still_serving, bounds_matrix, kind, ledger_history, matrix, pb, refusal_code, spent_epsilon

D, ROWS_PER_OWNER, N_OWNERS = 3, 2, 4


def _known_fields_only(msg):
    """A copy of ``msg`` without unknown fields: serialises differently iff ``msg`` had some."""
    clean = type(msg)()
    clean.CopyFrom(msg)
    clean.DiscardUnknownFields()
    return clean


def _pca(task_id, owner_id, count_epsilon):
    return pb.Task(
        task_id=task_id,
        owner_id=owner_id,
        round_id="pca",
        pca_share=pb.PcaShareTask(
            epsilon=0.3,
            delta=1e-4,
            k=1,
            bounds=bounds_matrix(D),
            count_epsilon=count_epsilon,
            scaling=pb.ROW_SCALING_BALL,
        ),
    )


def _svm(task_id, owner_id, U):
    return pb.Task(
        task_id=task_id,
        owner_id=owner_id,
        round_id="svm",
        svm_share=pb.SvmShareTask(
            epsilon=0.3,
            lam=0.1,
            n_classes=2,
            bounds=bounds_matrix(D),
            subspace=matrix(U),
            model=pb.SVM_MODEL_OVR_HUBER,
            scaling=pb.ROW_SCALING_BALL,
            rows=8,  # ovr-huber's public row count
        ),
    )


def test_registration_carries_no_row_count(coordinator, owners):
    rng = np.random.Generator(np.random.PCG64(1))
    node = owners("owner-0", rng.uniform(size=(5, D)), np.array([0, 1, 0, 1, 1]))  # 3 and 2 rows
    assert "n_rows" not in pb.OwnerInfo.DESCRIPTOR.fields_by_name
    assert not any("row" in f or "count" in f for f in pb.RegisterNodeRequest.DESCRIPTOR.fields_by_name)
    request = coordinator.registrations[0].request
    for info in request.owners:
        assert info.SerializeToString() == _known_fields_only(info).SerializeToString(), (
            "the registration carried a field this schema does not know"
        )
        assert {fd.name for fd, _ in info.ListFields()} <= {"owner_id", "x25519_public_key", "key_signature"}
    assert_still_serving(coordinator, node, node.owner_ids[0], d=D)


def test_feddpdr_counts_are_noisy_and_debited(coordinator, owners):
    rng = np.random.Generator(np.random.PCG64(2))
    X = rng.uniform(size=(ROWS_PER_OWNER * N_OWNERS, D))
    y = np.tile([0, 1], N_OWNERS)
    node = owners("owner-0", X, y)
    ids = node.owner_ids
    results = coordinator.run([_pca(f"pca-{i}", o, 0.1) for i, o in enumerate(ids)])
    assert all(kind(results[f"pca-{i}"]) == "pca_share" for i in range(N_OWNERS)), results
    shares = [results[f"pca-{i}"].pca_share for i in range(N_OWNERS)]
    assert "n_rows" not in pb.PcaShare.DESCRIPTOR.fields_by_name
    counts = [s.noisy_count for s in shares]
    # geometric noise at ε = 0.1 is 0 with probability 0.05: four exact counts would be a leak
    assert not all(c == ROWS_PER_OWNER for c in counts), f"every owner reported its exact count: {counts}"
    for o in ids:
        history = ledger_history(node.ledger, o)
        count_entries = [h for h in history if "count" in h["purpose"]]
        assert len(count_entries) == 1 and count_entries[0]["epsilon"] == 0.1, history

    # the SVM phase carries no count at all, and spends no second count debit
    U = np.array([[1.0], [0.0], [0.0]])
    svm = coordinator.run([_svm(f"svm-{i}", o, U) for i, o in enumerate(ids)])
    assert all(kind(svm[f"svm-{i}"]) == "svm_share" for i in range(N_OWNERS)), svm
    assert set(pb.SvmShare.DESCRIPTOR.fields_by_name) == {"coef"}
    for o in ids:
        assert len([h for h in ledger_history(node.ledger, o) if "count" in h["purpose"]]) == 1

    # asking for the exact count, or for a count without saying its ε, is refused and costs nothing
    before = {o: spent_epsilon(ledger_history(node.ledger, o)) for o in ids[:2]}
    bad = coordinator.run([_pca("exact", ids[0], math.inf), _pca("noeps", ids[1], 0.0)])
    assert kind(bad["exact"]) == "refusal" and refusal_code(bad["exact"]) == "budget_exceeded", bad["exact"]
    assert kind(bad["noeps"]) == "refusal" and refusal_code(bad["noeps"]) == "invalid_task", bad["noeps"]
    assert {o: spent_epsilon(ledger_history(node.ledger, o)) for o in ids[:2]} == before
    assert_still_serving(coordinator, node, ids[2], d=D)
