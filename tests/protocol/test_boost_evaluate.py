"""Evaluation releases of LDP boosting at the owner (issue 9 item 1, contract 4), through the real
owner core (``privfed.owner.core.OwnerCore``, its ring mod): real certificates and signed ring keys,
a real SQLite ledger, envelopes routed as bytes between nodes as ring-message tasks. The ring totals
are the sum of the owners' *noisy* releases; a re-formed ring reuses the release without a second
debit; over-budget, replayed-after-restart, malformed and wrongly-vouched tasks are refused before
anything leaves."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from privfed.common.boosting.owner import local_error
from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.releases import ReleasePlan
from privfed.common.boosting.wire import at_round, config_to_dict, empty_history, owner_weights, with_round
from privfed.common.bounds import Bounds
from privfed.common.errors import RoundFailed
from privfed.common.identity import owner_id
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.learners.stump import Stump, thresholds
from privfed.common.ledger import Ledger
from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.ring import Inbound, new_session_id
from privfed.common.secagg.signed_keys import sign_public_key
from privfed.common.tasks import (
    BoostEvaluateTask,
    PeerKey,
    Refusal,
    RingJoined,
    RingMessageTask,
    RingSpec,
    RingTotal,
    Task,
)
from privfed.owner.core import OwnerCore
from privfed.owner.keys import OwnerKeys
from privfed.owner.kinds.base import KEPT_RUNS
from privfed.owner.kinds.boosting import note_run
from privfed.owner.local import LocalOwner
from privfed.server.securesum import RelayedTransport

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


class Federation:
    """Two owner nodes (``owner-0``, ``owner-1``) with signed ring keys, ledgers and owner cores."""

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
        self.owners, self.x25519, self.peer_keys, self.ledgers, self.cores = {}, {}, {}, {}, {}
        self.budget, self.tmp_path = budget, tmp_path
        self._ids = itertools.count()
        for j, node in enumerate(self.node_keys):
            for i in range(per_node):
                oid = owner_id(node, j * per_node + i)
                X = rng.uniform(-1, 1, (4, 3))
                y = (X[:, 0] > 0).astype(np.int64) ^ (rng.random(4) < 0.2)
                self.owners[oid] = LocalOwner(oid, X, y, np.random.Generator(np.random.PCG64([seed, j, i])), 2, BOUNDS)
                self.x25519[oid] = generate_private_key()
                pub = public_bytes(self.x25519[oid])
                self.peer_keys[oid] = PeerKey(oid, node, pub, sign_public_key(self.node_keys[node], pub, oid))
            self.restart(node)

    def restart(self, node):
        """A fresh core over the node's ledger file; its owners forget what they kept in memory."""
        self.ledgers[node] = Ledger(self.tmp_path / f"{node}.sqlite", epsilon_budget=self.budget)
        hosted = [o for oid, o in self.owners.items() if self.node(oid) == node]
        for o in hosted:
            o.released.clear()
            o.boost_applied.clear()
        keys = {o.owner_id: self.x25519[o.owner_id] for o in hosted}
        self.cores[node] = OwnerCore(hosted, self.ledgers[node], keys=OwnerKeys(keys, self.ca_pem))

    def node(self, oid):
        return oid.split(".")[0]

    def spec(self, config, history, learner, ring, *, session=None, peers=None, max_abs=None):
        fb_bound = config.releases.contribution_bound if max_abs is None else max_abs
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

    def answer(self, node, tasks):
        answer = self.cores[node].answer(tasks)
        return answer.results, answer.outbound

    def task(self, oid, spec):
        return Task(f"e{next(self._ids)}", oid, "run", spec)

    def evaluate(self, oid, spec):
        """One evaluate task: its answer now (a join, a refusal, or None for the leader) and envelopes."""
        results, out = self.answer(self.node(oid), [self.task(oid, spec)])
        return (results[0].payload if results else None), out

    def refusal(self, oid, spec, match=""):
        """The code of an evaluate task that must be refused, with nothing sent (and ``match`` in its text)."""
        payload, out = self.evaluate(oid, spec)
        assert isinstance(payload, Refusal) and not out, (payload, out)
        assert match in payload.message, payload.message
        return payload.code

    def release_of(self, oid, release_id):
        cached = self.owners[oid].released.get(release_id)
        return None if cached is None else np.array(cached.payload)

    def route(self, queue):
        """Deliver envelopes as bytes (ring-message tasks) until quiet; the results they produce."""
        results, queue = [], list(queue)
        while queue:
            msg = Inbound.from_bytes(queue.pop(0).to_bytes())
            hop = Task(f"relay-{next(self._ids)}", msg.recipient, "ring", RingMessageTask(msg.to_bytes()))
            got, out = self.answer(self.node(msg.recipient), [hop])
            results += got
            queue += out
        return results

    def run_ring(self, spec):
        """Every member evaluates, then envelopes are routed as bytes until the leader reports the total."""
        queue = []
        for oid in spec.ring.ring:
            payload, out = self.evaluate(oid, spec)
            assert payload is None if oid == spec.ring.ring[0] else isinstance(payload, RingJoined), payload
            queue += out
        totals = [r.payload.values for r in self.route(queue) if isinstance(r.payload, RingTotal)]
        return totals[0] if totals else None


