"""The sections of ``privfed reproduce``: one entry per table or figure of the three seed papers.

Each :class:`Section` is data: the paper's number (quoted, with its table or figure), the
``privfed`` command that measures ours (full and ``--quick``), where our number sits in the
command's ``report.json`` (:class:`Quantity` paths), the verdict rule, and every setting that
differs from the paper. Adding a result is one entry in :data:`SECTIONS`; a section whose
experiment this build does not have is reported as "not available in this build".

Papers: seed 002 (Wang & Chang, *Privacy-Preserving Boosting in the Local Setting*), seed 003
(Xu et al., *Enhancing the Privacy of Predictors*, AAAI 2017), seed 004 (Wang et al.,
*Differentially Private Support Vector Machines with Knowledge Aggregation*, CMC 2024).
"""

from __future__ import annotations

import math
import operator
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

Value = float | list[float]
#: A key, a list index (negative: from the end), or a tuple of keys/indices: one value each (a list).
PathStep = str | int | tuple[str | int, ...]

MET, CLOSE, NOT_MET = "met", "close", "not met"
#: Statuses of a section besides its verdict: run and read (ok), not runnable in this build, the
#: experiment failed (non-zero exit or timeout), or its report lacks the number read.
OK, NOT_AVAILABLE, FAILED, NO_NUMBER = "ok", "not available", "failed", "no number"


@dataclass(frozen=True)
class Quantity:
    """A number read from ``report.json``: the value at ``path`` (dict keys and list indices,
    negative indices from the end; a tuple step reads each of its keys and gives a list), minus
    the value at ``minus`` when given. A list of numbers is kept as a list (e.g. one value per ε)."""

    label: str
    path: tuple[PathStep, ...]
    minus: tuple[PathStep, ...] | None = None
    fmt: str = "{:.3f}"

    def where(self) -> str:
        """The path as text, e.g. ``results.synthetic.curves["eps=5"].mean[-1]``."""
        text = _path_text(self.path)
        return text if self.minus is None else f"{text} - {_path_text(self.minus)}"


def _path_text(path: tuple[PathStep, ...]) -> str:
    out = ""
    for step in path:
        if isinstance(step, tuple):
            out += "[" + "|".join(repr(s) if isinstance(s, str) else str(s) for s in step) + "]"
        elif isinstance(step, int):
            out += f"[{step}]"
        elif step.isidentifier():
            out += f".{step}" if out else step
        else:
            out += f'["{step}"]'
    return out


def _as_list(value: Value) -> list[float]:
    return value if isinstance(value, list) else [value]


def _pairs(a: Value, b: Value) -> list[tuple[float, float]]:
    """Elementwise pairs of two values (a scalar pairs with every element of a list)."""
    xs, ys = _as_list(a), _as_list(b)
    if len(xs) == 1:
        xs = xs * len(ys)
    if len(ys) == 1:
        ys = ys * len(xs)
    if len(xs) != len(ys):
        raise ValueError(f"cannot compare {len(xs)} values with {len(ys)}")
    return list(zip(xs, ys))


@dataclass(frozen=True)
class AtLeast:
    """Met when the smallest value of ``name`` is >= ``met``; close when >= ``close``."""

    name: str
    met: float
    close: float
    #: The comparison every value must pass; :class:`AtMost` turns it around.
    op: ClassVar[str] = ">="

    def names(self) -> tuple[str, ...]:
        return (self.name,)

    def text(self) -> str:
        return (
            f"met if {self.name} {self.op} {self.met:g} (every value); close if {self.op} {self.close:g}; else not met"
        )

    def __call__(self, values: Mapping[str, Value]) -> str:
        passes = operator.ge if self.op == ">=" else operator.le
        vals = _as_list(values[self.name])
        worst = min(vals) if self.op == ">=" else max(vals)
        return MET if passes(worst, self.met) else CLOSE if passes(worst, self.close) else NOT_MET


@dataclass(frozen=True)
class AtMost(AtLeast):
    """Met when the largest value of ``name`` is <= ``met``; close when <= ``close``."""

    op: ClassVar[str] = "<="


