"""A seeded owner node restarted on its ledger draws new noise for new releases (audit 20, L1).

``--rng seeded`` (tests and reproducible simulations) seeded every start's noise from ``--seed`` alone, so a
node restarted on the same ledger replayed its stream: a new share of the same query after the restart was
the first one, bit for bit, while the ledger debited both; a different query at the same place in the stream
would have had the same noise, which two answers can cancel. The stream now follows the releases the ledger
holds when the node starts. ``--rng secure`` is the control the first half of the test also checks.
"""

import numpy as np
import pytest
from hostile import kind, ledger_history, ncc_task, spent_epsilon

D, EPS, LABEL_EPS = 3, 0.4, 0.1
X = np.random.default_rng(1).uniform(0, 1, (8, D))
Y = np.array([0, 1] * 4)


def share(result) -> bytes:
    assert kind(result) not in (None, "refusal"), result
    return getattr(result, kind(result)).SerializeToString()


@pytest.mark.parametrize("rng", ["seeded", "secure"])
def test_a_restarted_node_draws_new_noise_for_a_new_share_of_the_same_query(coordinator, owners, rng):
    node = owners("owner-0", X, Y, rng=rng, shards=4)
    o = node.owner_ids[0]
    before = coordinator.run([ncc_task("before", o, d=D, epsilon=EPS, label_epsilon=LABEL_EPS)])["before"]
    node.stop()
    again = owners("owner-0", X, Y, rng=rng, shards=4)  # the same data and ledger: an operator's restart
    after = coordinator.run([ncc_task("after", o, d=D, epsilon=EPS, label_epsilon=LABEL_EPS)])["after"]
    assert spent_epsilon(ledger_history(again.ledger, o)) == pytest.approx(2 * (EPS + LABEL_EPS))  # two releases
    assert share(before) != share(after), f"the restarted node drew the same noise again:\n{again.log()[-2000:]}"
    if rng == "seeded":
        assert "--rng seeded: this node's noise is a function of --seed" in node.log()
