"""One row added to an owner moves its ``ovr-huber`` release by no more than the ε it debits (audit 14).

The finding: FedDPDR's one-vs-rest Huber SVMs (seed 004 Alg. 3; Chaudhuri, Monteleoni, Sarwate 2011, Alg. 2)
calibrated the objective's noise with the owner's row count ``n``, and regularised with ``n lam`` and divided
the noise by ``n``. Theorem 9 covers replace-one neighbours, where ``n`` is fixed; privfed keeps ``n`` private
(it leaves an owner only through a debited DP count), so add/remove-one is the relation that counts, and there
the release is roughly ``-b / (n lam)``: its size told 3 rows from 4. A hostile coordinator sending the same
task (ε = 0.1, ``lam`` = 100, inside the public range) to an owner of 3 rows and to one of the same 3 rows and
one more, reading one release each, guessed which at an advantage of 0.217, where ε-DP allows
``(e^ε - 1) / (e^ε + 1)`` = 0.050.

Now the objective takes a public ``m`` in place of ``n`` (the task's ``rows``,
:func:`privfed.common.mechanisms.objective.privacy_adjustment`). The two owners below answer the same task
through a real :class:`~privfed.owner.core.OwnerCore`, over the wire's encoding, each release debited:

* no clock: the calibration each owner's mechanism uses (noise rate, ``Delta``, ``m``) is the same for owners
  of 3, 4 and 100 rows;
* statistical: the same threshold test's advantage is within ε-DP's bound (plus four standard errors), and a
  positive control, a task whose ``m`` is each owner's own count (the paper's calibration), exceeds it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.ledger import Ledger
from privfed.common.mechanisms import objective
from privfed.common.tasks import SvmShareReply, SvmShareTask, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

D, K = 2, 2
BOUNDS = Bounds.of(0.0, 1.0, D)
EPSILON, LAM = 0.1, 100.0
X3, Y3 = np.array([[0.2, 0.8], [0.7, 0.3], [0.5, 0.5]]), np.array([0, 1, 0])
X4, Y4 = np.vstack([X3, [[0.9, 0.9]]]), np.append(Y3, 1)  # the same rows and one more: add/remove neighbours
RELEASES = 1500


def _owner(X: np.ndarray, y: np.ndarray, seed: int) -> tuple[LocalOwner, OwnerCore]:
    owner = LocalOwner(
        "node-0.o00000", X, y, np.random.Generator(np.random.PCG64(seed)), K, BOUNDS, row_keys=tuple(row_digests(X, y))
    )
    return owner, OwnerCore([owner], Ledger(":memory:", epsilon_budget=1e9))


def _releases(X: np.ndarray, y: np.ndarray, seed: int, rows: int, count: int) -> np.ndarray:
    """``count`` releases of one owner, each a task of its own run (debited each time), as the wire carries it."""
    owner, core = _owner(X, y, seed)
    spec = SvmShareTask(EPSILON, LAM, K, BOUNDS, None, 0.0, "ovr-huber", "ball", rows)
    out = []
    for i in range(count):
        wire = pb.Task.FromString(serde.task_to_proto(Task(f"t{i}", owner.owner_id, f"r{i}", spec)).SerializeToString())
        task, refused = serde.task_or_refusal(wire)
        assert refused is None
        (result,) = core.answer([task]).results
        assert isinstance(result.payload, SvmShareReply), result.payload
        out.append(result.payload.coef)
    assert core.ledger.spent(owner.owner_id).epsilon == pytest.approx(EPSILON * count)
    return np.asarray(out)


def _advantage(a: np.ndarray, b: np.ndarray) -> float:
    """The advantage of one release's test "the norm is above the pooled median, so the owner of 3 rows"."""
    na, nb = (np.linalg.norm(x.reshape(len(x), -1), axis=1) for x in (a, b))
    t = float(np.median(np.concatenate([na, nb])))
    return float(np.mean(na > t) - np.mean(nb > t))


def test_the_calibration_reads_no_row_count(monkeypatch):
    seen: list[tuple[float, float, int]] = []
    real = objective.ObjectivePerturbation.privatize

    def recording(self, *args, **kwargs):
        seen.append((*self.adjustment, self.rows))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(objective.ObjectivePerturbation, "privatize", recording)
    rng = np.random.default_rng(3)
    X100, y100 = rng.uniform(0, 1, (100, D)), rng.integers(0, K, 100)
    for X, y in ((X3, Y3), (X4, Y4), (X100, y100)):
        _releases(X, y, 5, 7, 1)
    assert seen and len(set(seen)) == 1, seen
    seen.clear()  # positive control: the recorder sees a calibration that moves with the task's m
    for m in (3, 4):
        _releases(X3, Y3, 5, m, 1)
    assert len(set(seen)) == 2, seen


def test_one_row_added_moves_an_ovr_release_within_its_epsilon():
    bound = (math.exp(EPSILON) - 1) / (math.exp(EPSILON) + 1)
    slack = 4 * math.sqrt(0.5 / RELEASES)  # four standard errors of a difference of two proportions near 1/2
    public = _advantage(_releases(X3, Y3, 11, 1, RELEASES), _releases(X4, Y4, 12, 1, RELEASES))
    assert abs(public) <= bound + slack, f"advantage {public:.3f} > {bound:.3f} + {slack:.3f}"
    own = _advantage(_releases(X3, Y3, 11, 3, RELEASES), _releases(X4, Y4, 12, 4, RELEASES))
    assert own > bound + slack, f"positive control: the paper's calibration (m = n) at advantage {own:.3f}"
