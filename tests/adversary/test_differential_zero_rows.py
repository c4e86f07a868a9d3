"""Audit 7: an owner of no rows (a shard left empty) against an owner of one row, in process.

Zero and one row share the first public row cell (:func:`privfed.common.work_rows.work_rows`), so nothing
an owner answers may tell them apart but its released values. Before this audit each kind took a shortcut
for no rows (an early return, an exception into the fallback, a validation skipped) and the no-clock work
trace of ``differential.py`` showed it: a coordinator timing one answer learned whether the owner holds any
row at all. The fix (:mod:`privfed.owner.compute`, "Timing"; :attr:`privfed.owner.local.LocalOwner.work_owner`)
computes a one-row owner's work on a public stand-in row, drops it, and answers the kind's fallback of no
rows, which is the kind's mechanism on an empty set: the release of an owner of no rows is what it was.

An NCC share under ``labels="rr"`` was left out while its length was the row count; it carries the public cell's
count of reports now (``common/learners/ncc_rr.py``: one report for no rows and for one, a ⊥ dummy or the row).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from differential import BOUNDS, CASE_IDS, CASES, XB, YB, D, K, skeleton, work_trace
from scipy import stats

from privfed.common.ledger import Ledger
from privfed.common.tasks import Result, Task
from privfed.owner.core import OwnerCore
from privfed.owner.kinds import kind_of
from privfed.owner.local import LocalOwner
from privfed.proto import serde

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

X0, Y0 = np.zeros((0, D)), np.zeros(0, dtype=np.int64)
X1, Y1 = XB[:1], YB[:1]
ZERO_IDS = CASE_IDS
#: Cases the owner refuses before it reads a row (its schema, its budget, a public limit): nothing computed.
REFUSED = {
    ("ncc_share", "over-budget"),
    ("ncc_share", "other-schema"),
    ("ncc_share", "other-classes"),
    ("ncc_share", "infinite"),
    ("lr_share", "huge-bound"),
}
#: The accept round's answer releases nothing, so it has no fallback (its work is compared above all the same).
RELEASE_IDS = [c for c in CASE_IDS if c not in REFUSED and c[0] != "join"]


def _first_difference(ta: list, tb: list) -> tuple:
    return next((i, a, b) for i, (a, b) in enumerate(zip(ta + [None], tb + [None])) if a != b)


@pytest.mark.parametrize(("kind", "case"), ZERO_IDS, ids=[f"{k}/{c}" for k, c in ZERO_IDS])
def test_an_owner_of_no_rows_does_a_one_row_owners_work(kind, case):
    """The calls an owner's answer makes (``work_trace``: no clock) are the same for no rows and for one row,
    after a warm-up answer of each (module caches), and so is the reply's wire skeleton (``differential.py``:
    everything but the released values)."""
    make = CASES[kind][case]
    work_trace(X0, Y0, make("run-1"))
    work_trace(X1, Y1, make("run-1"))
    (t0, p0), (t1, p1) = work_trace(X0, Y0, make("run-1")), work_trace(X1, Y1, make("run-1"))
    assert t0 and type(p0) is type(p1), (p0, p1)
    assert t0 == t1, _first_difference(t0, t1)
    s0, s1 = (skeleton(serde.result_to_proto(Result("t", "node-0.o00000", p))) for p in (p0, p1))
    assert s0 == s1, _first_difference(s0, s1)


def _owner(X: np.ndarray, y: np.ndarray, seed: int) -> LocalOwner:
    return LocalOwner("node-0.o00000", X, y, np.random.Generator(np.random.PCG64(seed)), K, BOUNDS)


def _arrays(release) -> list[np.ndarray]:
    if isinstance(release, np.ndarray):
        return [release]
    return [np.asarray(getattr(release, f.name)) for f in dataclasses.fields(release)]


@pytest.mark.parametrize(("kind", "case"), RELEASE_IDS, ids=[f"{k}/{c}" for k, c in RELEASE_IDS])
def test_the_fallback_of_no_rows_is_the_release_of_no_rows(kind, case):
    """What an owner of no rows answers now, its kind's fallback of no rows, is what it answered before: the
    kind's computation on its empty rows, draw for draw from one seed (so in distribution too); a boosted
    stump share, whose computation could not encode no rows (it works on the row cell's one row of weight 0 since
    audit 12), answered (and answers) the fallback of the midpoint."""
    spec = CASES[kind][case]("run-1")
    owner_kind = kind_of(spec)
    task = Task("t", "node-0.o00000", "run-1", spec)
    for seed in (1, 2):
        empty = _owner(X0, Y0, seed)
        fallback = _arrays(owner_kind.fallback(spec, empty.public, 0, np.random.Generator(np.random.PCG64(seed))))
        if case.startswith("stump"):
            before = owner_kind.fallback(spec, empty.public, 1, np.random.Generator(np.random.PCG64(seed)))
        else:
            before = owner_kind.compute(task, spec, empty)
        assert [a.shape for a in fallback] == [b.shape for b in _arrays(before)]
        assert all(np.array_equal(a, b) for a, b in zip(fallback, _arrays(before), strict=True)), (fallback, before)


#: A few kinds' releases through the whole owner core, many seeds: one coordinate's distribution.
STATISTICAL = [("lr_gradient", "pm"), ("ncc_share", "joint-laplace"), ("boost_share", "lr"), ("pca_share", "ball-k1")]


def _core_answers(X: np.ndarray, y: np.ndarray, kind: str, case: str, seeds: range) -> np.ndarray:
    out = []
    for seed in seeds:
        owner = _owner(X, y, seed)
        core = OwnerCore([owner], Ledger(":memory:", epsilon_budget=1e4, delta_budget=1e-3))
        (result,) = core.answer([Task("t", owner.owner_id, "run-1", CASES[kind][case]("run-1"))]).results
        out.append(np.concatenate([a.ravel() for a in _arrays(result.payload)]).astype(np.float64))
    return np.array(out)


def _agreement(answered: np.ndarray, kind: str, case: str) -> float:
    """Bonferroni-corrected least two-sample Kolmogorov-Smirnov p-value of ``answered`` against the kind's
    computation on no rows (200 other fixed seeds), over the released coordinates that vary."""
    spec = CASES[kind][case]("run-1")
    task = Task("t", "node-0.o00000", "run-1", spec)
    computed = []
    for seed in range(10_000, 10_200):
        release = kind_of(spec).compute(task, spec, _owner(X0, Y0, seed))
        computed.append(np.concatenate([a.ravel() for a in _arrays(release)]).astype(np.float64))
    computed_arr = np.array(computed)
    assert answered.shape == computed_arr.shape
    varying = [j for j in range(answered.shape[1]) if np.ptp(computed_arr[:, j]) > 0]
    assert varying, "nothing random released"
    return min(stats.ks_2samp(answered[:, j], computed_arr[:, j]).pvalue for j in varying) * len(varying)


@pytest.mark.parametrize(("kind", "case"), STATISTICAL, ids=[f"{k}/{c}" for k, c in STATISTICAL])
def test_an_owner_of_no_rows_releases_what_the_mechanism_gives_no_data(kind, case):
    """The core's answer for an owner of no rows (stand-in work, then the fallback) against the kind's
    computation on no rows, 200 fixed seeds each (deterministic): every released coordinate's two samples
    agree (two-sample Kolmogorov-Smirnov, Bonferroni over the coordinates, level 1e-3)."""
    assert _agreement(_core_answers(X0, Y0, kind, case, range(200)), kind, case) > 1e-3


@pytest.mark.parametrize(("kind", "case"), STATISTICAL[1::2], ids=[f"{k}/{c}" for k, c in STATISTICAL[1::2]])
def test_the_comparison_tells_one_row_from_none(kind, case):
    """Positive control: the same comparison rejects an owner of one row at the box's corner (the kinds whose
    release at ε = 1 shows one row within 200 draws: the NCC sums and the PCA count)."""
    one = _core_answers(np.ones((1, D)), np.ones(1, dtype=np.int64), kind, case, range(200))
    assert _agreement(one, kind, case) < 1e-3


def test_the_stand_in_follows_the_rows_held_now():
    """An owner's rows set after it was made decide whose rows are computed from: never a stand-in's row in
    place of real rows (a release from the wrong rows), nor no work for rows taken away."""
    owner = _owner(X0, Y0, 1)
    assert owner.work_owner is not owner and owner.work_owner.n_rows == 1
    assert owner.work_owner.boost_applied is owner.boost_applied and owner.work_owner.rng is owner.rng
    owner.X, owner.y = X1, Y1
    assert owner.work_owner is owner
    owner.X, owner.y = X0, Y0
    assert owner.work_owner is not owner and owner.work_owner.n_rows == 1
