"""A coordinator that refuses to relay (or drops every envelope) must not take an honest node
down, nor make it release twice.

The owner debits its evaluation release before the ring's first envelope leaves; when the relay
refuses that envelope the ring cannot close, but the node keeps serving, and asking the same
(run, round) again — the re-formed ring a coordinator would send — gets the cached release, so the
ledger shows one debit, not two.
"""

import numpy as np
from hostile import assert_still_serving, boost_config, grid_stump, ledger_history, spent_epsilon

D = 2
X = np.array([[0.2, 0.7], [0.9, 0.1], [0.5, 0.5]])
Y = np.array([0, 1, 1])


def test_refused_relay_leaves_the_node_serving_and_debits_once(coordinator, owners):
    node = owners("owner-0", X, Y)
    a, b, spare = node.owner_ids
    config = boost_config(D, "withheld-run")
    coordinator.relay = False
    first = coordinator.run_ring([a, b], grid_stump(0, 1, 2), config, round_id="withheld", timeout=5.0)
    assert first.total is None
    assert coordinator.relays_from("owner-0"), "the ring never tried to send (the test would prove nothing)"
    assert node.alive(), f"a refused relay killed the node:\n{node.log()[-3000:]}"
    spent = {o: spent_epsilon(ledger_history(node.ledger, o)) for o in (a, b)}

    coordinator.relay = True
    again = coordinator.run_ring([a, b], grid_stump(0, 1, 2), config, round_id="withheld")
    assert again.total is not None or again.refusals(), (again.answers, node.log()[-3000:])
    assert {o: spent_epsilon(ledger_history(node.ledger, o)) for o in (a, b)} == spent, (
        "re-forming the ring for the same (run, round) debited a second release"
    )
    assert_still_serving(coordinator, node, spare, d=D)