@dataclass(frozen=True)
class Near:
    """Met when ``name`` is within ``met`` of ``ref`` (every element); close within ``close``."""

    name: str
    ref: str
    met: float
    close: float

    def names(self) -> tuple[str, ...]:
        return (self.name, self.ref)

    def text(self) -> str:
        return (
            f"met if |{self.name} - {self.ref}| <= {self.met:g} (every value); close if <= {self.close:g}; else not met"
        )

    def __call__(self, values: Mapping[str, Value]) -> str:
        gap = max(abs(a - b) for a, b in _pairs(values[self.name], values[self.ref]))
        return MET if gap <= self.met else CLOSE if gap <= self.close else NOT_MET


@dataclass(frozen=True)
class Beats:
    """Met when ``name`` is strictly better than each of ``others`` at every element (higher,
    or lower with ``lower=True``); close when it is nowhere worse by ``close`` or more (with
    ``close = 0``, a tie or worse is not met)."""

    name: str
    others: tuple[str, ...]
    close: float
    lower: bool = False

    def names(self) -> tuple[str, ...]:
        return (self.name, *self.others)

    def text(self) -> str:
        word = "below" if self.lower else "above"
        band = f"close if it is nowhere {self.close:g} or more on the wrong side; " if self.close > 0 else ""
        return f"met if {self.name} is {word} {' and '.join(self.others)} at every value; {band}else not met"

    def __call__(self, values: Mapping[str, Value]) -> str:
        sign = -1.0 if self.lower else 1.0
        margins = [sign * (a - b) for other in self.others for a, b in _pairs(values[self.name], values[other])]
        worst = min(margins)
        return MET if worst > 0 else CLOSE if worst > -self.close else NOT_MET


Rule = AtLeast | AtMost | Near | Beats


@dataclass(frozen=True)
class Section:
    """One result of ``privfed reproduce`` (see the module docstring).

    ``command`` and ``quick`` are the arguments after ``privfed`` (shell-style), without ``--seed``
    and ``--out`` (the runner adds both); ``{data}`` stands for the shared data directory.
    ``plots`` names the PNGs of the run directory to embed (empty: all of them).
    """

    key: str
    title: str
    paper: str
    where: str
    quote: str
    command: str
    quick: str
    quantities: tuple[Quantity, ...]
    rule: Rule
    differences: tuple[str, ...]
    plots: tuple[str, ...] = ()

    @property
    def experiment(self) -> str:
        """The ``privfed experiment`` NAME this section runs."""
        return self.args(False)[1]

    def args(self, quick: bool) -> tuple[str, ...]:
        """The ``privfed`` arguments of the full run or of the quick one (shell-style split)."""
        return tuple(shlex.split(self.quick if quick else self.command))


def fmt_value(value: Value, fmt: str) -> str:
    """``value`` formatted with ``fmt``; a list as ``a / b / c``; ``nan`` and ``inf`` as such."""
    return " / ".join(fmt.format(v) if math.isfinite(v) else str(v) for v in _as_list(value))


P002 = "seed 002 (Wang & Chang, LDP boosting)"
P003 = "seed 003 (Xu et al., null-space cleaning)"
P004 = "seed 004 (Wang et al., FedDPDR-DPML)"

_FEDDPDR_FULL = "--runs 2"
_FEDDPDR_QUICK = "--quick --runs 1"
_FEDDPDR_DIFF = (
    "MNIST-5k (4000 training rows, 800 per party) instead of MNIST's 60,000; n = 10^4 rows per party "
    "does not fit the bundled data (no data set may be fetched at run time)",
    "delta = 1e-5 instead of the paper's 1e-4 (the experiment's default)",
    "phase-2 classifier: the experiment's default (DP class sums, 'centroid'), not the paper's one-vs-rest "
    "SVM at eps/K each",
    "Fashion-MNIST and CIFAR-10 are not available offline; MNIST only",
    "2 runs (seeds seed, seed+1; the paper does not say how many), to keep the full run under 30 minutes",
)


