"""Evaluation releases of LDP boosting at the owner (issue 9 item 1, contract 4), through the real
``RingDriver``: real certificates and signed ring keys, a real SQLite ledger, envelopes routed
as bytes between nodes. The ring totals are the sum of the owners' *noisy* releases; a
re-formed ring reuses the release without a second debit; over-budget, replayed-after-restart,
malformed and wrongly-vouched tasks are refused before anything leaves."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from privfed.common.boosting.federated import FederatedBoosting, owner_local_error, rr_evaluation_oracle
from privfed.common.boosting.wire import at_round, config_to_dict, empty_history, owner_weights, with_round
from privfed.common.bounds import Bounds
from privfed.common.errors import BudgetExceeded, ConfigError, RemoteProtocolError, RoundFailed
from privfed.common.identity import owner_id
from privfed.common.learners.ncc import NearestCentroidModel
from privfed.common.learners.stump import Stump, thresholds
from privfed.common.ledger import Ledger
from privfed.common.messages import BoostEvaluateTask, PeerKey, RingJoined, RingSpec, RingTotal
from privfed.common.secagg.boxes import generate_private_key, public_bytes, sign_public_key
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.ring import Inbound, new_session_id
from privfed.owner.boosting import AlreadyReleased, HistoryRewritten, RingDriver
from privfed.server.job import RelayedSecureSum

NOW = datetime.now(UTC)
BOUNDS = Bounds.of(-1.0, 1.0, 3)


def _cert(key, cn, ca_key, ca_name):
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - timedelta(days=1))
        .not_valid_after(NOW + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=cn == "privfed-ca", path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )


@dataclass
class Owner:
    """The fields of a hosted owner the driver reads (``privfed.owner.handlers.LocalOwner``'s)."""

    owner_id: str
    X: np.ndarray
    y: np.ndarray
    rng: np.random.Generator
    boost_applied: dict = field(default_factory=dict)


class Federation:
    """Two owner nodes (``owner-0``, ``owner-1``) with signed ring keys, ledgers and drivers."""

    def __init__(self, tmp_path, *, per_node=3, budget=10.0, seed=0):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "privfed-ca")])
        ca = _cert(ca_key, "privfed-ca", ca_key, ca_name)
        self.ca_pem = ca.public_bytes(serialization.Encoding.PEM)
        self.node_keys = {n: ec.generate_private_key(ec.SECP256R1()) for n in ("owner-0", "owner-1")}
        self.certificates = {
            n: _cert(k, n, ca_key, ca_name).public_bytes(serialization.Encoding.PEM) for n, k in self.node_keys.items()
        }
        rng = np.random.Generator(np.random.PCG64(seed))
        self.owners, self.x25519, self.peer_keys, self.ledgers, self.drivers = {}, {}, {}, {}, {}
        self.budget, self.tmp_path = budget, tmp_path
        for j, node in enumerate(self.node_keys):
            for i in range(per_node):
                oid = owner_id(node, j * per_node + i)
                X = rng.uniform(-1, 1, (4, 3))
                self.owners[oid] = Owner(
                    oid,
                    X,
                    (X[:, 0] > 0).astype(np.int64) ^ (rng.random(4) < 0.2),
                    np.random.Generator(np.random.PCG64([seed, j, i])),
                )
                self.x25519[oid] = generate_private_key()
                pub = public_bytes(self.x25519[oid])
                self.peer_keys[oid] = PeerKey(oid, node, pub, sign_public_key(self.node_keys[node], pub, oid))
            self.restart(node)

    def restart(self, node):
        """A fresh driver (empty cache) over the node's ledger file."""
        self.ledgers[node] = Ledger(self.tmp_path / f"{node}.sqlite", epsilon_budget=self.budget)
        keys = {o: k for o, k in self.x25519.items() if o.startswith(node + ".")}
        self.drivers[node] = RingDriver(keys, self.ca_pem, self.ledgers[node])

    def node(self, oid):
        return oid.split(".")[0]

    def spec(self, config, history, learner, ring, *, session=None, peers=None, max_abs=None):
        fb_bound = config.booster.contribution_bound if max_abs is None else max_abs
        fp = FixedPoint.choose(len(ring), fb_bound)
        peers = tuple(self.peer_keys[o] for o in ring) if peers is None else peers
        return BoostEvaluateTask(
            config=config,
            history=history,
            learner=learner,
            ring=RingSpec(
                session or new_session_id(), tuple(ring), fp.frac_bits, fp.n_parties, fb_bound, peers, self.certificates
            ),
        )

    def evaluate(self, oid, spec):
        return self.drivers[self.node(oid)].evaluate(self.owners[oid], spec)

    def run_ring(self, spec):
        """Every member evaluates, then envelopes are routed as bytes until the leader reports the total."""
        queue, total = [], None
        for oid in spec.ring.ring:
            payload, out = self.evaluate(oid, spec)
            assert payload is None if oid == spec.ring.ring[0] else isinstance(payload, RingJoined)
            queue += out
        while queue:
            msg = Inbound.from_bytes(queue.pop(0).to_bytes())
            payload, out = self.drivers[self.node(msg.recipient)].deliver(msg.recipient, msg.to_bytes())
            queue += out
            if isinstance(payload, RingTotal):
                total = payload.values
        return total


