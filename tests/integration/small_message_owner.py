"""The owner CLI with a small message bound, for tests of what does not fit one message: run as
``python small_message_owner.py BYTES owner ...`` (the owner CLI's arguments after BYTES). Its node
splits what it sends at BYTES, the bound the test's coordinator was given
(``CoordinatorServer(max_message_bytes=BYTES)``), as a real node splits at gRPC's 16 MiB. Test-only."""

from __future__ import annotations

import functools
import sys

from privfed.deploy.cli import main
from privfed.owner.node import OwnerNode

if __name__ == "__main__":
    limit = int(sys.argv[1])
    OwnerNode.__init__ = functools.partialmethod(OwnerNode.__init__, max_message_bytes=limit)  # type: ignore[method-assign]
    sys.exit(main(sys.argv[2:]))
