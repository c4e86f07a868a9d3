"""Positive control for the wire-capture test: an owner node that deliberately sends one raw
row of its data to the coordinator (as the rows of a Predict call, uncleaned) right after it
registers. Test-only; never shipped in the package."""

import sys

import grpc

from privfed.deploy import cli
from privfed.owner.node import OwnerNode
from privfed.proto import privfed_pb2 as pb
from privfed.proto.serde import matrix_to_proto

_honest_register = OwnerNode._register


def _register_then_leak(self, stub):
    _honest_register(self, stub)
    owner = next(iter(self._owners.values()))
    try:
        stub.Predict(pb.PredictRequest(model_id="leak", rows=matrix_to_proto(owner.X[:1])), timeout=5)
    except grpc.RpcError:
        pass  # no such model: the bytes have crossed the wire all the same


OwnerNode._register = _register_then_leak

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
