"""Serde pairs of the secure sums' steps and messages (``common/tasks/steps.py``, ``common/secagg/messages.py``).

A reply that speaks for an owner (a mask key advert, key shares, a masked input, unmasking shares)
is decoded as the answering owner's: the ``Result``'s owner id is its sender.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from privfed.common.errors import RemoteProtocolError
from privfed.common.secagg.messages import (
    InputRequest,
    KeyAdvert,
    KeyShares,
    MaskedInput,
    SealedShare,
    ShareKeysRequest,
    UnmaskReply,
    UnmaskRequest,
)
from privfed.common.tasks.steps import (
    PeerKey,
    RingJoined,
    RingMessageTask,
    RingSpec,
    RingTotal,
    SecAggKeysTask,
    SecAggUnmaskTask,
)
from privfed.proto import privfed_pb2 as pb


def _peer_keys_to_proto(peers: Sequence[PeerKey]) -> list[pb.PeerKey]:
    return [
        pb.PeerKey(
            owner_id=p.owner_id,
            node_id=p.node_id,
            x25519_public_key=p.x25519_public_key,
            key_signature=p.key_signature,
            key_index=p.key_index,
            key_tree_size=p.key_tree_size,
            key_path=p.key_path,
        )
        for p in peers
    ]


def peer_key_from_proto(p: pb.PeerKey) -> PeerKey:
    """The :class:`PeerKey` a ``pb.PeerKey`` carries (an owner's ring key, signed by its node)."""
    return PeerKey(
        p.owner_id,
        p.node_id,
        bytes(p.x25519_public_key),
        bytes(p.key_signature),
        p.key_index,
        p.key_tree_size,
        bytes(p.key_path),
    )


def _peer_keys_from_proto(peers: Iterable[pb.PeerKey]) -> tuple[PeerKey, ...]:
    return tuple(peer_key_from_proto(p) for p in peers)


def _certificates_to_proto(certificates: Mapping[str, bytes]) -> list[pb.NodeCertificate]:
    return [pb.NodeCertificate(node_id=n, pem=pem) for n, pem in certificates.items()]


def _certificates_from_proto(certificates: Iterable[pb.NodeCertificate]) -> dict[str, bytes]:
    return {c.node_id: bytes(c.pem) for c in certificates}


def ring_spec_to_proto(r: RingSpec) -> pb.RingSpec:
    return pb.RingSpec(
        session_id=r.session_id,
        ring=list(r.ring),
        frac_bits=r.frac_bits,
        n_parties=r.n_parties,
        max_abs=r.max_abs,
        peers=_peer_keys_to_proto(r.peers),
        certificates=_certificates_to_proto(r.certificates),
    )


def ring_spec_from_proto(m: pb.RingSpec) -> RingSpec:
    return RingSpec(
        session_id=m.session_id,
        ring=tuple(m.ring),
        frac_bits=int(m.frac_bits),
        n_parties=int(m.n_parties),
        max_abs=float(m.max_abs),
        peers=_peer_keys_from_proto(m.peers),
        certificates=_certificates_from_proto(m.certificates),
    )


def ring_message_to_proto(t: RingMessageTask) -> pb.RingMessageTask:
    return pb.RingMessageTask(data=t.data)


def ring_message_from_proto(m: pb.RingMessageTask) -> RingMessageTask:
    return RingMessageTask(data=bytes(m.data))


def ring_joined_to_proto(p: RingJoined) -> pb.RingJoined:
    return pb.RingJoined(session_id=p.session_id)


def ring_joined_from_proto(m: pb.RingJoined, owner_id: str) -> RingJoined:
    return RingJoined(session_id=m.session_id)


def ring_total_to_proto(p: RingTotal) -> pb.RingTotal:
    return pb.RingTotal(session_id=p.session_id, values=np.asarray(p.values).tolist())


def ring_total_from_proto(m: pb.RingTotal, owner_id: str) -> RingTotal:
    return RingTotal(session_id=m.session_id, values=np.asarray(m.values, dtype=float))


# ---------------------------------------------------------------------- pairwise-mask secure sum


def _sealed_to_proto(shares: Iterable[SealedShare]) -> list[pb.SealedShare]:
    return [pb.SealedShare(sender=s.sender, recipient=s.recipient, ciphertext=s.ciphertext) for s in shares]


def _sealed_from_proto(shares: Iterable[pb.SealedShare]) -> tuple[SealedShare, ...]:
    return tuple(SealedShare(s.sender, s.recipient, bytes(s.ciphertext)) for s in shares)


def key_advert_to_proto(a: KeyAdvert) -> pb.KeyAdvert:
    return pb.KeyAdvert(owner_id=a.owner_id, public_key=a.public_key, signature=a.signature)


def _advert_from_proto(m: pb.KeyAdvert) -> KeyAdvert:
    return KeyAdvert(m.owner_id, bytes(m.public_key), bytes(m.signature))


def key_advert_from_proto(m: pb.KeyAdvert, owner_id: str) -> KeyAdvert:
    advert = _advert_from_proto(m)
    if advert.owner_id != owner_id:
        raise RemoteProtocolError(f"a mask key advert of {advert.owner_id!r} in a result of {owner_id!r}")
    return advert


def secagg_keys_to_proto(t: SecAggKeysTask) -> pb.SecAggKeysTask:
    msg = pb.SecAggKeysTask(
        session_id=t.session_id,
        frac_bits=t.frac_bits,
        n_parties=t.n_parties,
        max_abs=t.max_abs,
        peers=_peer_keys_to_proto(t.peers),
        certificates=_certificates_to_proto(t.certificates),
    )
    if t.request is not None:
        r = t.request
        msg.share_keys.CopyFrom(
            pb.ShareKeysRequest(
                members=list(r.members), adverts=[key_advert_to_proto(a) for a in r.adverts], rounds=r.rounds
            )
        )
    return msg


def secagg_keys_from_proto(m: pb.SecAggKeysTask) -> SecAggKeysTask:
    request = None
    if m.HasField("share_keys"):
        k = m.share_keys
        request = ShareKeysRequest(tuple(k.members), tuple(_advert_from_proto(a) for a in k.adverts), int(k.rounds))
    return SecAggKeysTask(
        session_id=m.session_id,
        frac_bits=int(m.frac_bits),
        n_parties=int(m.n_parties),
        max_abs=float(m.max_abs),
        request=request,
        peers=_peer_keys_from_proto(m.peers),
        certificates=_certificates_from_proto(m.certificates),
    )


def secagg_unmask_to_proto(t: SecAggUnmaskTask) -> pb.SecAggUnmaskTask:
    r = t.request
    return pb.SecAggUnmaskTask(
        session_id=t.session_id, round=r.round, survivors=list(r.survivors), dropped=list(r.dropped)
    )


def secagg_unmask_from_proto(m: pb.SecAggUnmaskTask) -> SecAggUnmaskTask:
    return SecAggUnmaskTask(m.session_id, UnmaskRequest(int(m.round), tuple(m.survivors), tuple(m.dropped)))


def input_request_to_proto(r: InputRequest) -> pb.SecAggInput:
    return pb.SecAggInput(round=r.round, participants=list(r.participants), key_shares=_sealed_to_proto(r.key_shares))


def input_request_from_proto(m: pb.SecAggInput) -> InputRequest:
    return InputRequest(int(m.round), tuple(m.participants), _sealed_from_proto(m.key_shares))


def key_shares_to_proto(p: KeyShares) -> pb.KeyShares:
    return pb.KeyShares(shares=_sealed_to_proto(p.shares))


def key_shares_from_proto(m: pb.KeyShares, owner_id: str) -> KeyShares:
    """The answering owner is the sender (the coordinator checks each share's)."""
    return KeyShares(owner_id, _sealed_from_proto(m.shares))


def masked_input_to_proto(p: MaskedInput) -> pb.MaskedInput:
    return pb.MaskedInput(round=p.round, masked=p.masked.tolist())


def masked_input_from_proto(m: pb.MaskedInput, owner_id: str) -> MaskedInput:
    return MaskedInput(owner_id, int(m.round), np.asarray(m.masked, dtype=np.uint64))


def _owner_shares(shares: Mapping[str, bytes]) -> list[pb.OwnerShare]:
    return [pb.OwnerShare(owner_id=o, share=s) for o, s in shares.items()]


def _owner_shares_from_proto(shares: Sequence[pb.OwnerShare], what: str) -> dict[str, bytes]:
    out = {s.owner_id: bytes(s.share) for s in shares}
    if len(out) != len(shares):
        raise RemoteProtocolError(f"unmask reply: an owner named twice in its {what}")
    return out


def unmask_reply_to_proto(p: UnmaskReply) -> pb.UnmaskReply:
    return pb.UnmaskReply(
        round=p.round, self_shares=_owner_shares(p.self_shares), key_shares=_owner_shares(p.key_shares)
    )


def unmask_reply_from_proto(m: pb.UnmaskReply, owner_id: str) -> UnmaskReply:
    return UnmaskReply(
        owner_id,
        int(m.round),
        _owner_shares_from_proto(m.self_shares, "self-mask shares"),
        _owner_shares_from_proto(m.key_shares, "key shares"),
    )