def _config(eps=2.0, run="boost-r1", **kw):
    fb = FederatedBoosting(epsilon=eps, n_classes=2, bounds=BOUNDS, n_rounds=3, n_bins=4, weight_bound=4.0, **kw)
    return fb, config_to_dict(fb, run)


def _stump(feature=0, b=2):
    return Stump(feature, b, float(thresholds(BOUNDS, 4)[feature, b - 1]), (0, 1), 0.3)


@pytest.fixture
def fed(tmp_path):
    return Federation(tmp_path)


def test_ring_total_is_the_sum_of_the_owners_noisy_releases_each_debited_once(fed):
    fb, config = _config()
    ring = list(fed.owners)
    spec = fed.spec(config, at_round(empty_history(), 0), _stump(), ring)
    total = fed.run_ring(spec)
    released = np.array([fed.drivers[fed.node(o)].release_of(o, spec.release_id) for o in ring])
    exact = np.array(
        [
            owner_local_error(
                _stump(),
                fed.owners[o].X,
                fed.owners[o].y,
                owner_weights(spec.history, fed.owners[o].X, fed.owners[o].y),
            )
            for o in ring
        ]
    )
    fp = FixedPoint(spec.ring.frac_bits, spec.ring.n_parties, spec.ring.max_abs)
    np.testing.assert_allclose(total, released.sum(axis=0), rtol=0, atol=fp.error_bound)
    assert not np.allclose(released, exact)  # noised: the total is not the exact (E, W)
    for o in ring:
        entries = fed.ledgers[fed.node(o)].history(o)
        assert [(e["release_id"], e["epsilon"]) for e in entries] == [(spec.release_id, pytest.approx(fb.eval_epsilon))]


def test_a_release_sums_row_weights_clipped_to_the_row_bound(tmp_path):
    """Row-level calibration: every row's SAMME weight enters the released pair clipped to the public
    ``eval_row_bound`` (so one row moves each coordinate by at most b), at ε = ∞ exactly, and the
    noise scale is 2b/ε whatever the owner's rows."""
    fed = Federation(tmp_path, budget=math.inf)
    fb, config = _config(eps=math.inf, eval_row_bound=2.0, max_owner_rows=10)
    # A kept learner with a large α: the rows it missed now weigh ~17 each, far above b = 2.
    history = at_round(with_round(empty_history(), _stump(1, 2), 3.0, 1.0, 100.0), 1)
    ring = list(fed.owners)
    spec = fed.spec(config, history, _stump(), ring)
    total = fed.run_ring(spec)
    released = np.array([fed.drivers[fed.node(o)].release_of(o, spec.release_id) for o in ring])
    weights = {o: owner_weights(history, fed.owners[o].X, fed.owners[o].y) for o in ring}
    assert max(w.max() for w in weights.values()) > 10.0
    clipped = np.array(
        [owner_local_error(_stump(), fed.owners[o].X, fed.owners[o].y, weights[o], row_bound=2.0) for o in ring]
    )
    np.testing.assert_allclose(released, clipped, atol=2.0**-20)
    assert np.all(released[:, 1] <= 2.0 * 4) and total[1] < sum(w.sum() for w in weights.values())
    assert spec.ring.max_abs == pytest.approx(2.0 * 10)  # b * max_owner_rows at ε = ∞: public, no row count
    assert _config(eps=2.0, eval_row_bound=2.0)[0].eval_noise_scale == pytest.approx(
        2 * 2.0 / 0.8
    )  # eval fraction 0.4 of eps 2


