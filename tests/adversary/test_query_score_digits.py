"""``privfed query``: a served stage reads at most ``--score-bits`` bits per score (audit 18's design limit).

``--max-rank`` bounds the directions a model reads, not the digits: a score travelled at the wire's 2^-20 grid,
so one direction could pack several features. A rank-1 stage with weights 17^j read five features valued 0..16
back from each row sent, exactly. Each score now goes out rounded to ``2^K`` steps of its range over the
model's bounds (``owner/query_cleaning.py``, "Digits"), so a row tells at most ``log2(2^K + 1)`` bits per score.

Real ``privfed query`` processes against the hostile coordinator serving that stage: with ``--score-bits 4`` at
most 17 distinct rows go out for 300 query rows; at the default (16) the lowest digit is lost, the next one in
part, and the top three features come back; the control, ``--score-bits 52``, gives back all five, as before.
"""

import numpy as np
import pytest
from hostile import GRID_BITS, matrix, pb
from test_query_model_attack import _query

F, BASE = 5, 17
PACK = (BASE ** np.arange(F, dtype=np.float64))[:, None]  # one direction holding five base-17 digits
BOX = (np.zeros(F), np.full(F, BASE - 1.0))
ROWS = np.random.Generator(np.random.PCG64(21)).integers(0, BASE, (300, F)).astype(np.float64)


def _sent(coordinator, certs, tmp_path, *extra) -> np.ndarray:
    path = tmp_path / "queries.csv"
    path.write_text("".join(",".join(repr(float(v)) for v in r) + "\n" for r in ROWS))
    since = len(coordinator.predicts)
    proc = _query(coordinator, certs, tmp_path, path, path, *extra)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = [np.frombuffer(r.rows.data, dtype="<i8").reshape(tuple(r.rows.shape)) for r in coordinator.predicts[since:]]
    return np.concatenate(got) * 2.0**-GRID_BITS


def _digits_read(sent: np.ndarray) -> np.ndarray:
    """The fraction of rows whose feature j the coordinator reads back from its score, j = 0..F-1."""
    score = np.rint(sent @ PACK[:, 0]).astype(np.int64)
    digits = (score[:, None] // BASE ** np.arange(F)) % BASE
    return np.mean(digits == ROWS, axis=0)


@pytest.fixture
def packing(coordinator):
    coordinator.model = pb.GetModelResponse(
        model_id="m", kind="lr", bounds=matrix(np.stack(BOX)), linear_stage=matrix(PACK), schema=""
    )
    return coordinator


def test_a_row_tells_at_most_its_score_bits(packing, certs, tmp_path):
    sent = _sent(packing, certs, tmp_path, "--score-bits", "4")
    assert sent.shape == ROWS.shape
    assert len(np.unique(sent, axis=0)) <= 2**4 + 1


def test_the_default_grid_keeps_the_top_digits_and_loses_the_lowest(packing, certs, tmp_path):
    """16 bits hold about 3.9 base-17 digits: a step of the grid is 21.7 units of the score, so the lowest
    digit is read no better than a guess (1/17), the next one in part and the top three."""
    read = _digits_read(_sent(packing, certs, tmp_path))
    assert read[0] < 0.15 and read[1] < 0.9 and np.all(read[2:] > 0.95), read


def test_control_without_a_coarse_grid_every_digit_comes_back(packing, certs, tmp_path):
    read = _digits_read(_sent(packing, certs, tmp_path, "--score-bits", "52"))
    assert np.all(read == 1.0), read
