"""Issue 9, item 1: the ring secure sum must not leak raw values.

The attack (as measured in the issue): BoostEvaluate tasks with 2-party rings of honest owners
[A,B], [A,C], [B,C] give totals ab, ac, bc, and a = (ab + ac - bc) / 2 is A's own
(err_sum, w_sum); a stump whose threshold the coordinator chooses turns err_sum into the bit
``x_A[j] >= threshold``, so a binary search over thresholds (one fresh round per step) reads a raw
attribute. Before the fix: labels and attributes to 1e-10, ledgers empty.

What must hold now (contract 4): every evaluation an owner contributes to is a Laplace release
calibrated to the public weight bound B and debited before the ring's first envelope leaves;
re-forming rings within one (run, round) gets the same cached noisy pair (no new information,
no second debit); a fresh round is a fresh debit, until the budget is spent. So the test asserts

* every round in which an owner's value entered a total is paid for in that owner's ledger, and
  nothing beyond the budget is spent;
* the reconstructed values are off by at least what the debited ε implies: normalised by the
  Laplace scale B / ε of the debits (half the scale the owner uses, 2B/ε, to leave room), the
  mean absolute error over the 6 reconstructed coordinates per round is bounded below, and the
  attacker's best estimate (the mean over all its rounds) is still off by the scale implied by
  the *total* ε debited;
* different thresholds within one round tell the attacker nothing new;
* the honest node is alive and still answers a normal task.
"""

import secrets

import numpy as np
import pytest
from hostile import BUDGET, assert_still_serving, boost_config, grid_stump, ledger_history, spent_epsilon

D = 2
WEIGHT_BOUND = 1.0
MAX_ROUNDS = 10
MAX_ABS = 1e4  # the ring's fixed-point range: large enough for any noisy pair (weight_bound * (1 + 80/ε))
N_BINS = 1024  # the attacker's "public" threshold grid: any config is the coordinator's to choose
# A: (0.3, 0.8) label 1; B: (0.6, 0.1) label 0; C: (0.45, 0.55) label 1; D: spare, never attacked.
X = np.array([[0.3, 0.8], [0.6, 0.1], [0.45, 0.55], [0.5, 0.5]])
Y = np.array([1, 0, 1, 0])


def _pairs(a, b, c):
    return [[a, b], [a, c], [b, c]]


def _reconstruct(ab, ac, bc):
    """The difference attack: each single owner's value from the three pairwise totals."""
    return {"A": (ab + ac - bc) / 2, "B": (ab + bc - ac) / 2, "C": (ac + bc - ab) / 2}


def _truth(x, y, threshold):
    """(err_sum, w_sum) of a one-row owner with weight 1 under stump(0, threshold, leaves (0, 1))."""
    pred = 1 if x[0] >= threshold else 0
    return np.array([float(pred != y), 1.0])


def _entries_for(history, *needles):
    return [h for h in history if any(n in h["release_id"] or n in h["purpose"] for n in needles)]


def _spawn(owners, layout):
    """A, B, C (and a spare owner never attacked) on one node, or A+spare, B and C on three nodes
    (so the rings cross node certificates). Returns (ids, rows, node of each owner)."""
    if layout == "one-node":
        nodes = [owners("owner-0", X, Y)]
    else:
        nodes = [
            owners("owner-0", X[[0, 3]], Y[[0, 3]]),
            owners("owner-1", X[[1]], Y[[1]]),
            owners("owner-2", X[[2]], Y[[2]]),
        ]
    rows, node_of = {}, {}
    for node in nodes:
        rows.update(node.rows())
        node_of.update({o: node for o in node.owner_ids})
    truth_order = {tuple(X[i]): i for i in range(len(X))}
    ids = sorted(rows, key=lambda o: truth_order[tuple(rows[o][0])])  # A, B, C, spare by their rows
    return ids, rows, node_of


