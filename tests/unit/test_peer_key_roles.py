"""Which certificate may vouch for a ring peer's key (``OwnerKeys.peer_key``, contract 1): an owner node's, whatever
its name, and never the coordinator's or a data user's.

A node's name is free (``privfed certs --owner-names hospital-a,...``, ``privfed owner --name hospital-a``), but
the check that kept the coordinator from listing itself as a peer's node was a name rule (``owner-<i>``): a
secure sum among nodes named otherwise failed after its owners had paid for the round (a walkthrough's
``bdt`` job on hospital nodes). The rule is now the certificate's, which the CA signs: the coordinator's certificate
serves TLS (server auth), an owner node's never does, and a data user's carries its role.
"""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.serialization import Encoding, load_pem_private_key

from privfed.common.errors import RemoteProtocolError
from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.signed_keys import sign_public_key
from privfed.common.tasks import PeerKey
from privfed.deploy.certs import COORDINATOR, load_ca, make_certs, party_dir
from privfed.owner.keys import OwnerKeys

NODES = ("hospital-a", "hospital-b")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    root = make_certs(tmp_path_factory.mktemp("pki"), owners=2, owner_names=list(NODES), data_users=["alice"])
    pems = {n: (party_dir(root, n) / f"{n}.pem").read_bytes() for n in (*NODES, COORDINATOR, "alice")}
    keys = {n: load_pem_private_key((party_dir(root, n) / f"{n}-key.pem").read_bytes(), None) for n in pems}
    return OwnerKeys({}, load_ca(root)[1].public_bytes(Encoding.PEM)), pems, keys


def _peer(keys, signer: str, node: str) -> PeerKey:
    owner = f"{node}.o00000"
    pub = public_bytes(generate_private_key())
    return PeerKey(owner, node, pub, sign_public_key(keys[signer], pub, owner))


def test_a_node_of_any_name_vouches_for_its_own_owners_keys(pki):
    owner_keys, pems, keys = pki
    peer = _peer(keys, "hospital-b", "hospital-b")
    assert owner_keys.peer_key({"hospital-b": pems["hospital-b"]}, peer) == peer.x25519_public_key


@pytest.mark.parametrize(
    ("signer", "why"),
    [(COORDINATOR, "is a server's"), ("alice", "is a data user's")],
    ids=["coordinator", "data-user"],
)
def test_neither_the_coordinator_nor_a_data_user_vouches_for_a_peer(pki, signer, why):
    owner_keys, pems, keys = pki
    with pytest.raises(RemoteProtocolError, match=why):
        owner_keys.peer_key({signer: pems[signer]}, _peer(keys, signer, signer))


def test_a_node_does_not_vouch_for_another_nodes_owners(pki):
    owner_keys, pems, keys = pki
    pub = public_bytes(generate_private_key())
    peer = PeerKey(
        "hospital-a.o00000", "hospital-b", pub, sign_public_key(keys["hospital-b"], pub, "hospital-a.o00000")
    )
    with pytest.raises(RemoteProtocolError, match="not an owner of node"):
        owner_keys.peer_key({"hospital-b": pems["hospital-b"]}, peer)
