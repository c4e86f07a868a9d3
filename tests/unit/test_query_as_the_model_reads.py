"""``privfed query`` as the served model will read the rows sent (walkthrough 8): a stage that reads every column
is named as one (W8-6). The coordinator is a stand-in in this
process that answers from a real model, so what it is sent and what it answers are checked together."""

import contextlib
import logging

import numpy as np
import pytest

from privfed.common.dataset_files import read_schema
from privfed.common.errors import ConfigError
from privfed.common.learners.logistic import LinearModel
from privfed.owner.query import QueryConfig, run_query
from privfed.owner.query_cleaning import (
    check_linear_stage,
)
from privfed.owner.query_client import Answers, ModelDescription
from privfed.owner.query_files import query_rows, read_queries
from privfed.server.models import model_linear_stage

SCHEMA = """features = ["radius", "texture", "concavity", "scanner"]
classes = ["malignant", "benign"]
label = "diagnosis"
[bounds]
lo = [6.9, 9.7, 0.0]
hi = [28.2, 39.3, 0.43]
[categories]
scanner = ["A", "B"]
"""


class _Served:
    """The coordinator's two model calls, answered in process by ``model`` (an honest coordinator)."""

    def __init__(self, model, schema, stage=None):
        self.model, self.schema, self.stage, self.sent = model, schema, stage, []

    def install(self, monkeypatch):
        from privfed.owner import query_client

        monkeypatch.setattr(query_client, "channel", lambda *_a, **_k: contextlib.nullcontext())
        monkeypatch.setattr(query_client, "ModelClient", lambda *_a: self)

    def get_model(self, model_id):
        kind, A_d = model_linear_stage(self.model) if self.stage is None else ("feddpdr", self.stage)
        classes = tuple(self.schema.classes)
        return ModelDescription(kind, self.model.bounds, A_d, classes, False, self.schema)

    def predict(self, model_id, rows, *, probabilities=False):
        self.sent.append(rows)
        return Answers([self.schema.classes[i] for i in self.model.predict_index(rows)], None, 1)


def _readme_like_files(tmp_path, rng, n_train=200, n_query=40):
    """The README's schema (a one-hot column, a feature often at its bound 0), a training file with a
    confidential 0/1 column tied to the scanner, and query rows; the model an LR of fixed weights."""
    (tmp_path / "schema.toml").write_text(SCHEMA)

    def rows(n):
        radius = rng.uniform(8.0, 26.0, n)
        texture = rng.uniform(11.0, 37.0, n)
        concavity = np.where(rng.random(n) < 0.4, 0.0, rng.uniform(0.0, 0.4, n))
        scanner = rng.choice(["A", "B"], n)
        return radius, texture, concavity, scanner

    r, t, c, s = rows(n_train)
    smoker = ((s == "B") ^ (rng.random(n_train) < 0.1)).astype(int)
    label = np.where(r + 20 * c > 17, "malignant", "benign")
    lines = ["radius,texture,concavity,scanner,diagnosis,smoker"]
    lines += [f"{a:.2f},{b:.2f},{d:.4f},{e},{f},{g}" for a, b, d, e, f, g in zip(r, t, c, s, label, smoker)]
    (tmp_path / "train.csv").write_text("\n".join(lines) + "\n")
    r, t, c, s = rows(n_query)
    lines = ["scanner,concavity,texture,radius"] + [f"{e},{d:.4f},{b:.2f},{a:.2f}" for a, b, d, e in zip(r, t, c, s)]
    (tmp_path / "queries.csv").write_text("\n".join(lines) + "\n")
    schema = read_schema(tmp_path / "schema.toml")
    # unit-space weights: radius and concavity push to malignant (index 0), the scanner a little
    model = LinearModel(np.array([[-2.0, -0.3, -1.5, 0.4, -0.4]]), np.array([-0.2]), schema.bounds, [0, 1])
    return schema, model


def _query(tmp_path, method, **extra):
    if method != "projection":
        extra = {
            "train_data": tmp_path / "train.csv",
            "confidential_labels": (1,),
            "allow_confidential_map_leak": True,
            **extra,
        }
    return QueryConfig(
        coordinator="127.0.0.1:1",
        model_id="m",
        queries=tmp_path / "queries.csv",
        schema=tmp_path / "schema.toml",
        method=method,
        **extra,
    )


# ---------------------------------------------------------------------------- W8-6
def test_a_stage_that_reads_every_column_is_refused_in_words_that_say_so(rng):
    F = 5
    U, _ = np.linalg.qr(rng.standard_normal((F, F)))  # a default FedDPDR stage of a 5-column schema: k = 5
    with pytest.raises(ConfigError) as refused:
        check_linear_stage("m", "feddpdr", U, F, max_rank=1)
    message = str(refused.value)
    assert "reads every one of your rows' 5 column(s)" in message, message
    assert "query cleaning hides nothing" in message and "learn each query row whole" in message, message
    assert "nothing sent. Pass --max-rank 5 only if you accept that this model" in message, message
    assert "\n" not in message
    # a stage that reads fewer directions than the columns keeps the old advice
    with pytest.raises(ConfigError) as fewer:
        check_linear_stage("m", "feddpdr", U[:, :3], F, max_rank=1)
    assert "every one" not in str(fewer.value) and "a feddpdr model its k" in str(fewer.value)


def test_a_max_rank_that_lets_a_full_rank_stage_through_warns_before_the_rows_go(tmp_path, rng, monkeypatch, caplog):
    schema, model = _readme_like_files(tmp_path, rng, n_query=5)
    U, _ = np.linalg.qr(rng.standard_normal((schema.d, schema.d)))
    served = _Served(model, schema, stage=U)
    served.install(monkeypatch)
    with caplog.at_level(logging.INFO, logger="privfed.query"):
        assert run_query(_query(tmp_path, "projection", max_rank=schema.d), None) == 0
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "every one" in r.getMessage()]
    assert len(warned) == 1 and "learn each query row whole" in warned[0].getMessage(), caplog.text
    # ... and it is true: the rows sent are the query rows (to the score grid)
    raw = query_rows(read_queries(tmp_path / "queries.csv", schema), schema, schema.d, pinned=True)
    width = schema.bounds.hi - schema.bounds.lo
    assert np.max(np.abs(served.sent[0] - raw) / width) < 1e-3