@pytest.mark.parametrize("layout", ["one-node", "three-nodes"])
def test_ring_difference_attack_learns_no_more_than_the_debits(coordinator, owners, layout):
    ids, rows, node_of = _spawn(owners, layout)
    A, B, C, spare = ids
    node = node_of[A]
    attack = f"atk-{secrets.token_hex(3)}"
    configs = {}

    # --- the binary search on A's attribute 0: one fresh round per step ---------------------
    lo, hi = 0.0, 1.0
    rounds = []  # (round id, threshold, {pair: total or None}, {owner: refusal code})
    for step in range(MAX_ROUNDS):
        index = min(N_BINS - 1, max(1, round((lo + hi) / 2 * N_BINS)))
        learner = grid_stump(0, index, N_BINS)
        threshold = learner.threshold
        # A fresh boosting run id and round id per step: whatever an owner keys its releases by,
        # each step is a new (run, round), which must be a new, debited release.
        round_id = f"{attack}-s{step:02d}"
        config = configs[round_id] = boost_config(D, round_id, epsilon=1.0, weight_bound=WEIGHT_BOUND, n_bins=N_BINS)
        totals, refusals = {}, {}
        for ring in _pairs(A, B, C):
            out = coordinator.run_ring(ring, learner, config, round_id=round_id, max_abs=MAX_ABS)
            totals[tuple(ring)] = out.total
            refusals.update({o: r.code for o, r in out.refusals().items()})
            assert all(r is not None for r in out.answers.values()) or out.total is not None or refusals, (
                f"ring {ring} got no answer at all:\n{node_of[ring[0]].log()[-3000:]}"
            )
        rounds.append((round_id, threshold, totals, refusals))
        if any(t is None for t in totals.values()):
            if any(code == "budget_exceeded" for code in refusals.values()):
                break  # the attack has spent the budget: that's the bound working
            continue
        a_err = _reconstruct(*(totals[tuple(p)][0] for p in _pairs(A, B, C)))["A"]
        # the attacker's step: is A's stump error that of "x_A[0] >= threshold"?
        if a_err < 0.5:  # leaves (0, 1) and y_A = 1 (from round 0's label read): prediction 1 means x >= t
            lo = threshold
        else:
            hi = threshold

    for o in (A, B, C):
        assert node_of[o].alive(), node_of[o].log()[-3000:]

    # --- what each owner paid for ----------------------------------------------------------
    histories = {o: ledger_history(node_of[o].ledger, o) for o in (A, B, C)}
    closed = [(rid, thr, t) for rid, thr, t, _ in rounds if all(v is not None for v in t.values())]
    for o, hist in histories.items():
        contributed = {rid for rid, _, t, _ in rounds for ring, total in t.items() if total is not None and o in ring}
        paid = [h for h in hist if h["epsilon"] > 0]
        assert spent_epsilon(hist) <= BUDGET * (1 + 1e-9), hist
        if contributed:
            assert paid, (
                f"{o} contributed to {len(contributed)} ring round(s) and its ledger shows nothing: {hist}; "
                f"the search put x_A[0] in [{lo:.6f}, {hi:.6f}], truth {rows[A][0][0]}"
            )
            # each step is its own boosting run (run id = the step's id): each must have its debit
            unpaid = sorted(rid for rid in contributed if not [h for h in _entries_for(hist, rid) if h["epsilon"] > 0])
            assert not unpaid, f"{o}: evaluations of {unpaid} reached a total without a debit; ledger {hist}"

    # Nothing (or only noise) was learnt. Refused outright is a pass for this part.
    if not closed:
        assert_still_serving(coordinator, node, spare, d=D)
        return

    # --- the reconstruction error against the debited ε --------------------------------------
    per_round_eps = []
    normalised = []
    estimates = {k: [] for k in "ABC"}
    for rid, thr, totals in closed:
        rec = _reconstruct(*(totals[tuple(p)] for p in _pairs(A, B, C)))
        for key, oid in zip("ABC", (A, B, C)):
            hist = histories[oid]
            eps = spent_epsilon(_entries_for(hist, rid)) or spent_epsilon(hist) / len(closed)
            per_round_eps.append(eps)
            scale = WEIGHT_BOUND / eps  # half the owner's own Laplace scale 2B/ε
            truth = _truth(*rows[oid], thr)
            normalised.extend(np.abs(rec[key] - truth) / scale)
            estimates[key].append(rec[key] - truth)
    normalised = np.asarray(normalised)
    assert np.all(np.isfinite(normalised))
    # Exactness was the bug: before the fix every reconstruction matched to 1e-10.
    assert np.max(normalised) > 1e-6, "the attacker reconstructed raw values exactly"
    # |Lap(2B/ε)| / (B/ε) has mean 2; a mean below 0.5 over >= 6 draws has probability < 1e-3.
    assert normalised.mean() >= 0.5, (normalised, per_round_eps)

    # The attacker's best estimate averages its rounds; its error must still reflect the total ε.
    best = []
    for key, oid in zip("ABC", (A, B, C)):
        total_eps = spent_epsilon(histories[oid])
        best.extend(np.abs(np.mean(estimates[key], axis=0)) / (WEIGHT_BOUND / total_eps))
    assert np.mean(best) >= 0.3, (best, [spent_epsilon(h) for h in histories.values()])

    # --- thresholds within one round change nothing: the round's pair is cached --------------
    rid = closed[0][0]
    again = [
        coordinator.run_ring([A, B], grid_stump(0, index, N_BINS), configs[rid], round_id=rid, max_abs=MAX_ABS).total
        for index in (1, N_BINS - 1)
    ]
    spent_before = spent_epsilon(ledger_history(node.ledger, A))
    for total in again:
        if total is not None:
            np.testing.assert_array_equal(total, closed[0][2][(A, B)])
    assert spent_epsilon(ledger_history(node.ledger, A)) == pytest.approx(spent_before)

    assert_still_serving(coordinator, node, spare, d=D)
    assert_still_serving(coordinator, node, A, d=D)