def test_an_rr_evaluation_over_the_ring_is_one_of_three_debited_values_summed_exactly(fed):
    """``eval_mechanism="rr"`` over the real owner drivers and ring: each owner's release is one of
    the three pairs its k-RR report can stand for (nothing else about its rows leaves), inside the
    public range the ring is sized for, debited once at the evaluation ε; the ring total is their sum."""
    rows = max(o.X.shape[0] for o in fed.owners.values())
    fb, config = _config(eval_mechanism="rr", max_owner_rows=rows)
    assert fb.eval_mechanism == "rr"
    ring = list(fed.owners)
    spec = fed.spec(config, at_round(empty_history(), 0), _stump(), ring)
    total = fed.run_ring(spec)
    released = np.array([fed.drivers[fed.node(o)].release_of(o, spec.release_id) for o in ring])
    rr = rr_evaluation_oracle(fb.eval_round_epsilon)
    unit = fb.eval_row_bound * rows / (rr.p - rr.q)
    values = unit * np.array([[1 - rr.q, 1 - 2 * rr.q], [-rr.q, 1 - 2 * rr.q], [-rr.q, -2 * rr.q]])
    assert all(np.any(np.all(np.isclose(values, pair, atol=2.0**-20), axis=1)) for pair in released)
    assert np.all(np.abs(released) <= fb.contribution_bound) and spec.ring.max_abs <= fb.contribution_bound
    fp = FixedPoint(spec.ring.frac_bits, spec.ring.n_parties, spec.ring.max_abs)
    np.testing.assert_allclose(total, released.sum(axis=0), rtol=0, atol=fp.error_bound)
    for o in ring:
        entries = fed.ledgers[fed.node(o)].history(o)
        assert [(e["release_id"], e["epsilon"]) for e in entries] == [(spec.release_id, pytest.approx(fb.eval_epsilon))]


def test_reformed_ring_gets_the_same_release_without_a_second_debit(fed):
    fb, config = _config()
    ring = list(fed.owners)
    history = at_round(empty_history(), 0)
    first = fed.run_ring(fed.spec(config, history, _stump(), ring))
    # A coordinator re-forms the ring into pairs and asks again: the totals are sums of the same values.
    pairs = [ring[0:2], ring[1:3], [ring[0], ring[2]]]
    sums = [fed.run_ring(fed.spec(config, history, _stump(), p)) for p in pairs]
    released = {o: fed.drivers[fed.node(o)].release_of(o, "boost-eval:boost-r1:once") for o in ring}
    for p, s in zip(pairs, sums):
        np.testing.assert_allclose(s, released[p[0]] + released[p[1]], atol=1e-6)
    assert first is not None
    assert all(len(fed.ledgers[fed.node(o)].history(o)) == 1 for o in ring)
    a = (sums[0] + sums[1] - sums[2]) / 2  # the attack now recovers the noisy release, no more
    np.testing.assert_allclose(a, released[ring[1]], atol=1e-6)


