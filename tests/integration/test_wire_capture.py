"""No raw feature value crosses the wire: full NCC and LR federations in --insecure mode
through a recording TCP proxy; every raw value of every owner is searched for in the bytes."""

from pathlib import Path

import numpy as np
import pytest

from privfed.deploy.tcpproxy import RecordingProxy
from privfed.owner.data import build_owners, federation_split
from privfed.server.strategies import make_strategy

from fedharness import Federation

pytestmark = pytest.mark.slow

N_OWNERS = 60
LEAKY = str(Path(__file__).with_name("leaky_owner.py"))


def raw_rows():
    train, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)
    owners = build_owners(train, n_owners=N_OWNERS, shards=range(N_OWNERS), seed=3, rng_kind="seeded", rng_seed=3)
    return np.concatenate([o.X for o in owners]), test


def needles(X: np.ndarray) -> list[bytes]:
    """Each raw value as float64 and float32 little-endian bytes and as decimal text."""
    out = []
    for v in np.unique(X.ravel()):
        out += [np.float64(v).tobytes(), np.float32(v).tobytes(), repr(float(v)).encode(),
                f"{v:.6g}".encode(), repr(float(np.float32(v))).encode()]
    return out


def found(captured: bytes, X: np.ndarray) -> list[bytes]:
    return [n for n in needles(X) if n in captured]


def capture(tmp_path, task: str, *, leaky: bool = False) -> tuple[bytes, object]:
    X, test = raw_rows()
    fed = Federation(tmp_path, secure=False)
    proxy = RecordingProxy("127.0.0.1", fed.port).start()
    try:
        fed.spawn("owner-0", n_owners=N_OWNERS, shards="0:30", budget=10.0, port=proxy.port)
        fed.spawn("owner-1", n_owners=N_OWNERS, shards="30:60", budget=10.0, port=proxy.port,
                  module_cmd=[LEAKY] if leaky else None)
        strategy = make_strategy(task, mechanism="pm", epsilon=4.0, n_classes=2, bounds=test.bounds)
        outcome = fed.run(strategy, N_OWNERS)
        assert outcome.answered == N_OWNERS
    finally:
        fed.close()
        proxy.stop()
    return proxy.captured, X


@pytest.mark.parametrize("task", ["ncc", "lr"])
def test_no_raw_value_on_the_wire(tmp_path, task):
    captured, X = capture(tmp_path, task)
    assert len(captured) > 10_000, "the proxy recorded the federation's traffic"
    assert found(captured, X) == []


def test_positive_control_a_leaked_row_is_caught(tmp_path):
    captured, X = capture(tmp_path, "ncc", leaky=True)
    hits = found(captured, X)
    assert len(hits) >= X.shape[1], "every value of the leaked row is found"
