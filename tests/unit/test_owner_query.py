"""The owner side of private prediction without a network: the checks on the model's linear stage,
cleaning around the public centre, what the cleaned rows carry, the local file readers and the
command-line checks (owner/query.py)."""

import re
from dataclasses import replace as dataclasses_replace
from pathlib import Path

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.learners.logistic import LinearModel
from privfed.common.schema import FederationSchema
from privfed.deploy.cli import build_parser
from privfed.deploy.query_flags import parse_columns, query_config
from privfed.owner.query import QueryConfig
from privfed.owner.query_cleaning import check_linear_stage, clean_queries, public_centre
from privfed.owner.query_files import query_rows, read_queries, read_table, read_training, split_features
from privfed.server.models import model_linear_stage


@pytest.fixture
def problem(rng):
    """F = 8 features with a non-zero mean, one desired map, two confidential labels, public bounds."""
    F, n = 8, 400
    X = rng.standard_normal((n, F)) @ rng.standard_normal((F, F)) + 3.0
    Y_conf = (X @ rng.standard_normal((F, 2)) > 0).astype(float)
    A_d = rng.standard_normal((F, 1))
    queries = rng.standard_normal((30, F)) * 2 + 3.0
    centre = public_centre(Bounds.of(-4.0, 12.0, F))  # 4.0 per feature, not the training mean
    return X, Y_conf, A_d, queries, centre


NULL_SPACE = ["subspace", "generalized"]
ALL_METHODS = ["projection", *NULL_SPACE]


def _null_space_of(A_d):
    """Orthonormal columns spanning the directions A_d does not read."""
    _, _, Vt = np.linalg.svd(A_d.T)
    return Vt[np.linalg.matrix_rank(A_d) :].T


@pytest.mark.parametrize("method", NULL_SPACE)
def test_exact_null_space_keeps_the_desired_score_and_a_constant_confidential_guess(problem, method):
    X, Y_conf, A_d, queries, centre = problem
    out = clean_queries(queries, A_d, X, Y_conf, centre=centre, epsilon=0.0, method=method)
    assert np.array_equal(out.centre, centre)
    assert np.max(np.abs((queries - out.rows) @ A_d)) <= 1e-9
    # what survives is invisible to A_c: the confidential guess is the same for every row
    assert np.max(np.abs((out.rows - centre) @ out.A_c)) <= 1e-7
    expected_privacy = np.sum(((queries - centre) @ out.A_c) ** 2, axis=1)
    assert np.allclose(out.e_privacy, expected_privacy, rtol=1e-7)
    assert np.all(out.e_privacy > 0)


def test_projection_keeps_the_desired_score_and_only_what_the_model_reads(problem):
    X, Y_conf, A_d, queries, centre = problem
    out = clean_queries(queries, A_d, centre=centre, epsilon=0.0)
    assert out.A_c is None and out.e_privacy is None
    assert np.max(np.abs((queries - out.rows) @ A_d)) <= 1e-9
    assert np.max(np.abs((out.rows - centre) @ _null_space_of(A_d))) <= 1e-12  # nothing outside span(A_d)
    assert np.all(np.linalg.norm(out.rows - centre, axis=1) <= np.linalg.norm(queries - centre, axis=1))