def test_another_round_of_a_run_that_evaluates_once_is_refused(fed):
    _, config = _config()
    ring = list(fed.owners)[:2]
    fed.run_ring(fed.spec(config, at_round(empty_history(), 0), _stump(), ring))
    with pytest.raises(AlreadyReleased):
        fed.evaluate(ring[0], fed.spec(config, at_round(empty_history(), 1), _stump(), ring))


def test_every_round_mode_debits_each_round_at_a_tth_of_the_evaluation_budget(fed):
    fb, config = _config(eval_groups="all")
    ring = list(fed.owners)[:2]
    for t in range(3):
        fed.run_ring(fed.spec(config, at_round(empty_history(), t), _stump(), ring))
    spent = [e["epsilon"] for e in fed.ledgers["owner-0"].history(ring[0])]
    assert spent == [pytest.approx(fb.eval_epsilon / 3)] * 3
    with pytest.raises(RemoteProtocolError, match="round"):  # round 3 of a 3-round run does not exist
        fed.evaluate(ring[0], fed.spec(config, at_round(empty_history(), 3), _stump(), ring))


def test_after_a_restart_a_released_evaluation_is_refused_not_redrawn(fed):
    _, config = _config()
    ring = list(fed.owners)[:2]
    spec = fed.spec(config, at_round(empty_history(), 0), _stump(), ring)
    fed.run_ring(spec)
    fed.restart("owner-0")
    with pytest.raises(AlreadyReleased, match="before this process started"):
        fed.evaluate(ring[0], fed.spec(config, at_round(empty_history(), 0), _stump(), ring))
    assert len(fed.ledgers["owner-0"].history(ring[0])) == 1


def test_over_budget_is_refused_before_anything_is_computed_or_sent(tmp_path):
    fed = Federation(tmp_path, budget=0.5)
    _, config = _config(eps=2.0)  # evaluation release at 0.4 * 2 = 0.8 > 0.5
    ring = list(fed.owners)[:2]
    with pytest.raises(BudgetExceeded):
        fed.evaluate(ring[1], fed.spec(config, at_round(empty_history(), 0), _stump(), ring))
    assert fed.ledgers["owner-0"].history(ring[1]) == []


@pytest.mark.parametrize(
    "learner",
    [
        Stump(3, 2, 0.0, (0, 1), 0.3),  # feature 3 of a 3-feature run
        Stump(0, 4, 1.0, (0, 1), 0.3),  # threshold index B = 4 is not a threshold
        Stump(0, 2, 0.123456, (0, 1), 0.3),  # a chosen threshold (the binary-search attack)
        Stump(0, 2, 0.0, (0, 2), 0.3),  # class 2 of a 2-class run
    ],
)
def test_learners_outside_the_run_config_are_refused(fed, learner):
    _, config = _config()
    ring = list(fed.owners)[:2]
    with pytest.raises(ConfigError):
        fed.evaluate(ring[1], fed.spec(config, at_round(empty_history(), 0), learner, ring))
    assert fed.ledgers["owner-0"].history(ring[1]) == []


def test_a_run_config_cannot_change_between_tasks(fed):
    _, config = _config()
    ring = list(fed.owners)[:2]
    fed.drivers["owner-0"].note_share(config)
    changed = replace(config, booster=replace(config.booster, eval_fraction=0.9))
    with pytest.raises(RemoteProtocolError, match="differs"):
        fed.evaluate(ring[1], fed.spec(changed, at_round(empty_history(), 0), _stump(), ring))


def test_a_ring_without_this_owner_or_with_one_party_is_refused(fed):
    _, config = _config()
    ids = list(fed.owners)
    with pytest.raises(RemoteProtocolError, match="not in the ring"):
        fed.evaluate(ids[0], fed.spec(config, at_round(empty_history(), 0), _stump(), ids[1:3]))
    with pytest.raises((ConfigError, RemoteProtocolError)):
        fed.evaluate(ids[0], fed.spec(config, at_round(empty_history(), 0), _stump(), ids[:1]))
    assert fed.ledgers["owner-0"].history(ids[0]) == []


