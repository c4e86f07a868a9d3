"""A node checks the mask and box keys of its own owners against the ones it holds, not their signatures.

Two real :class:`SecAggDriver` s (the owner node's code, real certificates from ``privfed certs``)
and a hostile coordinator that swaps a key of an owner hosted on the *same* node as the victim:
the signature path is skipped for co-hosted neighbours, so the local comparison must refuse it.
"""

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

from privfed.common.errors import RemoteProtocolError
from privfed.common.secagg import pairwise
from privfed.common.secagg.aggregator import SecAggServer
from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.masking import pair_key
from privfed.common.secagg.messages import KeyAdvert
from privfed.common.secagg.signed_keys import sign_public_key
from privfed.common.tasks import PeerKey
from privfed.owner.keys import OwnerKeys
from privfed.owner.secagg import SecAggDriver

sys.path.insert(0, str(Path(__file__).parent))
from hostile import cert_key, cert_pem, make_federation_certs  # noqa: E402

SESSION = "run-cohosted"


@pytest.fixture
def federation(tmp_path):
    certs = make_federation_certs(tmp_path / "certs", owners=2)
    ca_pem = (certs / "ca.pem").read_bytes()
    ids = {node: [f"{node}.o{i:05d}" for i in range(4 * j, 4 * j + 4)] for j, node in enumerate(("owner-0", "owner-1"))}
    keys = {o: generate_private_key() for owners in ids.values() for o in owners}
    drivers, peers = {}, {}
    for node, owners in ids.items():
        signer = cert_key(certs, node)
        releases = OwnerKeys({o: keys[o] for o in owners}, ca_pem)
        drivers[node] = SecAggDriver(releases, sign=lambda o, s, pk, k=signer: sign_public_key(k, pk, o, s))
        for o in owners:
            pk = public_bytes(keys[o])
            peers[o] = PeerKey(o, node, pk, sign_public_key(signer, pk, o))
    fp = FixedPoint.choose(n_parties=8, max_abs=10.0)
    adverts = {o: drivers[node].advertise(o, SESSION, fp) for node, owners in ids.items() for o in owners}
    server = SecAggServer(SESSION, sorted(adverts), fp, rounds=1)
    requests = server.on_adverts(adverts)
    certificates = {node: cert_pem(certs, node) for node in ids}
    return drivers, peers, requests, server, certificates


def _victim(server):
    """An owner of owner-0 with a neighbour on owner-0 too."""
    return next(
        (u, v) for u in server.members if u.startswith("owner-0") for v in server.graph[u] if v.startswith("owner-0")
    )


def test_honest_keys_of_co_hosted_neighbours_are_accepted_without_their_signatures(federation):
    drivers, peers, requests, server, certificates = federation
    u, v = _victim(server)
    request = requests[u]
    unsigned = tuple(replace(a, signature=b"") if a.owner_id == v else a for a in request.adverts)
    keys = [replace(peers[w], key_signature=b"") if w == v else peers[w] for w in server.graph[u]]
    shares = drivers["owner-0"].share_keys(u, SESSION, replace(request, adverts=unsigned), keys, certificates)
    assert [s.recipient for s in shares.shares] == list(server.graph[u])


def test_a_swapped_mask_key_of_a_co_hosted_neighbour_is_refused(federation):
    drivers, peers, requests, server, certificates = federation
    u, v = _victim(server)
    request = requests[u]
    swapped = public_bytes(generate_private_key())
    adverts = tuple(KeyAdvert(v, swapped, a.signature) if a.owner_id == v else a for a in request.adverts)
    keys = [peers[w] for w in server.graph[u]]
    with pytest.raises(RemoteProtocolError, match="not the one this node drew"):
        drivers["owner-0"].share_keys(u, SESSION, replace(request, adverts=adverts), keys, certificates)


