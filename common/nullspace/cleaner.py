"""Null-space cleaning of query feature vectors (Xu et al. AAAI 2017, Algorithm 1; SPEC §10).

A client holds a feature vector ``x``. The served model predicts the *desired* labels through a
known linear first stage ``A_d`` (F×m_d); an adversary predicts *confidential* labels with a linear
map ``A_c`` (F×m_c). Cleaning moves ``x`` to ``x̃`` so that

* ``e_utility = ‖A_dᵀ(x − x̃)‖²`` equals a requested budget ``ε`` exactly (Theorem 1), and
* ``e_privacy = ‖A_cᵀ(x − x̃)‖²`` is as large as the order of removal allows.

Algorithm (SPEC §10, which repairs the paper where it departs from it)
---------------------------------------------------------------------
1. ``B_d = A_d A_dᵀ``, ``B_c = A_c A_cᵀ``, ``M = B_c + ηI``. Solve ``B_d v = γ M v`` with
   :func:`scipy.linalg.eigh` (γ ascending, ``VᵀMV = I``, ``VᵀB_dV = diag(γ)``); clip γ ≥ 0.
2. Coefficients ``c = VᵀMx``, so that ``x = Vc``. The paper writes ``aᵢ = vᵢᵀx``, which are x's
   coordinates only for an orthonormal V. (Correction to SPEC §10, which says this "breaks Theorem
   1": the theorem's algebra gives ``e_utility = ε`` for *any* coefficients. What breaks is the
   meaning: ``x ≠ Va``, so "removing" a component does not remove it; ``Σγᵢaᵢ²`` is not
   ``‖A_dᵀx‖²``, so a budget larger than the whole desired signal is "spent" (17 vs 5 on the SPEC
   example) and ε ≥ everything does not clean to the mean; and with singular B_c the ``aᵢ`` grow
   like η^(−1/2): x̃ of norm ~1e8 and e_utility off by ~1e−6. The unit tests show all of this.)
3. ``δᵢ = γᵢcᵢ²`` (utility cost of removing component i), ``S_t = Σ_{i≤t} δᵢ``,
   ``t = max{t : S_t ≤ ε}``, ``α = sqrt((ε − S_t)/δ_{t+1})``,
   ``x̃ = x − Σ_{i≤t} cᵢvᵢ − α c_{t+1} v_{t+1}``.

Since the ``A_dᵀvᵢ`` are orthogonal with squared norms γᵢ, ``e_utility = S_t + α²δ_{t+1} = ε``.
When ``ε ≥ S_total = Σᵢ δᵢ = ‖A_dᵀx‖²`` the budget covers every component: all of them are
removed (``x̃ = 0`` in the full basis, i.e. the mean query when ``x`` is centred) and
``e_utility = S_total``. ``ε = 0`` is the exact null-space variant: only components with γ = 0
(the null space of ``A_dᵀ``) go, and the desired prediction is unchanged.

Choices made here (each documented where it is implemented)
-----------------------------------------------------------
* **Exact zeros.** The ``F − rank(A_d)`` smallest γ are exactly zero in exact arithmetic; eigh
  returns them as ±1e−17-ish, and a positive crumb would make ``S_1 > 0 = ε`` and stop the
  ``ε = 0`` variant from removing anything. They are set to 0 (rank by
  :func:`numpy.linalg.matrix_rank`'s default tolerance).
* **Singular B_c** (``regularization="auto"``): ``B_c`` is singular when ``rank(A_c) < F``
  (matrix_rank default tolerance, ``σ_min ≤ σ_max·max(F, m_c)·eps``) — always when F > m_c.
  Then ``η = 1e−8·tr(B_c)/F``; if ``A_c`` has full row rank, ``η = 0``.
* **method="subspace"** (the numerically robust variant of SPEC §10): restrict to
  ``span[A_d, A_c]`` with an orthonormal basis Q from the SVD ``[A_d, A_c] = Q S Eᵀ``. In that
  basis ``B_d + B_c = S²``, so the pencil ``(B_d, B_d + B_c)`` is an ordinary symmetric eigenproblem
  of ``E_d E_dᵀ`` (E = [E_d, E_c], ``E_dE_dᵀ + E_cE_cᵀ = I``) with eigenvalues ``μ = γ/(1+γ)`` in
  [0, 1]: no η, no Cholesky of an ill-conditioned M, and γ = ∞ is representable (directions A_c
  cannot see). Components outside the span change neither prediction and have γ = 0 (0/0 taken
  as 0), so like every other γ = 0 component they are always removed: ``x̃`` lies in the span.
  For finite γ the stored vectors are rescaled to the SPEC normalisation ``vᵀB_cv = 1``; for
  γ = ∞ they keep ``vᵀB_dv = 1`` and ``δᵢ = cᵢ²``. Both methods agree when B_c is PD.
* **α polish.** α is the root in [0, 1] of the quadratic ``‖p + α q‖² = ε`` with
  ``p = A_dᵀΣ_{i≤t} cᵢvᵢ`` and ``q = c_{t+1}A_dᵀv_{t+1}`` as actually computed. In exact arithmetic
  ``p·q = 0``, ``‖p‖² = S_t``, ``‖q‖² = δ_{t+1}`` and this is the SPEC's α; in floating point it
  keeps Theorem 1 at rounding level (≤ 1e−11 relative in the unit tests) where the SPEC formula
  misses by up to ~1e−6 relative when M is ill-conditioned (η ≈ 1e−8, or a nearly singular A_c)
  and the computed ``A_dᵀvᵢ`` are orthogonal only to ~1e−9. ``alpha_closed`` in the details is
  the SPEC formula. α = 0 when ``S_t = ε`` (so ε = 0 removes exactly the γ = 0 components).
* **Σδ calibration.** Per row, δ is scaled by ``‖A_dᵀx‖² / Σᵢδᵢ`` (1 up to rounding) so that
  ``S_total`` is exactly the e_utility of removing everything; rows with ``ε ≥ S_total`` get
  ``x̃ = 0`` exactly (``x = Vc``), so the "budget exceeds everything" branch is exact too.

What the cleaned rows depend on
-------------------------------
Every coefficient is linear in ``A_dᵀx`` (for γᵢ > 0, ``Mvᵢ = B_dvᵢ/γᵢ`` gives
``cᵢ = (A_dᵀvᵢ)ᵀA_dᵀx/γᵢ``; γᵢ = 0 components always go), so ``x̃`` is a function of ``A_dᵀx``:
nothing of ``x`` outside what ``A_d`` reads survives (to rounding: ~1e−15 relative for
"subspace", ~1e−8 for "generalized", whose ill-conditioned M leaves that much of the removed
components). But the function depends on ``A_c``: at ε = 0 in the 0/∞ case ``x̃`` lies in
``(I − P_c)span(A_d)``, so a reader who knows ``A_d`` learns ``P_cA_d`` (with one confidential
label, ``A_c``'s direction). When ``A_c`` is a statistic of private training rows, that is a
release of it. :class:`StageProjection` is the cleaning that uses no ``A_c`` at all.

References
----------
K. Xu, S. Shah, T. Cao, C. Maung, H. Schweitzer. Enhancing the Privacy of Predictors. AAAI 2017
(seed 003), Algorithm 1 and Theorem 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike

from privfed.common.errors import ConfigError
from privfed.common.nullspace.linear_map import as_matrix, as_rows
from privfed.common.validation import check_choice, check_non_negative

METHODS = ("generalized", "subspace")  # NullSpaceCleaner; "projection" is StageProjection
ETA_SCALE = 1e-8  # η = ETA_SCALE · tr(B_c) / F when B_c is singular (SPEC §10)


@dataclass(frozen=True)
class CleaningResult:
    """Per-row trace of Algorithm 1 (``n`` rows, ``k`` components).

    Attributes
    ----------
    x_clean : (n, F) cleaned rows.
    coef : (n, k) coefficients ``c = VᵀMx`` in the stored basis.
    delta : (n, k) ``δᵢ = γᵢcᵢ²``.
    t : (n,) number of fully removed components (``t = k``: everything removed).
    alpha : (n,) fraction of component ``t+1`` removed (0 when ``t = k``), polished (see module).
    alpha_closed : (n,) the SPEC formula ``sqrt((ε − S_t)/δ_{t+1})`` (0 when ``t = k``).
    s_total : (n,) ``S_total = ‖A_dᵀx‖²``, the largest attainable e_utility.
    e_utility : (n,) budget spent: ``ε`` when ``ε < S_total``, else ``S_total``.
    """

    x_clean: np.ndarray
    coef: np.ndarray
    delta: np.ndarray
    t: np.ndarray
    alpha: np.ndarray
    alpha_closed: np.ndarray
    s_total: np.ndarray
    e_utility: np.ndarray


class NullSpaceCleaner:
    """Algorithm 1 of Xu et al. (AAAI 2017) as reconstructed in SPEC §10; see the module docstring.

    Parameters
    ----------
    epsilon : float ≥ 0
        Requested ``e_utility`` per row, in squared units of the desired predictions.
        0 is exact null-space cleaning.
    regularization : "auto" or float ≥ 0
        η in ``M = B_c + ηI`` (``method="generalized"`` only). "auto": 0 if ``A_c`` has full row
        rank F, else ``1e−8·tr(B_c)/F``.
    method : {"generalized", "subspace"}
        "generalized" is the SPEC's eigh on ``(B_d, M)``; "subspace" is the robust variant
        restricted to ``span[A_d, A_c]`` (no η; γ may be ∞).

    Attributes
    ----------
    gamma_ : (k,) ascending generalised eigenvalues, ≥ 0 (∞ possible with "subspace").
    components_ : (k, F) eigenvectors vᵢ as rows (``vᵢᵀMvⱼ = δᵢⱼ``; see module for γ = ∞).
    dual_ : (k, F) rows of ``VᵀM``: ``c = dual_ @ x``.
    utility_weights_ : (k,) ``‖A_dᵀvᵢ‖²`` (= γᵢ when finite), so ``δ = utility_weights_·c²``.
    eta_ : float, the η used (0 for "subspace").
    span_ : (F, r) orthonormal basis of ``span[A_d, A_c]`` ("subspace"), else None.
    n_features_in_ : int, F.
    """

    def __init__(self, *, epsilon: float, regularization: str | float = "auto", method: str = "generalized"):
        self.epsilon = epsilon
        self.regularization = regularization
        self.method = method

    def _validate_params(self) -> None:
        check_non_negative(
            self.epsilon, name="epsilon", fix="the requested e_utility; use 0 for exact null-space cleaning"
        )
        check_choice(self.method, name="method", allowed=METHODS)
        reg = self.regularization
        if isinstance(reg, str):
            if reg != "auto":
                raise ConfigError(f"regularization must be 'auto' or a float >= 0, got {reg!r}")
            return
        check_non_negative(reg, name="regularization", fix="or leave regularization='auto'")
        if self.method == "subspace":
            raise ConfigError(
                f"regularization={reg!r} applies only to method='generalized'; the subspace method "
                "needs no η: leave regularization='auto'"
            )

    def fit(self, A_d: ArrayLike, A_c: ArrayLike) -> NullSpaceCleaner:
        """Solve the generalised eigenproblem for the desired and confidential maps.

        Parameters
        ----------
        A_d : array_like (F, m_d) — the served model's linear first stage (1-D: one column).
        A_c : array_like (F, m_c) — the (estimated) confidential predictor.

        Raises
        ------
        ConfigError
            Bad parameters, non-finite or mismatched maps, ``A_c = 0``, or a singular ``M``.
        """
        self._validate_params()
        A_d = as_matrix("A_d", A_d, rows_name="F features", cols_name="m_d desired labels")
        A_c = as_matrix("A_c", A_c, rows_name="F features", cols_name="m_c confidential labels")
        if A_d.shape[0] != A_c.shape[0]:
            raise ConfigError(
                f"A_d has shape {A_d.shape} and A_c has shape {A_c.shape}: both need one row per "
                "feature (F×m_d and F×m_c with the same F); transpose the one given as m×F"
            )
        if not np.any(A_c):
            raise ConfigError(
                "A_c is all zeros, so B_c = 0 and no regularisation makes the eigenproblem meaningful "
                "(the confidential predictor ignores every feature: there is nothing to protect); "
                "check how A_c was fitted"
            )
        rank_d = int(np.linalg.matrix_rank(A_d))
        rank_c = int(np.linalg.matrix_rank(A_c))
        if self.method == "generalized":
            self._fit_generalized(A_d, A_c, rank_d, rank_c)
        else:
            self._fit_subspace(A_d, A_c, rank_d, rank_c)
        self._A_d = A_d
        self._AdT_V = self.components_ @ A_d  # (k, m_d): rows A_dᵀvᵢ, used by the α polish
        self.n_features_in_ = A_d.shape[0]
        return self

    def _fit_generalized(self, A_d: np.ndarray, A_c: np.ndarray, rank_d: int, rank_c: int) -> None:
        F = A_d.shape[0]
        B_d = A_d @ A_d.T
        B_c = A_c @ A_c.T
        if self.regularization == "auto":
            eta = 0.0 if rank_c == F else ETA_SCALE * float(np.trace(B_c)) / F
        else:
            eta = float(self.regularization)
            if eta == 0.0 and rank_c < F:
                raise ConfigError(
                    f"B_c = A_c A_cᵀ is singular (rank {rank_c} < F = {F}) and regularization=0, so M is "
                    "not positive definite; use regularization='auto' (η = 1e-8·tr(B_c)/F), a positive "
                    "float, or method='subspace'"
                )
        M = B_c + eta * np.eye(F)
        try:
            gamma, V = scipy.linalg.eigh(B_d, M)
        except np.linalg.LinAlgError as exc:
            raise ConfigError(
                f"M = B_c + ηI (η = {eta:.3g}) is numerically singular: {exc}; use method='subspace' or a "
                "larger regularization"
            ) from exc
        gamma = np.maximum(gamma, 0.0)
        gamma[: F - rank_d] = 0.0  # exact null space of A_dᵀ (module docstring, "Exact zeros")
        self.gamma_ = gamma
        self.components_ = V.T
        self.dual_ = (M @ V).T
        self.utility_weights_ = gamma.copy()
        self.eta_ = eta
        self.span_: np.ndarray | None = None

    def _fit_subspace(self, A_d: np.ndarray, A_c: np.ndarray, rank_d: int, rank_c: int) -> None:
        m_d = A_d.shape[1]
        K = np.hstack([A_d, A_c])
        U, s, Et = np.linalg.svd(K, full_matrices=False)
        r = int(np.count_nonzero(s > s[0] * max(K.shape) * np.finfo(float).eps))
        Q, s, E = U[:, :r], s[:r], Et[:r]
        E_d, E_c = E[:, :m_d], E[:, m_d:]
        _, W = np.linalg.eigh(E_d @ E_d.T)  # ascending μ = γ/(1+γ)
        lam_d = np.sum((E_d.T @ W) ** 2, axis=0)  # μ, computed directly for accuracy near 0
        lam_c = np.sum((E_c.T @ W) ** 2, axis=0)  # 1 − μ, accurate near 1
        lam_d[: max(r - rank_d, 0)] = 0.0
        if r > rank_c:
            lam_c[rank_c - r :] = 0.0
        finite = lam_c > 0
        scale = np.ones(r)
        scale[finite] = np.sqrt(lam_c[finite])
        V = (Q / s) @ W / scale  # columns: vᵀB_cv = 1 (finite γ) or vᵀB_dv = 1 (γ = ∞)
        D = (Q * s) @ W * scale  # columns: c = Dᵀx
        with np.errstate(divide="ignore", invalid="ignore"):
            self.gamma_ = np.where(finite, lam_d / np.where(finite, lam_c, 1.0), np.inf)
        self.components_ = V.T
        self.dual_ = D.T
        self.utility_weights_ = np.where(finite, self.gamma_, lam_d)
        self.eta_ = 0.0
        self.span_ = Q

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Clean query rows: ``(n, F) → (n, F)`` (a 1-D row gives a 1-D row)."""
        result = self.transform_with_details(X)
        return result.x_clean[0] if np.ndim(X) == 1 else result.x_clean

    def transform_with_details(self, X: ArrayLike) -> CleaningResult:
        """Clean query rows and return the per-row trace of Algorithm 1 (all rows at once)."""
        if not hasattr(self, "components_"):
            raise ConfigError("this NullSpaceCleaner is not fitted yet; call fit(A_d, A_c) first")
        self._validate_params()
        X = as_rows("X", X, self.n_features_in_)
        eps = float(self.epsilon)
        n, k = X.shape[0], self.gamma_.shape[0]
        rows = np.arange(n)
        C = X @ self.dual_.T
        delta = self.utility_weights_ * C**2
        s_total = np.sum((X @ self._A_d) ** 2, axis=1)  # ‖A_dᵀx‖², what removing everything costs
        total = np.sum(delta, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):  # calibrate Σδ to ‖A_dᵀx‖² (module doc)
            delta *= np.where(total > 0, s_total / total, 1.0)[:, None]
        S = np.cumsum(delta, axis=1)  # non-decreasing: δ ≥ 0
        t = np.count_nonzero(S <= eps, axis=1)  # = max{t : S_t ≤ ε}, S monotone
        partial = t < k
        nxt = np.minimum(t, k - 1)
        S_t = np.where(t > 0, S[rows, np.maximum(t - 1, 0)], 0.0)
        d_next = delta[rows, nxt]
        alpha_closed = np.zeros(n)
        alpha_closed[partial] = np.sqrt((eps - S_t[partial]) / d_next[partial])
        full = (np.arange(k) < t[:, None]) * C  # c_i for i ≤ t, else 0
        p = full @ self._AdT_V
        q = C[rows, nxt][:, None] * self._AdT_V[nxt]
        alpha = np.where(partial, _quadratic_root(p, q, eps), 0.0)
        removed = full
        removed[rows[partial], t[partial]] = alpha[partial] * C[rows[partial], t[partial]]
        base = X if self.span_ is None else (X @ self.span_) @ self.span_.T
        x_clean = base - removed @ self.components_
        x_clean[~partial] = 0.0  # everything removed: x = Vc (full basis) or x's part in the span
        return CleaningResult(
            x_clean=x_clean,
            coef=C,
            delta=delta,
            t=t,
            alpha=alpha,
            alpha_closed=alpha_closed,
            s_total=s_total,
            e_utility=np.where(partial, eps, s_total),
        )


def _quadratic_root(p: np.ndarray, q: np.ndarray, eps: float) -> np.ndarray:
    """Per row, the α in [0, 1] with ``‖p + αq‖² = ε`` (``‖p‖² ≤ ε < ‖p + q‖²``; module docstring)."""
    qq = np.sum(q * q, axis=1)
    pq = np.sum(p * q, axis=1)
    gap = np.maximum(eps - np.sum(p * p, axis=1), 0.0)
    disc = np.sqrt(pq**2 + qq * gap)
    with np.errstate(divide="ignore", invalid="ignore"):  # two forms of one root, no cancellation
        root = np.where(pq > 0, gap / (disc + pq), (disc - pq) / qq)
    return np.clip(np.where((qq > 0) & (gap > 0), root, 0.0), 0.0, 1.0)