def test_a_peer_key_signed_by_a_node_that_does_not_own_the_id_is_refused(fed):
    _, config = _config()
    a, b = "owner-0.o00000", "owner-1.o00003"
    # owner-1 signs a key for owner-0's owner id and claims to host it (item 4 of the issue).
    forged_pub = public_bytes(generate_private_key())
    forged = PeerKey(a, "owner-1", forged_pub, sign_public_key(fed.node_keys["owner-1"], forged_pub, a))
    spec = fed.spec(config, at_round(empty_history(), 0), _stump(), [b, a], peers=(forged, fed.peer_keys[b]))
    with pytest.raises(RemoteProtocolError, match="not an owner of node"):
        fed.evaluate(b, spec)
    assert fed.ledgers["owner-1"].history(b) == []


class LocalTransport(RelayedSecureSum):
    """The coordinator's ``Transport`` over in-process nodes: tasks go to the real drivers, a raised
    refusal becomes a ``Refusal`` (as ``owner/node.py`` answers), envelopes are routed as bytes,
    and relaying is allowed only inside an open ring session (contract 5)."""

    def __init__(self, fed):
        self.fed, self.open, self.opened = fed, {}, []
        self.peer_key = fed.peer_keys.__getitem__
        self.certificates = lambda: fed.certificates
        self.silent_owners = set

    def open_ring(self, session, members):
        self.open[session] = set(members)
        self.opened.append(tuple(members))

    def close_ring(self, session):
        self.open.pop(session)

    def hop_senders(self, session):
        return set()

    def run_tasks(self, tasks, timeout=None):
        from privfed.common.messages import BoostShareTask, Refusal, Result
        from privfed.owner.boosting import boost_share

        results, queue, leader_task = [], [], {}
        for task in tasks:
            owner = self.fed.owners[task.owner_id]
            if isinstance(task.spec, BoostShareTask):
                try:
                    results.append(Result(task.task_id, task.owner_id, boost_share(owner, task.spec)))
                except ConfigError:
                    results.append(Result(task.task_id, task.owner_id, Refusal("invalid_task", "invalid")))
                continue
            try:
                payload, out = self.fed.evaluate(task.owner_id, task.spec)
            except BudgetExceeded:
                payload, out = Refusal("budget_exceeded", "over budget"), []
            except (ConfigError, RemoteProtocolError):
                payload, out = Refusal("invalid_task", "invalid"), []
            leader_task[task.owner_id] = task.task_id
            if payload is not None:
                results.append(Result(task.task_id, task.owner_id, payload))
            queue += out
        while queue:
            msg = Inbound.from_bytes(queue.pop(0).to_bytes())
            assert {msg.sender, msg.recipient} <= self.open[msg.session_id]
            payload, out = self.fed.drivers[self.fed.node(msg.recipient)].deliver(msg.recipient, msg.to_bytes())
            queue += out
            if isinstance(payload, RingTotal):
                results.append(Result(leader_task[msg.recipient], msg.recipient, payload))
        return results


def test_strategy_drops_a_refusing_owner_before_the_ring_moves_and_sums_the_rest(tmp_path):
    from privfed.common.boosting.federated import clip_contributions
    from privfed.server.strategies.boosting import BoostingStrategy

    fed = Federation(tmp_path, per_node=3, budget=math.inf)
    victim = "owner-1.o00004"
    fed.owners[victim].X = fed.owners[victim].X[:, :2]  # its schema no longer fits the run: it refuses
    fb = FederatedBoosting(epsilon=math.inf, n_classes=2, bounds=BOUNDS, n_rounds=2, n_bins=4, weight_bound=4.0)
    strategy = BoostingStrategy(fb, np.random.Generator(np.random.PCG64(3)))
    transport = LocalTransport(fed)
    ids = sorted(fed.owners)
    try:
        strategy.run(ids, transport)
    except RoundFailed:
        pass  # a tiny data set may yield no learner better than chance; the rings are what is tested
    assert strategy.refused == {victim: "invalid_task"} and victim in strategy.dropped
    t = next(i for i, e in enumerate(strategy.evaluators) if victim in e)
    rec = strategy.rounds[t]
    assert rec["ring_attempts"] == 2 and rec["ring_size"] == len(strategy.evaluators[t]) - 1
    assert not transport.open  # every ring session was closed
    rest = [o for o in strategy.evaluators[t] if o != victim]
    assert tuple(rest) in transport.opened  # the re-formed ring, opened for exactly its members
    released = np.array(
        [fed.drivers[fed.node(o)].release_of(o, f"boost-eval:{strategy_run_id(fed, o)}:once") for o in rest]
    )
    np.testing.assert_allclose(
        [rec["err_total"], rec["weight_total"]], clip_contributions(released).sum(axis=0), atol=1e-6
    )


