"""FedDPDR's ``"box"`` row scaling (walkthrough 13, W13-3): each feature centred at its bounds' midpoint and divided
by its own half-width, the row by sqrt(d), then clipped to the unit ball as ``"ball"`` does. Under ``"ball"`` one wide
feature (anes96's population in thousands, breast cancer's areas to 4254) held nearly all of the radius and left the
others under the noise. Checked: every in-bounds row lands in the ball, the map is exactly affine there, a zero-width
feature maps to 0, an out-of-bounds row is clipped (and an overflowing one clamped), and a served model's linear
stage is what its predictions read, through the query path's report too."""

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds, box_scale
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.choices import ROW_SCALINGS
from privfed.common.feddpdr.model import FedDPDRModel, add_bias_feature
from privfed.common.feddpdr.pca import scale_rows, scale_rows_to_unit_ball, scale_rows_to_unit_box
from privfed.owner.query_cleaning import check_linear_stage, model_scores, public_centre
from privfed.server.models import model_linear_stage

#: anes96-like: a population in thousands beside 1-7 scales and a 0/1 column
WIDE = Bounds(np.array([0.0, 1.0, 1.0, 1.0, 0.0]), np.array([7300.0, 7.0, 7.0, 7.0, 1.0]))


def _in_bounds(rng, bounds, n):
    return rng.uniform(bounds.lo, bounds.hi, (n, bounds.d))


def test_box_is_a_row_scaling_of_its_own():
    assert "box" in ROW_SCALINGS and "ball" in ROW_SCALINGS


def test_every_in_bounds_row_lands_in_the_unit_ball_and_the_corners_on_its_sphere(rng):
    for bounds in (WIDE, Bounds.of(0.0, 255.0, 30), Bounds(np.array([-1e6, 0.0]), np.array([1e6, 1e-6]))):
        X = _in_bounds(rng, bounds, 2000)
        A = scale_rows_to_unit_box(X, bounds)
        assert np.all(np.linalg.norm(A, axis=1) <= 1.0 + 1e-12)
        corners = np.where(rng.random((50, bounds.d)) < 0.5, bounds.lo, bounds.hi)  # the farthest in-bounds rows
        assert np.allclose(np.linalg.norm(scale_rows_to_unit_box(corners, bounds), axis=1), 1.0)


def test_in_bounds_it_is_exactly_the_affine_map_of_the_public_bounds(rng):
    X = _in_bounds(rng, WIDE, 500)
    A = scale_rows_to_unit_box(X, WIDE)
    half, centre = (WIDE.hi - WIDE.lo) / 2.0, (WIDE.hi + WIDE.lo) / 2.0
    assert np.allclose(A, (X - centre) / half / math.sqrt(WIDE.d), rtol=1e-12, atol=1e-15)
    assert np.allclose(box_scale(WIDE), 1.0 / (half * math.sqrt(WIDE.d)))
    # affine: a (x1 - x2) difference scales by the diagonal alone, the centre cancels
    assert np.allclose(A[1:] - A[:-1], (X[1:] - X[:-1]) * box_scale(WIDE), rtol=1e-9, atol=1e-15)
    # row by row: no other row (nor any statistic of the rows) is read
    assert np.array_equal(scale_rows_to_unit_box(X[7:8], WIDE), A[7:8])
    assert np.array_equal(scale_rows(X, WIDE, "box"), A)
    # each feature counts by its own range: a 1-7 scale spans as much of the ball as the population does
    spans = np.ptp(A, axis=0)
    assert np.all(spans > 0.8 * 2 / math.sqrt(WIDE.d))
    assert np.ptp(scale_rows_to_unit_ball(X, WIDE)[:, 1]) < 2e-3  # "ball": that scale lies at the centre


def test_a_zero_width_feature_maps_to_zero_without_dividing_by_zero():
    lo, hi = np.array([0.0, 3.0, -1.0]), np.array([2.0, 3.0, 1.0])
    with np.errstate(all="raise"):
        assert np.array_equal(box_scale((lo, hi)), [1.0 / math.sqrt(3.0), 0.0, 1.0 / math.sqrt(3.0)])
    # a bounds object with lo == hi (the Bounds class refuses one; this one bypassed its check)
    flat = object.__new__(Bounds)
    object.__setattr__(flat, "lo", lo)
    object.__setattr__(flat, "hi", hi)
    A = scale_rows_to_unit_box(np.array([[2.0, 3.0, 1.0], [0.0, 5.0, 0.0], [1.0, 1e308, 0.0]]), flat)
    assert np.all(np.isfinite(A)) and np.all(A[:, 1] == 0.0)
    assert np.allclose(A[0], [1 / math.sqrt(3), 0.0, 1 / math.sqrt(3)])
    with pytest.raises(ConfigError):
        Bounds(lo, hi)