def _acc(method: str, index: PathStep | None = None) -> tuple[PathStep, ...]:
    path: tuple[PathStep, ...] = ("accuracy", method, "mean")
    return path if index is None else (*path, index)


def _curve(dataset: str, setting: str | tuple[str, ...], index: int) -> tuple[PathStep, ...]:
    return ("results", dataset, "curves", setting, "mean", index)


def _ns(variant: str, metric: str) -> tuple[PathStep, ...]:
    return ("results", variant, metric, "mean", 0)


def _nullspace(desired: int, *, quick: bool) -> str:
    """The paper's protocol on yeast: 10 random 90/10 splits (quick: 2) at e_utility 0.01, 0.02, 0.03 (quick: 0.01)."""
    return (
        "experiment nullspace --data {data}/mulan/yeast-train.csv.gz --test-data {data}/mulan/yeast-test.csv.gz "
        f"--n-features 103 --desired {desired} --confidential {14 - desired} "
        + ("--epsilon 0.01 --runs 2" if quick else "--epsilon 0.01,0.02,0.03 --runs 10")
    )


_NS_DIFF = (
    "yeast (Mulan, 2417 rows, 103 features, 14 labels) instead of scene and wq, which are not in "
    "shared/data; the label splits 1/13, 7/7, 13/1 are wq's",
    "CP here is the paper's strict 'greater than' (the experiment's cp); ties are shown apart",
    "the adversary's A_c and refits are ridge fits chosen by generalised cross-validation (the experiment's "
    "default): the paper's plain least squares over-fits yeast's 103 features and predicts held-out "
    "confidential labels no better than their mean, which credits Laplace with the adversary's over-fitting",
    "method subspace (the experiment's default) for the generalised eigenproblem of Alg. 1",
)


def _ns_laplace(desired: int, paper_rows: str) -> Section:
    split = f"{desired}/{14 - desired}"
    return Section(
        key=f"nullspace-laplace-{desired}",
        title=f"Null-space cleaning with attack vs Laplace, yeast N_d/N_c = {split}",
        paper=P003,
        where="Fig. 3",
        quote=f"scene, N_d = 1, N_c = 5, e_utility 0.01: Laplace CP 31.5 %, Alg. 1 with attack CP 51.0 %{paper_rows}; "
        "'even with the proposed attack, our approach achieves better complete privacy rate compared to the "
        "Laplace mechanism'",
        command=_nullspace(desired, quick=False),
        quick=_nullspace(desired, quick=True),
        quantities=(
            Quantity("CP clean+attack", _ns("clean_attack", "cp")),
            Quantity("CP Laplace", _ns("laplace", "cp")),
            Quantity("CP Laplace+attack", _ns("laplace_attack", "cp")),
        ),
        rule=Beats("CP clean+attack", ("CP Laplace",), close=0.02),
        differences=(
            *_NS_DIFF,
            "Laplace noise scaled in closed form to cleaning's mean e_utility (the paper tunes it to the same "
            "e_utility); the verdict compares with Laplace against the fixed predictor, as the paper's table; "
            "Laplace with the refitting attack is shown too",
        ),
        plots=("cp.png",),
    )