def test_a_swapped_box_key_of_a_co_hosted_neighbour_is_refused(federation):
    drivers, peers, requests, server, certificates = federation
    u, v = _victim(server)
    swapped = public_bytes(generate_private_key())
    keys = [replace(peers[w], x25519_public_key=swapped) if w == v else peers[w] for w in server.graph[u]]
    with pytest.raises(RemoteProtocolError, match="not the one this node holds"):
        drivers["owner-0"].share_keys(u, SESSION, requests[u], keys, certificates)


def test_a_neighbour_on_another_node_still_needs_its_signature(federation):
    drivers, peers, requests, server, certificates = federation
    u = next(
        u for u in server.members if u.startswith("owner-0") and any(w.startswith("owner-1") for w in server.graph[u])
    )
    v = next(w for w in server.graph[u] if w.startswith("owner-1"))
    request = requests[u]
    unsigned = tuple(replace(a, signature=b"\x00" * 70) if a.owner_id == v else a for a in request.adverts)
    with pytest.raises(RemoteProtocolError):
        drivers["owner-0"].share_keys(
            u, SESSION, replace(request, adverts=unsigned), [peers[w] for w in server.graph[u]], certificates
        )


def test_co_hosted_pairs_agree_once_and_the_sum_is_exact(federation, monkeypatch):
    """A node computes the mask-key agreement of a pair it hosts both ends of once; each end's pair key
    is still the one its own X25519 exchange gives, and the secure sum through both drivers is exact."""
    drivers, peers, requests, server, certificates = federation
    exchanges = []

    def counted(raw):  # the mask-key agreements the machines compute (each asks for its peer's parsed key)
        exchanges.append(raw)
        return X25519PublicKey.from_public_bytes(raw)

    monkeypatch.setattr(pairwise, "public_key", counted)
    machines = {o: m for d in drivers.values() for o, m in d._machines[SESSION].items()}
    shares = {}
    for u in server.members:
        node = u.split(".")[0]
        keys = [peers[w] for w in server.graph[u]]
        shares[u] = drivers[node].share_keys(u, SESSION, requests[u], keys, certificates)
    edges = {tuple(sorted((u, v))) for u in server.members for v in server.graph[u]}
    cohosted = [e for e in edges if e[0].split(".")[0] == e[1].split(".")[0]]
    assert cohosted, "the fixture's graph has a pair on one node"
    for u, v in edges:  # every end's pair key as its own, independent exchange gives it
        for a, b in ((u, v), (v, u)):
            agreed = machines[a]._mask_key.exchange(X25519PublicKey.from_public_bytes(machines[b]._mask_public))
            assert machines[a]._pair_keys[b] == pair_key(agreed, SESSION, a, b)
    assert len(exchanges) == 2 * len(edges) - len(cohosted)  # a co-hosted pair's second end takes the first's
    server.on_key_shares(shares)
    values = {o: np.array([float(i), -0.5 * i]) for i, o in enumerate(server.members)}
    inputs = server.input_requests()
    masked = {o: machines[o].masked_input(r, values[o]) for o, r in inputs.items()}
    unmask = server.on_masked(masked)
    total = server.on_unmask({o: machines[o].on_unmask(r) for o, r in unmask.items()})
    np.testing.assert_allclose(total, np.sum(list(values.values()), axis=0), atol=1e-6)


