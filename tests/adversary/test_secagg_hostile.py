"""Issue 12, item 4: a hostile coordinator against honest owners of the pairwise-mask secure sum.

The coordinator drives honest :class:`SecAggOwner` machines (the real owner code, with real
end-to-end boxes and, in the last test, the real certificate binding) and crafts its requests.
Its goal is one owner's input ``x_u`` from ``y_u``: it needs both ``b_u^r`` (t self-mask shares)
and every pair key of ``u`` (``u``'s mask key, or each neighbour's). Honest owners reveal, per
run, either self-mask shares or a key share of a neighbour, never both; the tests check each way
of asking for both is refused, with nothing revealed and the machine out of the run.
"""

import sys
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from cryptography import x509

from privfed.common.errors import RemoteProtocolError
from privfed.common.secagg.messages import KeyAdvert, SealedShare, ShareKeysRequest, UnmaskRequest
from privfed.common.secagg.pairwise import OwnerState
from privfed.common.secagg.signed_keys import sign_public_key, verify_public_key

sys.path.insert(0, str(Path(__file__).parents[1]))
from protocol.secagg_harness import Federation  # noqa: E402


def _masked_round(fed, values=None):
    values = values or {o: np.array([1.0, 2.0]) for o in fed.ids}
    return fed.server.on_masked(fed.masked(values))


def test_both_shares_of_one_owner_in_one_request_are_refused():
    fed = Federation(12)
    fed.key_agreement()
    requests = _masked_round(fed)
    honest = "o000"
    req = requests[honest]
    target = req.survivors[0]
    hostile = UnmaskRequest(req.round, req.survivors, (*req.dropped, target))
    with pytest.raises(RemoteProtocolError, match="never both|one or the other"):
        fed.owners[honest].on_unmask(hostile)
    assert fed.owners[honest].state is OwnerState.FAILED


def test_key_share_after_a_self_mask_share_in_an_earlier_round_is_refused():
    """Round 1: the target survives and the coordinator collects its self-mask shares. Round 2: it
    claims the target dropped and asks for its key: with both it would unmask round 1's y."""
    fed = Federation(12)
    fed.key_agreement()
    requests = _masked_round(fed)
    honest = "o000"
    target = requests[honest].survivors[0]
    fed.server.on_unmask(fed.unmask(requests))
    values = {o: np.array([1.0, 2.0]) for o in fed.ids}
    inputs = fed.server.input_requests()
    fed.owners[honest].masked_input(inputs[honest], values[honest])
    near = inputs[honest].participants
    hostile = UnmaskRequest(inputs[honest].round, tuple(v for v in near if v != target), (target,))
    with pytest.raises(RemoteProtocolError, match="one or the other"):
        fed.owners[honest].on_unmask(hostile)


def test_self_mask_share_after_a_key_share_is_refused():
    fed = Federation(12)
    fed.key_agreement()
    honest = "o000"
    values = {o: np.array([1.0, 2.0]) for o in fed.ids}
    inputs = fed.server.input_requests()
    near = inputs[honest].participants
    target = near[0]
    fed.owners[honest].masked_input(inputs[honest], values[honest])
    reply = fed.owners[honest].on_unmask(UnmaskRequest(inputs[honest].round, near[1:], (target,)))
    assert target in reply.key_shares and target not in reply.self_shares
    # Next round the coordinator lists the revealed owner as a participant again.
    inputs = fed.server.input_requests()
    hostile = type(inputs[honest])(inputs[honest].round, near)
    with pytest.raises(RemoteProtocolError, match="not revealed"):
        fed.owners[honest].masked_input(hostile, values[honest])


