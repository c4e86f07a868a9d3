"""An NCC share's data-independent fallback must not carry its owner's row count (a value channel).

The attack: an owner's rows were spent under an earlier id (a node restarted with other shards: the ledger's
``RowsUnused``), so its new id answers the kind's fallback, debited on the id alone. A padded share (``labels="rr"``
or ``"joint"``) carries the public ``work_rows(n, max_owner_rows)`` reports; its fallback was ``n`` midpoint rows of
class 0 (weight 1) padded with ``m - n`` dummies (⊥ under rr, weight 0 under joint), so the reports' labels split
``n`` against ``m - n``: at a large label ε a coordinator read ``n`` off one fallback exactly (33 rows against 64 in
the cell of 64: 31 ⊥ against none), the very count the padding hides in a release from the rows. The fallback of
an owner of ``n`` rows is now its public count of dummies, a function of the length alone (and unbiased: it adds
nothing in expectation to any class's sum or count, where ``m`` rows of class 0 pulled class 0 to the midpoint).
A boosted NCC share's fallback had the same hole (``n`` rows of weight 1 and class 0 among weight-0 padding: 31 ⊥
against none at ε 20 under joint labels) and the same fix (``owner/kinds/boosting.py``, ``_fallback_rows``).

Real owner cores (:class:`~privfed.owner.core.OwnerCore`) over a real ledger, as ``test_timing_fallback.py`` builds
them; the replies through the wire's serde (``differential.skeleton``).
"""

from __future__ import annotations

import numpy as np
import pytest
from differential import skeleton

from privfed.common.bounds import Bounds
from privfed.common.learners.ncc import NccShare, ncc_class_sums
from privfed.common.ledger import Debit, Ledger
from privfed.common.tasks import JointNccShareReply, NccShareReply, NccShareTask, Result, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner
from privfed.proto import serde

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

D, K, BUDGET = 2, 2, 100.0
BOUNDS = Bounds.of(0.0, 1.0, D)


def _spent_owner_answer(n: int, spec: NccShareTask, seed: int = 0):
    """What a real core answers ``spec`` for an owner of ``n`` rows whose rows an earlier id spent (its fallback)."""
    rng = np.random.Generator(np.random.PCG64([seed, n]))
    X, y = rng.uniform(0, 1, (n, D)), rng.integers(0, K, n)
    keys = row_digests(X, y)
    ledger = Ledger(":memory:", epsilon_budget=BUDGET, delta_budget=1e-3)
    ledger.bind_rows("old-0.o00000", keys)
    ledger.debit_many([Debit("old-0.o00000", BUDGET - 1e-6, 0.0, "earlier", "earlier#0")])
    owner = LocalOwner("node-0.o00000", X, y, rng, K, BOUNDS, row_keys=tuple(keys))
    (result,) = OwnerCore([owner], ledger).answer([Task("t", owner.owner_id, "run-1", spec)]).results
    return result.payload, serde.result_to_proto(Result("t", owner.owner_id, result.payload))


def _histogram(payload) -> np.ndarray:
    codes = payload.labels if isinstance(payload, NccShareReply) else payload.reports
    return np.bincount(np.asarray(codes), minlength=2 * K + 1)


@pytest.mark.parametrize(
    "spec",
    [
        NccShareTask("pm", 30.0, "rr", 30.0, K, BOUNDS),  # at ε 30 every label report is its input
        NccShareTask("pm", 30.0, "rr", 30.0, K, BOUNDS, max_owner_rows=48),  # a bound inside the cell
        NccShareTask("pm", 30.0, "joint", 0.0, K, BOUNDS),
    ],
    ids=["rr", "rr-bound-48", "joint"],
)
def test_spent_owners_of_33_and_64_rows_answer_the_same_fallback(spec):
    (a, wire_a), (b, wire_b) = _spent_owner_answer(33, spec), _spent_owner_answer(64, spec)
    assert isinstance(a, NccShareReply | JointNccShareReply), a  # a release (the fallback), not a refusal
    assert skeleton(wire_a) == skeleton(wire_b)
    assert np.array_equal(_histogram(a), _histogram(b)), (_histogram(a), _histogram(b))


def test_an_rr_fallback_adds_nothing_to_the_classes():
    """The fallback's reports are dummies: the debiased class counts of a spent owner's rr share are 0 (±1e-9 at
    ε 30), where ``n`` rows of class 0 added ``n`` to class 0."""
    spec = NccShareTask("pm", 30.0, "rr", 30.0, K, BOUNDS)
    share, _ = _spent_owner_answer(40, spec)
    assert share.labels.shape == (64,)
    _, counts = ncc_class_sums(NccShare(share.reports, share.labels), n_classes=K, d=D, label_rr=spec.label_response())
    assert np.allclose(counts, 0.0, atol=1e-9), counts


def test_one_row_per_owner_a_spent_owner_answers_a_uniform_dummy_as_an_owner_of_no_rows():
    """Under ``max_owner_rows == 1`` (K-ary k-RR, no ⊥) the fallback is the one dummy an owner of no rows sends,
    of a uniform class, whatever ``n``: class 0 every time told that the owner has rows (and that they were spent)."""
    spec = NccShareTask("pm", 30.0, "rr", 30.0, K, BOUNDS, max_owner_rows=1)
    labels = {int(_spent_owner_answer(5, spec, seed)[0].labels[0]) for seed in range(24)}
    assert labels == set(range(K)), labels


@pytest.mark.parametrize("labels", ["joint", "rr"])
def test_spent_owners_of_33_and_64_rows_answer_the_same_boosted_fallback(labels):
    from differential import boost

    from privfed.common.boosting.wire import empty_history
    from privfed.common.tasks import BoostShareTask

    spec = BoostShareTask(boost("ncc", "run-1", epsilon=20.0, labels=labels), empty_history())
    if labels == "joint":  # the joint reports: every one ⊥ (weight 0) at ε 20, whatever n
        (a, _), (b, _) = _spent_owner_answer(33, spec), _spent_owner_answer(64, spec)
        ha, hb = (np.bincount(np.asarray(r.reports), minlength=2 * K + 1) for r in (a, b))
        assert np.array_equal(ha, hb), (ha, hb)  # main: [22 11 0 0 31] against [34 30 0 0 0]
        return
    # rr: the rows' k-RR labels, uniform for a dummy, so random: of 64 reports, class 0 about 32 times (sd 4) for
    # either owner, over 12 owners each (sd of the mean 1.2); n rows of class 0 among the dummies gave 48.5 and 64
    for n in (33, 64):
        zeros = [np.count_nonzero(np.asarray(_spent_owner_answer(n, spec, seed)[0].labels) == 0) for seed in range(12)]
        assert abs(np.mean(zeros) - 32) < 5, (n, zeros)
