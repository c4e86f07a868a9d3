"""Audit 24: a decision-stump share (``bdt --release shares``) at K > 3 classes is ε-LDP with exactly the ε its
owner's ledger debits, and that is the per-share ε the job announces. The encodings' dimension and domain grow
with K (table: 2·K cells per attribute bin; cells: 2^m·K + 1 values), and their tests elsewhere run at K = 2.

Through the real path: the job's config, the coordinator's strategy (its announced ε split), the share task as
the strategy builds it, then one owner core with a ledger holding the job's ε. The encoding the owner drew its
share with is recorded as it is used, and its largest log-probability ratio over all inputs is computed from its
own parameters in closed form: the Piecewise Mechanism with attribute sampling (Wang et al., ICDE 2019, Alg. 4)
k·ε/k, Laplace's L1 range over its scale, Duchi's ln(p / (1 - p)), k-RR ln(p / q), OUE ln(p(1 - q) / ((1 - p)q)),
OLH ln(p(g - 1) / (1 - p)). Checked against a broken build: the oracles drawn at 1.5 ε for K > 5 fail the six
cases of cells at K = 7 and 10 (stop 54)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.boosting.wire import config_to_dict, empty_history
from privfed.common.bounds import Bounds
from privfed.common.learners import stump_row_encoding, stump_sampled_encoding
from privfed.common.ledger import Ledger
from privfed.common.tasks import BoostShareTask, Refusal, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner
from privfed.server.config import JobConfig
from privfed.server.strategies import make_strategy

pytestmark = pytest.mark.in_process
BOUNDS = Bounds.of(0.0, 1.0, 2)
EPSILON = 4.0


def _mechanism_ratio(m: object) -> float:
    name = type(m).__name__
    if name == "PiecewiseMultidim":
        return m.k * m.attribute_epsilon  # type: ignore[attr-defined]
    if name == "LaplaceMechanism":
        return 2.0 * m.d / m.scale  # type: ignore[attr-defined]
    if name == "DuchiMultidim":
        return math.log(m.p / (1 - m.p))  # type: ignore[attr-defined]
    raise AssertionError(f"no closed form here for {name}")


def _oracle_ratio(o: object) -> float:
    name = type(o).__name__
    if name == "DirectEncoding":
        return math.log(o.p / o.q)  # type: ignore[attr-defined]
    if name == "OptimizedUnaryEncoding":
        return math.log(o.p * (1 - o.q) / ((1 - o.p) * o.q))  # type: ignore[attr-defined]
    if name == "OptimizedLocalHashing":
        return math.log(o.p * (o.g - 1) / (1 - o.p))  # type: ignore[attr-defined]
    raise AssertionError(f"no closed form here for {name}")


def _ratio_and_size(enc: object, K: int) -> tuple[float, int, int]:
    """(largest log-ratio, the size the encoding reports in, the size K asks for)."""
    if isinstance(enc, stump_row_encoding.RowEncoding):
        return _mechanism_ratio(enc.mechanism), enc.mechanism.d, enc.dim
    oracle = enc.frequency_oracle  # type: ignore[attr-defined]
    return _oracle_ratio(oracle), oracle.domain, 2**enc.m * K + 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("K", [4, 7, 10])
@pytest.mark.parametrize(
    ("encoding", "mechanism", "oracle"),
    [("table", "pm", "krr"), ("table", "duchi", "krr"), ("table", "laplace", "krr"),
     ("cells", "pm", "krr"), ("cells", "pm", "oue"), ("cells", "pm", "olh")],
)  # fmt: skip
def test_a_share_at_many_classes_spends_what_its_ledger_debits(monkeypatch, K, encoding, mechanism, oracle):
    used: list[object] = []
    for cls in (stump_row_encoding.RowEncoding, stump_sampled_encoding.SampledEncoding):
        share = cls.share

        def recorded(self, *args, _share=share, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            used.append(self)
            return _share(self, *args, **kwargs)

        monkeypatch.setattr(cls, "share", recorded)
    config = JobConfig.from_flat(task="bdt", release="shares", epsilon=EPSILON, base="stump", n_rounds=3, owners=10,
                                 stump_encoding=encoding, mechanism=mechanism, oracle=oracle)  # fmt: skip
    strategy = make_strategy(config, n_classes=K, bounds=BOUNDS)
    (announced,) = [p for p in strategy.privacy().parts if p.purpose == "boost-share"]
    rng = np.random.default_rng(K)
    X, y = rng.uniform(0, 1, (3, 2)), rng.integers(0, K, 3)
    owner = LocalOwner("node-0.o00000", X, y, np.random.default_rng(2), K, BOUNDS, row_keys=tuple(row_digests(X, y)))
    ledger = Ledger(":memory:", epsilon_budget=EPSILON)
    run = f"boost-{K}-{encoding}-{mechanism}-{oracle}"
    task = Task(f"{run}-t0", owner.owner_id, run, BoostShareTask(config_to_dict(strategy.params, run), empty_history()))
    (result,) = OwnerCore([owner], ledger).answer([task]).results
    assert not isinstance(result.payload, Refusal), result.payload
    debited = math.fsum(h["epsilon"] for h in ledger.history(owner.owner_id))
    ledger.close()
    assert used and len({repr(e) for e in used}) == 1, used  # one encoding (the fallback's work is drawn alike)
    ratio, size, wanted = _ratio_and_size(used[0], K)
    assert size == wanted
    assert debited == pytest.approx(announced.epsilon, rel=1e-12) and debited <= EPSILON
    assert ratio == pytest.approx(debited, rel=1e-9)