def _boosted_ncc(labels: str) -> Section:
    """Boosted NCC (Fig. 10) with privfed's private default, ``--labels joint``, or the paper's clear labels."""
    private = labels == "joint"
    return Section(
        key="boosted-ncc" if private else "boosted-ncc-clear",
        title="Boosted NCC, MNIST, eps = 3 and 5: round 10 vs round 1"
        + (" (private labels, joint)" if private else " (the paper's clear labels)"),
        paper=P002,
        where="Fig. 10",
        quote="'the boosted NCC still gets lower misclassification rate than non-boosted NCC (the first round of "
        "boosting)' at eps 3.0 and 5.0",
        command=f"experiment boosted-ncc --datasets mnist-box --labels {labels} --runs 10",
        quick=f"experiment boosted-ncc --datasets mnist-box --labels {labels} --quick --runs 1",
        quantities=(
            Quantity("eps=3, 5: round 10", _curve("mnist-box", ("eps=3", "eps=5"), -1)),
            Quantity("eps=3, 5: round 1", _curve("mnist-box", ("eps=3", "eps=5"), 0)),
            Quantity("non-private, round 10", _curve("mnist-box", "non-private", -1)),
        ),
        rule=Beats("eps=3, 5: round 10", ("eps=3, 5: round 1",), close=0.0, lower=True),
        differences=(
            "MNIST-5k (4000 training owners, 400 per round), 25 public features (4x4 mean blocks of the 20x20 digit "
            "box) instead of HOG + bag of visual words; Fashion-MNIST and IPUMS Brazil are not available",
            "labels private (the paper sends them in the clear): one (2K+1)-ary randomized response of (label, sign "
            "of one sampled feature) per row at the whole share eps; measured (10 runs) eps=3: 0.875 -> 0.871 (no "
            "gain within the standard error 0.013), eps=5: 0.866 -> 0.811; the paper's clear labels, 0.827 -> 0.786 "
            "and 0.732 -> 0.628; randomized response of the label alone at 0.2 of the budget is at chance (0.90)"
            if private
            else "labels in the clear, as in the paper (the features are eps-LDP, the label is not protected; owners "
            "answer only with --allow-clear-labels): the paper's setting, beside privfed's private default",
            "10 runs",
        ),
    )


