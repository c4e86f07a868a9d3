"""The owner applies a boosting history incrementally (issue 10, "a typed wire"): per (run, owner)
a node keeps the SAMME weights after the rounds it applied and the digest of that prefix; a task
applies only its new rounds, a history that rewrites an applied round is refused with the fixed
``invalid_task`` text, a restarted node recomputes from the full history, and every learner is
still checked against the run's public configuration. Real owners, real ledger, tasks through
the real serde."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import (
    BoostHistory,
    at_round,
    config_to_dict,
    empty_history,
    owner_weights,
    with_round,
)
from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.learners.ncc import split_label_budget
from privfed.common.learners.stump import Stump, thresholds
from privfed.common.ledger import Ledger
from privfed.common.tasks import REFUSAL_TEXTS, BoostShareReply, BoostShareTask, Refusal, Task
from privfed.common.work_rows import cell_rows, work_rows
from privfed.owner import history as boosting
from privfed.owner.core import handle_batch
from privfed.owner.history import APPLIED_RUNS, HistoryRewritten, applied_digest, check_history
from privfed.owner.history import history_weights as cell_weights
from privfed.owner.local import LocalOwner
from privfed.proto import serde

BOUNDS = Bounds.of(0.0, 1.0, 3)
N_BINS = 4


def _stump(feature: int, b: int, leaves=(0, 1)) -> Stump:
    return Stump(feature, b, float(thresholds(BOUNDS, N_BINS)[feature, b - 1]), leaves, 0.25)


def _owner(seed: int = 0, n: int = 40) -> LocalOwner:
    rng = np.random.Generator(np.random.PCG64(seed))
    X = rng.uniform(0.0, 1.0, (n, 3))
    y = ((X[:, 0] + 0.3 * rng.standard_normal(n)) > 0.5).astype(np.int64)
    return LocalOwner(f"owner-0.o{seed:05d}", X, y, np.random.Generator(np.random.PCG64(seed + 100)), 2, BOUNDS)


def history_weights(owner: LocalOwner, config, history) -> np.ndarray:
    """The owner's SAMME weights on its rows: those on its cell (owner/history.py) less the padding, whose are 0."""
    w = cell_weights(owner, config, history, *cell_rows(owner.X, owner.y))
    assert w.shape == (work_rows(owner.n_rows),) and not np.any(w[owner.n_rows :])
    return w[: owner.n_rows]


def _config(run: str = "run-1", **kw):
    kw = {"epsilon": 2.0, "n_classes": 2, "bounds": BOUNDS, "n_rounds": 6, "n_bins": N_BINS} | kw
    return config_to_dict(BoostingParams(**kw), run)


def _history(k: int, *, alpha0: float = 0.8) -> BoostHistory:
    """k kept rounds of distinct stumps and totals (round 0's α = ``alpha0``), sent with round k."""
    rounds = [
        (_stump(0, 2), alpha0, 9.0, 40.0),
        (_stump(1, 1, (1, 0)), 0.5, 12.0, 41.0),
        (_stump(2, 3), 0.3, 15.0, 39.5),
    ]
    h = empty_history()
    for learner, alpha, e, w in rounds[:k]:
        h = with_round(h, learner, alpha, e, w)
    return at_round(h, k)


def _wire(spec):
    """``spec`` as an owner node receives it: encoded and decoded by the real serde."""
    return serde.task_from_proto(serde.task_to_proto(Task("t", "o", "r", spec))).spec


@pytest.fixture
def applied_rounds(monkeypatch):
    """How many rounds each weight computation applies (the real function, counted)."""
    from privfed.common.boosting import wire

    counts: list[int] = []
    real = wire.apply_rounds

    def counting(w, rounds, X, y):
        counts.append(len(rounds))
        return real(w, rounds, X, y)

    monkeypatch.setattr(wire, "apply_rounds", counting)
    return counts


