"""The wire sizes of the secure sums' sealed envelopes (SPEC §11), without the cryptography that seals them.

:mod:`~privfed.common.secagg.boxes` seals with AES-GCM under these sizes; the messages, the ring's framing
and the coordinator's checks of ids need only the numbers, so a coordinator waiting for its owners does not
load ``cryptography``'s ciphers, serialization and the boxes for them (issue 27, idle RSS: ``bench/footprint.py``).
"""

#: AES-GCM's nonce and tag.
NONCE_BYTES = 12
TAG_BYTES = 16
#: Bytes a sealed message adds to its plaintext.
SEAL_OVERHEAD = NONCE_BYTES + TAG_BYTES
X25519_PUBLIC_BYTES = 32
#: The longest owner, node or session id on the wire (UTF-8 bytes; a 2-byte length prefix holds it).
MAX_ID_BYTES = 255
