"""Issue 9, item 4: owner ids are bound to node certificates (contract 1).

* Registration is the coordinator's check, and there the attacker is a *node*: a client holding
  owner-1's certificate registers owner-0's owner id (``owner-0.o00000``) and ids of nodes that do
  not exist, against the REAL coordinator server. Every such registration is refused, and the
  honest node owner-0 (a real ``privfed owner`` process) registers and keeps serving — before the
  fix it exited with "already registered by node 'owner-1'".
* Ring keys are the owner's check: a hostile coordinator (colluding with node owner-1) lists
  owner-0's owner id under node owner-1, signed with owner-1's key, or under node owner-0 with
  owner-1's certificate. The honest peer refuses the key (a refusal, no envelope leaves); a
  correctly bound key of owner-1 in the same position is accepted (positive control).
"""

import secrets

import grpc
import numpy as np
import pytest
from hostile import (
    WAIT,
    assert_still_serving,
    boost_config,
    boost_evaluate,
    cert_key,
    cert_pem,
    empty_history,
    kind,
    spawn_owner,
    stump,
    tls_files,
    wait_until,
)

from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.signed_keys import sign_public_key
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto.transport import REGISTER_TIMEOUT, channel_credentials, channel_options

D = 2
X = np.array([[0.2, 0.9], [0.7, 0.4]])
Y = np.array([0, 1])


def _owner_info(certs, signer_node, owner_id):
    key = generate_private_key()
    pub = public_bytes(key)
    return pb.OwnerInfo(
        owner_id=owner_id,
        x25519_public_key=pub,
        key_signature=sign_public_key(cert_key(certs, signer_node), pub, owner_id),
    ), pub


def _register_as(stub, certs, node, owner_ids):
    infos = [_owner_info(certs, node, o)[0] for o in owner_ids]
    stub.RegisterNode(
        pb.RegisterNodeRequest(node_id=node, owners=infos, node_certificate=cert_pem(certs, node)),
        timeout=REGISTER_TIMEOUT,
    )


@pytest.fixture
def owner1_stub(real_coordinator, certs):
    channel = grpc.secure_channel(
        f"127.0.0.1:{real_coordinator.port}",
        channel_credentials(tls_files(certs, "owner-1")),
        options=channel_options(),
    )
    yield pb_grpc.CoordinatorStub(channel)
    channel.close()


CLAIMS = {
    "victim-id": ["owner-0.o00000"],
    "mixed": ["owner-1.o00000", "owner-0.o00001"],
    "sybils-of-unknown-node": [f"owner-9.o{i:05d}" for i in range(20)],
    "unbound-id": ["o00000"],
}


def test_node_cannot_register_owner_ids_of_another_node(real_coordinator, owner1_stub, certs, tmp_path):
    from privfed.common.bounds import Bounds
    from privfed.server.strategies import make_strategy

    def refused(claimed):
        with pytest.raises(grpc.RpcError) as err:
            _register_as(owner1_stub, certs, "owner-1", claimed)
        assert err.value.code() in (
            grpc.StatusCode.INVALID_ARGUMENT,
            grpc.StatusCode.PERMISSION_DENIED,
            grpc.StatusCode.FAILED_PRECONDITION,
            grpc.StatusCode.UNAUTHENTICATED,
        )
        # nothing of the claim stuck: an id the victim holds keeps the victim's node and key
        for o, info in real_coordinator.dispatcher.owners().items():
            assert o not in claimed or (
                real_coordinator.dispatcher.peer_key(o).node_id == "owner-0"
                and info.x25519_public_key == honest_keys.get(o)
            ), o

    honest_keys = {}
    for claimed in CLAIMS.values():  # before the victim registers ...
        refused(claimed)
    honest = spawn_owner(tmp_path, real_coordinator.port, "owner-0", X, Y, certs=certs)
    try:
        assert real_coordinator.dispatcher.wait_for_owners(2, WAIT) == 2, honest.log()
        assert sorted(real_coordinator.dispatcher.owners()) == honest.owner_ids
        honest_keys.update({o: i.x25519_public_key for o, i in real_coordinator.dispatcher.owners().items()})
        for claimed in CLAIMS.values():  # ... and after
            refused(claimed)
        # control: owner-1 may register owners under its own name
        _register_as(owner1_stub, certs, "owner-1", ["owner-1.o00000"])
        strategy = make_strategy(
            "ncc", mechanism="pm", epsilon=0.1, n_classes=2, bounds=Bounds(np.zeros(D), np.ones(D))
        )
        outcome = real_coordinator.dispatcher.run(strategy.configure(honest.owner_ids, "r1"), timeout=WAIT)
        assert len(outcome.results) == 2 and not outcome.lost, honest.log()[-3000:]
        assert honest.alive(), honest.log()[-3000:]
        assert "already registered" not in honest.log()
    finally:
        real_coordinator.dispatcher.shutdown()
        honest.stop()