def test_malformed_rings_are_refused_without_a_debit(coordinator, owners):
    """Rings no honest coordinator forms: one party (its "sum" is its own value), a party twice,
    an owner asked to join a ring it is not in, a learner of another kind. Each is refused by the
    owner before anything is computed or debited, and the node keeps serving."""
    from hostile import boost_evaluate, empty_history, kind

    from privfed.common.learners.ncc_model import NearestCentroidModel

    node = owners("owner-0", X, Y)
    A, B, C, spare = node.owner_ids
    config = boost_config(D, f"bad-rings-{secrets.token_hex(3)}", epsilon=1.0)
    learner = grid_stump(0, 1, 2)
    cases = {
        "alone": (A, [A]),
        "twice": (A, [A, B, A]),
        "not-a-member": (C, [A, B]),
        "foreign-learner": (A, [A, B]),
    }
    for name, (target, ring) in cases.items():
        spec = coordinator.ring_spec(
            secrets.token_hex(16),
            ring if len(set(ring)) == len(ring) else [A, B],
            max_abs=MAX_ABS,
            peers=sorted(set(ring)),
        )
        del spec.ring[:]
        spec.ring.extend(ring)
        spec.n_parties = len(ring)
        lrn = NearestCentroidModel([[0.0, 0.0], [1.0, 1.0]]) if name == "foreign-learner" else learner
        task = boost_evaluate(f"{name}-{secrets.token_hex(3)}", target, name, config, empty_history(), lrn, spec)
        coordinator.send([task])
        got = coordinator.wait_results([task.task_id])
        assert got and kind(got[0]) == "refusal", f"{name}: {got}\n{node.log()[-2000:]}"
        assert coordinator.relays_from("owner-0", spec.session_id) == [], f"{name}: an envelope left"
    for o in (A, B, C):
        assert spent_epsilon(ledger_history(node.ledger, o)) == 0.0, ledger_history(node.ledger, o)
    assert_still_serving(coordinator, node, spare, d=D)
