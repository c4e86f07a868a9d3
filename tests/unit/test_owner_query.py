"""The owner side of private prediction without a network: cleaning with the owner's centring,
the local file readers and the command-line checks (owner/query.py)."""

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.deploy.cli import build_parser
from privfed.owner.query import clean_queries, parse_columns, read_table, split_features


@pytest.fixture
def problem(rng):
    """F = 8 features with a non-zero mean, one desired map, two confidential labels."""
    F, n = 8, 400
    X = rng.standard_normal((n, F)) @ rng.standard_normal((F, F)) + 3.0
    Y_conf = (X @ rng.standard_normal((F, 2)) > 0).astype(float)
    A_d = rng.standard_normal((F, 1))
    queries = rng.standard_normal((30, F)) * 2 + 3.0
    return X, Y_conf, A_d, queries


@pytest.mark.parametrize("method", ["subspace", "generalized"])
def test_exact_null_space_keeps_the_desired_score_and_leaves_the_mean_confidential_guess(problem, method):
    X, Y_conf, A_d, queries = problem
    out = clean_queries(queries, A_d, X, Y_conf, epsilon=0.0, method=method)
    assert np.allclose(out.feature_mean, X.mean(axis=0), rtol=0, atol=1e-12)
    assert np.max(np.abs((queries - out.rows) @ A_d)) <= 1e-9
    # what survives is invisible to A_c: the confidential guess is Ȳ_c, the mean's prediction
    assert np.max(np.abs((out.rows - out.feature_mean) @ out.A_c)) <= 1e-7
    expected_privacy = np.sum(((queries - out.feature_mean) @ out.A_c) ** 2, axis=1)
    assert np.allclose(out.e_privacy, expected_privacy, rtol=1e-7)
    assert np.all(out.e_privacy > 0)


def test_positive_budget_is_spent_exactly_per_row(problem):
    X, Y_conf, A_d, queries = problem
    eps = 0.5
    out = clean_queries(queries, A_d, X, Y_conf, epsilon=eps)
    s_total = np.sum(((queries - out.feature_mean) @ A_d) ** 2, axis=1)
    e_utility = np.sum(((queries - out.rows) @ A_d) ** 2, axis=1)
    assert np.count_nonzero(s_total > eps) >= 20
    assert np.allclose(e_utility, np.minimum(s_total, eps), rtol=1e-9, atol=0)
    assert np.allclose(out.details.e_utility, e_utility, rtol=1e-9)


def test_constant_confidential_labels_are_a_clear_error(problem):
    X, _, A_d, queries = problem
    with pytest.raises(ConfigError, match="A_c is all zeros"):
        clean_queries(queries, A_d, X, np.ones((X.shape[0], 1)), epsilon=0.0)


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


@pytest.mark.parametrize("content,message", [
    ("1,2\n3,x\n", "not a numeric CSV"),
    ("1,2\n3,nan\n", "row 2, column 2 is not finite"),
    ("f0,f1\n", "no data rows"),
])
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
    return ["query", "--coordinator", "h:1", "--model-id", "m", "--queries", "q.csv", "--train-data", "t.csv",
            "--confidential-labels", "1", *extra]


@pytest.mark.parametrize("extra", [
    ["--clean-epsilon", "-1"], ["--clean-epsilon", "nan"], ["--clean-epsilon", "inf"], ["--clean-epsilon", "x"],
    ["--confidential-labels", "1,1"], ["--confidential-labels", "-1"], ["--confidential-labels", "a"],
    ["--confidential-labels", ""], ["--method", "eigh"],
])
def test_bad_flags_are_refused_by_the_parser(extra, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(_query_args(*extra))
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_flag_defaults():
    args = build_parser().parse_args(_query_args())
    assert (args.name, args.clean_epsilon, args.method, args.insecure, args.out) == ("owner-0", 0.0, "subspace",
                                                                                     False, None)
    assert args.confidential_labels == (1,)