def strategy_run_id(fed, oid):
    """The run id an owner's ledger recorded its evaluation under."""
    (entry,) = [h for h in fed.ledgers[fed.node(oid)].history(oid) if h["release_id"].startswith("boost-eval:")]
    return entry["release_id"].split(":")[1]


def test_an_evaluation_config_must_match_the_share_the_owner_released_in_the_run(fed):
    fb, config = _config(eps=2.0)
    a, b = "owner-0.o00000", "owner-0.o00001"
    ledger = fed.ledgers["owner-0"]
    ledger.debit(a, fb.share_epsilon, purpose="boost-share:boost-r1", release_id="t-a#0")  # as the handler records it
    ledger.debit(b, 2.0, purpose="boost-share:boost-r1", release_id="t-b#0")  # a share at the whole ε
    ring = [a, b]
    with pytest.raises(RemoteProtocolError, match="differs from the share"):
        fed.evaluate(b, fed.spec(config, at_round(empty_history(), 0), _stump(), ring))
    payload, _ = fed.evaluate(a, fed.spec(config, at_round(empty_history(), 0), _stump(), ring))
    assert payload is None  # the leader started: a's share and this evaluation add up to the run's ε
    assert math.fsum(h["epsilon"] for h in ledger.history(a)) == pytest.approx(2.0)


def test_a_batch_of_evaluations_is_debited_together_and_each_refusal_stays_alone(fed):
    fb, config = _config()
    node = "owner-0"
    ids = [o for o in fed.owners if o.startswith(node + ".")]
    fed.ledgers[node].debit(ids[2], 9.9, purpose="other", release_id="x")  # no room left for a 0.6 release
    spec = fed.spec(config, at_round(empty_history(), 0), _stump(), list(fed.owners))
    items = [(fed.owners[o], spec) for o in ids] + [(fed.owners[ids[1]], spec)]  # ids[1] twice
    outcomes = fed.drivers[node].evaluate_many(items)
    assert outcomes[0][0] is None and outcomes[0][1]  # the leader started: its first hop
    assert isinstance(outcomes[1][0], RingJoined) and isinstance(outcomes[3][0], RingJoined)
    assert isinstance(outcomes[2], BudgetExceeded)
    driver = fed.drivers[node]
    assert driver.release_of(ids[2], spec.release_id) is None
    assert [len(fed.ledgers[node].history(o)) for o in ids] == [1, 1, 1]  # ids[2]: only its earlier entry


def test_a_run_that_keeps_nothing_says_why_with_the_noise_and_weight_numbers(tmp_path):
    """Every round skipped because the noisy error looks no better than chance: the coordinator's
    error is one line with the noise scale against the weight totals and what to change."""
    from privfed.server.strategies.boosting import BoostingStrategy

    fed = Federation(tmp_path, per_node=3, budget=math.inf)
    fb = FederatedBoosting(epsilon=1e-3, n_classes=2, bounds=BOUNDS, n_rounds=2, n_bins=4, weight_bound=4.0)
    errors = []
    for seed in range(10):  # hopeless noise (scale 2b/eps_e ~ 6667 against W ~ 12): some run keeps nothing
        strategy = BoostingStrategy(fb, np.random.Generator(np.random.PCG64(seed)))
        try:
            strategy.run(sorted(fed.owners), LocalTransport(fed))
        except RoundFailed as exc:
            errors.append(str(exc))
            break
    assert errors, "every one of 10 runs kept a learner at eps = 1e-3"
    (msg,) = errors
    assert "\n" not in msg and msg.startswith("nothing to boost: no base learner was better than chance")
    for part in (
        f"{fb.eval_noise_scale:.3g} per owner",
        "against weight totals W",
        "the noise drowns",
        "more owners",
        "larger epsilon (now 0.001)",
        "eval fraction (now 0.4)",
    ):
        assert part in msg, (part, msg)


