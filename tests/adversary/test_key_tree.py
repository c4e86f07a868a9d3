"""Issue 27: a node binds its owners' ring keys with ONE signature over a Merkle tree of the bindings
(``privfed.common.secagg.signed_keys.sign_key_tree``), and each key travels with its inclusion path.
The coordinator rebuilds the paths from the registration, so it holds every proof, and it is hostile:
it tampers with the proof of a key of the honest node owner-1 (three owners, so the tree is three
leaves deep enough for a two-hash path) and sends a two-party ring [victim, that owner] to the honest
node owner-0. Every forgery is refused (a refusal, no envelope leaves); the same ring with the
untouched proof is accepted (positive control), and the victim's node keeps serving.

Forgeries: another key under the owner's proof; a leaf moved to another owner id; the path
truncated, extended, reordered; another index; another tree size (whose path still hashes to the
signed root: only the root's signature, which covers the size, refuses it); a tree signed by
another node's certificate key replayed under owner-1, with owner-1's certificate or with the other
node's certificate given under owner-1's name.
"""

import secrets
from dataclasses import dataclass

import numpy as np
from hostile import (
    WAIT,
    assert_still_serving,
    boost_config,
    boost_evaluate,
    cert_key,
    cert_pem,
    empty_history,
    kind,
    stump,
    wait_until,
)

from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.merkle import HASH_BYTES
from privfed.common.secagg.signed_keys import sign_key_tree
from privfed.proto import privfed_pb2 as pb

D = 2
X = np.array([[0.2, 0.9], [0.7, 0.4]])
Y = np.array([0, 1])
X3 = np.array([[0.2, 0.9], [0.7, 0.4], [0.5, 0.5]])
Y3 = np.array([0, 1, 0])


@dataclass
class Forgery:
    name: str
    key: pb.PeerKey
    cert_name: str = "owner-1"  # the node id the peer's certificate is given under
    cert_of: str = "owner-1"  # whose certificate it is
    accepted: bool = False


def _copy(key: pb.PeerKey, **fields) -> pb.PeerKey:
    out = pb.PeerKey()
    out.CopyFrom(key)
    for name, value in fields.items():
        setattr(out, name, value)
    return out


def _forgeries(coordinator, certs, owner_ids: list[str]) -> list[Forgery]:
    peer, other = owner_ids[0], owner_ids[1]
    honest = coordinator.peer_key(peer)
    assert honest.key_tree_size == 3 and len(honest.key_path) == 2 * HASH_BYTES, honest  # one tree, two hashes
    assert honest.key_signature == coordinator.peer_key(other).key_signature  # one signature for the node
    moved = coordinator.peer_key(other)
    path = bytes(honest.key_path)
    attacker = public_bytes(generate_private_key())
    _, replayed_signature = sign_key_tree(cert_key(certs, "owner-2"), "owner-1", [(peer, attacker)])
    replayed = pb.PeerKey(
        owner_id=peer,
        node_id="owner-1",
        x25519_public_key=attacker,
        key_signature=replayed_signature,
        key_index=0,
        key_tree_size=1,
    )
    return [
        Forgery("another key under the proof", _copy(honest, x25519_public_key=attacker)),
        Forgery("another owner's leaf under this id", _copy(moved, owner_id=peer)),
        Forgery("path truncated", _copy(honest, key_path=path[:HASH_BYTES])),
        Forgery("path extended", _copy(honest, key_path=path + path[:HASH_BYTES])),
        Forgery("path reordered", _copy(honest, key_path=path[HASH_BYTES:] + path[:HASH_BYTES])),
        Forgery("another index", _copy(honest, key_index=1)),
        Forgery("another tree size", _copy(honest, key_tree_size=4)),
        Forgery("another node's tree, owner-1's certificate", replayed),
        Forgery("another node's tree and certificate", replayed, cert_of="owner-2"),
        Forgery("positive control: the proof as registered", honest, accepted=True),
    ]


def _ring(coordinator, certs, victim: str, forgery: Forgery) -> tuple[str, pb.RingSpec]:
    fp = FixedPoint.choose(n_parties=2, max_abs=1e4)
    session = secrets.token_hex(16)
    return session, pb.RingSpec(
        session_id=session,
        ring=[victim, forgery.key.owner_id],
        frac_bits=fp.frac_bits,
        n_parties=2,
        max_abs=1e4,
        peers=[coordinator.peer_key(victim), forgery.key],
        certificates=[
            pb.NodeCertificate(node_id="owner-0", pem=cert_pem(certs, "owner-0")),
            pb.NodeCertificate(node_id=forgery.cert_name, pem=cert_pem(certs, forgery.cert_of)),
        ],
    )


def test_a_tampered_inclusion_proof_is_refused(coordinator, owners, certs):
    node = owners("owner-0", X, Y)
    peers = owners("owner-1", X3, Y3)
    victim = node.owner_ids[0]
    for forgery in _forgeries(coordinator, certs, peers.owner_ids):
        session, ring = _ring(coordinator, certs, victim, forgery)
        config = boost_config(D, f"tree-{secrets.token_hex(3)}")
        task = boost_evaluate(
            f"ev-{secrets.token_hex(4)}",
            victim,
            f"tree-{secrets.token_hex(3)}",
            config,
            empty_history(),
            stump(0, 0.5),
            ring,
        )
        coordinator.send([task])
        if forgery.accepted:
            assert wait_until(lambda s=session: coordinator.relays_from("owner-0", s), WAIT), (
                f"control: a correctly proven peer key was not used:\n{node.log()[-3000:]}"
            )
        else:
            got = coordinator.wait_results([task.task_id])
            assert got and kind(got[0]) == "refusal", f"{forgery.name}: not refused: {got}\n{node.log()[-3000:]}"
            assert coordinator.relays_from("owner-0", session) == [], f"{forgery.name}: an envelope left"
    assert_still_serving(coordinator, node, node.owner_ids[1], d=D)
