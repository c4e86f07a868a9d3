"""A boosting owner works on its rows' public cell (audit 12: ``cell_rows``, zero rows of weight 0; its SAMME weights
on the cell, ``owner/history.py``), and releases, for a fixed seed, bit for bit what the steps on its ``n`` rows
alone release (``privfed.common.boosting.owner``, as the in-process simulation calls them): every share encoding,
every base learner, an evaluation, and a share's fallback (the midpoint's rows, now on the cell too)."""

import dataclasses

import numpy as np
import pytest

from privfed.common.boosting import owner as steps
from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import BoostConfig, BoostHistory, KeptRound, at_round, empty_history, owner_weights
from privfed.common.bounds import Bounds
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.learners.samme import max_alpha
from privfed.common.learners.stump import Stump, thresholds
from privfed.common.tasks import BoostEvaluateTask, BoostShareTask, Task, share_reply
from privfed.common.tasks.steps import RingSpec
from privfed.common.work_rows import work_rows
from privfed.owner.kinds import kind_of
from privfed.owner.kinds.shares import midpoint_rows
from privfed.owner.local import LocalOwner

D, K = 2, 2
BOUNDS = Bounds.of(0.0, 1.0, D)
COUNTS = (1, 3, 37, 64)  # one row, inside cells, at a cell's top
SHARES = {
    **{f"stump-{e}": dict(base="stump", stump_encoding=e) for e in ("signs", "cells", "pair", "table")},
    "ncc-rr": dict(base="ncc"),
    "ncc-joint": dict(base="ncc", labels="joint"),
    "ncc-joint-bound": dict(base="ncc", labels="joint", max_owner_rows=3),
    "lr": dict(base="lr"),
}


def config(base: str, **kw) -> BoostConfig:
    params = BoostingParams(epsilon=1.0, n_classes=K, bounds=BOUNDS, n_rounds=3, group_size=1, n_bins=4, base=base)
    return BoostConfig("run-1", dataclasses.replace(params, **kw))


def kept(base: str, n_bins: int = 4) -> BoostHistory:
    """One kept learner at the largest α SAMME gives: the weights of the rows it misses move."""
    learner = {
        "stump": lambda: Stump(0, 2, float(thresholds(BOUNDS, n_bins)[0, 1]), (0, 1), 0.3),
        "ncc": lambda: NearestCentroidModel(np.array([[0.2, 0.8], [0.7, 0.3]]), np.arange(K)),
        "lr": lambda: LinearModel(np.array([[1.5, -2.0]]), np.array([0.1]), BOUNDS),
    }[base]()
    return at_round(BoostHistory((KeptRound(learner, max_alpha(K), 3.0, 10.0),), 1), 1)


def owner_of(n: int) -> LocalOwner:
    rng = np.random.default_rng(n)
    X, y = rng.uniform(-0.1, 1.1, (n, D)), rng.integers(0, K, n)
    return LocalOwner("node-0.o00000", X, y, np.random.Generator(np.random.PCG64(7)), K, BOUNDS)


def fields(reply) -> list:
    return [np.asarray(getattr(reply, f.name)) for f in dataclasses.fields(reply)]


def unpadded_share(cfg: BoostConfig, X, y, w, rng, count=None):
    plan = cfg.releases
    X, y, w = steps.ncc_release_rows(plan, X, y, w, rng=rng, count=count)
    return share_reply(plan, steps.ordered(plan, steps.share(plan, X, y, w, rng=rng), rng=rng))


@pytest.mark.parametrize("name", list(SHARES))
@pytest.mark.parametrize("with_history", [False, True])
def test_a_share_and_its_fallback_are_the_unpadded_ones(name, with_history):
    kw = dict(SHARES[name])
    cfg = config(kw.pop("base"), **kw)
    history = kept(cfg.params.base) if with_history else empty_history()
    spec = BoostShareTask(cfg, history)
    kind = kind_of(spec)
    for n in COUNTS:
        owner = owner_of(n)
        got = kind.compute(Task("t", owner.owner_id, "run-1", spec), spec, owner)
        w = owner_weights(history, owner.X, owner.y)
        expected = unpadded_share(cfg, owner.X, owner.y, w, np.random.Generator(np.random.PCG64(7)))
        for g, e in zip(fields(got), fields(expected), strict=True):
            np.testing.assert_array_equal(g, e)
        # the fallback: the midpoint, class 0, a public weight (one row for a stump share, none for LR: audit 15,
        # n rows of weight 1 told n); an NCC share's, no rows and its public count of weight-0 dummies (audit 13)
        rows = 1 if cfg.params.base == "stump" else 0
        fallback = kind.fallback(spec, owner.public, n, np.random.default_rng(3))
        rng = np.random.default_rng(3)
        if cfg.params.base == "ncc":
            count = work_rows(n, cfg.params.max_owner_rows)
            no_rows = np.zeros((0, D)), np.zeros(0, dtype=np.int64), np.zeros(0)
            expected = unpadded_share(cfg, *no_rows, rng, count=count)
            assert expected.reports.shape[0] == count and not np.any(
                steps.ncc_release_rows(cfg.releases, *no_rows, rng=np.random.default_rng(3), count=count)[2]
            )  # dummies alone, of weight 0
        else:
            X = midpoint_rows(BOUNDS, rows)
            expected = unpadded_share(cfg, X, np.zeros(rows, dtype=np.int64), np.ones(rows), rng)
        for g, e in zip(fields(fallback), fields(expected), strict=True):
            np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("base", ["stump", "ncc", "lr"])
def test_an_evaluation_is_the_unpadded_one(base):
    cfg, history = config(base), kept(base)
    learner = history.kept[0].learner
    spec = BoostEvaluateTask(cfg, history, learner, RingSpec("s", ("node-0.o00000",), 24, 2, 8.0, (), {}))
    for n in COUNTS:
        owner = owner_of(n)
        got = kind_of(spec).compute(Task("t", owner.owner_id, "run-1", spec), spec, owner)
        sums = steps.evaluation_sums(cfg.releases, learner, owner.X, owner.y, owner_weights(history, owner.X, owner.y))
        expected = steps.evaluation_release(cfg.releases, np.array([sums]), rng=np.random.Generator(np.random.PCG64(7)))
        np.testing.assert_array_equal(got, expected[0])
