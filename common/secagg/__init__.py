"""Secure aggregation: ring-masked sums in Z_2^64 relayed end-to-end encrypted (SPEC §11).

``fixedpoint``: reals <-> Z_2^64 with overflow bounds; ``boxes``: X25519 + HKDF + AES-GCM
envelopes and signed key checks; ``ring``: the ring protocol as a sans-I/O state machine (one per
party); ``session``: the coordinator's machine that forms, re-forms and gives up on a ring.
``pairwise`` (owner) and ``aggregator`` (coordinator): pairwise-mask secure aggregation in O(1)
round trips (Bonawitz et al. 2017 on Bell et al.'s sparse graph), with ``masking`` (graph,
threshold, masks), ``shamir`` (t-of-n shares) and ``messages``.
"""

#: The secure sums a federation runs (``--secure-sum``): the seed paper's ring, or pairwise masks.
SECURE_SUMS = ("ring", "secagg")