def test_an_out_of_bounds_row_is_clipped_onto_the_sphere_and_an_overflowing_one_clamped():
    bounds = Bounds(np.array([0.0, -2.0]), np.array([4.0, 2.0]))
    X = np.array([[40.0, 2.0], [2.0, 0.0], [1e308, -1e308], [-np.finfo(float).max, 0.0]])
    A = scale_rows_to_unit_box(X, bounds)
    assert np.all(np.isfinite(A))
    assert np.allclose(np.linalg.norm(A[[0, 2, 3]], axis=1), 1.0)
    raw = (X[0] - [2.0, 0.0]) * box_scale(bounds)
    assert np.allclose(A[0], raw / np.linalg.norm(raw))  # the row's direction stays
    assert np.array_equal(A[1], [0.0, 0.0])  # the centre
    assert np.allclose(A[2], [1 / math.sqrt(2), -1 / math.sqrt(2)]) and np.allclose(A[3], [-1.0, 0.0])


def _model(rng, bounds, scaling, k=3, n_classes=3):
    U, _ = np.linalg.qr(rng.standard_normal((bounds.d, k)))
    return FedDPDRModel(
        bounds=bounds,
        components=U,
        coef=rng.standard_normal((n_classes, k + 1)),
        eigenvalues=np.ones(k),
        owner_sizes=(10,),
        per_class_epsilon=np.ones(n_classes),
        scaling=scaling,
        model="centroid",
    )


@pytest.mark.parametrize("scaling", ["ball", "box"])
def test_the_served_linear_stage_is_what_the_model_predicts_from(rng, scaling):
    model = _model(rng, WIDE, scaling)
    kind, A_d = model_linear_stage(model)
    assert kind == ("feddpdr" if scaling == "ball" else "feddpdr-box")
    centre = public_centre(WIDE)
    X = _in_bounds(rng, WIDE, 400)
    assert np.allclose(model.transform(X), (X - centre) @ A_d, rtol=1e-9, atol=1e-12)
    scores = add_bias_feature((X - centre) @ A_d) @ model.coef.T
    assert np.array_equal(model.predict(X), np.argmax(scores, axis=1))
    # the query path's report of what the model reads (after its own norm clip), in and out of the bounds
    far = X + rng.choice([-3.0, 0.0, 3.0], size=X.shape) * (WIDE.hi - WIDE.lo)
    for rows in (X, far):
        assert np.allclose(model_scores(kind, A_d, WIDE, rows), model.transform(rows), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("scaling", ["ball", "box"])
def test_an_identity_basis_serves_the_stage_that_reads_every_column(rng, scaling):
    """Walkthrough 13, W13-7: a feddpdr model of `basis = "identity"` (no DP-PCA) was refused by privfed query "with
    'ball' scaling needed", which it had; it reads every column, so its stage is the scaling's diagonal, and the
    owner's rank check refuses it for that, in words that say so."""
    model = _model(rng, WIDE, scaling)
    model = FedDPDRModel(**{**model.__dict__, "components": None, "coef": rng.standard_normal((3, WIDE.d + 1))})
    kind, A_d = model_linear_stage(model)
    assert A_d.shape == (WIDE.d, WIDE.d) and np.linalg.matrix_rank(A_d) == WIDE.d
    X = _in_bounds(rng, WIDE, 100)
    assert np.allclose(model.transform(X), (X - public_centre(WIDE)) @ A_d, rtol=1e-9, atol=1e-12)
    with pytest.raises(ConfigError, match="reads every"):
        check_linear_stage("m", kind, A_d, WIDE.d, max_rank=1)


def test_a_box_model_saved_and_loaded_keeps_its_scaling_and_stage(rng):
    model = _model(rng, WIDE, "box")
    again = FedDPDRModel.from_dict(model.to_dict())
    assert again.scaling == "box"
    assert np.array_equal(model_linear_stage(again)[1], model_linear_stage(model)[1])
    X = _in_bounds(rng, WIDE, 50)
    assert np.array_equal(again.predict(X), model.predict(X))


def test_normalise_still_has_no_linear_stage(rng):
    with pytest.raises(ConfigError, match="only 'ball' and 'box' scaling are affine"):
        model_linear_stage(_model(rng, WIDE, "normalise"))


def test_only_a_ball_job_is_told_that_one_wide_feature_drowns_the_others(tmp_path):
    """The submission hint of W13-3 speaks of "ball"'s one radius; a "box" job scales each feature by its own."""
    from privfed.common.dataset_files import read_schema
    from privfed.server.config import JobConfig
    from privfed.server.jobapi import feddpdr_scaling_hint

    (tmp_path / "schema.toml").write_text(
        'features = ["popul", "selfLR", "PID", "educ"]\nclasses = ["Clinton", "Dole"]\nlabel = "vote"\n'
        "[bounds]\nlo = [0, 1, 0, 1]\nhi = [7400, 7, 6, 7]\n"
    )
    schema = read_schema(tmp_path / "schema.toml")
    ball = JobConfig.from_flat(task="feddpdr", epsilon=8.0, scaling="ball")
    hint = feddpdr_scaling_hint(ball, schema)
    assert hint is not None and "popul" in hint and 'scaling = "box"' in hint
    assert feddpdr_scaling_hint(JobConfig.from_flat(task="feddpdr", epsilon=8.0, scaling="box"), schema) is None
