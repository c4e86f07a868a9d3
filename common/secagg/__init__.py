"""Secure aggregation: ring-masked sums in Z_2^64 relayed end-to-end encrypted (SPEC §11).

``fixedpoint``: reals <-> Z_2^64 with overflow bounds; ``boxes``: X25519 + HKDF + AES-GCM
envelopes and signed key checks; ``ring``: the ring protocol as a sans-I/O state machine (one per
party). ``pairwise`` (owner) and ``aggregator`` (coordinator): pairwise-mask secure aggregation in
O(1) round trips (Bonawitz et al. 2017 on Bell et al.'s sparse graph), with ``masking`` (graph,
threshold, masks), ``shamir`` (t-of-n shares) and ``messages``. ``coordinator``: the coordinator's
policy over both, sans-I/O: one machine per sum whose every transition is in ``transitions``
(attempts, drops, stalls, re-keying, key reuse), with ``events`` (what it says to its driver),
``requests`` (what each owner is sent) and ``runs`` (the keyed pairwise-mask runs later sums reuse).
"""

from privfed.common.validation import check_choice, check_int

#: The secure sums a federation runs (``--secure-sum``): ``auto`` picks per sum (:func:`secure_sum_for`),
#: ``ring`` the seed paper's ring, ``secagg`` pairwise masks.
SECURE_SUMS = ("auto", "ring", "secagg")
#: ``auto``: sums of at least this many members use pairwise masks, smaller ones the ring. The
#: measured crossover over gRPC + mTLS (``bench/securesum.py`` part 2, 2 owner nodes on 2 shared
#: cores, a fresh key agreement per sum as a disjoint evaluation group has): ring 0.37 / 1.31 /
#: 3.25 s vs pairwise masks 0.64 / 1.95 / 3.50 s at N = 100 / 300 / 1000. The ring's N hops are
#: sequential, the pairwise-mask steps spread over every node and core, are batched across a
#: job's groups (``SecureSumCoordinator.prepare``) and recover dropped owners without starting again.
SECAGG_FROM = 1000


def secure_sum_for(protocol: str, n_members: int) -> str:
    """The protocol, ``"ring"`` or ``"secagg"``, that runs a sum of ``n_members`` under ``protocol``."""
    protocol = check_choice(protocol, name="secure_sum", allowed=SECURE_SUMS)
    if protocol != "auto":
        return protocol
    return "secagg" if check_int(n_members, name="n_members", minimum=0) >= SECAGG_FROM else "ring"
