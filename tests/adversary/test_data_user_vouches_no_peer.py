"""A data-user certificate vouches for no owner's key (contract 1; ``privfed.common.roles``).

The federation CA issues data users certificates too (``privfed certs --data-user NAME``); they
may submit jobs and nothing else. The coordinator refuses them as nodes, but a hostile coordinator
does not ask itself: it lists a ring peer ``owner-5.o00000`` on "node" ``owner-5`` and hands the
honest owner the certificate of a *data user* named ``owner-5``, with a key that data user signed.
Before the fix the owner checked the chain, the name and the signature, not the role, so it sealed
its ring contribution to the data user's key: a 2-party ring [victim, fake] gives the coordinator
(with the data user, often the same party) the victim's contribution alone, the secure sum void.

``privfed certs --add --data-user owner-5`` issued such a certificate (the name check looked at the
names of the same call only); it now refuses an owner node's name. The certificate here is made
with the CA's key directly, as another issuing tool or an older privfed could.
"""

import secrets

import pytest
from hostile import (
    WAIT,
    assert_still_serving,
    boost_config,
    boost_evaluate,
    empty_history,
    kind,
    stump,
    wait_until,
)
from test_identity_binding import D, X, Y, _forged_ring

from privfed.common.errors import ConfigError
from privfed.common.roles import DATA_USER
from privfed.deploy.certs import load_ca, make_certs, write_party

FAKE_NODE = "owner-5"


def _data_user_named_like_a_node(certs):
    write_party(certs / FAKE_NODE, FAKE_NODE, ca=load_ca(certs), sans=[FAKE_NODE], server=False, role=DATA_USER)


def test_an_owner_refuses_a_ring_peer_vouched_for_by_a_data_user_certificate(coordinator, owners, certs):
    _data_user_named_like_a_node(certs)
    node = owners("owner-0", X, Y)
    victim = node.owner_ids[0]
    for claimed_id, claimed_node, signer, accepted in [
        (f"{FAKE_NODE}.o00000", FAKE_NODE, FAKE_NODE, False),  # the data user's certificate and key
        ("owner-1.o00000", "owner-1", "owner-1", True),  # positive control: a node's own
    ]:
        session, ring = _forged_ring(
            coordinator, certs, victim, claimed_id, claimed_node, signer, claimed_node, claimed_node
        )
        run = f"du-{secrets.token_hex(3)}"
        task = boost_evaluate(
            f"ev-{secrets.token_hex(4)}", victim, run, boost_config(D, run), empty_history(), stump(0, 0.5), ring
        )
        coordinator.send([task])
        if accepted:
            assert wait_until(lambda: coordinator.relays_from("owner-0", session), WAIT), (
                f"control: a node's correctly bound peer key was not used:\n{node.log()[-3000:]}"
            )
        else:
            left = lambda: coordinator.relays_from("owner-0", session)  # noqa: E731
            wait_until(lambda: left() or coordinator.wait_results([task.task_id], timeout=0), WAIT)
            assert left() == [], "the victim's contribution left, sealed to a data user's key"
            got = coordinator.wait_results([task.task_id])
            assert got and kind(got[0]) == "refusal", f"a data user's key was not refused: {got}"
    assert_still_serving(coordinator, node, node.owner_ids[1], d=D)


def test_certs_refuses_a_data_user_named_like_an_owner_node(tmp_path):
    out = make_certs(tmp_path / "certs", owners=2)
    with pytest.raises(ConfigError, match="owner node.s name"):
        make_certs(out, owners=0, data_users=[FAKE_NODE], add=True)
    make_certs(out, owners=0, data_users=["alice"], add=True)  # any other name is fine