def test_fewer_than_t_participants_or_survivors_are_refused():
    fed = Federation(12)
    fed.key_agreement()
    honest = fed.owners["o000"]
    inputs = fed.server.input_requests()
    req = inputs["o000"]
    few = type(req)(req.round, req.participants[: honest.threshold - 1], req.key_shares)
    with pytest.raises(RemoteProtocolError, match="fewer than the threshold"):
        honest.masked_input(few, np.array([1.0, 2.0]))

    fed = Federation(12)
    fed.key_agreement()
    requests = _masked_round(fed)
    honest = fed.owners["o000"]
    req = requests["o000"]
    k = len(req.survivors)
    hostile = UnmaskRequest(req.round, req.survivors[: honest.threshold - 1], req.survivors[honest.threshold - 1 :])
    assert k >= honest.threshold
    with pytest.raises(RemoteProtocolError, match="fewer than the threshold"):
        honest.on_unmask(hostile)


def test_replayed_round_and_moved_shares_are_refused():
    fed = Federation(8)
    requests = fed.server.on_adverts({o: m.start(lambda pk: b"") for o, m in fed.owners.items()})
    shares = {o: fed.owners[o].on_share_keys(r) for o, r in requests.items()}
    fed.server.on_key_shares(shares)
    inputs = fed.server.input_requests()
    honest = "o000"
    sealed = inputs[honest].key_shares[0]
    # A share sealed for another owner, relabelled as addressed to the honest one: AES-GCM refuses it.
    other = next(s for r in shares.values() for s in r.shares if s.recipient != honest and s.sender != honest)
    moved = SealedShare(sealed.sender, honest, other.ciphertext)
    hostile = type(inputs[honest])(inputs[honest].round, inputs[honest].participants, (moved,))
    with pytest.raises(RemoteProtocolError, match="authentication"):
        fed.owners[honest].masked_input(hostile, np.array([1.0, 2.0]))


def test_adverts_that_are_not_the_graphs_neighbours_are_refused():
    fed = Federation(12)
    requests = fed.server.on_adverts({o: m.start(lambda pk: b"") for o, m in fed.owners.items()})
    req = requests["o000"]
    stranger = next(o for o in fed.ids if o not in {a.owner_id for a in req.adverts} and o != "o000")
    swapped = (*req.adverts[1:], KeyAdvert(stranger, req.adverts[0].public_key, b""))
    with pytest.raises(RemoteProtocolError, match="neighbours"):
        fed.owners["o000"].on_share_keys(ShareKeysRequest(req.members, swapped, req.rounds))


def test_a_mask_key_not_signed_by_the_node_named_in_the_owner_id_is_refused(tmp_path):
    """The certificate binding of the ring: owner-1's certificate cannot vouch for owner-0's owners."""
    from hostile import cert_key, cert_pem, make_federation_certs

    certs = make_federation_certs(tmp_path / "certs", owners=2)
    ca = x509.load_pem_x509_certificate((certs / "ca.pem").read_bytes())

    def node_of(owner_id: str) -> str:
        return "owner-0" if owner_id < "o006" else "owner-1"

    def verify(advert: KeyAdvert) -> None:
        node = node_of(advert.owner_id)
        cert = x509.load_pem_x509_certificate(cert_pem(certs, node))
        verify_public_key(
            cert,
            ca,
            advert.owner_id,
            advert.public_key,
            advert.signature,
            now=datetime.now(UTC),
            session_id="run-test",
            cert_identity=node,
        )

    def sign(owner_id: str, pk: bytes) -> bytes:
        return sign_public_key(cert_key(certs, node_of(owner_id)), pk, owner_id, "run-test")

    fed = Federation(12, verify=verify, sign=sign)
    requests = fed.server.on_adverts({o: m.start(partial(sign, o)) for o, m in fed.owners.items()})
    fed.owners["o000"].on_share_keys(requests["o000"])  # honest signatures: accepted
    victim = requests["o007"]
    forged_for = victim.adverts[0].owner_id
    wrong_node = "owner-1" if node_of(forged_for) == "owner-0" else "owner-0"
    pk = victim.adverts[0].public_key
    forged = KeyAdvert(forged_for, pk, sign_public_key(cert_key(certs, wrong_node), pk, forged_for, "run-test"))
    with pytest.raises(RemoteProtocolError):
        fed.owners["o007"].on_share_keys(ShareKeysRequest(victim.members, (forged, *victim.adverts[1:]), victim.rounds))
    assert fed.owners["o007"].state is OwnerState.FAILED