def test_incremental_weights_equal_the_full_replay_and_apply_only_new_rounds(applied_rounds):
    owner, config = _owner(), _config()
    histories = [_wire(BoostShareTask(config, _history(k))).history for k in range(4)]
    weights = [history_weights(owner, config, h) for h in histories]
    history_weights(owner, config, _history(3))  # a re-formed ring: same history, nothing to apply
    assert applied_rounds == [0, 1, 1, 1, 0]  # the full replay would be 0, 1, 2, 3, 3
    for h, w in zip(histories, weights):
        np.testing.assert_array_equal(w, owner_weights(h, owner.X, owner.y))  # bit for bit
    assert not np.allclose(weights[-1], 1.0)  # the rounds did move the weights


def test_a_restarted_node_recomputes_from_the_full_history(applied_rounds):
    config = _config()
    before = _owner()
    for k in (1, 3):
        history_weights(before, config, _history(k))
    restarted = _owner()  # same rows, no cache
    np.testing.assert_array_equal(
        history_weights(restarted, config, _history(3)), history_weights(before, config, _history(3))
    )
    assert applied_rounds == [1, 2, 3, 0]


@pytest.mark.parametrize(
    "later",
    [
        _history(3, alpha0=0.81),  # round 0's α rewritten
        _history(1),  # fewer rounds than already applied
        BoostHistory(tuple(reversed(_history(2).kept)), 2),  # the same rounds, reordered
    ],
    ids=["alpha-rewritten", "shorter", "reordered"],
)
def test_a_history_that_rewrites_applied_rounds_is_refused_with_the_fixed_text(tmp_path, later):
    owner = _owner()
    config = _config()
    applied = history_weights(owner, config, _history(2)).copy()  # what an evaluation in round 2 applied
    with pytest.raises(HistoryRewritten):
        history_weights(owner, config, later)
    np.testing.assert_array_equal(owner.boost_applied[config.run_id].weights[: owner.n_rows], applied)  # untouched
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=10.0)
    task = Task("share", owner.owner_id, config.run_id, _wire(BoostShareTask(config, later)))
    (result,) = handle_batch([task], {owner.owner_id: owner}, ledger)
    assert result.payload == Refusal("invalid_task", REFUSAL_TEXTS["invalid_task"])  # no detail at all
    assert ledger.history(owner.owner_id) == []
    # the node keeps serving the run: the honest continuation is answered
    task = Task("share-2", owner.owner_id, config.run_id, _wire(BoostShareTask(config, _history(3))))
    (result,) = handle_batch([task], {owner.owner_id: owner}, ledger)
    assert isinstance(result.payload, BoostShareReply)


def test_another_config_under_the_same_run_id_does_not_extend_the_history():
    owner = _owner()
    history_weights(owner, _config(), _history(1))
    with pytest.raises(HistoryRewritten):
        history_weights(owner, _config(eval_fraction=0.5), _history(2))
    history_weights(owner, _config(run="run-2", eval_fraction=0.5), _history(2))  # another run: fine


def test_a_history_passes_its_check_once_for_its_objects_only():
    """A node checks a round's decoded history once for the tasks that share it (issue 27); what it keeps
    must not let another history, or the same rounds under another run's config, skip the check: a history
    that fails is refused for every task, and a passed check covers only the same config and rounds."""
    config = _config()
    off_grid = Stump(0, 2, 0.4999, (0, 1), 0.25)
    bad = at_round(with_round(_history(2), off_grid, 0.2, 10.0, 40.0), 3)
    for _ in range(3):  # a failure is never kept as a pass
        with pytest.raises(ConfigError, match="public threshold"):
            check_history(None, config, bad)
    good = _history(3)
    check_history(None, config, good)
    check_history(None, config, good)  # the same objects: the same answer
    with pytest.raises(ConfigError, match="public threshold"):  # after a pass, another history is checked
        check_history(None, config, bad)
    with pytest.raises(ConfigError):  # the passed rounds under a config whose thresholds they miss
        check_history(None, _config(n_bins=3), good)
    with pytest.raises(HistoryRewritten):  # the digest is the config's too, whatever was kept before
        check_history((1, boosting.history_digests(config, good.kept)[1]), _config(run="run-2"), good)