def _forged_ring(coordinator, certs, victim, claimed_id, claimed_node, signer, cert_node_name, cert_of):
    """A 2-party ring [victim, claimed_id] whose second key the attacker (holding ``signer``'s
    certificate key) made, listed under node ``claimed_node`` with ``cert_of``'s certificate
    given under the name ``cert_node_name``."""
    key = generate_private_key()
    pub = public_bytes(key)
    sig = sign_public_key(cert_key(certs, signer), pub, claimed_id)
    fp = FixedPoint.choose(n_parties=2, max_abs=1e4)
    session = secrets.token_hex(16)
    ring = pb.RingSpec(
        session_id=session,
        ring=[victim, claimed_id],
        frac_bits=fp.frac_bits,
        n_parties=2,
        max_abs=1e4,
        peers=[
            coordinator.peer_key(victim),
            pb.PeerKey(owner_id=claimed_id, node_id=claimed_node, x25519_public_key=pub, key_signature=sig),
        ],
        certificates=[
            pb.NodeCertificate(node_id="owner-0", pem=cert_pem(certs, "owner-0")),
            pb.NodeCertificate(node_id=cert_node_name, pem=cert_pem(certs, cert_of)),
        ],
    )
    return session, ring


FORGERIES = [
    ("owner-0.o00007", "owner-1", "owner-1", "owner-1", False),  # owner-0's id under node owner-1
    ("owner-0.o00007", "owner-0", "owner-0", "owner-1", False),  # owner-1's certificate passed off as owner-0's
    ("owner-1.o00000", "owner-1", "owner-1", "owner-1", True),  # positive control: a correctly bound key
]


def test_ring_peer_refuses_a_key_signed_by_another_node(coordinator, owners, certs):
    node = owners("owner-0", X, Y)
    victim = node.owner_ids[0]
    for claimed_id, claimed_node, cert_name, cert_of, accepted in FORGERIES:
        session, ring = _forged_ring(
            coordinator, certs, victim, claimed_id, claimed_node, "owner-1", cert_name, cert_of
        )
        config = boost_config(D, f"keys-{secrets.token_hex(3)}")
        task = boost_evaluate(
            f"ev-{secrets.token_hex(4)}",
            victim,
            f"keys-{secrets.token_hex(3)}",
            config,
            empty_history(),
            stump(0, 0.5),
            ring,
        )
        coordinator.send([task])
        if accepted:
            assert wait_until(lambda: coordinator.relays_from("owner-0", session), WAIT), (
                f"control: a correctly bound peer key was not used:\n{node.log()[-3000:]}"
            )
        else:
            got = coordinator.wait_results([task.task_id])
            assert got and kind(got[0]) == "refusal", (
                f"{claimed_id} under {claimed_node}: forged key not refused: {got}\n{node.log()[-3000:]}"
            )
            assert coordinator.relays_from("owner-0", session) == [], "an envelope left for a forged key"
    assert_still_serving(coordinator, node, node.owner_ids[1], d=D)
