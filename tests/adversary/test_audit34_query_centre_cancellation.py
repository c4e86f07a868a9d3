"""Audit 34, A34-3: ``privfed query`` centred a row, ``x − c``, before it computed the scores, so a centre the
coordinator puts far from the rows rounds every feature on its own, and the rows sent depend on more than the scores.

The centre is the midpoint of the model's bounds: without ``--schema``, the coordinator's choice. With
``c = (2^41, −2^41, …)`` (the wire carries rows below 2^42) and a stage reading ``x0 + x1`` the real score
``A_dᵀ(x − c)`` is ``x0 + x1`` (the two offsets cancel), and bounds of width 8 put it on a grid of steps of 2^-12. But
``x0 − 2^41`` is a double of step 2^-11: each feature was rounded to a multiple of 2^-11 on its own first, so two rows of
one sum went out 2^-11 apart when one of their features crossed a rounding edge (the coordinator moves the edges with
the centre's low bits, the step with its exponent, up to about 2^-11): bits of single features below 2^-11, not a
function of the scores. Low severity: a row's features are read on their own only that finely, and the grid's bits
bound the total.

Real ``privfed query`` processes against the hostile coordinator, as ``test_audit34_query_score_overflow.py``: two query
files whose integer rows, pair by pair, have the same ``x0 + x1``; everything that leaves the owner must be the same.
Control: the same files under an honest box ([0, 8]^2, the same stage) go out alike before the fix too, so what differs is the centre's cancellation, and a stage reading ``x0 − x1`` tells the pairs apart.
"""

from __future__ import annotations

import numpy as np
from hostile import GRID_BITS
from test_audit34_query_score_overflow import F, _model, _outcome

C = 2.0**41  # the wire carries rows below 2^42; near 2^41 a double's step is 2^-11
Q = 2.0**-11
SUM = np.array([[1.0], [1.0], [0.0], [0.0]])
DIFFERENCE = np.array([[1.0], [-1.0], [0.0], [0.0]])
CENTRE = np.array([C, -C, 0.5, 0.5])
WIDTH = np.array([8.0, 8.0, 1.0, 1.0])  # the scores' half range 8, steps of 2^-12 on the grid
HOSTILE = (CENTRE - WIDTH / 2, CENTRE + WIDTH / 2)
HONEST = (np.zeros(F), np.array([8.0, 8.0, 1.0, 1.0]))


def _rows() -> tuple[np.ndarray, np.ndarray]:
    """Rows with x0 = k0·Q + Q/4 and x1 = k1·Q + Q/4 (each rounds down at step Q after the centre's offset) and
    partners of the same x0 + x1 with x0 = k0·Q + 3Q/4 (rounds up) and x1 = k1·Q − Q/4 (rounds up to k1·Q): the real
    scores agree, and the rounded ones differ by Q, two steps of the grid."""
    rng = np.random.Generator(np.random.PCG64(343))
    k = rng.integers(1, 6000, (24, 2)).astype(float)
    X0 = np.column_stack([k * Q + Q / 4, rng.uniform(0.2, 0.8, (24, F - 2))])
    X1 = X0.copy()
    X1[:, 0], X1[:, 1] = k[:, 0] * Q + 3 * Q / 4, k[:, 1] * Q - Q / 4
    assert np.array_equal(X0[:, 0] + X0[:, 1], X1[:, 0] + X1[:, 1])
    return X0, X1


def _apart(sent0: np.ndarray, sent1: np.ndarray) -> int:
    return int(np.count_nonzero(np.any(np.abs(sent0 - sent1) > 2.0**-GRID_BITS, axis=1)))


def test_rows_of_equal_scores_go_out_alike_whatever_centre_the_coordinator_announces(coordinator, certs, tmp_path):
    X0, X1 = _rows()
    coordinator.model = _model(SUM, HOSTILE)
    code0, calls0, sent0 = _outcome(coordinator, certs, tmp_path, "q0", X0)
    code1, calls1, sent1 = _outcome(coordinator, certs, tmp_path, "q1", X1)
    assert (code0, code1) == (0, 0) and calls0 == calls1 and sent0 is not None and sent1 is not None
    assert _apart(sent0, sent1) == 0, f"rows of equal scores went out differently: {_apart(sent0, sent1)} of {len(X0)}"


def test_control_an_honest_box_sends_the_pairs_alike_and_a_difference_stage_tells_them_apart(
    coordinator, certs, tmp_path
):
    X0, X1 = _rows()
    coordinator.model = _model(SUM, HONEST)
    sent0, sent1 = (_outcome(coordinator, certs, tmp_path, n, X)[2] for n, X in (("q0", X0), ("q1", X1)))
    assert sent0 is not None and sent1 is not None and _apart(sent0, sent1) == 0
    coordinator.model = _model(DIFFERENCE, HONEST)
    sent0, sent1 = (_outcome(coordinator, certs, tmp_path, n, X)[2] for n, X in (("d0", X0), ("d1", X1)))
    assert sent0 is not None and sent1 is not None and _apart(sent0, sent1) == len(X0)
