"""One run of ``privfed experiment nullspace`` (:mod:`privfed.deploy.experiments.nullspace`; seed 003, Figs. 1-3;
SPEC §10): every variant's metrics on one train/test split.

Metrics, per test row, then averaged over rows and given as mean ± std over runs
---------------------------------------------------------------------------------
* ``e_utility = ‖A_dᵀ(z − z̃)‖²``, ``e_privacy = ‖A_cᵀ(z − z̃)‖²`` (SPEC §10).
* Complete privacy, the paper's definition and the **headline** (``cp``): the error of predicting the
  true confidential labels from the cleaned row is *strictly greater* than from the mean feature
  vector, ``‖y_c − ŷ_c(z̃)‖² > ‖y_c − ȳ_c‖²`` beyond a relative tolerance (``TIE_RTOL``). Ties
  (``|difference| ≤ TIE_RTOL``) are reported apart (``tie``; ``cp_with_ties = cp + tie`` is the
  paper's gloss "no more advantageous than with the mean vector"). Without the attack every cleaned
  row is a tie here: with ``F ≥ K1 + K2`` the generalised eigenvalues are all 0 or ∞ and cleaning
  sets the confidential *linear* prediction to exactly ``ȳ_c`` (the rows are centred at the training
  mean, so "fully cleaned" is the mean vector). The paper's 81.8 % on scene is not a tie count;
  its centring is not stated.
* ``mse_ratio``: the adversary's mean squared error over the mean vector's (< 1: it learns something).
* Adversary (``--adversary``, default ``ridge-gcv``): ``A_c``, and every map the attacker refits,
  is a ridge fit with the penalty chosen by generalised cross-validation on the training rows
  (:func:`privfed.common.nullspace.fit_linear_map`). The paper's plain least squares
  (``--adversary lstsq``) over-fits yeast's 103 features: its held-out predictions are worse than the
  mean for N_d = 7 and 13 (``mse_ratio`` 1.00 and 1.06 on raw rows), so raw rows and Laplace-noised
  rows already score high CP, while the attacker who refits on cleaned rows (a few directions) is
  regularised by the cleaning itself. That is why cleaning with the attack did not beat Laplace on
  yeast (issue 13): the comparison credited Laplace with the adversary's over-fitting.
* Attack (paper, Fig. 2): the adversary cleans the training rows with the same cleaner and ε and
  refits its map on them; ``e_privacy`` is then ``‖ŷ_c′(z̃) − ŷ_c(z)‖²`` (its prediction from the
  cleaned row against the one it would make from the raw row) and CP uses ``ŷ_c′``.
* Laplace (paper, Fig. 3): ``z + b·L``, L i.i.d. standard Laplace per feature, with b set so the
  mean e_utility over the test rows equals cleaning's. For fixed draws the mean e_utility is
  exactly ``b²·mean‖A_dᵀL‖²``, so b is solved in closed form. (This is the paper's noise-adding
  baseline, not a DP release: no sensitivity bound.) ``laplace_attack``: the adversary refits on
  training rows noised the same way.
* Projection (``privfed query``'s default, :class:`~privfed.common.nullspace.StageProjection`):
  ``z̃ = (1 − β)·P_d z``, the part of ``z`` the desired map reads, shrunk to spend exactly
  cleaning's ε per row. It uses no confidential map (owner/query.py, "What x̃ reveals");
  ``projection_attack``: training rows projected the same way.
* ``cp_raw``: CP of the raw (uncleaned) rows, the floor any mechanism starts from.
* Method (``--method``, default ``subspace``): the generalised eigensolver's η-regularised ``M``
  leaves ~1e−8 of the removed components in ``z̃``; without the attack that turns every tie into a
  rounding coin flip (strict CP 17-40 % on yeast instead of 0), and the refitting attacker's least
  squares amplifies the residue back into the raw predictor (N_d = 13: CP 67.6 % vs raw 66.7 %).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from privfed.common.nullspace import NullSpaceCleaner, StageProjection, e_utility, fit_linear_map

TIE_RTOL = 1e-9  # |err(z̃) − err(mean)| ≤ TIE_RTOL·(err(z̃) + err(mean)) counts as a tie
VARIANTS = ("clean", "clean_attack", "laplace", "laplace_attack", "projection", "projection_attack")
METRICS = ("e_utility", "e_privacy", "cp", "tie", "cp_with_ties", "mse_ratio")
ADVERSARIES: dict[str, float | str] = {"ridge-gcv": "gcv", "lstsq": 0.0}
"""``--adversary``: how ``A_c`` and the attacker's refits are estimated (the ``alpha`` of fit_linear_map)."""

Columns = tuple[np.ndarray, np.ndarray, np.ndarray]