@pytest.mark.parametrize("eps", [0.0, 0.5])
def test_projection_inside_the_bounds_keeps_the_served_models_scores_and_only_what_it_reads(eps, rng):
    """The served model clips its input to its public bounds: a cleaned row outside them would be read
    as another row (the README walkthrough's query once printed labels the exported model did not give).
    With the bounds, every cleaned row lies inside them, its scores are the query's (shrunk by ε as without
    the box) or, where no row of the box has those, the box's nearest (an end of the interval, rank 1), it is
    the plain projection where that lies inside, and it is the least-norm such row; two queries with the same
    scores send the same row, inside the box or not (audit 18: the raw rows were clipped first, so where a
    row crossed the coordinator's box told rows of equal scores apart)."""
    F = 6
    bounds = Bounds(lo=np.array([0.0, 0.0, 10.0, -1.0, 0.0, 5.0]), hi=np.array([0.5, 30.0, 40.0, 1.0, 2.0, 6.0]))
    centre = public_centre(bounds)
    A_d = rng.standard_normal((F, 1)) / (bounds.hi - bounds.lo)[:, None] * rng.lognormal(0, 1.5, (F, 1))
    queries = rng.uniform(bounds.lo - 0.4 * (bounds.hi - bounds.lo), bounds.hi, (300, F))
    boxed = clean_queries(queries, A_d, centre=centre, epsilon=eps, bounds=bounds).rows
    plain = clean_queries(queries, A_d, centre=centre, epsilon=eps).rows
    assert np.all((boxed >= bounds.lo) & (boxed <= bounds.hi))
    scores = ((queries - centre) @ A_d)[:, 0]
    shrunk = scores - np.sign(scores) * np.minimum(np.sqrt(eps), np.abs(scores))  # (1 − β)·A_dᵀ(x − c)
    reach = np.sum(np.abs(A_d[:, 0]) * (bounds.hi - bounds.lo) / 2)  # the box's scores: [−reach, reach]
    assert 5 <= np.count_nonzero(np.abs(shrunk) > reach) < 100  # both cases occur in this problem
    assert np.allclose(((boxed - centre) @ A_d)[:, 0], np.clip(shrunk, -reach, reach), rtol=1e-9, atol=1e-12)
    outside = np.any((plain < bounds.lo) | (plain > bounds.hi), axis=1)
    assert 20 <= np.count_nonzero(outside) < len(queries)
    assert np.allclose(boxed[~outside], plain[~outside], rtol=0, atol=1e-12)
    inside_queries = np.all((queries >= bounds.lo) & (queries <= bounds.hi), axis=1)
    if eps == 0.0:  # least norm: no row of the box with these scores is nearer the centre (the query is one)
        near = np.linalg.norm(boxed - centre, axis=1) <= np.linalg.norm(queries - centre, axis=1) + 1e-12
        assert np.all(near[inside_queries])
    # what the rows carry: a query moved along directions A_d ignores sends the same row, in the box or not
    step = rng.standard_normal((len(queries), F - 1)) @ _null_space_of(A_d).T * 10.0
    moved = queries + step
    assert np.count_nonzero(np.any((moved < bounds.lo) | (moved > bounds.hi), axis=1)) >= 100
    a = clean_queries(queries, A_d, centre=centre, epsilon=eps, bounds=bounds).rows
    b = clean_queries(moved, A_d, centre=centre, epsilon=eps, bounds=bounds).rows
    assert np.allclose(a, b, rtol=0, atol=1e-9)


def test_box_projection_is_the_least_norm_row_of_the_box_with_the_scores(rng):
    """Rank 2 and 3 stages, against a general QP solver on the same problem."""
    from scipy.optimize import minimize

    from privfed.common.nullspace.projection import box_projection

    for _ in range(40):
        F, m = int(rng.integers(3, 8)), int(rng.integers(2, 4))
        A = rng.standard_normal((F, m))
        a, b = -rng.uniform(0.1, 2.0, F), rng.uniform(0.1, 2.0, F)
        x = rng.uniform(a, b)
        z = box_projection(A, A.T @ x, a, b)
        assert np.all((z >= a) & (z <= b)) and np.allclose(A.T @ z, A.T @ x, rtol=0, atol=1e-10)
        qp = minimize(
            lambda v: v @ v,
            x,
            jac=lambda v: 2 * v,
            constraints=[{"type": "eq", "fun": lambda v: A.T @ (v - x), "jac": lambda v: A.T}],
            bounds=list(zip(a, b)),
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 500},
        )
        assert z @ z <= qp.x @ qp.x + 1e-8


@pytest.mark.parametrize("method", ALL_METHODS)
def test_positive_budget_is_spent_exactly_per_row(problem, method):
    X, Y_conf, A_d, queries, centre = problem
    eps = 0.5
    out = clean_queries(queries, A_d, X, Y_conf, centre=centre, epsilon=eps, method=method)
    s_total = np.sum(((queries - centre) @ A_d) ** 2, axis=1)
    e_utility = np.sum(((queries - out.rows) @ A_d) ** 2, axis=1)
    assert np.count_nonzero(s_total > eps) >= 20
    assert np.allclose(e_utility, np.minimum(s_total, eps), rtol=1e-9, atol=0)
    assert np.allclose(out.details.e_utility, e_utility, rtol=1e-9)
    assert np.allclose(out.rows[s_total <= eps], centre, rtol=0, atol=1e-12)  # everything removed: c, public


