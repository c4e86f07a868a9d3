"""What ``privfed reproduce`` reads from an experiment's ``report.json``, how it judges it, and
the :class:`Section` records that say so (the sections are listed in
:mod:`privfed.deploy.reproduce_table`).

A :class:`Quantity` names per-seed values in one run's report (a path of keys and indices; ``"*"``
goes through every element of a list, e.g. every run). A rule (:class:`AtLeast`, :class:`AtMost`,
:class:`Similar`, :class:`Better`) turns the values of the quantities it names into a
:class:`Judgement`: a verdict from confidence intervals (:mod:`privfed.deploy.reproduce_stats`)
and the evidence, each number with its unit and interval.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from privfed.deploy.reproduce_stats import (
    Interval,
    combine,
    mean_interval,
    paired,
    proportion_interval,
    side,
    within,
)

#: A key, a list index (negative: from the end), or ``"*"``: every element of a list.
PathStep = str | int
EVERY = "*"
#: How a quantity's values are summarised: the mean over seeds (t interval), the rate of 0/1
#: outcomes (Wilson interval), or one number fixed by the setting (chance; no interval).
MEAN, RATE, CONSTANT = "mean", "rate", "constant"


@dataclass(frozen=True)
class Quantity:
    """Per-seed numbers read from the report of the section's command ``run``.

    ``unit`` is written next to every value ("accuracy", "misclassification", ...). A path that
    reaches one number is a :data:`CONSTANT` (e.g. chance); one that reaches a list gives one
    value per seed (``kind`` :data:`MEAN`) or one 0/1 outcome per run (:data:`RATE`).
    """

    label: str
    path: tuple[PathStep, ...]
    unit: str
    run: str = "ours"
    kind: str = MEAN
    fmt: str = "{:.3f}"

    def where(self) -> str:
        """The path as text, e.g. ``results.synthetic.curves["eps=5"].per_run[*][-1]``."""
        out = ""
        for step in self.path:
            if isinstance(step, int) or step == EVERY:
                out += f"[{step}]"
            elif step.isidentifier():
                out += f".{step}" if out else step
            else:
                out += f'["{step}"]'
        return f"{self.run}: {out}"


#: What a quantity of each unit can be: its t interval is shown cut to this range (walkthrough 15, W15-13: an
#: accuracy of 0.928 [0.802, 1.054], a fit time of 0.0159 [-0.000807, 0.0327] s); verdicts use the interval as it is.
UNIT_RANGES = {
    "accuracy": (0.0, 1.0),
    "misclassification": (0.0, 1.0),
    "top-3 hit rate": (0.0, 1.0),
    "CP (fraction of test rows)": (0.0, 1.0),
    "fit seconds": (0.0, math.inf),
    "MSE (parameter units^2)": (0.0, math.inf),
}


@dataclass(frozen=True)
class Series:
    """The values of one quantity in one report, summarised by :meth:`interval`."""

    quantity: Quantity
    values: list[float]
    kind: str

    def interval(self) -> Interval:
        if self.kind == CONSTANT:
            return Interval(self.values[0], self.values[0], self.values[0], 1)
        if self.kind == RATE:
            return proportion_interval(self.values)
        return mean_interval(self.values)

    def text(self) -> str:
        q = self.quantity
        if self.kind == CONSTANT:
            return f"{q.label}: {q.fmt.format(self.values[0])} {q.unit}"
        iv = self.interval()
        lo, hi = UNIT_RANGES.get(q.unit, (-math.inf, math.inf))  # shown inside what the quantity can be (W15-13)
        shown = Interval(iv.mean, max(iv.lo, lo), min(iv.hi, hi), iv.n)
        runs = "runs" if self.kind == RATE else "seeds"
        return f"{q.label}: {shown.text(q.fmt)} {q.unit} ({iv.n} {runs})"


def read_path(report: Any, path: tuple[PathStep, ...]) -> float | list[float]:
    """The number, or flat list of numbers, at ``path`` in a parsed report.json."""
    if not path:
        if isinstance(report, list):
            return [float(v) for v in report]
        return float(report)  # also "inf" / "nan", as write_json stores them
    step, rest = path[0], path[1:]
    if step == EVERY:
        if not isinstance(report, list):
            raise TypeError(f"'*' needs a list, found {type(report).__name__}")
        out: list[float] = []
        for item in report:
            value = read_path(item, rest)
            out += value if isinstance(value, list) else [value]
        return out
    return read_path(report[step], rest)


def series(reports: Mapping[str, Any], q: Quantity) -> Series:
    """``q`` read from the report of its run."""
    value = read_path(reports[q.run], q.path)
    if isinstance(value, list):
        if not value:
            raise ValueError(f"{q.label}: no values at {q.where()}")
        return Series(q, value, q.kind)
    return Series(q, [value], CONSTANT)


@dataclass
class Judgement:
    """A rule's verdict, its evidence lines and the intervals behind it (for reproduce.json)."""

    verdict: str
    evidence: list[str] = field(default_factory=list)
    intervals: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class AtLeast:
    """Met when the interval of ``name`` lies above ``claim``; not met when it lies below."""

    name: str
    claim: float
    above: ClassVar[bool] = True

    def names(self) -> tuple[str, ...]:
        return (self.name,)

    def text(self) -> str:
        word, other = ("above", "below") if self.above else ("below", "above")
        return (
            f"met if the 95 % interval of {self.name} lies {word} {self.claim:g}; not met if it lies {other}; "
            "else inconclusive"
        )

    def __call__(self, values: Mapping[str, Series]) -> Judgement:
        s = values[self.name]
        iv = s.interval()
        return Judgement(side(iv, self.claim, above=self.above), [s.text()], {self.name: iv.as_dict()})