def _cp(y: np.ndarray, pred: np.ndarray, y_mean: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Per row: (strictly complete privacy, tie), and the adversary's MSE over the mean vector's."""
    err = np.sum((y - pred) ** 2, axis=1)
    err_mean = np.sum((y - y_mean) ** 2, axis=1)
    tol = TIE_RTOL * (err + err_mean) + 1e-300
    return err - err_mean > tol, np.abs(err - err_mean) <= tol, float(err.mean() / max(err_mean.mean(), 1e-300))


def _refit_predict(Z_train: np.ndarray, Yc_train: np.ndarray, Z_query: np.ndarray, alpha: float | str) -> np.ndarray:
    """The adversary's attack: fit on (transformed) training rows, predict the transformed queries."""
    A = fit_linear_map(Z_train, Yc_train, alpha=alpha)
    return Yc_train.mean(axis=0) + (Z_query - Z_train.mean(axis=0)) @ A


def evaluate_split(tr: Columns, te: Columns, args: argparse.Namespace, rng: np.random.Generator) -> dict[str, Any]:
    """All metrics of one split; returns ``{variant: {metric: (n_eps,) array}}`` and the raw-row figures."""
    (Xtr, Ydtr, Yctr), (Xte, _Ydte, Ycte) = tr, te
    alpha = ADVERSARIES[args.adversary]
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd[sd == 0] = 1.0
    Ztr, Zte = (Xtr - mu) / sd, (Xte - mu) / sd
    A_d, A_c = fit_linear_map(Ztr, Ydtr), fit_linear_map(Ztr, Yctr, alpha=alpha)
    yc_mean = Yctr.mean(axis=0)
    pred_raw = yc_mean + (Zte - Ztr.mean(axis=0)) @ A_c
    cp_raw, _, mse_raw = _cp(Ycte, pred_raw, yc_mean)
    L_te, L_tr = rng.laplace(size=Zte.shape), rng.laplace(size=Ztr.shape)
    unit = float(np.mean(np.sum((L_te @ A_d) ** 2, axis=1)))
    out: dict[str, dict[str, list[float]]] = {v: {m: [] for m in METRICS} for v in VARIANTS}
    out["clean"].update(budget_met=[], theorem1_rel_err=[])
    gam = np.zeros(0)
    for eps in args.epsilon:
        cleaner = NullSpaceCleaner(epsilon=eps, method=args.method).fit(A_d, A_c)
        gam = cleaner.gamma_
        res = cleaner.transform_with_details(Zte)
        eu = e_utility(A_d, Zte, res.x_clean)
        met = eps < res.s_total
        out["clean"]["budget_met"].append(float(met.mean()))
        out["clean"]["theorem1_rel_err"].append(
            float(np.max(np.abs(eu[met] - eps) / eps, initial=0.0)) if eps > 0 else 0.0
        )
        b = math.sqrt(eu.mean() / unit) if unit > 0 else 0.0
        Zl_te, Zl_tr = Zte + b * L_te, Ztr + b * L_tr
        projector = StageProjection(epsilon=eps).fit(A_d)
        Zp_te = projector.transform(Zte)
        cases = {
            "clean": (res.x_clean, yc_mean + res.x_clean @ A_c),
            "clean_attack": (res.x_clean, _refit_predict(cleaner.transform(Ztr), Yctr, res.x_clean, alpha)),
            "laplace": (Zl_te, yc_mean + Zl_te @ A_c),
            "laplace_attack": (Zl_te, _refit_predict(Zl_tr, Yctr, Zl_te, alpha)),
            "projection": (Zp_te, yc_mean + Zp_te @ A_c),
            "projection_attack": (Zp_te, _refit_predict(projector.transform(Ztr), Yctr, Zp_te, alpha)),
        }
        for variant, (Zq, pred) in cases.items():
            cp, tie, mse_ratio = _cp(Ycte, pred, yc_mean)
            o = out[variant]
            o["e_utility"].append(float(e_utility(A_d, Zte, Zq).mean()))
            o["e_privacy"].append(float(np.mean(np.sum((pred - pred_raw) ** 2, axis=1))))
            o["cp"].append(float(cp.mean()))
            o["tie"].append(float(tie.mean()))
            o["cp_with_ties"].append(float((cp | tie).mean()))
            o["mse_ratio"].append(mse_ratio)
    result: dict[str, Any] = {v: {m: np.asarray(x, dtype=float) for m, x in d.items()} for v, d in out.items()}
    result["cp_raw"] = float(cp_raw.mean())
    result["mse_ratio_raw"] = mse_raw
    result["gamma_zero"] = int(np.sum(gam == 0))
    result["gamma_inf"] = int(np.sum(np.isinf(gam)))
    result["n_components"] = int(gam.size)
    return result
