"""Positive controls for the wire-capture tests: an owner node that leaks on purpose, each of its
owners in exactly one encoding, so every search of ``capture.py`` is shown to find what it looks
for. Test-only; never shipped in the package.

Run as the owner CLI (``python leaky_owner.py owner ...``, same arguments). The leak happens at the
last step before the wire, ``privfed.proto.serde.result_to_proto``: the honest NCC result is built,
then changed. The node's own rows are rebuilt here from the public partition arguments, and the
encodings are written out again with plain numpy (not taken from ``capture.py``), so a wrong
encoding on the search side cannot hide behind the same mistake here.

The plan, by the node's owners in index order (:func:`assignments`): owner ``k < len(PLAN)`` sends
its first row in encoding ``PLAN[k]`` in place of its first report row (``text``: as the text of a
refusal); every later owner sends ONE raw value per report row as a 2^-20 unit-space grid index
(``single``: column ``i mod d`` of report row ``i``), which no row search can see. Every owner of
the node also sends its true labels in place of its randomized-response labels.
"""

from __future__ import annotations

import argparse
import re
import sys

import numpy as np

PLAN = (
    "f64",
    "unit-f64",
    "text",
    "f32",
    "unit-f32",
    "grid20-data",
    "grid20-unit",
    "grid20-ball",
    "grid16-data",
    "grid16-unit",
    "grid16-ball",
    "grid20-box",
    "grid16-box",
    "permuted-grid20-unit",
    "permuted-grid16-data",
)


#: A fixed permutation of a row's columns (no fixed point for d >= 2: a rotation by one).
def permutation(d: int) -> np.ndarray:
    return np.roll(np.arange(d), 1)


def assignments(shards: range) -> dict[int, str]:
    """Owner index -> what it leaks."""
    return {i: PLAN[k] if k < len(PLAN) else "single" for k, i in enumerate(shards)}


def _unit(X, lo, hi):
    return 2.0 * (np.clip(X, lo, hi) - lo) / (hi - lo) - 1.0


def _ball(X, lo, hi):
    c = (X - (lo + hi) / 2.0) / np.sqrt(np.sum(((hi - lo) / 2.0) ** 2))
    return c / np.maximum(1.0, np.linalg.norm(c, axis=1, keepdims=True))


def _box(X, lo, hi):
    c = (X - (lo + hi) / 2.0) / ((hi - lo) / 2.0) / np.sqrt(X.shape[1])
    return c / np.maximum(1.0, np.linalg.norm(c, axis=1, keepdims=True))


def leaked_row(how: str, x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bytes:
    """One row ``x`` (data space) in a binary encoding of :data:`PLAN`."""
    x = x[None, :]
    floats = {"f64": "<f8", "f32": "<f4"}
    if how in floats:
        return x.astype(floats[how]).tobytes()
    if how in ("unit-f64", "unit-f32"):
        return _unit(x, lo, hi).astype(floats[how[-3:]]).tobytes()
    m = re.fullmatch(r"(permuted-)?grid(\d+)-(data|unit|ball|box)", how)
    values = {"data": x, "unit": _unit(x, lo, hi), "ball": _ball(x, lo, hi), "box": _box(x, lo, hi)}[m.group(3)]
    row = np.rint(values * 2.0 ** int(m.group(2))).astype("<i8")
    return (row[:, permutation(x.shape[1])] if m.group(1) else row).tobytes()


def leak(msg, how: str, X: np.ndarray, y: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """The changed ``pb.Result`` for one owner's honest NCC result ``msg`` (changed in place)."""
    from privfed.proto import privfed_pb2 as pb

    share = msg.ncc_share
    del share.labels[:]
    share.labels.extend(int(v) for v in y)
    if how == "text":
        text = "could not perturb row " + " ".join(repr(float(v)) for v in X[0])
        return pb.Result(
            task_id=msg.task_id, owner_id=msg.owner_id, refusal=pb.Refusal(code=pb.REFUSAL_CODE_INTERNAL, message=text)
        )
    reports = np.frombuffer(share.reports.data, dtype="<i8").reshape(tuple(share.reports.shape)).copy()
    if how == "single":
        t = _unit(X, lo, hi)
        n, d = min(len(X), reports.shape[0]), X.shape[1]
        for i in range(n):
            reports[i, i % d] = np.rint(t[i, i % d] * 2.0**20)
        share.reports.data = reports.tobytes()
        return msg
    data = bytearray(reports.tobytes())
    payload = leaked_row(how, X[0], lo, hi)
    data[: len(payload)] = payload
    share.reports.data = bytes(data)
    return msg


def _partition_rows(argv: list[str]):
    """This node's owners' rows, rebuilt from the public arguments exactly as the node builds them."""
    from privfed.common.datasets import partition
    from privfed.owner.data import federation_split, parse_shards

    p = argparse.ArgumentParser(add_help=False)
    for flag in ("--dataset", "--n-samples", "--seed", "--test-fraction", "--n-owners", "--shards"):
        p.add_argument(flag)
    a, _ = p.parse_known_args(argv)
    train, test = federation_split(
        a.dataset, seed=int(a.seed), test_fraction=float(a.test_fraction), n_samples=int(a.n_samples)
    )
    parts = partition(train.X.shape[0], int(a.n_owners), seed=int(a.seed))
    shards = parse_shards(a.shards, int(a.n_owners))
    return {i: (train.X[parts[i]], train.y[parts[i]]) for i in shards}, assignments(shards), test.bounds


def install(argv: list[str]) -> None:
    from privfed.proto import serde

    rows, plan, bounds = _partition_rows(argv)
    honest = serde.result_to_proto

    def leaky_result_to_proto(r):
        msg = honest(r)
        if msg.WhichOneof("kind") != "ncc_share":
            return msg
        i = int(re.fullmatch(r"(?:.*\.)?o(\d+)", msg.owner_id).group(1))
        X, y = rows[i]
        return leak(msg, plan[i], X, y, bounds.lo, bounds.hi)

    serde.result_to_proto = leaky_result_to_proto


if __name__ == "__main__":
    from privfed.deploy import cli

    install(sys.argv[1:])
    sys.exit(cli.main(sys.argv[1:]))