# ---------------------------------------------------------------------------- what the rows carry
@pytest.mark.parametrize("eps", [0.0, 0.5, 1e6])
@pytest.mark.parametrize("method", ALL_METHODS)
def test_rows_sent_do_not_depend_on_the_training_mean(problem, method, eps, rng):
    """Issue 9 item 5: the owner's training mean m1 or m2 — the rows sent are the same. Shifting the
    training rows moves their mean and nothing else (A_c is a slope)."""
    X, Y_conf, A_d, queries, centre = problem
    many = np.vstack([queries, rng.standard_normal((30, X.shape[1])) * 2 + 3.0])  # 60 queries
    shift = rng.standard_normal(X.shape[1]) * 5.0
    m1 = clean_queries(many, A_d, X, Y_conf, centre=centre, epsilon=eps, method=method).rows
    m2 = clean_queries(many, A_d, X + shift, Y_conf, centre=centre, epsilon=eps, method=method).rows
    # the generalized solver's M = B_c + ηI (η ≈ 1e-8·tr B_c/F) amplifies the rounding of A_c's refit
    assert np.allclose(m1, m2, rtol=0, atol=1e-6 if method == "generalized" else 1e-9)
    if method == "projection":
        assert np.array_equal(m1, m2)  # no training data used at all
    # and the rows' affine hull points at the public centre, not at the training mean (generalized:
    # rounding puts ~2e-8 relative of x's other directions into x̃; owner/query.py, "What x̃ reveals")
    sv = np.linalg.svd(m1 - centre, compute_uv=False)
    assert np.all(sv[A_d.shape[1] :] <= sv[0] * (1e-7 if method == "generalized" else 1e-13))


@pytest.mark.parametrize("eps", [0.0, 0.5])
@pytest.mark.parametrize("method", ["projection", "subspace"])
def test_rows_sent_depend_on_a_query_only_through_what_the_model_reads(problem, method, eps, rng):
    """x̃ − c = g(A_dᵀ(x − c)): moving a query along directions A_d ignores changes nothing sent
    (the generalized solver only up to its rounding, see the test above)."""
    X, Y_conf, A_d, queries, centre = problem
    moved = queries + rng.standard_normal((queries.shape[0], X.shape[1] - 1)) @ _null_space_of(A_d).T * 3.0
    a = clean_queries(queries, A_d, X, Y_conf, centre=centre, epsilon=eps, method=method).rows
    b = clean_queries(moved, A_d, X, Y_conf, centre=centre, epsilon=eps, method=method).rows
    assert np.allclose(a, b, rtol=0, atol=1e-11)


def test_null_space_rows_reveal_the_confidential_map_direction(rng):
    """Why the null-space methods need --allow-confidential-map-leak (owner/query.py, "What x̃
    reveals"): with one confidential label, one cleaned row and A_d give A_c's direction exactly.
    The projection's rows do not depend on the training rows at all (test above)."""
    F = 8
    X = rng.standard_normal((300, F))
    y_c = (X @ rng.standard_normal(F) > 0).astype(float)
    a_d = rng.standard_normal((F, 1))
    centre = np.zeros(F)
    out = clean_queries(
        rng.standard_normal((1, F)), a_d, X, y_c[:, None], centre=centre, epsilon=0.0, method="subspace"
    )
    w = (out.rows[0] - centre) / np.linalg.norm(out.rows[0] - centre)
    guess = a_d[:, 0] - (a_d[:, 0] @ w) * w  # P_c a_d, read off by the coordinator
    a_c = out.A_c[:, 0]
    cosine = abs(guess @ a_c) / (np.linalg.norm(guess) * np.linalg.norm(a_c))
    assert cosine == pytest.approx(1.0, abs=1e-9)


# ---------------------------------------------------------------------------- the model's stage
def test_identity_stage_is_refused_and_an_honest_lr_stage_accepted(rng):
    F = 10
    with pytest.raises(
        ConfigError,
        match=r"reads 10 direction\(s\) of each row \(a linear stage of 10 column\(s\), rank 10\), more than --max-rank 1; nothing sent. Pass --max-rank 10 only if",
    ):
        check_linear_stage("m", "lr", np.eye(F), F, max_rank=1)
    with pytest.raises(
        ConfigError, match=r"reads 10 direction\(s\) .* rank 10\), more than --max-rank 9; nothing sent"
    ):
        check_linear_stage("m", "feddpdr", np.eye(F), F, max_rank=9)
    bounds = Bounds.of(-2.0, 3.0, F)
    binary = LinearModel(rng.standard_normal((1, F)), rng.standard_normal(1), bounds, [0, 1])
    kind, A_d = model_linear_stage(binary)
    assert check_linear_stage("m", kind, A_d, F, max_rank=1) == 1
    three = LinearModel(rng.standard_normal((3, F)), rng.standard_normal(3), bounds, [0, 1, 2])
    kind, A_d = model_linear_stage(three)
    with pytest.raises(ConfigError, match="a K-class lr model K"):
        check_linear_stage("m", kind, A_d, F, max_rank=1)
    assert check_linear_stage("m", kind, A_d, F, max_rank=3) == 3


