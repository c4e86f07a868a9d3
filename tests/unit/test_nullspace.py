"""Null-space cleaning (Xu et al. AAAI 2017, Algorithm 1 / Theorem 1; SPEC §10)."""

import gzip
import math

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.nullspace import METHODS, NullSpaceCleaner, e_privacy, e_utility, fit_linear_map

# SPEC §10 sanity example (B_c is positive definite, so η = 0).
A_D = np.array([[2.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
A_C = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
X1 = np.array([1.0, 1.0, 1.0])
SPEC_TABLE = [  # ε, t, α, x̃, e_utility, e_privacy
    (0.0, 1, 0.0, [1.0, 1.0, -0.5], 0.0, 4.5),
    (1.0, 1, 0.622804, [0.834497, 0.056372, -0.028186], 1.0, 6.175391),
    (3.0, 2, 0.417381, [0.427795, -0.300124, 0.150062], 3.0, 8.850781),
]


def _problem(rng, F, m_d, m_c, n=40):
    scale = rng.lognormal(0.0, 1.0, size=3)
    return (
        rng.normal(size=(F, m_d)) * scale[0],
        rng.normal(size=(F, m_c)) * scale[1],
        rng.normal(size=(n, F)) * scale[2],
    )


def _random_problems(rng, count, *, full_rank_c=None):
    for _ in range(count):
        F = int(rng.integers(1, 13))
        m_d = int(rng.integers(1, 6))
        if full_rank_c is None:
            m_c = int(rng.integers(1, 9))
        else:
            m_c = int(rng.integers(F, F + 4))
        yield _problem(rng, F, m_d, m_c)


@pytest.mark.parametrize("method", METHODS)
def test_spec_sanity_spectrum(method):
    cl = NullSpaceCleaner(epsilon=1.0, method=method).fit(A_D, A_C)
    res = cl.transform_with_details(X1[None, :])
    assert cl.eta_ == 0.0
    np.testing.assert_allclose(cl.gamma_, [0.0, 0.596876, 13.403124], atol=1e-6)
    # eigenvectors carry an arbitrary sign; c_i v_i does not
    np.testing.assert_allclose(np.abs(res.coef[0]), [2.121320, 2.078293, 0.425085], atol=1e-6)
    np.testing.assert_allclose(res.delta[0], [0.0, 2.578087, 2.421913], atol=1e-6)
    np.testing.assert_allclose(res.s_total, [5.0], rtol=1e-12)  # ‖A_dᵀx‖² = 4 + 1


def test_spec_sanity_signed_coefficients_generalized():
    res = NullSpaceCleaner(epsilon=0.0).fit(A_D, A_C).transform_with_details(X1)
    signs = np.sign(res.coef[0]) * np.sign([2.121320, 2.078293, -0.425085])
    np.testing.assert_allclose(res.coef[0] * signs, [2.121320, 2.078293, -0.425085], atol=1e-6)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("eps, t, alpha, x_clean, eu, ep", SPEC_TABLE)
def test_spec_sanity_table(method, eps, t, alpha, x_clean, eu, ep):
    res = NullSpaceCleaner(epsilon=eps, method=method).fit(A_D, A_C).transform_with_details(X1)
    assert res.t[0] == t
    assert res.alpha[0] == pytest.approx(alpha, abs=1e-6)
    assert res.alpha_closed[0] == pytest.approx(alpha, abs=1e-6)
    np.testing.assert_allclose(res.x_clean[0], x_clean, atol=1e-6)
    assert e_utility(A_D, X1, res.x_clean[0]) == pytest.approx(eu, abs=1e-12)
    assert e_privacy(A_C, X1, res.x_clean[0]) == pytest.approx(ep, abs=1e-6)
    assert res.e_utility[0] == eps


def _paper_clean(cl, x, eps):
    """Seed 003's steps 4-7 verbatim, with a_i = v_iᵀx instead of c = VᵀMx."""
    V = cl.components_.T
    a = V.T @ x
    delta = cl.gamma_ * a**2
    S = np.cumsum(delta)
    t = int(np.count_nonzero(S <= eps))
    w = np.r_[np.ones(t), np.zeros(len(a) - t)]
    if t < len(a):
        w[t] = np.sqrt((eps - (S[t - 1] if t else 0.0)) / delta[t])
    return x - V @ (w * a), S[-1]


def test_paper_coefficients_are_not_coordinates():
    """SPEC §10 correction: with a_i = v_iᵀx Theorem 1's algebra still gives e_utility = ε (it holds
    for any coefficients), but a_i are not x's coordinates (x ≠ Va): 'removing' a component does
    not remove it, S_total = Σγa² = 17 ≠ ‖A_dᵀx‖² = 5, so a budget of 10 is 'spent' although
    removing all of x would cost only 5, and the exact null-space variant gives another x̃."""
    cl = NullSpaceCleaner(epsilon=0.0).fit(A_D, A_C)
    x0, s_total = _paper_clean(cl, X1, 0.0)
    np.testing.assert_allclose(x0, [1.0, 1.0, 0.5], atol=1e-12)  # SPEC/ours: (1, 1, −0.5)
    assert s_total == pytest.approx(17.0) and np.sum((X1 @ A_D) ** 2) == pytest.approx(5.0)
    x1, _ = _paper_clean(cl, X1, 1.0)
    assert e_utility(A_D, X1, x1) == pytest.approx(1.0, rel=1e-12)
    assert e_privacy(A_C, X1, x1) == pytest.approx(0.806248, abs=1e-6)  # SPEC/ours: 6.175391
    x10, _ = _paper_clean(cl, X1, 10.0)
    assert e_utility(A_D, X1, x10) == pytest.approx(10.0, rel=1e-12)
    cl.epsilon = 10.0
    res = cl.transform_with_details(X1)
    assert res.e_utility[0] == pytest.approx(5.0) and np.all(res.x_clean == 0.0)


@pytest.mark.parametrize("method", METHODS)
def test_theorem_1_random_problems(method, rng):
    """e_utility = ε to 1e-9 relative when ε < S_total; else x̃ = 0 and e_utility = S_total."""
    n_partial = n_full = 0
    for A_d, A_c, X in _random_problems(rng, 80):
        cl = NullSpaceCleaner(epsilon=0.0, method=method).fit(A_d, A_c)
        s_total = np.sum((X @ A_d) ** 2, axis=1)
        cl.epsilon = float(np.quantile(s_total, rng.uniform(0.1, 0.9)))
        res = cl.transform_with_details(X)
        eu = e_utility(A_d, X, res.x_clean)
        partial = cl.epsilon < s_total
        np.testing.assert_allclose(eu[partial], cl.epsilon, rtol=1e-9)
        np.testing.assert_allclose(res.e_utility[partial], cl.epsilon, rtol=0)
        np.testing.assert_allclose(eu[~partial], s_total[~partial], rtol=1e-9)
        assert np.all(res.x_clean[~partial] == 0.0)
        np.testing.assert_allclose(res.s_total, s_total, rtol=1e-12)
        n_partial += partial.sum()
        n_full += (~partial).sum()
    assert n_partial > 1000 and n_full > 500


def test_polished_alpha_equals_spec_formula_when_well_conditioned(rng):
    for _ in range(30):
        F = int(rng.integers(2, 8))
        A_d, A_c, X = _problem(rng, F, int(rng.integers(1, 4)), F + 2)
        cl = NullSpaceCleaner(epsilon=0.0).fit(A_d, A_c)
        cl.epsilon = float(np.median(np.sum((X @ A_d) ** 2, axis=1)))
        res = cl.transform_with_details(X)
        np.testing.assert_allclose(res.alpha, res.alpha_closed, atol=1e-8)


@pytest.mark.parametrize("method", METHODS)
def test_epsilon_zero_keeps_desired_predictions(method, rng):
    for A_d, A_c, X in _random_problems(rng, 60):
        cl = NullSpaceCleaner(epsilon=0.0, method=method).fit(A_d, A_c)
        X_clean = cl.transform(X)
        before, after = X @ A_d, X_clean @ A_d
        # the SPEC's η ≈ 1e-8·tr(B_c)/F makes M ill-conditioned when A_c lacks full row rank:
        # the generalized method is then accurate to ~1e-8 only (module docstring; use "subspace")
        singular = np.linalg.matrix_rank(A_c) < A_c.shape[0]
        tol = 1e-6 if (method == "generalized" and singular) else 1e-9
        np.testing.assert_allclose(after, before, atol=tol * np.abs(before).max())


def test_privacy_bound_with_full_rank_b_c(rng):
    """With B_c PD (η = 0): e_privacy = Σ w²c² and e_utility = Σ w²γc², so
    e_privacy ≥ e_utility / γ_last (γ_last: γ of the last component touched); hence
    e_privacy ≥ e_utility whenever γ_last ≤ 1."""
    checked = 0
    for A_d, A_c, X in _random_problems(rng, 60, full_rank_c=True):
        cl = NullSpaceCleaner(epsilon=0.0).fit(A_d, A_c)
        assert cl.eta_ == 0.0
        s_total = np.sum((X @ A_d) ** 2, axis=1)
        cl.epsilon = float(np.quantile(s_total, rng.uniform(0.05, 0.95)))
        res = cl.transform_with_details(X)
        eu, ep = e_utility(A_d, X, res.x_clean), e_privacy(A_c, X, res.x_clean)
        g_last = cl.gamma_[np.minimum(res.t, cl.gamma_.size - 1)]
        assert np.all(ep * g_last >= eu * (1 - 1e-9) - 1e-12 * s_total)
        small = g_last <= 1.0
        assert np.all(ep[small] >= eu[small] * (1 - 1e-9))
        checked += small.sum()
    assert checked > 200


def test_privacy_bound_condition_is_needed():
    """γ > 1 everywhere: e_privacy < e_utility (F = 1, γ = 4, ε = 1 → α = ½, e_privacy = ¼)."""
    res = NullSpaceCleaner(epsilon=1.0).fit([[2.0]], [[1.0]]).transform_with_details([[1.0]])
    assert res.alpha[0] == pytest.approx(0.5)
    assert e_utility([[2.0]], [[1.0]], res.x_clean)[0] == pytest.approx(1.0)
    assert e_privacy([[1.0]], [[1.0]], res.x_clean)[0] == pytest.approx(0.25)


TOY_X = np.array([[3.0, 1.0], [4.0, 2.0], [5.0, 1.0]])
TOY_A_D = np.array([1.0, -1.0])  # y_d = x1 − x2 = (2, 2, 4)


@pytest.mark.parametrize("method", METHODS)
def test_paper_toy_example_orthogonal_projection(method):
    """Seed 003's toy table is the Euclidean projection off the null vector (1, 1): Algorithm 1
    gives exactly that when M ∝ I, e.g. A_c = I (both features confidential)."""
    X_clean = NullSpaceCleaner(epsilon=0.0, method=method).fit(TOY_A_D, np.eye(2)).transform(TOY_X)
    np.testing.assert_allclose(X_clean, [[1.0, -1.0], [1.0, -1.0], [2.0, -2.0]], atol=1e-12)


def test_paper_toy_example_with_its_own_confidential_map():
    """With the toy's own y_c = x1 + 2x2, Algorithm 1 removes the null vector (1, 1) in the
    M-metric, not the Euclidean one: x̃ = (4/3, −2/3)·y_d/2, which zeroes the confidential
    prediction; rows 1 and 2 (y_c = 5, 8) still become identical and y_d is kept."""
    A_c = np.array([1.0, 2.0])
    X_clean = NullSpaceCleaner(epsilon=0.0, method="subspace").fit(TOY_A_D, A_c).transform(TOY_X)
    np.testing.assert_allclose(X_clean, [[4 / 3, -2 / 3], [4 / 3, -2 / 3], [8 / 3, -4 / 3]], atol=1e-12)
    np.testing.assert_allclose(X_clean @ TOY_A_D, [2.0, 2.0, 4.0], atol=1e-12)
    np.testing.assert_allclose(X_clean @ A_c, 0.0, atol=1e-12)
    gen = NullSpaceCleaner(epsilon=0.0).fit(TOY_A_D, A_c).transform(TOY_X)  # η > 0: B_c singular
    np.testing.assert_allclose(gen, X_clean, atol=1e-7)


def test_degenerate_pencil_resets_confidential_prediction(rng):
    """F ≥ m_d + m_c (generic): γ ∈ {0, ∞}, so any ε zeroes A_cᵀx̃ exactly (subspace)."""
    A_d, A_c, X = _problem(rng, 12, 2, 4, n=50)
    for eps in (0.0, 0.5, 5.0):
        cl = NullSpaceCleaner(epsilon=eps, method="subspace").fit(A_d, A_c)
        assert np.all((cl.gamma_ == 0) | np.isinf(cl.gamma_))
        X_clean = cl.transform(X)
        np.testing.assert_allclose(X_clean @ A_c, 0.0, atol=1e-12 * np.abs(X @ A_c).max())
        np.testing.assert_allclose(e_privacy(A_c, X, X_clean), np.sum((X @ A_c) ** 2, axis=1), rtol=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_rows_are_cleaned_independently(method, rng):
    A_d, A_c, X = _problem(rng, 5, 2, 3, n=7)
    cl = NullSpaceCleaner(epsilon=0.3, method=method).fit(A_d, A_c)
    batch = cl.transform(X)
    np.testing.assert_allclose(batch, np.stack([cl.transform(x) for x in X]), atol=1e-12)
    assert cl.transform(X[0]).shape == (5,)


def test_estimator_contract():
    cl = NullSpaceCleaner(epsilon=-1.0, regularization="nope", method="x")  # __init__ only stores
    assert (cl.epsilon, cl.regularization, cl.method) == (-1.0, "nope", "x")
    cl = NullSpaceCleaner(epsilon=1.0)
    assert cl.fit(A_D, A_C) is cl
    cl.fit([[1.0], [0.0]], [[0.0], [1.0]])
    assert cl.n_features_in_ == 2 and cl.gamma_.shape == (2,)


def test_fit_linear_map_recovers_affine_model(rng):
    X = rng.normal(size=(200, 4))
    A = rng.normal(size=(4, 2))
    Y = 3.0 + X @ A
    np.testing.assert_allclose(fit_linear_map(X, Y), A, atol=1e-10)
    assert fit_linear_map(X, Y[:, 0]).shape == (4, 1)
    np.testing.assert_allclose(fit_linear_map(X, X @ A, center=False), A, atol=1e-10)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"epsilon": -0.1}, "epsilon must be finite and >= 0"),
        ({"epsilon": float("nan")}, "epsilon must be finite"),
        ({"epsilon": float("inf")}, "epsilon must be finite"),
        ({"epsilon": True}, "epsilon must be a real number"),
        ({"epsilon": "0.1"}, "epsilon must be a real number"),
        ({"epsilon": 0.1, "method": "qr"}, "method must be one of"),
        ({"epsilon": 0.1, "regularization": "big"}, "regularization must be 'auto'"),
        ({"epsilon": 0.1, "regularization": -1e-3}, r"regularization must be finite and >= 0.*regularization='auto'"),
        ({"epsilon": 0.1, "regularization": 1e-3, "method": "subspace"}, "applies only to method='generalized'"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        NullSpaceCleaner(**kwargs).fit(A_D, A_C)


@pytest.mark.parametrize(
    "A_d, A_c, match",
    [
        (np.ones((3, 2)), np.ones((4, 1)), r"A_d has shape \(3, 2\) and A_c has shape \(4, 1\)"),
        (np.array([[np.nan, 1.0], [0.0, 1.0]]), np.eye(2), "A_d has 1 non-finite"),
        (np.eye(2), np.array([[np.inf], [0.0]]), "A_c has 1 non-finite"),
        (np.eye(2), np.zeros((2, 3)), "A_c is all zeros"),
        (np.ones((2, 2, 2)), np.eye(2), "A_d must be a non-empty 2-D array"),
        (np.eye(2), np.empty((2, 0)), "A_c must be a non-empty 2-D array"),
    ],
)
def test_bad_maps(A_d, A_c, match):
    with pytest.raises(ConfigError, match=match):
        NullSpaceCleaner(epsilon=0.1).fit(A_d, A_c)


def test_singular_b_c_without_regularization_is_refused():
    with pytest.raises(ConfigError, match=r"singular \(rank 1 < F = 3\).*regularization='auto'"):
        NullSpaceCleaner(epsilon=0.1, regularization=0.0).fit(A_D, np.ones((3, 1)))
    assert NullSpaceCleaner(epsilon=0.1, regularization=0.0).fit(A_D, A_C).eta_ == 0.0


def test_bad_queries():
    cl = NullSpaceCleaner(epsilon=0.1)
    with pytest.raises(ConfigError, match="not fitted"):
        cl.transform(X1)
    cl.fit(A_D, A_C)
    with pytest.raises(ConfigError, match=r"X has shape \(2, 4\) but A_d and A_c have F = 3"):
        cl.transform(np.ones((2, 4)))
    with pytest.raises(ConfigError, match="X has 1 non-finite"):
        cl.transform([1.0, np.nan, 0.0])
    with pytest.raises(ConfigError, match="x has shape"):
        e_utility(A_D, np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(ConfigError, match="X has 5 rows but Y has 4"):
        fit_linear_map(np.ones((5, 2)), np.ones(4))


# --- experiment (deploy/experiments/nullspace.py) on a small synthetic Mulan-style file -------


def _synthetic_csv(path, rng, n=300, F=6):
    X = rng.normal(size=(n, F))
    logits = X @ rng.normal(size=(F, 3))
    Y = (logits + rng.normal(size=logits.shape) > 0).astype(float)
    with gzip.open(path, "wt") as fh:
        fh.write(",".join([f"f{j}" for j in range(F)] + ["d0", "c0", "c1"]) + "\n")
        np.savetxt(fh, np.hstack([X, Y]), delimiter=",", fmt="%.6f")


def _args(tmp_path, data, **over):
    import argparse

    from privfed.deploy.experiments import nullspace as exp

    parser = argparse.ArgumentParser()
    exp.add_arguments(parser)
    argv = [
        "--data",
        str(data),
        "--n-features",
        "6",
        "--desired",
        "1",
        "--confidential",
        "2",
        "--runs",
        "2",
        "--epsilon",
        "0,0.01,0.05",
        "--out",
        str(tmp_path / "out"),
    ]
    args = parser.parse_args(argv + over.get("extra", []))
    args.experiment = "nullspace"
    return exp, args


def test_experiment_writes_report(tmp_path, rng, capsys):
    import json

    data = tmp_path / "toy.csv.gz"
    _synthetic_csv(data, rng)
    exp, args = _args(tmp_path, data)
    out = exp.run(args)
    report = json.loads((out / "report.json").read_text())
    assert {p.name for p in out.glob("*.png")} == {"cp.png", "e_privacy.png", "mse_ratio.png"}
    res = report["results"]
    clean, lap = res["clean"], res["laplace"]
    assert clean["e_utility"]["mean"][0] == pytest.approx(0.0, abs=1e-20)
    assert all(u <= e + 1e-12 for u, e in zip(clean["e_utility"]["mean"], res["epsilon"]))
    np.testing.assert_allclose(lap["e_utility"]["mean"], clean["e_utility"]["mean"], rtol=1e-9, atol=1e-20)
    assert max(clean["theorem1_rel_err"]["mean"]) < 1e-9
    assert "clean_attack" in capsys.readouterr().out
    # F = 6 >= K1 + K2 = 3: cleaning sets the confidential linear prediction to exactly the mean, so
    # without the attack every row is a tie: the paper's strict CP is 0 and the ties are reported apart
    assert clean["cp"]["mean"] == [0.0, 0.0, 0.0] and clean["tie"]["mean"] == [1.0, 1.0, 1.0]
    assert clean["cp_with_ties"]["mean"] == [1.0, 1.0, 1.0]
    assert report["split"].startswith("pool: toy.csv.gz (300 rows), a random 270/30 train/test split per run")
    assert report["total_seconds"] > 0 and report["config"]["adversary"] == "ridge-gcv"


def test_experiment_epsilon_is_one_comma_separated_list(tmp_path, rng):
    data = tmp_path / "toy.csv.gz"
    _synthetic_csv(data, rng, n=50)
    exp, args = _args(tmp_path, data)
    assert args.epsilon == [0.0, 0.01, 0.05]  # 0 is the exact null-space variant
    args.epsilon = [0.01, math.inf]
    with pytest.raises(ConfigError, match="inf"):
        exp.run(args)
    with pytest.raises(SystemExit):
        _args(tmp_path, data, extra=["--epsilon", "-1"])


def test_gcv_ridge_beats_least_squares_where_least_squares_overfits(rng):
    """Few rows per feature and weak signal: the GCV-chosen ridge map predicts held-out labels better
    than plain least squares, and on pure-noise labels it shrinks to (almost) the mean."""
    n, F = 120, 60
    X = rng.normal(size=(2 * n, F))
    y = X[:, :2] @ np.array([0.3, -0.3]) + rng.normal(size=2 * n)
    mse = {}
    for alpha in (0.0, "gcv"):
        A = fit_linear_map(X[:n], y[:n], alpha=alpha)
        pred = y[:n].mean() + (X[n:] - X[:n].mean(axis=0)) @ A
        mse[alpha] = float(np.mean((y[n:, None] - pred) ** 2))
    assert mse["gcv"] < 0.8 * mse[0.0]
    np.testing.assert_allclose(fit_linear_map(X, y, alpha=0.0), fit_linear_map(X, y), atol=1e-12)
    noise = fit_linear_map(X[:n], rng.normal(size=n), alpha="gcv")
    assert np.linalg.norm(noise) < 0.2 * np.linalg.norm(fit_linear_map(X[:n], rng.normal(size=n)))
    with pytest.raises(ConfigError, match="alpha"):
        fit_linear_map(X, y, alpha=-1.0)


def test_experiment_rejects_bad_columns(tmp_path, rng):
    data = tmp_path / "toy.csv.gz"
    _synthetic_csv(data, rng, n=50)
    exp, args = _args(tmp_path, data)
    args.confidential = 5
    with pytest.raises(ConfigError, match="has 9 columns but --n-features 6 .* needs 12"):
        exp.run(args)
    exp, args = _args(tmp_path, tmp_path / "missing.csv")
    with pytest.raises(ConfigError, match="does not exist"):
        exp.run(args)