@dataclass(frozen=True)
class AtMost(AtLeast):
    """Met when the interval of ``name`` lies below ``claim``; not met when it lies above."""

    above: ClassVar[bool] = False


@dataclass(frozen=True)
class Similar:
    """Equivalence: for ``(name, ref)`` and each pair of ``more``, the paired difference
    ``name - ref``. Met when every interval lies within ``±margin``; not met when one lies wholly
    outside; else inconclusive."""

    name: str
    ref: str
    margin: float
    more: tuple[tuple[str, str], ...] = ()

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        return ((self.name, self.ref), *self.more)

    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for pair in self.pairs for n in pair))

    def text(self) -> str:
        listed = "; ".join(f"{a} - {b}" for a, b in self.pairs)
        return (
            f"{listed}: met if the 95 % interval of every paired difference lies within ±{self.margin:g}; not met "
            "if one lies wholly outside; else inconclusive"
        )

    def __call__(self, values: Mapping[str, Series]) -> Judgement:
        verdicts, lines, intervals = [], [], {}
        for a, b in self.pairs:
            iv = mean_interval(paired(values[a].values, values[b].values))
            verdicts.append(within(iv, self.margin))
            label = f"{a} - {b}"
            intervals[label] = iv.as_dict()
            lines += [values[a].text(), values[b].text()]
            lines.append(
                f"difference {label}: {iv.text('{:+.3f}')} {values[a].quantity.unit} (margin ±{self.margin:g})"
            )
        return Judgement(combine(verdicts), list(dict.fromkeys(lines)), intervals)


@dataclass(frozen=True)
class Better:
    """Each ``(a, b)`` of ``pairs``: the paired difference ``a - b`` is above ``-margin`` (``lower``, for errors:
    below ``margin``). Met when every interval lies on that side, not met when one lies on the other. With a
    ``margin``: "``a`` at most ``margin`` worse than ``b``", a one-sided goal (issue 22: bdt within 0.03 of
    AdaBoost-10, better being no fault)."""

    pairs: tuple[tuple[str, str], ...]
    lower: bool = False
    margin: float = 0.0

    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for pair in self.pairs for n in pair))

    def text(self) -> str:
        word = "below" if self.lower else "above"
        slack = f" {'+' if self.lower else '-'} {self.margin:g}" if self.margin else ""
        listed = "; ".join(f"{a} {word} {b}{slack}" for a, b in self.pairs)
        line = f"{'+' if self.lower else '-'}{self.margin:g}" if self.margin else "0"
        return (
            f"{listed}: met if the 95 % interval of every paired difference lies on that side of {line}; not met if "
            "one lies on the other side; else inconclusive"
        )

    def __call__(self, values: Mapping[str, Series]) -> Judgement:
        verdicts, lines, intervals = [], [], {}
        shown: set[str] = set()
        for a, b in self.pairs:
            for n in (a, b):
                if n not in shown:
                    lines.append(values[n].text())
                    shown.add(n)
            iv = mean_interval(paired(values[a].values, values[b].values))
            verdicts.append(side(iv, self.margin if self.lower else -self.margin, above=not self.lower))
            label = f"{a} - {b}"
            intervals[label] = iv.as_dict()
            lines.append(f"difference {label}: {iv.text('{:+.3g}')} {values[a].quantity.unit}")
        return Judgement(combine(verdicts), lines, intervals)


