"""``privfed query`` as the served model will read the rows sent (walkthrough 8): a stage that reads every column
is named as one (W8-6), null-space rows are kept inside the model's bounds with what Algorithm 1 chose them for,
and the e_utility logged is the one after the model's clipping (W8-8). The coordinator is a stand-in in this
process that answers from a real model, so what it is sent and what it answers are checked together."""

import contextlib
import logging

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.dataset_files import read_schema
from privfed.common.errors import ConfigError
from privfed.common.learners.logistic import LinearModel
from privfed.owner.query import QueryConfig, run_query
from privfed.owner.query_cleaning import (
    check_linear_stage,
    clean_queries,
    null_space_rows_in_box,
    public_centre,
)
from privfed.owner.query_client import Answers, ModelDescription
from privfed.owner.query_files import query_rows, read_queries, read_training
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


# ---------------------------------------------------------------------------- W8-8
@pytest.mark.parametrize("method", ["subspace", "generalized"])
def test_null_space_cleaning_gives_the_labels_the_model_gives_the_query_rows(
    tmp_path, rng, monkeypatch, method, caplog
):
    """On the README's schema Algorithm 1's rows left the bounds (a one-hot column at 1.49, concavity below 0) and
    the model's clipping changed half the labels, while the log said e_utility 0."""
    schema, model = _readme_like_files(tmp_path, rng)
    served = _Served(model, schema)
    served.install(monkeypatch)
    with caplog.at_level(logging.INFO, logger="privfed.query"):
        assert run_query(_query(tmp_path, method), None) == 0
    raw = query_rows(read_queries(tmp_path / "queries.csv", schema), schema, schema.d, pinned=True)
    sent = served.sent[0]
    bounds = schema.bounds
    inside = np.all((sent >= bounds.lo - 1e-9) & (sent <= bounds.hi + 1e-9), axis=1)  # nothing for the model to clip
    assert np.array_equal(model.predict_index(sent[inside]), model.predict_index(raw[inside]))
    # what the rows still hide: the confidential guess of the local A_c is the same for every row sent
    train = read_training(tmp_path / "train.csv", schema)
    cleaned = clean_queries(
        raw,
        model_linear_stage(model)[1],
        train[:, : schema.d],
        train[:, schema.d + 1 :],
        centre=public_centre(bounds),
        epsilon=0.0,
        method=method,
        bounds=bounds,
        score_bits=16,
    )
    assert np.allclose(cleaned.rows, sent, rtol=0, atol=1e-6)  # A_c from the rows, not their moments: to rounding
    # what the rows hide: the local A_c's guess is the same for every row sent, those the box could not hold with it
    # too, which went as cleaned, outside the bounds, and are counted in a WARNING
    guess = np.abs((cleaned.rows - cleaned.centre) @ cleaned.A_c)[:, 0]
    assert np.all(guess <= 1e-6 * np.max(np.abs(cleaned.centred @ cleaned.A_c)))
    assert np.count_nonzero(~inside) == cleaned.projected <= len(raw) // 10
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    outside_line = [w for w in warned if w.startswith(f"{cleaned.projected} of {len(raw)} cleaned row(s) left")]
    assert len(outside_line) == (cleaned.projected > 0), caplog.text


def test_null_space_rows_in_the_box_keep_both_scores_or_stay_as_cleaned(rng):
    F = 6
    A_d, A_c = rng.standard_normal((F, 1)), rng.standard_normal((F, 1))
    a, b = -np.ones(F), np.ones(F)
    x_clean = rng.uniform(-1.6, 1.6, (200, F))
    outside = np.any((x_clean < a) | (x_clean > b), axis=1)
    rows, projected = null_space_rows_in_box(x_clean, A_d, A_c, a, b)
    assert np.array_equal(rows[~outside], x_clean[~outside])  # rows inside are left alone
    moved = np.any(rows != x_clean, axis=1)
    same_both = np.max(np.abs((rows - x_clean) @ np.hstack([A_d, A_c])), axis=1) <= 1e-8
    assert np.all(same_both)  # e_utility and e_privacy kept, every row
    assert np.all(np.all((rows[moved] >= a - 1e-12) & (rows[moved] <= b + 1e-12), axis=1))  # moved: inside
    assert np.count_nonzero(moved) > 0 and np.count_nonzero(outside & ~moved) == projected  # the others counted
    # F = 2 with one score of each: x̃ is the only row with its two scores, so a row outside stays as it is
    A2, C2 = np.array([[1.0], [0.3]]), np.array([[0.2], [1.0]])
    rows2, projected2 = null_space_rows_in_box(np.array([[1.3, 0.0], [0.5, 0.5]]), A2, C2, -np.ones(2), np.ones(2))
    assert projected2 == 1 and np.array_equal(rows2, [[1.3, 0.0], [0.5, 0.5]])


def test_the_logged_e_utility_is_the_one_after_the_models_clipping(tmp_path, rng, monkeypatch, caplog):
    """A query row outside the bounds: the row sent keeps its scores, the model reading the row itself would clip
    it. The log said "mean e_utility 0"; it now gives the change the model sees, and warns of the rows."""
    schema, model = _readme_like_files(tmp_path, rng, n_query=6)
    text = (tmp_path / "queries.csv").read_text().splitlines()
    text[1] = "A,0.0100,12.00,40.00"  # radius 40 against a bound of 28.2: the model reads 28.2
    (tmp_path / "queries.csv").write_text("\n".join(text) + "\n")
    _Served(model, schema).install(monkeypatch)
    with caplog.at_level(logging.INFO, logger="privfed.query"):
        assert run_query(_query(tmp_path, "projection"), None) == 0
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("cleaned "))
    e_utility = float(line.split("mean e_utility ")[1].split()[0])
    A_d = model_linear_stage(model)[1][:, 0]
    expected = (A_d[0] * (40.0 - 28.2)) ** 2 / 6  # one row of six moved by the clipping of its radius
    assert e_utility == pytest.approx(expected, rel=1e-3), line
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and warned[0].startswith("1 of 6 row(s) will be read by the model with other scores")


def test_feddpdr_scores_are_read_after_its_norm_clip():
    from privfed.owner.query_cleaning import model_scores

    bounds = Bounds.of(-1.0, 1.0, 2)  # radius sqrt(2)
    A = np.eye(2)
    inside, far = np.array([[0.5, -0.5]]), np.array([[3.0, 0.0]])
    assert np.allclose(model_scores("feddpdr", A, bounds, inside), inside)
    assert np.allclose(model_scores("feddpdr", A, bounds, far), [[np.sqrt(2.0), 0.0]])
    assert np.allclose(model_scores("lr", A, bounds, far), [[1.0, 0.0]])


def test_a_model_without_a_linear_stage_is_refused_with_the_way_to_predict_with_it():
    """Walkthrough 11, W11-10: a data user's `privfed query` of a nearest-centroid model read only "has no linear
    first stage to clean queries against"; it now names the models it cleans for and how to predict with this one."""
    from privfed.common.learners.ncc_model import NearestCentroidModel

    with pytest.raises(ConfigError) as refused:
        model_linear_stage(NearestCentroidModel(np.zeros((2, 3)), np.arange(2)))
    said = str(refused.value)
    assert "NearestCentroidModel has no linear first stage" in said
    assert "lr model" in said and "privfed job model" in said and "privfed export" in said, said
