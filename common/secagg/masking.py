"""The public pieces of pairwise-mask secure aggregation: neighbour graph, threshold and masks.

Shared by the owner's and the coordinator's machines (:mod:`privfed.common.secagg.pairwise`), so
both derive the same graph and the same masks from the same public inputs.

* **Graph** (Bell et al., "Secure Single-Server Aggregation with (Poly)Logarithmic Overhead",
  CCS 2020, §3: each client only agrees masks and shares secrets with its neighbours in a random
  sparse graph of degree ``k = O(log N)``). Here: the Harary graph ``H(k, N)`` (each member joined
  to the ``k/2`` next and ``k/2`` previous members of a cycle) over a permutation of the sorted
  members drawn from a numpy Generator seeded by SHA-256 of the run id. The graph is public
  randomness, not a secret: every party recomputes it from ``(run id, members)``.
* **Degree** ``k = 2⌈log2(N)/2⌉ + 2`` capped at ``N - 1`` and **threshold** ``t = ⌊k/2⌋ + 1``
  (``k`` here the member's own degree), a strict majority of its neighbours: honest neighbours answer each unmasking
  request with *either* a self-mask share *or* a key share of a given owner, never both, so a
  coordinator needs ``2t > k`` distinct neighbours to collect ``t`` of each (Bonawitz et al.,
  "Practical Secure Aggregation for Privacy-Preserving Machine Learning", CCS 2017, §4). That rule
  is per owner: without a consistency round the coordinator can still take the owner's self-mask
  from its neighbours and its partners' mask keys from theirs (:mod:`~privfed.common.secagg.pairwise`,
  "Inputs are releases").
* **Masks** in Z_2^64: a PRG (ChaCha20 over zeros, key from HKDF-SHA256) expands a seed into
  ``m`` ring elements. The pairwise seed of ``u, v`` is their X25519 agreement (Bonawitz step
  "MaskedInputCollection": ``s_{u,v} = KA.agree(s_u^SK, s_v^PK)``), from which the run's pair
  key ``k_{u,v} = HKDF-SHA256(s_{u,v}, salt = run id, info = "pair" ‖ lp(min id) ‖ lp(max id))``
  is derived once; round ``r``'s mask is ``PRG(k_{u,v}, r)`` (HMAC-SHA256 in counter mode over
  ``r``), so key agreement happens once per run and each round's masks are fresh. ``u`` adds the
  mask if ``u < v`` (string order) and subtracts it otherwise, so each pair cancels in the sum.
  The self-mask of round ``r`` is ``PRG(b_u^r, r)`` with ``b_u^r`` one of the seeds the owner
  drew from :mod:`secrets` for the run's rounds.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import struct
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.secagg.boxes import hkdf_sha256

#: Fewest members of a pairwise-mask secure sum: with two, each learns the other's input from the sum.
MIN_MEMBERS = 3
_PAIR, _SELF = b"privfed-secagg-pair", b"privfed-secagg-self"
_CYCLE_TRIES = 64
_MINUS_ONE = 2**64 - 1


def degree(n_members: int) -> int:
    """``k = min(N - 1, 2⌈log2(N)/2⌉ + 2)``: even, ``O(log N)``, every member's neighbour count."""
    if n_members < MIN_MEMBERS:
        raise ConfigError(f"a pairwise-mask secure sum needs at least {MIN_MEMBERS} members, got {n_members}")
    return min(n_members - 1, 2 * math.ceil(math.log2(n_members) / 2) + 2)


def threshold(k: int) -> int:
    """``t = ⌊k/2⌋ + 1``: a strict majority of the ``k`` neighbours holding a member's shares."""
    return k // 2 + 1


#: The last member list digested, by its tuple's identity, and its digest (:func:`members_digest`).
_last_digest: tuple[tuple[str, ...], str] | None = None


def members_digest(members: tuple[str, ...]) -> str:
    """The run's member list in 32 hex characters (SHA-256), what a member's key shares are sealed to.

    Each owner draws the graph from the list its own step-1 request carries (:func:`neighbour_graph`), so a
    coordinator could key one owner with a list of its own, making it ``k = 3`` and ``t = 2`` whatever the run's
    size, and its neighbours, drawing from theirs, would accept its shares (audit 31, A31-2). Shares sealed to the
    list's digest open only for a neighbour handed the same list. Cached by the tuple's identity, as the graph is:
    every owner of a node is handed the node's one tuple, whose digest costs O(N).
    """
    global _last_digest
    last = _last_digest
    if last is not None and last[0] is members:
        return last[1]
    h = hashlib.sha256(b"privfed-secagg-members\0")
    for member in members:  # each id's length first: injective whatever an id holds (audit 32, A32-2: NUL-joined
        data = member.encode("utf-8")  # ids made another list with the run's digest; nothing refuses a NUL in one)
        h.update(len(data).to_bytes(8, "big") + data)
    digest = h.hexdigest()[:32]
    _last_digest = (members, digest)
    return digest


#: The last graph asked for, by the identity of its members tuple (:func:`neighbour_graph`).
_last_graph: tuple[str, tuple[str, ...], dict[str, tuple[str, ...]]] | None = None


