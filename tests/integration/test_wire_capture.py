"""No raw feature value crosses the wire: full NCC and LR federations in --insecure mode
through a recording TCP proxy; every raw value of every owner is searched for in the bytes.

Chance matches: the 4-byte float32 needles are the weak ones. Reports travel as int64 grid
indices (proto ``Reports``), whose random low bytes match a given 4-byte needle with
probability 2^-32 per position: with ~10^4 needles and ~10^5 captured bytes the expected
number of chance hits is ~0.2 per run. (Report indices themselves can't serve as needles: at
2^-20 resolution legitimate reports land on the grid points of raw values by chance.) The
owners' noise is seeded (``--rng seeded``), so the
payload is the same in every run and the outcome doesn't flicker; the positive control shows
that the same search does find a leaked row."""

from pathlib import Path

import numpy as np
import pytest

from privfed.deploy.tcpproxy import RecordingProxy
from privfed.owner.data import build_owners, federation_split
from privfed.proto.serde import GRID_BITS
from privfed.server.strategies import make_strategy

from fedharness import Federation

pytestmark = pytest.mark.slow

N_OWNERS = 60
LEAKY = str(Path(__file__).with_name("leaky_owner.py"))


def raw_rows():
    train, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)
    owners = build_owners(train, n_owners=N_OWNERS, shards=range(N_OWNERS), seed=3, rng_kind="seeded", rng_seed=3)
    return np.concatenate([o.X for o in owners]), test


def needles(X: np.ndarray, bounds) -> list[bytes]:
    """Each raw value as float64 and float32 little-endian bytes and as decimal text, and its
    [-1, 1]-space image as float64. Values clipped to a public bound (t = ±1) are the bound
    itself, which is public and on the wire in every task, so they are not needles."""
    out = []
    for v, t in zip(X.ravel(), bounds.to_unit(X).ravel()):
        if abs(t) == 1.0:
            continue
        out += [np.float64(v).tobytes(), np.float32(v).tobytes(), repr(float(v)).encode(),
                f"{v:.6g}".encode(), repr(float(np.float32(v))).encode(), np.float64(t).tobytes()]
    return list(dict.fromkeys(out))


def row_needles(X: np.ndarray, bounds) -> list[bytes]:
    """Each raw row whole, as the wire's Reports would carry it (int64 indices on the 2^-20
    grid), in data space and in [-1, 1]-space. Single indices can't be needles (see above), but
    a perturbed report matching a whole row index by index is out of the question."""
    out = []
    for row, t in zip(X, bounds.to_unit(X)):
        out += [np.rint(row * 2**GRID_BITS).astype("<i8").tobytes(), np.rint(t * 2**GRID_BITS).astype("<i8").tobytes()]
    return out


def found(captured: bytes, X: np.ndarray, bounds) -> list[bytes]:
    return [n for n in needles(X, bounds) + row_needles(X, bounds) if n in captured]


def capture(tmp_path, task: str, *, leak: str | None = None) -> tuple[bytes, object]:
    X, test = raw_rows()
    fed = Federation(tmp_path, secure=False)
    proxy = RecordingProxy("127.0.0.1", fed.port).start()
    try:
        fed.spawn("owner-0", n_owners=N_OWNERS, shards="0:30", budget=10.0, port=proxy.port)
        fed.spawn("owner-1", n_owners=N_OWNERS, shards="30:60", budget=10.0, port=proxy.port,
                  module_cmd=[LEAKY] if leak else None, env={"PRIVFED_TEST_LEAK": leak} if leak else None)
        strategy = make_strategy(task, mechanism="pm", epsilon=4.0, n_classes=2, bounds=test.bounds)
        outcome = fed.run(strategy, N_OWNERS)
        assert outcome.answered == N_OWNERS
    finally:
        fed.close()
        proxy.stop()
    return proxy.captured, X, test.bounds


@pytest.mark.parametrize("task", ["ncc", "lr"])
def test_no_raw_value_on_the_wire(tmp_path, task):
    captured, X, bounds = capture(tmp_path, task)
    assert len(captured) > 10_000, "the proxy recorded the federation's traffic"
    assert found(captured, X, bounds) == []


def test_positive_control_a_leaked_row_is_caught(tmp_path):
    captured, X, bounds = capture(tmp_path, "ncc", leak="matrix")
    hits = found(captured, X, bounds)
    assert len(hits) >= X.shape[1], "every value of the leaked row is found"


def test_positive_control_a_row_leaked_through_a_report_is_caught(tmp_path):
    captured, X, bounds = capture(tmp_path, "ncc", leak="report")
    hits = [n for n in row_needles(X, bounds) if n in captured]
    assert len(hits) == 1, "the row sent unperturbed in place of its report is found whole"