def _config(eps=2.0, run="boost-r1", **kw):
    fb = BoostingParams(epsilon=eps, n_classes=2, bounds=BOUNDS, n_rounds=3, n_bins=4, weight_bound=4.0, **kw)
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
    released = np.array([fed.release_of(o, spec.release_id) for o in ring])
    exact = np.array(
        [
            local_error(
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
    released = np.array([fed.release_of(o, spec.release_id) for o in ring])
    weights = {o: owner_weights(history, fed.owners[o].X, fed.owners[o].y) for o in ring}
    assert max(w.max() for w in weights.values()) > 10.0
    clipped = np.array(
        [local_error(_stump(), fed.owners[o].X, fed.owners[o].y, weights[o], row_bound=2.0) for o in ring]
    )
    np.testing.assert_allclose(released, clipped, atol=2.0**-20)
    assert np.all(released[:, 1] <= 2.0 * 4) and total[1] < sum(w.sum() for w in weights.values())
    assert spec.ring.max_abs == pytest.approx(2.0 * 10)  # b * max_owner_rows at ε = ∞: public, no row count
    assert ReleasePlan(_config(eps=2.0, eval_row_bound=2.0)[0]).eval_noise_scale == pytest.approx(
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
    released = np.array([fed.release_of(o, spec.release_id) for o in ring])
    rr = config.releases.evaluation.oracle
    unit = fb.eval_row_bound * rows / (rr.p - rr.q)
    values = unit * np.array([[1 - rr.q, 1 - 2 * rr.q], [-rr.q, 1 - 2 * rr.q], [-rr.q, -2 * rr.q]])
    assert all(np.any(np.all(np.isclose(values, pair, atol=2.0**-20), axis=1)) for pair in released)
    bound = config.releases.contribution_bound
    assert np.all(np.abs(released) <= bound) and spec.ring.max_abs <= bound
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
    released = {o: fed.release_of(o, "boost-eval:boost-r1:once") for o in ring}
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
    assert fed.refusal(ring[0], fed.spec(config, at_round(empty_history(), 1), _stump(), ring)) == "already_released"


def test_every_round_mode_debits_each_round_at_a_tth_of_the_evaluation_budget(fed):
    fb, config = _config(eval_groups="all")
    ring = list(fed.owners)[:2]
    for t in range(3):
        fed.run_ring(fed.spec(config, at_round(empty_history(), t), _stump(), ring))
    spent = [e["epsilon"] for e in fed.ledgers["owner-0"].history(ring[0])]
    assert spent == [pytest.approx(fb.eval_epsilon / 3)] * 3
    assert (
        fed.refusal(ring[0], fed.spec(config, at_round(empty_history(), 3), _stump(), ring), match="round")
        == "invalid_task"
    )  # round 3 of a 3-round run does not exist


def test_after_a_restart_a_released_evaluation_is_refused_not_redrawn(fed):
    _, config = _config()
    ring = list(fed.owners)[:2]
    spec = fed.spec(config, at_round(empty_history(), 0), _stump(), ring)
    fed.run_ring(spec)
    fed.restart("owner-0")
    assert fed.refusal(ring[0], fed.spec(config, at_round(empty_history(), 0), _stump(), ring)) == "already_released"
    assert len(fed.ledgers["owner-0"].history(ring[0])) == 1


def test_over_budget_is_refused_before_anything_is_computed_or_sent(tmp_path):
    fed = Federation(tmp_path, budget=0.5)
    _, config = _config(eps=2.0)  # evaluation release at 0.4 * 2 = 0.8 > 0.5
    ring = list(fed.owners)[:2]
    assert fed.refusal(ring[1], fed.spec(config, at_round(empty_history(), 0), _stump(), ring)) == "budget_exceeded"
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
    assert fed.refusal(ring[1], fed.spec(config, at_round(empty_history(), 0), learner, ring)) == "invalid_task"
    assert fed.ledgers["owner-0"].history(ring[1]) == []


def test_a_run_config_cannot_change_between_tasks(fed):
    _, config = _config()
    ring = list(fed.owners)[:2]
    note_run(fed.cores["owner-0"].node, config)  # what a released share of the run records
    changed = replace(config, params=replace(config.params, eval_fraction=0.9))
    assert (
        fed.refusal(ring[1], fed.spec(changed, at_round(empty_history(), 0), _stump(), ring), match="differs")
        == "invalid_task"
    )


def test_a_long_lived_node_keeps_the_latest_runs_and_refuses_a_task_of_a_run_it_forgot(fed):
    _, config = _config()
    node = fed.cores["owner-0"].node
    note_run(node, config)
    for i in range(3 * KEPT_RUNS):  # one boosting job after another
        note_run(node, replace(config, run_id=f"boost-later-{i}"))
        note_run(node, replace(config, run_id="boost-ongoing"))  # used by every job: never forgotten
    assert len(node.runs) == KEPT_RUNS and config.run_id not in node.runs and "boost-ongoing" in node.runs
    ring = list(fed.owners)[:2]
    spec = fed.spec(config, at_round(empty_history(), 0), _stump(), ring)
    assert fed.refusal(ring[1], spec, match="is over on this node") == "invalid_task"
    assert fed.ledgers["owner-0"].history(ring[1]) == []


def test_a_ring_without_this_owner_or_with_one_party_is_refused(fed):
    _, config = _config()
    ids = list(fed.owners)
    assert (
        fed.refusal(ids[0], fed.spec(config, at_round(empty_history(), 0), _stump(), ids[1:3]), match="not in the ring")
        == "invalid_task"
    )
    assert fed.refusal(ids[0], fed.spec(config, at_round(empty_history(), 0), _stump(), ids[:1])) == "invalid_task"
    assert fed.ledgers["owner-0"].history(ids[0]) == []


def test_a_peer_key_signed_by_a_node_that_does_not_own_the_id_is_refused(fed):
    _, config = _config()
    a, b = "owner-0.o00000", "owner-1.o00003"
    # owner-1 signs a key for owner-0's owner id and claims to host it (item 4 of the issue).
    forged_pub = public_bytes(generate_private_key())
    forged = PeerKey(a, "owner-1", forged_pub, sign_public_key(fed.node_keys["owner-1"], forged_pub, a))
    spec = fed.spec(config, at_round(empty_history(), 0), _stump(), [b, a], peers=(forged, fed.peer_keys[b]))
    assert fed.refusal(b, spec, match="not an owner of node") == "invalid_task"
    assert fed.ledgers["owner-1"].history(b) == []


class LocalTransport(RelayedTransport):
    """The coordinator's ``Transport`` over in-process nodes: tasks go to the real owner cores,
    envelopes are routed as bytes, and relaying is allowed only inside an open ring session
    (contract 5)."""

    def __init__(self, fed):
        super().__init__("ring")
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

    def run_tasks(self, tasks, timeout=None, *, stalls=None):
        results, queue = [], []
        for node in self.fed.cores:
            got, out = self.fed.answer(node, [t for t in tasks if self.fed.node(t.owner_id) == node])
            results += got
            queue += out
        for env in queue:
            assert {env.sender, env.recipient} <= self.open[env.session_id]
        return results + self.fed.route(queue)


def test_strategy_drops_a_refusing_owner_before_the_ring_moves_and_sums_the_rest(tmp_path):
    from privfed.common.mechanisms import clip_error_pairs
    from privfed.server.strategies.boosting import BoostingStrategy

    fed = Federation(tmp_path, per_node=3, budget=math.inf)
    victim = "owner-1.o00004"
    v = fed.owners[victim]  # its schema no longer fits the run: it refuses
    fed.owners[victim] = LocalOwner(victim, v.X[:, :2], v.y, v.rng, 2, Bounds.of(-1.0, 1.0, 2))
    fed.ledgers["owner-1"].close()
    fed.restart("owner-1")
    fb = BoostingParams(epsilon=math.inf, n_classes=2, bounds=BOUNDS, n_rounds=2, n_bins=4, weight_bound=4.0)
    strategy = BoostingStrategy(fb, np.random.Generator(np.random.PCG64(3)))
    transport = LocalTransport(fed)
    ids = sorted(fed.owners)
    try:
        result = strategy.run(ids, transport)
    except RoundFailed:
        pytest.skip("this tiny data set gave no learner better than chance: nothing to check")
    assert result.refused == {victim: "invalid_task"} and victim in result.dropped
    rec = next(r for r in result.rounds if victim in r.evaluators)
    assert rec.secure_sum.attempts == 2 and len(rec.secure_sum.summed) == len(rec.evaluators) - 1
    assert not transport.open  # every ring session was closed
    rest = [o for o in rec.evaluators if o != victim]
    assert tuple(rest) in transport.opened  # the re-formed ring, opened for exactly its members
    released = np.array([fed.release_of(o, f"boost-eval:{strategy_run_id(fed, o)}:once") for o in rest])
    np.testing.assert_allclose(
        [rec.decision.err_total, rec.decision.weight_total], clip_error_pairs(released).sum(axis=0), atol=1e-6
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
    assert (
        fed.refusal(b, fed.spec(config, at_round(empty_history(), 0), _stump(), ring), match="differs from the share")
        == "invalid_task"
    )
    payload, _ = fed.evaluate(a, fed.spec(config, at_round(empty_history(), 0), _stump(), ring))
    assert payload is None  # the leader started: a's share and this evaluation add up to the run's ε
    assert math.fsum(h["epsilon"] for h in ledger.history(a)) == pytest.approx(2.0)


def test_a_batch_of_evaluations_is_debited_together_and_each_refusal_stays_alone(fed):
    fb, config = _config()
    node = "owner-0"
    ids = [o for o in fed.owners if o.startswith(node + ".")]
    fed.ledgers[node].debit(ids[2], 9.9, purpose="other", release_id="x")  # no room left for a 0.6 release
    spec = fed.spec(config, at_round(empty_history(), 0), _stump(), list(fed.owners))
    tasks = [fed.task(o, spec) for o in ids] + [fed.task(ids[1], spec)]  # ids[1] twice
    results, out = fed.answer(node, tasks)
    payloads = {r.task_id: r.payload for r in results}
    assert tasks[0].task_id not in payloads and out  # the leader started: its first hop, no answer yet
    assert isinstance(payloads[tasks[1].task_id], RingJoined)
    assert payloads[tasks[2].task_id].code == "budget_exceeded"
    assert payloads[tasks[3].task_id].code == "already_released"  # the batch's first task of ids[1] released it
    assert fed.release_of(ids[2], spec.release_id) is None
    assert [len(fed.ledgers[node].history(o)) for o in ids] == [1, 1, 1]  # ids[2]: only its earlier entry


def test_a_run_that_keeps_nothing_says_why_with_the_noise_and_weight_numbers(tmp_path):
    """Every round skipped because the noisy error looks no better than chance: the coordinator's
    error is one line with the noise scale against the weight totals and what to change."""
    from privfed.server.strategies.boosting import BoostingStrategy

    fed = Federation(tmp_path, per_node=3, budget=math.inf)
    fb = BoostingParams(epsilon=1e-3, n_classes=2, bounds=BOUNDS, n_rounds=2, n_bins=4, weight_bound=4.0)
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
        f"{ReleasePlan(fb).eval_noise_scale:.3g} per owner",
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
    assert fed.refusal(ring[1], fed.spec(config, rewritten, _stump(2, 3), ring)) == "invalid_task"
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
    exact = [local_error(learner, o.X, o.y, np.ones(4), row_bound=1.0) for o in fed.owners.values()]
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
    assert fed.refusal(a, fed.spec(config, at_round(empty_history(), 0), _stump(), ring)) == "already_released"
    assert len(ledger.history(a)) == 1
    fed.evaluate(b, fed.spec(config, at_round(empty_history(), 0), _stump(), ring))
    assert [e["epsilon"] for e in ledger.history(b)] == [pytest.approx(fb.eval_epsilon)] and fb.eval_epsilon == 2.0