def neighbour_graph(run_id: str, members: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Each member's neighbours (sorted) in the run's public random graph (module docstring).

    ``members`` must be sorted and distinct (the caller's canonical form). Cached: every party
    of a node asks for the same graph, with the same members tuple, whose hash alone costs O(N)
    per owner (so the last graph is kept by that tuple's identity, in front of the cache).
    """
    global _last_graph
    last = _last_graph
    if last is not None and last[1] is members and last[0] == run_id:
        return last[2]
    graph = _neighbour_graph(run_id, members)
    _last_graph = (run_id, members, graph)
    return graph


@lru_cache(maxsize=16)
def _neighbour_graph(run_id: str, members: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    if list(members) != sorted(set(members)):
        raise ConfigError("members of a secure sum must be given sorted and distinct")
    n, k = len(members), degree(len(members))
    if k == n - 1:
        return {m: tuple(p for p in members if p != m) for m in members}
    seed = int.from_bytes(hashlib.sha256(b"privfed-secagg-graph\0" + run_id.encode("utf-8")).digest(), "big")
    rng = np.random.default_rng(seed)
    # columns 2c, 2c+1: successor, predecessor on cycle c; -1 where no cycle is drawn yet (and in the
    # padding to whole 8-byte words, which _shared_edges compares a word at a time)
    near = np.full((n, -(-k // 8) * 8), -1, dtype=np.int32)
    for c in range(k // 2):
        best, fewest = np.arange(n), n + 1
        for _ in range(_CYCLE_TRIES):  # prefer a cycle that shares no edge with the earlier ones
            cycle = rng.permutation(n)
            shared = _shared_edges(near, cycle)
            if shared < fewest:
                best, fewest = cycle, shared
            if not shared:
                break
        near[best, 2 * c], near[best, 2 * c + 1] = _after(best), np.roll(best, 1)
    return _by_name(members, near[:, :k])


def _after(cycle: np.ndarray) -> np.ndarray:
    """Each position's successor on the cycle (``np.roll(cycle, -1)``, a few times faster)."""
    return np.concatenate((cycle[1:], cycle[:1]))


def _shared_edges(near: np.ndarray, cycle: np.ndarray) -> int:
    """How many edges of ``cycle`` join members already neighbours in ``near``: the positions ``i``
    whose successor is in ``near[cycle[i]]``. The row's matches are OR-ed eight bytes at a time
    (``near`` has whole words of columns): numpy's ``any`` along a short axis is ten times slower."""
    words = (near.take(cycle, axis=0) == _after(cycle).astype(near.dtype)[:, None]).view(np.uint64)
    hit = words[:, 0].copy()
    for j in range(1, words.shape[1]):
        hit |= words[:, j]
    return int(np.count_nonzero(hit))


def _by_name(members: tuple[str, ...], near: np.ndarray) -> dict[str, tuple[str, ...]]:
    """``{member: its distinct neighbours, sorted}`` from the neighbours' indices (members are sorted,
    so index order is name order); a row with an edge drawn on two cycles lists it once."""
    ordered = np.sort(near, axis=1)
    names = np.array(members, dtype=object)
    rows = names[ordered].tolist()
    for i in np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1)).tolist():
        rows[i] = names[np.unique(ordered[i])].tolist()
    return dict(zip(members, map(tuple, rows), strict=True))


def _prg(keys: Sequence[bytes], label: bytes, round_no: int, m: int) -> np.ndarray:
    """``m`` uniform elements of Z_2^64 per key, shape ``(len(keys), m)``: HMAC-SHA256(key, label ‖
    round ‖ block) in counter mode.

    A PRF in counter mode (NIST SP 800-108) is a PRG. Stdlib ``hmac.digest`` over HKDF-derived
    keys (``cryptography``), rather than a ChaCha20 context per mask: a context costs ~40 µs to
    build, an HMAC ~1 µs, and a 10^4-owner run of 10 rounds expands ~1.6 million pairwise masks.
    """
    size = 8 * m
    heads = [label + struct.pack(">QI", round_no, i) for i in range((size + 31) // 32)]
    raw = b"".join([b"".join([hmac.digest(key, head, "sha256") for head in heads])[:size] for key in keys])
    return np.frombuffer(raw, dtype="<u8").reshape(len(keys), m).astype(np.uint64)


def _lp(raw: bytes) -> bytes:
    return struct.pack(">H", len(raw)) + raw


def pair_key(agreed: bytes, run_id: str, own: str, peer: str) -> bytes:
    """The run's mask key of the pair: ``HKDF(s_{u,v}, salt = run id, info = "pair" ‖ lp(min id) ‖ lp(max id))``."""
    lo, hi = sorted((own, peer))
    info = _PAIR + _lp(lo.encode("utf-8")) + _lp(hi.encode("utf-8"))
    return hkdf_sha256(agreed, salt=run_id.encode("utf-8"), info=info)


def pair_masks(keys: Mapping[str, bytes], own: str, round_no: int, m: int) -> np.ndarray:
    """``Σ_v ±PRG(k_{own,v}, round)`` over ``keys = {v: k_{own,v}}``: what ``own`` adds for its peers
    (``+`` for ``v`` after ``own`` in string order, ``-`` before, so each pair cancels in the sum)."""
    rows = _prg(list(keys.values()), _PAIR, round_no, m)
    signs = np.array([1 if own < v else _MINUS_ONE for v in keys], dtype=np.uint64)  # -1 is 2^64 - 1 in Z_2^64
    return (rows * signs[:, None]).sum(axis=0, dtype=np.uint64)


def self_mask(seed: bytes, round_no: int, m: int) -> np.ndarray:
    """``PRG(b_u^r, r)``: the self-mask of round ``r`` from that round's seed."""
    return _prg([seed], _SELF, round_no, m)[0]


def self_masks_sum(seeds: Sequence[bytes], round_no: int, m: int) -> np.ndarray:
    """``Σ_u PRG(b_u^r, r)`` over ``seeds`` (in Z_2^64): what the coordinator removes for the round's survivors."""
    return _prg(seeds, _SELF, round_no, m).sum(axis=0, dtype=np.uint64)
