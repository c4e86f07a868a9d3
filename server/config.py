"""The coordinator's job configuration: one frozen, validated value built by the command line.

``deploy/cli.py`` turns the flags of ``privfed coordinator`` (and, once per ε, of ``privfed
simulate``) into a :class:`JobConfig`; nothing below ``deploy/`` sees an argparse ``Namespace``.
:func:`privfed.server.strategies.make_strategy` builds the round logic from it, and
:func:`privfed.server.main.run_coordinator` runs the job it describes.

It lives in ``server/``, not ``common/``: only the coordinator reads it. Owners receive the
parameters of each release inside the task itself (and check them against their own public
configuration), so keeping the coordinator's flags out of ``common/`` keeps them out of the
owner's import path too.

Every field is public configuration. Each invalid value raises :class:`ConfigError` naming the
flag (:data:`FLAGS`), the value received, the allowed range and the fix (STYLE rule 9).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfed.common.boosting.federated import BASE_LEARNERS, EVAL_ROW_BOUND, MAX_OWNER_ROWS
from privfed.common.datasets import BUILTINS
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.basis import BASES
from privfed.common.learners.logistic import DEFAULT_PARAM_BOUND
from privfed.common.mechanisms import MECHANISMS
from privfed.common.secagg import SECURE_SUMS
from privfed.common.validation import check_choice, check_fraction, check_int, check_non_negative, check_positive

TASKS = ("ncc", "lr", "feddpdr", "bdt")
LABEL_SCHEMES = ("rr", "clear")

#: Share weight bound used for ``--task bdt`` when neither ``--weight-bound`` nor
#: ``--rows-per-owner`` is given: the bound for owners holding one row each (the local-DP setting),
#: whose mean-1 SAMME weight may grow to about 2. An owner holding more rows has its share's
#: weights scaled down to this total before release -- a biased share, never a privacy loss -- so
#: a federation of multi-row owners should declare ``--rows-per-owner`` or ``--weight-bound``.
DEFAULT_WEIGHT_BOUND = 2.0

#: The command-line flag of each field, for error messages and for ``deploy/cli.py``, which reads
#: the flag's argparse destination (``--label-fraction`` -> ``label_fraction``).
FLAGS = {
    "task": "--task",
    "epsilon": "--epsilon",
    "mechanism": "--mechanism",
    "labels": "--labels",
    "label_fraction": "--label-fraction",
    "param_bound": "--param-bound",
    "c": "--C",
    "k": "--k",
    "delta": "--delta",
    "lam": "--lam",
    "basis": "--basis",
    "base": "--base",
    "n_rounds": "--rounds",
    "group_size": "--group-size",
    "n_bins": "--n-bins",
    "weight_bound": "--weight-bound",
    "rows_per_owner": "--rows-per-owner",
    "eval_fraction": "--eval-fraction",
    "eval_row_bound": "--eval-row-bound",
    "max_owner_rows": "--max-owner-rows",
    "ring_timeout": "--ring-timeout",
    "secure_sum": "--secure-sum",
    "seed": "--seed",
    "dataset": "--dataset",
    "n_samples": "--n-samples",
    "test_fraction": "--test-fraction",
    "owners": "--owners",
    "register_timeout": "--register-timeout",
    "round_timeout": "--round-timeout",
    "node_timeout": "--node-timeout",
    "listen": "--listen",
    "out": "--out",
    "serve": "--serve",
    "load_model": "--load-model",
    "journal": "--journal",
    "resume": "--resume",
    "schema": "--schema",
}


@dataclass(frozen=True, kw_only=True)
class JobConfig:
    """One federated job as the coordinator runs it.

    Parameters
    ----------
    task : {"ncc", "lr", "feddpdr", "bdt"}
        ``--task``: nearest centroid, logistic regression (seed 002 §3.5.1-2), FedDPDR-DPML
        (seed 004 Alg. 1) or LDP boosting (seed 002 Alg. 2).
    epsilon : float > 0 or math.inf
        ``--epsilon``: each owner's budget for the job (``inf``: no noise, the non-private reference).
    mechanism : {"pm", "duchi", "laplace"}
        ``--mechanism``: LDP mechanism of the ncc, lr and bdt releases.
    labels : {"rr", "clear"}
        ``--labels``: k-ary randomized response (default) or clear labels, which owners answer
        only when started with ``--allow-clear-labels`` (issue 9, contract 6).
    label_fraction : float in (0, 1)
        ``--label-fraction``: share of ε spent on labels with ``labels="rr"``.
    param_bound, c : float > 0
        ``--param-bound``, ``--C``: lr's public clip bound and inverse L2 strength.
    k : int >= 1; delta : float in [0, 1); lam : float > 0
        ``--k``, ``--delta``, ``--lam``: FedDPDR's subspace dimension, DP-PCA δ, SVM regularisation.
    basis : {"dp-pca", "dct", "identity"}
        ``--basis``: FedDPDR's phase 1, the paper's DP-PCA (the default), or a public basis that
        spends nothing and leaves all of ε to the classifier (:mod:`privfed.common.feddpdr.basis`).
    base : {"stump", "ncc", "lr"}; n_rounds : int >= 1; group_size : int >= 1 or None; n_bins : int >= 2
        ``--base``, ``--rounds``, ``--group-size`` (default ``owners // rounds``), ``--n-bins``:
        boosting's base learner, T, owners per round and public thresholds per attribute + 1.
    weight_bound : float > 0 or None
        ``--weight-bound``: public bound on an owner's total SAMME weight in a boosting share
        (mean-1 weights, so about its row count). None: derived from ``rows_per_owner``, else
        :data:`DEFAULT_WEIGHT_BOUND`; :attr:`share_weight_bound` is the value used.
    rows_per_owner : float > 0 or None
        ``--rows-per-owner``: the rows each owner holds, when that is public configuration of the
        federation (``privfed simulate`` knows it: it plays every owner). Only sets the default
        share weight bound, ``2 * ceil(rows_per_owner)``.
    eval_fraction : float in (0, 1); eval_row_bound : float > 0; max_owner_rows : int >= 1
        ``--eval-fraction``, ``--eval-row-bound``, ``--max-owner-rows``: boosting's evaluation
        releases (:class:`~privfed.common.boosting.federated.FederatedBoosting`).
    ring_timeout : float > 0 or None
        ``--ring-timeout``: seconds per ring secure sum (None: 30 s + 10 ms per member).
    secure_sum : {"auto", "ring", "secagg"}
        ``--secure-sum``: boosting's evaluation secure sum, the ring or pairwise masks; ``auto``
        pairwise masks for sums of at least :data:`~privfed.common.secagg.SECAGG_FROM` owners.
    seed : int >= 0
        ``--seed``: the public split and partition, and boosting's public group sampling.
    dataset : str; n_samples : int >= 1 or None; test_fraction : float in (0, 1)
        ``--dataset``, ``--n-samples``, ``--test-fraction``: the public evaluation split and the
        data set's public schema (bounds, classes).
    owners : int >= 1 or None
        ``--owners``: logical owners to wait for (None only for a config that just builds a strategy).
    register_timeout, round_timeout, node_timeout : float > 0
        ``--register-timeout``, ``--round-timeout``, ``--node-timeout``, in seconds.
    listen : str; out : Path; serve : bool; load_model : Path or None
        ``--listen``, ``--out``, ``--serve``, ``--load-model``: where to serve, where run
        directories go, whether to keep serving Predict, and a saved model to serve instead of training.
    journal : Path or None; resume : bool
        ``--journal``, ``--resume``: bdt only: the SQLite file where each round is checkpointed
        (:mod:`privfed.server.journal`), and whether to continue the job it holds.
    schema : Path or None
        ``--schema``: the federation schema file (:mod:`privfed.common.schema`): features, public
        bounds and class values of owners' own data, and optionally a public test file. Sent to
        every owner at registration. None: the schema of the built-in ``dataset``.
    """

    task: str
    epsilon: float
    mechanism: str = "pm"
    labels: str = "rr"
    label_fraction: float = 0.2
    param_bound: float = DEFAULT_PARAM_BOUND
    c: float = 1.0
    k: int = 20
    delta: float = 1e-5
    lam: float = 0.01
    basis: str = "dp-pca"
    base: str = "stump"
    n_rounds: int = 10
    group_size: int | None = None
    n_bins: int = 4
    weight_bound: float | None = None
    rows_per_owner: float | None = None
    eval_fraction: float = 0.3
    eval_row_bound: float = EVAL_ROW_BOUND
    max_owner_rows: int = MAX_OWNER_ROWS
    ring_timeout: float | None = None
    secure_sum: str = "auto"
    seed: int = 0
    dataset: str = "synthetic"
    n_samples: int | None = None
    test_fraction: float = 0.2
    owners: int | None = None
    register_timeout: float = 300.0
    round_timeout: float = 600.0
    node_timeout: float = 15.0
    listen: str = "0.0.0.0:50051"
    out: Path = Path("runs")
    serve: bool = False
    load_model: Path | None = None
    journal: Path | None = None
    resume: bool = False
    schema: Path | None = None

    def __post_init__(self) -> None:
        check_choice(self.task, name=FLAGS["task"], allowed=TASKS)
        check_choice(self.mechanism, name=FLAGS["mechanism"], allowed=MECHANISMS)
        check_choice(self.labels, name=FLAGS["labels"], allowed=LABEL_SCHEMES)
        check_choice(self.base, name=FLAGS["base"], allowed=BASE_LEARNERS)
        check_choice(self.basis, name=FLAGS["basis"], allowed=BASES)
        check_positive(self.epsilon, name=FLAGS["epsilon"], allow_inf=True, fix="math.inf (or 'inf') means no noise")
        check_choice(self.secure_sum, name=FLAGS["secure_sum"], allowed=SECURE_SUMS)
        for name in ("param_bound", "c", "lam", "eval_row_bound", "register_timeout", "round_timeout", "node_timeout"):
            check_positive(getattr(self, name), name=FLAGS[name])
        for name in ("weight_bound", "rows_per_owner", "ring_timeout"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name=FLAGS[name])
        for name in ("label_fraction", "eval_fraction", "test_fraction"):
            check_fraction(getattr(self, name), name=FLAGS[name])
        if check_non_negative(self.delta, name=FLAGS["delta"]) >= 1:
            raise ConfigError(f"{FLAGS['delta']} must be a number in [0, 1), got {self.delta!r}")
        for name, low in (("k", 1), ("n_rounds", 1), ("n_bins", 2), ("max_owner_rows", 1), ("seed", 0)):
            check_int(getattr(self, name), name=FLAGS[name], minimum=low)
        for name in ("group_size", "n_samples", "owners"):
            if getattr(self, name) is not None:
                check_int(getattr(self, name), name=FLAGS[name], minimum=1)
        if self.dataset not in BUILTINS:
            raise ConfigError(
                f"--dataset must be one of {', '.join(BUILTINS)}, got {self.dataset!r}; for owners' own files give "
                "the coordinator a federation schema instead (--schema FILE; README, 'Your own data')"
            )
        if not isinstance(self.listen, str) or not self.listen:
            raise ConfigError(f"--listen must be HOST:PORT, got {self.listen!r}")
        object.__setattr__(self, "out", Path(self.out))
        for name in ("load_model", "journal", "schema"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, Path(getattr(self, name)))

    @property
    def share_weight_bound(self) -> float:
        """The public bound on an owner's total weight in a boosting share that the job uses:
        ``weight_bound`` if given, else ``2 * ceil(rows_per_owner)`` (mean-1 weights sum to about
        the row count; the factor 2 leaves room for reweighting), else :data:`DEFAULT_WEIGHT_BOUND`."""
        if self.weight_bound is not None:
            return float(self.weight_bound)
        if self.rows_per_owner is not None:
            return 2.0 * max(1.0, float(math.ceil(self.rows_per_owner)))
        return DEFAULT_WEIGHT_BOUND

    @property
    def weight_bound_source(self) -> str:
        """Where :attr:`share_weight_bound` comes from: ``--weight-bound``, ``--rows-per-owner`` or ``default``."""
        if self.weight_bound is not None:
            return FLAGS["weight_bound"]
        return FLAGS["rows_per_owner"] if self.rows_per_owner is not None else "default"

    def replace(self, **changes: Any) -> JobConfig:
        """A copy with ``changes`` applied and validated again (e.g. one ε of a simulation)."""
        return dataclasses.replace(self, **changes)

    def to_report(self) -> dict[str, Any]:
        """Every field by name, plus the share weight bound used and where it came from."""
        return dataclasses.asdict(self) | {
            "share_weight_bound": self.share_weight_bound,
            "weight_bound_source": self.weight_bound_source,
        }