def test_rank_is_bounded_and_one_redundant_column_allowed(rng):
    F = 6
    a, b = rng.standard_normal((F, 1)), rng.standard_normal((F, 1))
    sum_to_zero = np.hstack([a, -a])  # two score columns, one direction
    assert check_linear_stage("m", "lr", sum_to_zero, F, max_rank=1) == 1
    with pytest.raises(
        ConfigError,
        match=r"reads 2 direction\(s\) of each row \(a linear stage of 2 column\(s\), rank 2\), more than --max-rank 1",
    ):
        check_linear_stage("m", "lr", np.hstack([a, b]), F, max_rank=1)
    with pytest.raises(
        ConfigError,
        match=r"reads 2 direction\(s\) of each row \(a linear stage of 3 column\(s\), rank 1\), more than --max-rank 1",
    ):
        check_linear_stage("m", "lr", np.hstack([a, -a, 2 * a]), F, max_rank=1)
    below_tolerance = np.hstack([a, 1e-18 * b])  # the cleaners ignore that direction too
    assert check_linear_stage("m", "lr", below_tolerance, F, max_rank=1) == 1
    queries = rng.standard_normal((20, F))
    for method in ALL_METHODS:
        rows = clean_queries(
            queries, below_tolerance, queries, queries[:, :1] > 0, centre=np.zeros(F), epsilon=0.0, method=method
        ).rows
        rel = 1e-6 if method == "generalized" else 1e-12  # generalized: its rounding, as with any stage
        assert np.linalg.matrix_rank(rows, tol=rel * np.abs(rows).max()) == 1, method


def test_refusal_is_one_line_whatever_the_coordinator_calls_the_model():
    with pytest.raises(ConfigError) as exc:
        check_linear_stage("m", "lr\nprivfed query: done" + "x" * 1000, np.eye(4), 4, max_rank=1)
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 400


@pytest.mark.parametrize(
    "A_d,message",
    [
        (np.array([[1.0], [np.nan], [0.0]]), "1 non-finite value"),
        (np.array([[1.0], [np.inf], [-np.inf]]), "2 non-finite value"),
        (np.ones((4, 1)), "does not fit its 3 features"),
        (np.ones((3, 0)), "does not fit its 3 features"),
        (np.ones(3), "does not fit its 3 features"),
    ],
)
def test_malformed_stage_is_refused(A_d, message):
    with pytest.raises(RemoteProtocolError, match=message):
        check_linear_stage("m", "lr", A_d, 3, max_rank=3)


def test_null_space_method_needs_training_rows(problem):
    _, _, A_d, queries, centre = problem
    with pytest.raises(ConfigError, match="--method projection, which needs neither"):
        clean_queries(queries, A_d, centre=centre, epsilon=0.0, method="subspace")


def test_constant_confidential_labels_are_a_clear_error(problem):
    X, _, A_d, queries, centre = problem
    with pytest.raises(ConfigError, match="A_c is all zeros"):
        clean_queries(queries, A_d, X, np.ones((X.shape[0], 1)), centre=centre, epsilon=0.0, method="subspace")


def test_read_table_csv_with_and_without_header(tmp_path):
    data = np.array([[1.5, -2.0, 1.0], [0.25, 3.0, 0.0]])
    plain, headed = tmp_path / "a.csv", tmp_path / "b.csv"
    np.savetxt(plain, data, delimiter=",", fmt="%.17g")
    np.savetxt(headed, data, delimiter=",", fmt="%.17g", header="f0,f1,y", comments="")
    assert np.array_equal(read_table(plain, "--queries"), data)
    assert np.array_equal(read_table(headed, "--queries"), data)


def test_read_table_npz_joins_x_and_y(tmp_path):
    X, y = np.arange(6.0).reshape(3, 2), np.array([[1, 0], [0, 1], [1, 1]])
    np.savez(tmp_path / "t.npz", X=X, y=y)
    np.savez(tmp_path / "q.npz", X=X)
    assert np.array_equal(read_table(tmp_path / "t.npz", "--train-data"), np.hstack([X, y]))
    assert np.array_equal(read_table(tmp_path / "q.npz", "--queries"), X)


