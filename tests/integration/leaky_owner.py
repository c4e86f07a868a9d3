"""Positive controls for the wire-capture test: an owner node that deliberately sends one raw
row of its data for its first task. Test-only; never shipped in the package.

``PRIVFED_TEST_LEAK=matrix``: the row as a float64 matrix (in the ``PcaShare`` field, the one
reply kind that carries a plain float64 matrix) instead of its perturbed share.
``PRIVFED_TEST_LEAK=report``: the row mapped to [-1, 1] but not perturbed, in place of its
first perturbed report (it then travels as grid indices like every report).
"""

import os
import sys

from privfed.common.messages import NccShareReply, PcaShareReply
from privfed.deploy import cli
from privfed.owner import handlers

_honest = handlers.compute_share
_leaked = []
MODE = os.environ["PRIVFED_TEST_LEAK"]


def _leak_one_row(owner, spec):
    share = _honest(owner, spec)
    if _leaked:
        return share
    _leaked.append(owner.owner_id)
    if MODE == "matrix":
        return PcaShareReply(subspace=owner.X[:1].copy(), n_rows=1)
    reports = share.reports.copy()
    reports[0] = spec.bounds.to_unit(owner.X[:1])[0]
    return NccShareReply(reports=reports, labels=share.labels)


handlers.compute_share = _leak_one_row

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