def test_every_learner_of_the_history_is_still_checked_against_the_run(tmp_path):
    owner, config = _owner(), _config()
    history_weights(owner, config, _history(2))
    off_grid = Stump(0, 2, 0.4999, (0, 1), 0.25)  # not the public threshold of feature 0, index 2
    bad = at_round(with_round(_history(2), off_grid, 0.2, 10.0, 40.0), 3)
    with pytest.raises(ConfigError, match="public threshold"):
        check_history(applied_digest(owner, config.run_id), config, bad)
    with pytest.raises(RemoteProtocolError, match="not in"):  # round 6 of a 6-round run
        check_history(applied_digest(owner, config.run_id), config, at_round(_history(2), 6))
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=10.0)
    (result,) = handle_batch(
        [Task("share", owner.owner_id, config.run_id, _wire(BoostShareTask(config, bad)))],
        {owner.owner_id: owner},
        ledger,
    )
    assert result.payload.code == "invalid_task" and "public threshold" in result.payload.message
    assert ledger.history(owner.owner_id) == []


def test_a_node_keeps_the_latest_runs_only():
    owner = _owner()
    for i in range(APPLIED_RUNS + 2):
        history_weights(owner, _config(run=f"run-{i}"), _history(1))
    assert list(owner.boost_applied) == [f"run-{i}" for i in range(2, APPLIED_RUNS + 2)]
    history_weights(owner, _config(run="run-0"), _history(2))  # an evicted run recomputes, like a restart
    assert "run-0" in owner.boost_applied


def test_the_cached_weights_cannot_be_changed_by_a_consumer():
    owner, config = _owner(), _config()
    w = history_weights(owner, config, _history(2))
    with pytest.raises(ValueError, match="read-only"):
        w *= 2.0


def test_a_boosted_ncc_share_with_rr_labels_at_infinite_epsilon_is_accepted(tmp_path):
    """Issue 10: the share debit and the mechanism use one split (``split_label_budget``); at ε = ∞
    both parts are ∞ (it used to give NaN, and the task was refused as invalid_task)."""
    owner = _owner()
    config = _config(base="ncc", epsilon=math.inf, labels="rr")
    spec = _wire(BoostShareTask(config, _history(0)))
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=math.inf)
    (result,) = handle_batch([Task("share", owner.owner_id, config.run_id, spec)], {owner.owner_id: owner}, ledger)
    assert isinstance(result.payload, BoostShareReply), result.payload
    n = owner.y.shape[0]  # and the public count's dummies, shuffled in (common/work_rows.py)
    assert result.payload.labels.shape == (work_rows(n, config.params.max_owner_rows),)
    rows = np.asarray(result.payload.reports)[:, -1] > -1  # weight column 2u - 1: -1 for a dummy (u = 0) only
    assert rows.sum() == n  # no randomized response at ε = ∞: the rows' own labels
    np.testing.assert_array_equal(np.sort(result.payload.labels[rows]), np.sort(owner.y))
    entries = sorted((h["purpose"].split(":")[0], h["epsilon"]) for h in ledger.history(owner.owner_id))
    assert entries == [("boost-share-features", math.inf), ("boost-share-labels", math.inf)]


@pytest.mark.parametrize("epsilon", [0.5, 2.0, math.inf])
def test_the_share_debit_is_the_split_the_mechanisms_use(epsilon):
    config = _config(base="ncc", epsilon=epsilon, labels="rr", label_fraction=0.25)
    fb, plan = config.params, config.releases
    features, labels = split_label_budget(fb.share_epsilon, "rr", 0.25)
    spec = BoostShareTask(config_to_dict(fb, "r"), empty_history())
    assert spec.ledger_entries() == [(features, 0.0, "boost-share-features"), (labels, 0.0, "boost-share-labels")]
    assert plan.release_mechanism.epsilon == features
    if math.isfinite(epsilon):
        assert plan.label_rr().epsilon == labels
    assert not any(math.isnan(e) for e, _, _ in spec.ledger_entries())


def test_the_digest_names_one_exact_prefix():
    config = _config()
    full = boosting.history_digests(config, _history(3).kept)
    assert full[:3] == boosting.history_digests(config, _history(2).kept)
    assert len(set(full)) == 4
    moved = dataclasses.replace(_history(1).kept[0], err_total=9.000000000000002)  # one ulp
    assert boosting.history_digests(config, (moved,))[1] != full[1]