@pytest.mark.parametrize(
    "content,message",
    [
        ("1,2\n3,x\n", "not a numeric CSV"),
        ("1,2\n3,nan\n", "row 2, column 2 is not finite"),
        ("f0,f1\n", "no data rows"),
    ],
)
def test_read_table_bad_csv(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        read_table(path, "--queries")


def test_read_table_missing_file_and_npz_without_x(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        read_table(tmp_path / "nope.csv", "--queries")
    np.savez(tmp_path / "z.npz", rows=np.zeros((2, 2)))
    with pytest.raises(ConfigError, match="must hold an array 'X'"):
        read_table(tmp_path / "z.npz", "--queries")


SCHEMA = FederationSchema(
    ("age", "sex", "income"),
    (0.0, 0.0),
    (100.0, 1e6),
    ("no", "yes"),
    categories=(("sex", ("f", "m")),),
    fill=(("income", 0.0),),
    header=True,
    label="owns",
)
# Columns in another order than the schema's, a category, a missing cell the schema fills, the label
# between two confidential columns.
TRAINING = "id,sex,owns,income,age,smoker\n7,m,yes,1200,40,1\n8,f,no,,31,0\n9,f,yes,900.5,58,1\n"


def test_training_rows_under_the_owners_schema_are_its_encoded_features_then_the_other_columns(tmp_path, caplog):
    """``privfed query --schema --train-data`` reads the training file as the owner's rows are read: the
    features in the schema's encoded columns (sex one-hot), the other columns in the file's order as the
    label columns ``--confidential-labels`` indexes (the schema's label as its class index), and the log
    names each index."""
    path = tmp_path / "train.csv"
    path.write_text(TRAINING)
    with caplog.at_level("INFO", logger="privfed.query"):
        table = read_training(path, SCHEMA)
    features = [[40, 0, 1, 1200], [31, 1, 0, 0], [58, 1, 0, 900.5]]  # age, sex=f, sex=m, income (filled)
    labels = [[7, 1, 1], [8, 0, 0], [9, 1, 1]]  # id, owns (class index), smoker
    assert np.array_equal(table, np.hstack([features, labels]))
    assert "0 id, 1 owns (the schema's label, as its class index), 2 smoker" in caplog.text
    assert "filled 1 missing value" in caplog.text and "ignored" not in caplog.text


def test_training_rows_without_a_schema_are_the_files_numbers(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("a,b,c\n1,2,3\n4,5,6\n")
    assert np.array_equal(read_training(path, None), [[1, 2, 3], [4, 5, 6]])
    path.write_text(TRAINING)
    with pytest.raises(ConfigError, match="not a numeric CSV"):
        read_training(path, None)  # a category: by hand without --schema, as before


def test_a_training_label_column_that_is_not_numbers_is_named(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text(TRAINING.replace("40,1", "40,sometimes"))
    with pytest.raises(ConfigError, match=r"line 2, column 6 \(smoker\): non-numeric value 'sometimes'"):
        read_training(path, SCHEMA)


def test_split_features_needs_f_columns():
    table = np.zeros((4, 5))
    X, rest = split_features(table, 3, "--train-data t.csv")
    assert X.shape == (4, 3) and rest.shape == (4, 2)
    with pytest.raises(ConfigError, match="reads F = 6 features"):
        split_features(table, 6, "--queries q.csv")


def test_parse_columns():
    assert parse_columns("1,2") == (1, 2)
    assert parse_columns(" 0 ") == (0,)


def _query_args(*extra):
    return ["query", "--coordinator", "h:1", "--model-id", "m", "--queries", "q.csv", *extra]


@pytest.mark.parametrize(
    "extra",
    [
        ["--clean-epsilon", "x"],
        ["--confidential-labels", "a"],
        ["--confidential-labels", "1,b"],
        ["--method", "eigh"],
        ["--max-rank", "1.5"],
    ],
)
def test_flags_that_are_not_values_are_refused_by_the_parser(extra, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(_query_args(*extra))
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--utility-loss", "-1"], "--utility-loss must be finite and >= 0, got -1.0"),
        (["--utility-loss", "nan"], "--utility-loss must be finite and >= 0, got nan"),
        (["--clean-epsilon", "inf"], "--utility-loss must be finite and >= 0, got inf"),
        (["--confidential-labels", "1,1"], "none repeated, got (1, 1)"),
        (["--confidential-labels", ""], "needs at least one index"),
        (["--confidential-labels", "-1"], "--confidential-labels index must be an int >= 0, got -1"),
        (["--max-rank", "0"], "--max-rank must be an int >= 1, got 0"),
        (["--max-rank", "-2"], "--max-rank must be an int >= 1, got -2"),
        (["--score-bits", "0"], "--score-bits must be an int in [1, 52], got 0"),
        (["--score-bits", "53"], "--score-bits must be an int in [1, 52], got 53"),
    ],
)
def test_flag_values_out_of_range_are_refused_by_the_config(extra, message):
    """A ConfigError naming the flag: the CLI prints it as one line and exits with status 2."""
    args = build_parser().parse_args(_query_args(*extra))
    with pytest.raises(ConfigError, match=re.escape(message)):
        query_config(args)


def test_query_config_checks_values_given_in_code():
    config = QueryConfig(coordinator="h:1", model_id="m", queries=Path("q.csv"), max_rank=np.int64(3))
    assert type(config.max_rank) is int and config.training is None
    with pytest.raises(ConfigError, match="--method must be one of"):
        QueryConfig(coordinator="h:1", model_id="m", queries=Path("q.csv"), method="eigh")
    with pytest.raises(TypeError, match="--max-rank must be an int"):
        QueryConfig(coordinator="h:1", model_id="m", queries=Path("q.csv"), max_rank=1.0)
    mapped = QueryConfig(
        coordinator="h:1",
        model_id="m",
        queries=Path("q.csv"),
        method="subspace",
        allow_confidential_map_leak=True,
        train_data=Path("t.csv"),
        confidential_labels=[2, 0],
    )
    assert mapped.training == (Path("t.csv"), (2, 0))


def test_flag_defaults():
    args = build_parser().parse_args(_query_args())
    assert (args.name, args.utility_loss, args.method, args.insecure, args.out, args.max_rank) == (
        "owner-0",
        0.0,
        "projection",
        False,
        None,
        1,
    )
    assert (args.train_data, args.confidential_labels, args.allow_confidential_map_leak) == (None, None, False)
    args = build_parser().parse_args(_query_args("--confidential-labels", "1", "--max-rank", "5"))
    assert args.confidential_labels == (1,) and args.max_rank == 5


@pytest.mark.parametrize(
    "extra,message",
    [
        (
            ["--method", "subspace", "--train-data", "t.csv", "--confidential-labels", "1"],
            "pass --allow-confidential-map-leak to accept that",
        ),
        (
            ["--method", "generalized", "--allow-confidential-map-leak", "--confidential-labels", "1"],
            "needs --train-data (the confidential map",
        ),
        (["--method", "subspace", "--allow-confidential-map-leak"], "needs --train-data and --confidential-labels"),
    ],
)
def test_null_space_flags_are_checked_before_anything_is_read_or_sent(extra, message):
    """A ConfigError (the CLI's one-line error, exit 2) when the configuration is built, before
    run_query could read the (missing) query file or dial the (dead) coordinator address."""
    args = build_parser().parse_args(_query_args("--insecure", *extra))
    with pytest.raises(ConfigError, match=f"^--method .*{re.escape(message)}"):
        query_config(args)


@pytest.mark.parametrize("n", [3, 9, 400])
def test_moment_rows_fit_the_rows_map_in_a_shape_that_does_not_show_the_row_count(rng, n):
    """``privfed query`` fits A_c after GetModel from the training rows' moments (owner/query.py, "Timing"):
    the same least-squares map as from the rows (fewer rows than columns too: the minimum-norm one), from
    2C rows whatever the row count."""
    from privfed.common.nullspace import fit_linear_map
    from privfed.owner.query_cleaning import moment_rows

    F = 6
    X = rng.standard_normal((n, F)) * rng.lognormal(0, 1, F) + 3.0
    table = np.column_stack([X, X @ rng.standard_normal((F, 2)) + rng.standard_normal((n, 2))])
    moments = moment_rows(table)
    assert moments.shape == (2 * table.shape[1], table.shape[1])
    np.testing.assert_allclose(np.mean(moments, axis=0), 0.0, atol=1e-12)
    expected = fit_linear_map(X, table[:, F:])
    np.testing.assert_allclose(
        fit_linear_map(moments[:, :F], moments[:, F:]), expected, atol=1e-9 * np.abs(expected).max()
    )


def test_moment_rows_need_two_rows():
    from privfed.owner.query_cleaning import moment_rows

    with pytest.raises(ConfigError, match="at least 2 rows"):
        moment_rows(np.ones((1, 3)))


def test_rows_on_the_score_grid_carry_their_scores_rounded_to_2_to_the_k_steps_of_their_range():
    """``--score-bits`` ("Digits" in owner/query_cleaning.py): the rows cleaned are the least-norm rows whose
    scores are the query's on the public grid, clipped to their range over the bounds; a function of the
    scores alone, so rows of equal scores give the same row, and a stage scaled up reads no finer."""
    from privfed.owner.query_cleaning import on_score_grid

    rng = np.random.Generator(np.random.PCG64(5))
    A = rng.normal(size=(6, 2))
    width = np.full(6, 2.0)  # the box [-1, 1]^6 around the centre
    X = rng.uniform(-1, 1, (200, 6))
    half = 0.5 * np.abs(A).T @ width
    step = 2 * half / 2**8
    Z = on_score_grid(X, A, width, 8)
    scores = Z @ A
    assert np.all(np.abs(scores - X @ A) <= step / 2 + 1e-9)
    assert np.allclose(scores / step, np.rint(scores / step), atol=1e-6)  # on the grid
    assert np.allclose(Z, Z @ A @ np.linalg.pinv(A))  # in span(A_d): nothing else of the row
    ignored = np.linalg.svd(A.T)[2][2:].T  # directions A does not read: moving along them changes nothing
    assert np.allclose(on_score_grid(X + rng.normal(size=(200, 4)) @ ignored.T * 0.01, A, width, 8), Z)
    assert np.allclose(on_score_grid(X, 1000.0 * A, width, 8), Z)  # scaling the stage reads no finer
    far = on_score_grid(X * 50.0, A, width, 8) @ A  # rows far outside the bounds: scores clipped to the range
    assert np.all(np.abs(far) <= half + 1e-9)
    assert len(np.unique(np.rint(Z @ A / step), axis=0)) <= (2**8 + 1) ** 2
    zero = on_score_grid(X, np.c_[A[:, :1], np.zeros(6)], width, 8)  # a column that reads nothing
    assert np.all(np.isfinite(zero)) and np.allclose(zero[:, :], on_score_grid(X, A[:, :1], width, 8))


# ---------------------------------------------------------------------------- walkthrough 4
def test_a_built_in_models_query_file_is_read_by_its_headers_names(tmp_path):
    """Walkthrough 4 (S1): a model trained on ``--dataset wine`` names its features but leaves ``header`` unset;
    a query file listing them in another order was read by position (0.33 right against 0.98), exit 0. The
    model's schema (the coordinator's, not pinned) now reads it by name, as the exported classifier does."""
    schema = FederationSchema(("alcohol", "malic_acid", "ash"), (0.0,) * 3, (20.0,) * 3, (0, 1, 2))
    assert schema.header is None  # as FederationSchema.of_dataset makes it
    path = tmp_path / "q.csv"
    path.write_text("ash,malic_acid,alcohol\n3,2,13\n2,1,12\n")
    rows = query_rows(read_queries(path, None), schema, 3)
    assert rows.tolist() == [[13, 2, 3], [12, 1, 2]]


class _Dialled(AssertionError):
    pass


def _no_dial(monkeypatch):
    """The coordinator must not be contacted: dialling it fails the test."""
    from privfed.owner import query_client

    def dial(*_a, **_k):
        raise _Dialled("the coordinator was contacted")

    monkeypatch.setattr(query_client, "channel", dial)


@pytest.mark.parametrize("out", ["outdir", "nodir/x.csv"])
def test_an_out_that_cannot_be_written_stops_the_run_before_the_coordinator_is_contacted(
    tmp_path, monkeypatch, capsys, out
):
    """Walkthrough 4 (M1): ``--out outdir`` (a directory) or ``--out nodir/x.csv`` sent every row in a Predict
    call, then failed "cannot write the labels"; a retry sent them again. Now a one-line error, exit 2, before
    anything is read or sent (the CLI's ``main`` in process; dialling fails the test)."""
    from privfed.deploy.cli import main

    (tmp_path / "outdir").mkdir()
    queries = tmp_path / "q.csv"
    queries.write_text("0.5,0.5\n")
    _no_dial(monkeypatch)
    argv = ["query", "--coordinator", "127.0.0.1:1", "--model-id", "m", "--queries", str(queries), "--insecure"]
    assert main([*argv, "--out", str(tmp_path / out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / out}: " in err and "nothing sent" in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outdir", "q.csv"]  # no temp file left either
    assert list((tmp_path / "outdir").iterdir()) == []


def test_an_out_that_can_be_written_gets_the_labels_and_no_temp_file_is_left(tmp_path, monkeypatch):
    """The control: the temp file created before contact becomes --out; a failure after it leaves none."""
    from privfed.owner import query_client
    from privfed.owner.query import run_query

    queries, out = tmp_path / "q.csv", tmp_path / "labels.csv"
    queries.write_text("0.5,0.5\n")
    _no_dial(monkeypatch)
    config = QueryConfig(coordinator="127.0.0.1:1", model_id="m", queries=queries, out=out)
    with pytest.raises(_Dialled):
        run_query(config, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.csv"]
    with query_client.answers_out(out):
        assert (tmp_path / "labels.csv.partial").is_file()
        query_client.write_answers(["1"], out, "label")
    assert out.read_text() == "label\n1\n" and sorted(p.name for p in tmp_path.iterdir()) == ["labels.csv", "q.csv"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--train-data", "t.csv"], "--method projection uses no training data: --train-data would do nothing"),
        (
            ["--train-data", "t.csv", "--confidential-labels", "0"],
            "--method projection uses no training data: --train-data and --confidential-labels would do nothing",
        ),
        (["--confidential-labels", "1"], "--method projection uses no training data: --confidential-labels would do"),
    ],
)
def test_training_flags_with_projection_are_refused_not_ignored(extra, message):
    """Walkthrough 4 (m2): README, "a combination of flags that would do nothing is refused, not ignored"; it
    was an INFO line."""
    args = build_parser().parse_args(_query_args("--insecure", *extra))
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        query_config(args)


@pytest.mark.parametrize("with_schema", [False, True])
def test_confidential_label_indices_past_the_file_are_refused_before_the_coordinator_is_contacted(
    tmp_path, monkeypatch, with_schema
):
    """Walkthrough 4 (m2): ``--confidential-labels 5`` was checked only after GetModel, though the training file
    was read before. With ``--schema`` F is known, so the index is checked exactly; without it, against the
    columns after at least one feature."""
    from privfed.owner.query import run_query

    queries, train, schema = tmp_path / "q.csv", tmp_path / "t.csv", tmp_path / "s.json"
    if with_schema:
        schema.write_text(SCHEMA.to_json())
        queries.write_text("age,sex,income\n40,m,10\n")
        train.write_text(TRAINING)  # 3 label columns: id, owns, smoker
    else:
        queries.write_text("0.5,0.5\n")
        train.write_text("1,2,3\n4,5,6\n")  # at most 2 label columns
    _no_dial(monkeypatch)
    flags = {"method": "subspace", "allow_confidential_map_leak": True, "train_data": train}
    config = QueryConfig(
        coordinator="127.0.0.1:1",
        model_id="m",
        queries=queries,
        confidential_labels=(3 if with_schema else 2,),
        schema=schema if with_schema else None,
        **flags,
    )
    with pytest.raises(ConfigError, match="--confidential-labels 3: --train-data t.csv has 3 label column|"
                       "--confidential-labels 2: --train-data t.csv has 3 column"):  # fmt: skip
        run_query(config, None)
    fine = dataclasses_replace(config, confidential_labels=(2 if with_schema else 1,))
    with pytest.raises(_Dialled):  # a valid index: on to the coordinator
        run_query(fine, None)


def test_out_is_never_written_over_an_existing_file_without_force(tmp_path, monkeypatch):
    """Walkthrough 11, W11-8: ``privfed query --out FILE`` replaced an existing file silently, where ``privfed export``
    and ``privfed job model`` never overwrite. Now it stops before anything is sent, unless ``--force``."""
    from privfed.owner import query_client
    from privfed.owner.query import run_query

    queries, out = tmp_path / "q.csv", tmp_path / "labels.csv"
    queries.write_text("0.5,0.5\n")
    out.write_text("precious\n")
    _no_dial(monkeypatch)
    config = QueryConfig(coordinator="127.0.0.1:1", model_id="m", queries=queries, out=out)
    with pytest.raises(ConfigError, match=r"labels.csv exists; give another file, or --force to replace it \(nothing"):
        run_query(config, None)  # before any contact: _Dialled is not raised
    assert out.read_text() == "precious\n"
    with pytest.raises(_Dialled):  # with --force the run goes on to the coordinator
        run_query(dataclasses_replace(config, force=True), None)
    with query_client.answers_out(out, force=True):
        query_client.write_answers(["1"], out, "label", force=True)
    assert out.read_text() == "label\n1\n"
    late = tmp_path / "late.csv"
    with query_client.answers_out(late):
        late.write_text("made meanwhile\n")
        with pytest.raises(ConfigError, match="made while the queries ran"):
            query_client.write_answers(["1"], late, "label")
    assert late.read_text() == "made meanwhile\n" and not (tmp_path / "late.csv.partial").exists()
