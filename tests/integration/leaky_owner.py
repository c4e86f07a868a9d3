"""Positive control for the wire-capture test: an owner node that deliberately sends one raw
row of its data: for its first task it answers with the row as a float64 matrix (in the
``PcaShare`` field, the one reply kind that carries a plain float64 matrix) instead of its
perturbed share. Test-only; never shipped in the package."""

import sys

from privfed.common.messages import PcaShareReply
from privfed.deploy import cli
from privfed.owner import handlers

_honest = handlers.compute_share
_leaked = []


def _leak_one_row(owner, spec):
    if not _leaked:
        _leaked.append(owner.owner_id)
        return PcaShareReply(subspace=owner.X[:1].copy(), n_rows=1)
    return _honest(owner, spec)


handlers.compute_share = _leak_one_row

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