def test_a_long_lived_node_keeps_its_checked_keys_only_for_the_sessions_it_holds(tmp_path):
    from privfed.owner import secagg

    certs = make_federation_certs(tmp_path / "certs", owners=2)
    ca_pem = (certs / "ca.pem").read_bytes()
    ids = {"owner-0": ["owner-0.o00000"], "owner-1": ["owner-1.o00000", "owner-1.o00001"]}
    keys = {o: generate_private_key() for owners in ids.values() for o in owners}
    drivers, peers = {}, {}
    for node, owners in ids.items():
        signer = cert_key(certs, node)
        drivers[node] = SecAggDriver(
            OwnerKeys({o: keys[o] for o in owners}, ca_pem),
            sign=lambda o, s, pk, k=signer: sign_public_key(k, pk, o, s),
        )
        peers |= {
            o: PeerKey(o, node, public_bytes(keys[o]), sign_public_key(signer, public_bytes(keys[o]), o))
            for o in owners
        }
    certificates = {node: cert_pem(certs, node) for node in ids}
    fp = FixedPoint.choose(n_parties=3, max_abs=10.0)
    u, node = ids["owner-0"][0], drivers["owner-0"]
    for i in range(3 * secagg.KEPT_SESSIONS):  # boosting job after boosting job
        session = f"job-{i}"
        adverts = {o: drivers[n].advertise(o, session, fp) for n, owners in ids.items() for o in owners}
        server = SecAggServer(session, sorted(adverts), fp, rounds=1)
        request = server.on_adverts(adverts)[u]
        shares = node.share_keys(u, session, request, [peers[w] for w in server.graph[u]], certificates)
        assert [s.recipient for s in shares.shares] == list(server.graph[u])  # the neighbours' signed keys checked
    held = {name: len(t) for name, t in vars(node).items() if isinstance(t, dict | set | list)}
    assert max(held.values()) <= secagg.KEPT_SESSIONS, held


def _sharing_a_remote_neighbour(server):
    """Two owners of owner-0 and a neighbour of both on owner-1."""
    ours = [u for u in server.members if u.startswith("owner-0")]
    for v in (w for w in server.members if w.startswith("owner-1")):
        having = [u for u in ours if v in server.graph[u]]
        if len(having) >= 2:
            return having[0], having[1], v
    raise AssertionError("the fixture's graph has no remote neighbour of two owners of owner-0")


def test_a_key_sent_with_one_owner_is_checked_for_every_owner_that_uses_it(federation):
    """Each box key goes to a node once per run, with the first of its owners that has the neighbour
    (issue 27): a hostile coordinator presents another owner's key, signed for that owner, as the
    neighbour's, with the first owner's step 1. The first owner refuses it, and so does the second,
    whose step 1 carries no key: the node's keys of a run are checked per owner at use, not trusted
    because they came with a task."""
    drivers, peers, requests, server, certificates = federation
    u1, u2, v = _sharing_a_remote_neighbour(server)
    other = next(w for w in server.members if w.startswith("owner-1") and w != v)
    posing = replace(peers[other], owner_id=v)  # other's key and signature under v's id
    keys = [posing if w == v else peers[w] for w in server.graph[u1]]
    with pytest.raises(RemoteProtocolError, match="does not verify"):
        drivers["owner-0"].share_keys(u1, SESSION, requests[u1], keys, certificates)
    with pytest.raises(RemoteProtocolError, match="does not verify"):
        drivers["owner-0"].share_keys(u2, SESSION, requests[u2], [], certificates)


def test_two_keys_for_one_neighbour_in_one_run_are_refused(federation, tmp_path):
    """Equivocation: the coordinator gives two owners of one node different keys for the same neighbour
    in one run, both signed by the neighbour's node (a second key, as a restarted node signs). No
    honest run sends a node a neighbour's key twice; the node keeps the first and refuses the other,
    so all its owners seal to one key per neighbour and run."""
    drivers, peers, requests, server, certificates = federation
    u1, u2, v = _sharing_a_remote_neighbour(server)
    drivers["owner-0"].share_keys(u1, SESSION, requests[u1], [peers[w] for w in server.graph[u1]], certificates)
    pk = public_bytes(generate_private_key())
    second = PeerKey(v, "owner-1", pk, sign_public_key(cert_key(tmp_path / "certs", "owner-1"), pk, v))
    with pytest.raises(RemoteProtocolError, match="second box key"):
        drivers["owner-0"].share_keys(u2, SESSION, requests[u2], [second], certificates)
    shares = drivers["owner-0"].share_keys(u2, SESSION, requests[u2], [], certificates)  # the first key stands
    assert [s.recipient for s in shares.shares] == list(server.graph[u2])