Rule = AtLeast | AtMost | Similar | Better


# ---------------------------------------------------------------------------- sections
#: The two pipelines a claim can belong to.
PAPER, OURS = "paper's pipeline", "privfed default"
#: "Similar" / "close to" / "as accurate as" in the papers, read as: the paired difference lies
#: within this many points of accuracy or misclassification (the papers give no number; one
#: margin for every such claim, fixed before the runs).
SIMILAR = 0.03


@dataclass(frozen=True)
class Command:
    """One ``privfed`` invocation (the arguments after ``privfed``, shell-style, without ``--seed``
    and ``--out``, which the runner adds); ``{data}`` stands for the shared data directory."""

    full: str
    quick: str
    key: str = "ours"

    def args(self, quick: bool) -> tuple[str, ...]:
        """The ``privfed`` arguments of the full run or of the quick one (shell-style split)."""
        return tuple(shlex.split(self.quick if quick else self.full))


@dataclass(frozen=True)
class Claim:
    """One statement of the paper tested on one pipeline; ``deviations`` are written next to its
    number (each "what: ours (paper: theirs)")."""

    pipeline: str
    text: str
    rule: Rule
    deviations: tuple[str, ...] = ()


@dataclass(frozen=True)
class Section:
    """One table or figure of a paper (see the module docstring). ``lines`` are the labels of the
    quantities drawn beside every claim (chance, non-private); ``notes`` say why the deviations
    are what they are; ``plots`` names the PNGs of the runs to embed (empty: all of them)."""

    key: str
    title: str
    paper: str
    where: str
    quote: str
    commands: tuple[Command, ...]
    quantities: tuple[Quantity, ...]
    claims: tuple[Claim, ...]
    lines: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    plots: tuple[str, ...] = ()

    @property
    def experiments(self) -> tuple[str, ...]:
        """The ``privfed experiment`` NAMEs this section runs."""
        return tuple(c.args(False)[1] for c in self.commands)

    def command(self, key: str) -> Command:
        return next(c for c in self.commands if c.key == key)


def pipelines(
    text: str, rule: Callable[[str], Rule], paper: tuple[str, ...], ours: tuple[str, ...]
) -> tuple[Claim, Claim]:
    """``text`` tested on the paper's pipeline and on ours: ``rule(who)`` reads that pipeline's numbers,
    labelled ``(paper's)`` or ``(ours)``; ``paper`` and ``ours`` are each pipeline's deviations."""
    return Claim(PAPER, text, rule("paper's"), paper), Claim(OURS, text, rule("ours"), ours)


P002 = "seed 002 (Wang & Chang, LDP boosting)"
P003 = "seed 003 (Xu et al., null-space cleaning)"
P004 = "seed 004 (Wang et al., FedDPDR-DPML)"


def check_section(s: Section) -> list[str]:
    """What is wrong with ``s`` (empty when nothing): unknown names, runs or lines."""
    problems = []
    labels = {q.label for q in s.quantities}
    if len(labels) != len(s.quantities):
        problems.append("two quantities share a label")
    keys = [c.key for c in s.commands]
    if len(set(keys)) != len(keys):
        problems.append("two commands share a key")
    problems += [f"quantity {q.label!r} reads run {q.run!r}, not a command" for q in s.quantities if q.run not in keys]
    problems += [f"rule reads {n!r}" for n in check_names([c.rule for c in s.claims], labels)]
    problems += [f"line {n!r} is not a quantity" for n in s.lines if n not in labels]
    if not s.claims or not s.quote or not s.where:
        problems.append("a section needs the paper's words, where they are, and a claim")
    return problems


def judge(rule: Rule, values: Mapping[str, Series]) -> Judgement:
    """``rule`` applied to ``values`` (every name it reads must be there)."""
    missing = [n for n in rule.names() if n not in values]
    if missing:
        raise KeyError(f"the rule reads {missing}, which the section does not define")
    return rule(values)


def check_names(rules: Sequence[Rule], labels: set[str]) -> list[str]:
    """The names ``rules`` read that are not among ``labels`` (empty when all are)."""
    return sorted({n for r in rules for n in r.names()} - labels)