def test_an_evaluation_whose_history_rewrites_an_applied_round_is_refused_without_a_debit(fed):
    """The node applied round 0's learner with α = 0.7 in round 1; a round-2 task that says α = 0.9
    for it is a rewritten history (``HistoryRewritten``, answered ``invalid_task``), the honest one is not."""
    fb, config = _config(eval_groups="all")
    ring = list(fed.owners)[:2]
    kept = with_round(empty_history(), _stump(1, 2), 0.7, 1.0, 8.0)
    fed.run_ring(fed.spec(config, at_round(kept, 1), _stump(), ring))
    rewritten = at_round(with_round(with_round(empty_history(), _stump(1, 2), 0.9, 1.0, 8.0), _stump(), 0.5, 2, 8), 2)
    with pytest.raises(HistoryRewritten):
        fed.evaluate(ring[1], fed.spec(config, rewritten, _stump(2, 3), ring))
    assert len(fed.ledgers["owner-0"].history(ring[1])) == 1  # round 1's release only
    honest = at_round(with_round(kept, _stump(), 0.5, 2.0, 8.0), 2)
    assert fed.run_ring(fed.spec(config, honest, _stump(2, 3), ring)) is not None
    assert len(fed.ledgers["owner-0"].history(ring[1])) == 2


def test_a_boosted_ncc_evaluation_with_rr_labels_at_infinite_epsilon_is_accepted(tmp_path):
    """Issue 10: ε = ∞ with labels="rr" used to give a NaN debit and an invalid_task refusal."""
    fed = Federation(tmp_path, budget=math.inf)
    fb, config = _config(eps=math.inf, base="ncc", labels="rr")
    learner = NearestCentroidModel(np.array([[-0.5, 0.0, 0.0], [0.5, 0.0, 0.0]]))
    ring = list(fed.owners)
    spec = fed.spec(config, at_round(empty_history(), 0), learner, ring)
    total = fed.run_ring(spec)
    exact = [owner_local_error(learner, o.X, o.y, np.ones(4), row_bound=1.0) for o in fed.owners.values()]
    np.testing.assert_allclose(total, np.sum(exact, axis=0), atol=1e-6)  # no noise at ε = ∞
    assert spec.ledger_entries() == [(math.inf, 0.0, "boost-eval")]


def test_an_owner_that_shared_in_an_owners_split_run_refuses_to_evaluate(fed):
    """``budget_split="owners"``: one role per owner and run, so a shared owner's evaluation is refused
    before anything is computed or debited; an owner that did not share evaluates at the whole ε."""
    fb, config = _config(eps=2.0, budget_split="owners")
    a, b = "owner-0.o00000", "owner-0.o00001"
    ledger = fed.ledgers["owner-0"]
    ledger.debit(a, 2.0, purpose="boost-share:boost-r1", release_id="t-a#0")
    ring = [a, b]
    with pytest.raises(AlreadyReleased):
        fed.evaluate(a, fed.spec(config, at_round(empty_history(), 0), _stump(), ring))
    assert len(ledger.history(a)) == 1
    fed.evaluate(b, fed.spec(config, at_round(empty_history(), 0), _stump(), ring))
    assert [e["epsilon"] for e in ledger.history(b)] == [pytest.approx(fb.eval_epsilon)] and fb.eval_epsilon == 2.0