SECTIONS: tuple[Section, ...] = (
    # ------------------------------------------------------------------ seed 002: LDP boosting
    Section(
        key="mechanism-mse",
        title="MSE of the mean of LR parameters, Laplace / Duchi / PM, eps = 1, 5, 9",
        paper=P002,
        where="Table II",
        quote="MNIST, eps = 1 / 5 / 9: Laplace 27.4852 / 1.0848 / 0.3333, Duchi 0.6149 / 0.1300 / 0.1350, "
        "PM 0.5104 / 0.0299 / 0.0129; 'PM has the smallest MSE across all privacy budgets except one setting'",
        command="experiment mechanism-mse --runs 5",
        quick="experiment mechanism-mse --runs 2",
        quantities=(
            Quantity("PM", ("results", "mse", ("pm@1", "pm@5", "pm@9"), "mean"), fmt="{:.4g}"),
            Quantity("Duchi", ("results", "mse", ("duchi@1", "duchi@5", "duchi@9"), "mean"), fmt="{:.4g}"),
            Quantity("Laplace", ("results", "mse", ("laplace@1", "laplace@5", "laplace@9"), "mean"), fmt="{:.4g}"),
        ),
        rule=Beats("PM", ("Duchi", "Laplace"), close=0.0, lower=True),
        differences=(
            "MNIST-5k 4x4 mean-pooled (49 public features), 800 owners x 5 rows, instead of MNIST with HOG + bag "
            "of visual words features",
        ),
    ),
    Section(
        key="lr-epsilon",
        title="LR from perturbed local models: accuracy at eps = 1, 5, 9",
        paper=P002,
        where="Fig. 3",
        quote="'the accuracy improves as eps increases in general ... and PM among all three perturbation "
        "methods achieves the highest accuracy' (eps 1..9; the values are only in the figure)",
        command="experiment lr-epsilon --runs 5",
        quick="experiment lr-epsilon --runs 2",
        quantities=(
            Quantity("PM", ("results", "accuracy", ("pm@1", "pm@5", "pm@9"), "mean")),
            Quantity("Duchi", ("results", "accuracy", ("duchi@1", "duchi@5", "duchi@9"), "mean")),
            Quantity("Laplace", ("results", "accuracy", ("laplace@1", "laplace@5", "laplace@9"), "mean")),
            Quantity("non-private", ("results", "non_private")),
        ),
        rule=Beats("PM", ("Duchi", "Laplace"), close=0.02),
        differences=("MNIST-5k 4x4 mean-pooled, 800 owners x 5 rows (issue 12) instead of MNIST's 60,000 rows",),
    ),
    Section(
        key="ncc-epsilon",
        title="NCC from perturbed rows: accuracy at eps = 1, 5, 9",
        paper=P002,
        where="Fig. 5",
        quote="'PM performs better than other two perturbation methods for NCC' (the values are only in the figure)",
        command="experiment ncc-epsilon --runs 5",
        quick="experiment ncc-epsilon --runs 2",
        quantities=(
            Quantity("PM", ("results", "accuracy", ("pm@1", "pm@5", "pm@9"), "mean")),
            Quantity("Duchi", ("results", "accuracy", ("duchi@1", "duchi@5", "duchi@9"), "mean")),
            Quantity("Laplace", ("results", "accuracy", ("laplace@1", "laplace@5", "laplace@9"), "mean")),
            Quantity("non-private", ("results", "non_private")),
        ),
        rule=Beats("PM", ("Duchi", "Laplace"), close=0.02),
        differences=(
            "MNIST-5k 4x4 mean-pooled instead of MNIST, Fashion-MNIST and IPUMS Brazil",
            "labels by randomized response at 20 % of eps (the paper sends them in the clear, which is not private)",
        ),
    ),
    Section(
        key="stump-synthetic",
        title="Stump top-3 hit rate, synthetic, 10^4 owners",
        paper=P002,
        where="Fig. 12",
        quote="'there are 10,000 data owners simulated from the synthetic dataset, and the top-3 hitting rate is "
        "almost [100 %] as eps reaches to 3.0' (PM above Duchi)",
        command="experiment stump-hit-rate --runs 100 --epsilon 1,3,5,7,9 --encodings signs,table --mechanisms pm,duchi",
        quick="experiment stump-hit-rate --runs 5 --epsilon 3 --encodings signs,table --mechanisms pm",
        quantities=(
            Quantity("top-3 signs, eps=3", ("results", "results", "signs@3", "top3"), fmt="{:.2f}"),
            Quantity(
                "top-3 table/pm (paper's encoding), eps=3", ("results", "results", "table/pm@3", "top3"), fmt="{:.2f}"
            ),
            Quantity("top-1 signs, eps=3", ("results", "results", "signs@3", "top1"), fmt="{:.2f}"),
        ),  # fmt: skip
        rule=AtLeast("top-3 signs, eps=3", met=0.95, close=0.85),
        differences=(
            "default encoding 'signs' (one sampled attribute sign per owner, issue 12) instead of the paper's "
            "perturbed cross tables; the paper's encoding ('table') is shown beside it",
            "each attribute binarised at its public midpoint",
        ),
        plots=("stump_hit_rate.png",),
    ),
    Section(
        key="stump-mnist",
        title="Stump top-3 hit rate, MNIST 4 vs 9, 1000 owners",
        paper=P002,
        where="Fig. 11",
        quote="'For the binary MNIST dataset, the top-3 hitting rates of PM perturbation reaches almost [100 %] "
        "as eps grows to 5.0' (1,000 data owners)",
        command="experiment stump-hit-rate --datasets mnist4v9-pool --runs 100 --epsilon 1,3,5,7,9 "
        "--encodings signs,table --mechanisms pm",
        quick="experiment stump-hit-rate --datasets mnist4v9-pool --runs 5 --epsilon 5 --encodings signs,table "
        "--mechanisms pm",
        quantities=(
            Quantity("top-3 signs, eps=5", ("results", "results", "signs@5", "top3"), fmt="{:.2f}"),
            Quantity(
                "top-3 table/pm (paper's encoding), eps=5", ("results", "results", "table/pm@5", "top3"), fmt="{:.2f}"
            ),
        ),  # fmt: skip
        rule=AtLeast("top-3 signs, eps=5", met=0.95, close=0.85),
        differences=(
            "MNIST-5k digits 4 and 9 (~1000 rows) 7x7 mean-pooled to 16 public features instead of HOG + bag of "
            "visual words (not available); chance top-3 = 3/16",
            "default encoding 'signs' instead of the paper's cross tables (shown beside it)",
        ),
        plots=("stump_hit_rate.png",),
    ),
    Section(
        key="bdt-synthetic",
        title="Boosted decision stumps, synthetic, eps = 5, after 10 stumps",
        paper=P002,
        where="Fig. 14",
        quote="'the privacy-preserving BDT has a similar prediction capacity compared to the non-private one under "
        "various number of decision stumps' (synthetic)",
        command="experiment bdt-error --datasets synthetic --runs 5 --epsilon 1,3,5",
        quick="experiment bdt-error --datasets synthetic --quick --runs 1 --epsilon 5",
        quantities=(
            Quantity("private eps=5, round 10", _curve("synthetic", "eps=5", -1)),
            Quantity("non-private, round 10", _curve("synthetic", "non-private", -1)),
            Quantity("private eps=5, round 1", _curve("synthetic", "eps=5", 0)),
        ),
        rule=Near("private eps=5, round 10", "non-private, round 10", met=0.02, close=0.05),
        differences=("each round a fresh group of N/T owners (the paper's design)", "5 runs"),
    ),
    Section(
        key="bdt-mnist",
        title="Boosted decision stumps, MNIST 4 vs 9, eps = 5, after 10 stumps (issue 12 target: <= 0.25)",
        paper=P002,
        where="Fig. 13",
        quote="'it has a similar prediction capacity compared to the non-private one' (MNIST 4 vs 9)",
        command="experiment bdt-error --datasets mnist4v9-ink --runs 5 --epsilon 1,3,5",
        quick="experiment bdt-error --datasets mnist4v9-ink --quick --runs 1 --epsilon 5",
        quantities=(
            Quantity("private eps=5, round 10", _curve("mnist4v9-ink", "eps=5", -1)),
            Quantity("non-private, round 10", _curve("mnist4v9-ink", "non-private", -1)),
        ),
        rule=AtMost("private eps=5, round 10", met=0.25, close=0.30),
        differences=(
            "MNIST-5k digits 4 and 9 (about 800 training owners of one row, 80 per round; the paper's 60k-row MNIST "
            "gives about 12k), 30 public, data-independent features (any ink in the 2x2 blocks of the upper half of "
            "the 20x20 digit box, middle 12 columns; picked among several maps on MNIST) instead of HOG + bag of "
            "visual words",
            "verdict: issue 12's target (private eps = 5 at most 0.25 after 10 stumps); the paper's 'similar to "
            "non-private' is not met at this data size (about 0.21 against 0.14: the evaluation noise of 80-owner "
            "groups rejects good stumps)",
            "5 runs",
        ),
    ),
    *(_boosted_ncc(labels) for labels in ("joint", "clear")),
    # ------------------------------------------------------------------ seed 004: FedDPDR-DPML
    Section(
        key="feddpdr-k",
        title="FedDPDR-DPML vs target dimension k (k = 20)",
        paper=P004,
        where="Fig. 2",
        quote="'accuracy of all mechanisms continuously increases with the dimension k increasing from 5 to 100 "
        "... FedDPDR-DPML has the best accuracy on all datasets' (eps = 0.1, n = 10,000, N = 5)",
        command=f"experiment feddpdr-k {_FEDDPDR_FULL}",
        quick=f"experiment feddpdr-k {_FEDDPDR_QUICK}",
        quantities=(
            Quantity("FedDPDR-DPML", _acc("FedDPDR-DPML", 2)),
            Quantity("DPML", _acc("DPML", 2)),
            Quantity("DPDR-DPML (mean party)", _acc("DPDR-DPML", 2)),
            Quantity("Non-Priv", _acc("Non-Priv", 2)),
        ),
        rule=Beats("FedDPDR-DPML", ("DPML", "DPDR-DPML (mean party)"), close=0.02),
        differences=(*_FEDDPDR_DIFF, "k grid 5, 10, 20, 50, 100 (the paper's); our number at k = 20"),
        plots=("accuracy.png",),
    ),
    Section(
        key="feddpdr-epsilon",
        title="FedDPDR-DPML vs eps, at the paper's n*eps",
        paper=P004,
        where="Fig. 3",
        quote="'the accuracy of FedDPDR-DPML is much closer to Non-Priv' for eps from 0.01 to 2.0 (k = 20, "
        "n = 10,000, N = 5)",
        command=f"experiment feddpdr-epsilon {_FEDDPDR_FULL} --epsilon 0.01,0.05,0.1,0.5,1,1.25,2",
        quick=f"experiment feddpdr-epsilon {_FEDDPDR_QUICK} --epsilon 0.1,1,3.484320557491289,10",
        quantities=(
            Quantity("FedDPDR-DPML", _acc("FedDPDR-DPML", -2)),
            Quantity("Non-Priv", _acc("Non-Priv", -2)),
            Quantity("DPDR-DPML (mean party)", _acc("DPDR-DPML", -2)),
            Quantity("FedDPDR-DPML at every eps", _acc("FedDPDR-DPML")),
        ),
        rule=Near("FedDPDR-DPML", "Non-Priv", met=0.05, close=0.10),
        differences=(
            *_FEDDPDR_DIFF,
            "our number at eps = 1.25 = 0.1 x 10^4 / 800, the paper's n*eps (noise in both phases scales with "
            "1/(n eps)); quick: 3.48 for digits' 287 rows per party",
        ),
        plots=("accuracy.png",),
    ),
    Section(
        key="feddpdr-n",
        title="FedDPDR-DPML vs rows per party n",
        paper=P004,
        where="Fig. 4",
        quote="'our proposed FedDPDR-DPML always outperforms DPML under the same privacy protection level' "
        "(n = 100 ... 10,000, eps = 0.1)",
        command=f"experiment feddpdr-n {_FEDDPDR_FULL}",
        quick=f"experiment feddpdr-n {_FEDDPDR_QUICK}",
        quantities=(
            Quantity("FedDPDR-DPML", _acc("FedDPDR-DPML")),
            Quantity("DPML", _acc("DPML")),
            Quantity("Non-Priv", _acc("Non-Priv")),
        ),
        rule=Beats("FedDPDR-DPML", ("DPML",), close=0.02),
        differences=(*_FEDDPDR_DIFF, "n grid capped at the 800 rows per party MNIST-5k has"),
        plots=("accuracy.png",),
    ),
    Section(
        key="feddpdr-uneven",
        title="FedDPDR-DPML on the three uneven sets",
        paper=P004,
        where="Fig. 5",
        quote="'FedDPDR-DPML is almost guaranteed to be as accurate as the Non-Priv method' (three uneven sets "
        "of five parties, eps = 0.1)",
        command=f"experiment feddpdr-uneven {_FEDDPDR_FULL}",
        quick=f"experiment feddpdr-uneven {_FEDDPDR_QUICK}",
        quantities=(
            Quantity("FedDPDR-DPML", _acc("FedDPDR-DPML")),
            Quantity("Non-Priv", _acc("Non-Priv")),
            Quantity("DPML", _acc("DPML")),
        ),
        rule=Near("FedDPDR-DPML", "Non-Priv", met=0.05, close=0.10),
        differences=(*_FEDDPDR_DIFF, "the paper's uneven sizes scaled down to the 4000 training rows, ratios kept"),
        plots=("accuracy.png",),
    ),
    Section(
        key="feddpdr-time",
        title="FedDPDR-DPML fit time vs DPML",
        paper=P004,
        where="Table 3",
        quote="'the running time of Non-Priv, DPDR-DPML, and FedDPDR-DPML is much lower than DPML' (n = 10,000, "
        "k = 20; the table's values were lost in the text extraction)",
        # feddpdr-time runs the same fits as feddpdr-n, whose report has fit_seconds too: one run serves both
        command=f"experiment feddpdr-n {_FEDDPDR_FULL}",
        quick=f"experiment feddpdr-n {_FEDDPDR_QUICK}",
        quantities=(
            Quantity("FedDPDR-DPML s", ("fit_seconds", "FedDPDR-DPML", "mean", -1), fmt="{:.3g}"),
            Quantity("DPML s", ("fit_seconds", "DPML", "mean", -1), fmt="{:.3g}"),
            Quantity("Non-Priv s", ("fit_seconds", "Non-Priv", "mean", -1), fmt="{:.3g}"),
        ),
        rule=Beats("FedDPDR-DPML s", ("DPML s",), close=0.0, lower=True),
        differences=(*_FEDDPDR_DIFF, "owners fit one after another in one process; largest n = 800 rows per party"),
        plots=("fit_seconds.png",),
    ),
    # ------------------------------------------------------------------ seed 003: null-space cleaning
    Section(
        key="nullspace-clean",
        title="Null-space cleaning without attack, yeast N_d/N_c = 1/13, eps = 0.01",
        paper=P003,
        where="Fig. 1",
        quote="no attack, eps = 0.01: wq 1/13 CP 52.6 %, e_privacy 2.654; scene 1/5 CP 81.8 %, e_privacy 0.796; "
        "'typically the adversary would be no more advantageous using the cleaned feature vector'",
        command=_nullspace(1, quick=False),
        quick=_nullspace(1, quick=True),
        quantities=(
            Quantity("CP (strict)", _ns("clean", "cp")),
            Quantity("ties", _ns("clean", "tie")),
            Quantity("e_privacy", _ns("clean", "e_privacy")),
            Quantity("e_utility", _ns("clean", "e_utility"), fmt="{:.4f}"),
        ),
        rule=AtLeast("CP (strict)", met=0.5, close=0.4),
        differences=_NS_DIFF,
        plots=("cp.png", "e_privacy.png"),
    ),
    Section(
        key="nullspace-attack",
        title="Null-space cleaning with the refitting attack, yeast N_d/N_c = 1/13, eps = 0.01",
        paper=P003,
        where="Fig. 2",
        quote="with attack, eps = 0.01: wq 1/13 CP 48.9 %, e_privacy 0.308; scene 1/5 CP 51.0 %, e_privacy 0.289",
        command=_nullspace(1, quick=False),
        quick=_nullspace(1, quick=True),
        quantities=(
            Quantity("CP (strict)", _ns("clean_attack", "cp")),
            Quantity("ties", _ns("clean_attack", "tie")),
            Quantity("e_privacy", _ns("clean_attack", "e_privacy")),
        ),
        rule=AtLeast("CP (strict)", met=0.45, close=0.35),
        differences=_NS_DIFF,
        plots=("cp.png",),
    ),
    _ns_laplace(1, ""),
    _ns_laplace(7, "; wq 7/7 with attack CP 38.7 %"),
    _ns_laplace(13, "; wq 13/1 with attack CP 30.9 %"),
    # ------------------------------------------------------------------ issue 22: real tabular data
    Section(
        key="tabular",
        title="Private learners on six real tabular data sets, one row per owner",
        paper="issue 22 (no paper: the learners on data nobody tuned on)",
        where="goals",
        quote="BDT at eps = 3 within 0.03 of AdaBoost-10 stumps on every data set; ncc and lr at eps = 5 at least "
        "the majority class plus half the gap to their non-private counterpart",
        command="experiment tabular",
        quick="experiment tabular --quick",
        quantities=(
            Quantity("AdaBoost-10 minus bdt, eps=3", ("results", "goal_values", "bdt@3 gap to adaboost")),
            Quantity("ncc short of its target, eps=5", ("results", "goal_values", "ncc@5 short of target")),
            Quantity("lr short of its target, eps=5", ("results", "goal_values", "lr@5 short of target")),
        ),
        rule=AtMost("AdaBoost-10 minus bdt, eps=3", met=0.03, close=0.06),
        differences=(
            "values in data set order: breast_cancer, wine, iris, fair, anes96, star98 (quick: iris, fair on 600 rows)",
        ),
        plots=("tabular.png",),
    ),
)


def check_unique(sections: Sequence[Section]) -> None:
    """Raise ValueError when two sections share a key (their anchors and run directories)."""
    keys = [s.key for s in sections]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ValueError(f"duplicate reproduce section keys: {dupes}")
