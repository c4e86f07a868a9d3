"""A boosted stump or LR share's fallback tells nothing of the owner's row count (audit 15).

An owner answers a task its rows cannot afford (``RowsUnused``: spent under an earlier id after a re-shard, a
rename or a restart, or kept out by its policy) with its kind's data-independent fallback, debited on the id
alone: the rows' accounts are not charged (DESIGN, release discipline 5: the budget follows the rows). A boosted
share's fallback was ``n`` midpoint rows of weight 1: a stump encoding picked a row with probability
``min(n, B) / B`` and an LR fit's intercept grew with ``n``. A sweep of every release's calibration (stop 48)
drove renamed ids over the same spent rows, 3 against 4 of them, and told them apart at advantage 0.67 where
the rows' ε = 1 allows 0.46: free releases about rows whose budget was gone. Audit 13 had closed the same
channel for NCC shares (``test_ncc_fallback_row_count.py``).

Now the fallback's weight is public (one row for a stump share, none for LR). Differential and exact: through a
real :class:`~privfed.owner.core.OwnerCore` and the wire's encoding, an owner of 3 spent rows and one of the
same rows and a fourth (one cell), the same generator: the same bytes for every stump encoding and for LR. The
positive control puts the old fallback back.
"""

from __future__ import annotations

import numpy as np
import pytest

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import BoostConfig, empty_history
from privfed.common.bounds import Bounds
from privfed.common.learners.stump_encodings import STUMP_ENCODINGS
from privfed.common.ledger import Debit, Ledger
from privfed.common.tasks import BoostShareTask, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.kinds import boosting as boosting_kind
from privfed.owner.local import LocalOwner
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

D, K = 2, 2
BOUNDS = Bounds.of(0.0, 1.0, D)
X4 = np.array([[0.2, 0.8], [0.7, 0.3], [0.5, 0.1], [0.9, 0.9]])
Y4 = np.array([0, 1, 0, 1])
CASES = [("stump", encoding) for encoding in STUMP_ENCODINGS] + [("lr", None)]
SEEDS = 8


def _spec(base: str, encoding: str | None, run: str) -> BoostShareTask:
    params = BoostingParams(
        base=base,
        epsilon=1.0,
        n_classes=K,
        bounds=BOUNDS,
        n_rounds=3,
        group_size=1,
        weight_bound=4.0,  # what default_weight_bound gives owners of 4 rows
        budget_split="owners",
        stump_encoding=encoding,
        n_sampled=1 if encoding in ("signs", "cells") else None,
    )
    return BoostShareTask(BoostConfig(run, params), empty_history())


def _fallback_bytes(n: int, base: str, encoding: str | None, seed: int) -> bytes:
    """The reply of a fresh id over ``n`` rows an earlier id spent, to a boosting share, as it goes on the wire."""
    keys = row_digests(X4[:n], Y4[:n])
    ledger = Ledger(":memory:", epsilon_budget=2.0)
    ledger.bind_rows("old-0.o00000", keys)
    ledger.debit_many([Debit("old-0.o00000", 2.0, 0.0, "earlier", "earlier#0")])
    owner = LocalOwner(
        "node-1.o00000", X4[:n], Y4[:n], np.random.Generator(np.random.PCG64(seed)), K, BOUNDS, row_keys=tuple(keys)
    )
    core = OwnerCore([owner], ledger)
    task = Task("t0", owner.owner_id, "run-0", _spec(base, encoding, "run-0"))
    wire, refused = serde.task_or_refusal(pb.Task.FromString(serde.task_to_proto(task).SerializeToString()))
    assert refused is None
    (result,) = core.answer([wire]).results
    assert type(result.payload).__name__ != "Refusal", result.payload
    assert ledger.spent(owner.owner_id).epsilon == pytest.approx(1.0)  # debited on the id; the rows had nothing
    return serde.result_to_proto(result).SerializeToString()


@pytest.mark.parametrize(("base", "encoding"), CASES)
def test_the_fallback_of_spent_rows_is_the_same_for_3_and_4_of_them(base, encoding):
    for seed in range(SEEDS):
        assert _fallback_bytes(3, base, encoding, seed) == _fallback_bytes(4, base, encoding, seed), seed


def test_positive_control_the_old_fallback_told_the_count(monkeypatch):
    """``n_rows`` rows of weight 1, as before audit 15: LR's intercept, and a stump's picked row, move with the
    count (PM reports one sampled coordinate, a stump encoding one sampled cell: some seeds show it)."""
    from privfed.common.work_rows import work_rows, zero_padding
    from privfed.owner.kinds.shares import midpoint_rows

    def old(spec, public, n_rows):
        X = midpoint_rows(public.bounds, work_rows(n_rows))
        rows = max(n_rows, 1) if spec.config.params.base == "stump" else n_rows
        return X, np.zeros(X.shape[0], dtype=np.int64), zero_padding(np.ones(X.shape[0]), rows, axis=-1)

    monkeypatch.setattr(boosting_kind, "_fallback_rows", old)
    for base, encoding in (("lr", None), ("stump", "table")):
        differ = [_fallback_bytes(3, base, encoding, s) != _fallback_bytes(4, base, encoding, s) for s in range(SEEDS)]
        assert any(differ), (base, encoding)
