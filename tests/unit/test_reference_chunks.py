"""The non-private reference of a one-round task plays its owners a chunk at a time (issue 27: bounded
memory at 10^6 owners), and its model is the one all owners at once give, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.datasets import load_builtin
from privfed.deploy import reference
from privfed.deploy.reference import OwnersInChunks, _close, _exact_transport, even_parts, reference_model
from privfed.server.config import JobConfig
from privfed.server.strategies import make_strategy


@pytest.mark.parametrize("task", ["lr", "ncc"])
def test_the_chunked_reference_is_the_all_at_once_reference_bit_for_bit(task, monkeypatch):
    train = load_builtin("synthetic", n_samples=1300, seed=2)
    parts = even_parts(train.n, 1300, seed=2)
    job = JobConfig.from_flat(
        task=task, epsilon=1.0, seed=2, **({"solver": "local"} if task == "lr" else {})
    )  # one round
    monkeypatch.setattr(reference, "CHUNK", 1024)  # two chunks, the second one short
    built: list[int] = []
    fold_chunk = reference.InProcessTransport.fold_tasks
    monkeypatch.setattr(
        reference.InProcessTransport,
        "fold_tasks",
        lambda self, tasks, fold, timeout=None: (built.append(len(self.owners)), fold_chunk(self, tasks, fold)),
    )
    chunked = reference_model(job, train, parts)
    assert built == [1024, 276]  # never more than a chunk of owners at once
    exact = make_strategy(job.replace(epsilon=math.inf), n_classes=train.n_classes, bounds=train.bounds)
    owners = OwnersInChunks(train, parts, job.seed)
    transport = _exact_transport([owners.owner(o) for o in owners.owner_ids])
    monkeypatch.undo()
    try:
        at_once = exact.run(owners.owner_ids, transport).model
    finally:
        _close(transport)
    test = load_builtin("synthetic", n_samples=400, seed=3)
    np.testing.assert_array_equal(chunked.predict(test.X), at_once.predict(test.X))
    for name in ("coef_", "intercept_", "centroids"):
        if hasattr(at_once, name):
            np.testing.assert_array_equal(getattr(chunked, name), getattr(at_once, name))
