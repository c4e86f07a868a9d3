"""Positive control for the wire-capture test: an owner node that deliberately sends one raw
row of its data in place of a perturbed share. Test-only; never shipped in the package."""

import sys

import numpy as np

from privfed.common.messages import NccShareReply
from privfed.deploy import cli
from privfed.owner import handlers

_honest = handlers.compute_share


def _leak_one_row(owner, spec):
    share = _honest(owner, spec)
    if isinstance(share, NccShareReply):
        reports = share.reports.copy()
        reports[0] = owner.X[0]  # a raw row, in data space, as float64
        return NccShareReply(reports=reports, labels=share.labels)
    return share


handlers.compute_share = _leak_one_row

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
