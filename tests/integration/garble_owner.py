"""The owner CLI, whose ring machine flips the last bit of every hop it seals for the owner named by
``PRIVFED_TEST_GARBLE`` (its node otherwise honest and online): a hostile ring member over the real wire (audit 33,
A33-2). Run as ``python garble_owner.py owner ...`` (the owner CLI's arguments). Without the variable it is the owner
CLI. Test-only."""

from __future__ import annotations

import os
import sys

from privfed.common.secagg import ring as ring_module
from privfed.deploy.cli import main

_send = ring_module.RingParty._send


def _garbled(self, kind, recipient, seq, payload):
    out = _send(self, kind, recipient, seq, payload)
    if self.party_id != os.environ.get("PRIVFED_TEST_GARBLE") or kind is not ring_module.MessageKind.HOP:
        return out
    sealed = out.ciphertext[:-1] + bytes([out.ciphertext[-1] ^ 1])
    return ring_module.Outbound(out.session_id, out.sender, out.recipient, out.kind, out.seq, sealed)


if __name__ == "__main__":
    ring_module.RingParty._send = _garbled  # type: ignore[method-assign]
    sys.exit(main(sys.argv[1:]))
