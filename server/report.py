"""Run reports: a timestamped directory holding ``report.json`` and PNG plots, and the few
summaries every report carries so a reader can judge a result at a glance: the baselines an
accuracy must beat, why owners refused, and which privfed version produced it."""

from __future__ import annotations

import functools
import json
import math
import platform
import re
import socket
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from privfed import __version__  # not importlib.metadata's: it loads email and zipfile (1.2 MB; issue 27)
from privfed.common.errors import JobAborted, PrivfedError
from privfed.common.files import replace_file
from privfed.common.learners.ncc import resolve_labels
from privfed.common.tasks import refusal_parts

if TYPE_CHECKING:
    from privfed.server.config import JobConfig
    from privfed.server.rounds import JobBook


def new_run_dir(out: str | Path) -> Path:
    """Create and return ``out/<UTC timestamp>/`` (suffixed if it already exists)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = Path(out) / stamp
    path, k = base, 1
    while path.exists():
        path, k = Path(f"{base}-{k}"), k + 1
    path.mkdir(parents=True)
    return path


def _jsonable(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    if isinstance(value, Path):
        return str(value)
    return value


def failure_reason(exc: BaseException) -> str:
    """The reason a failed job's report gives for ``exc``: its message, or what stopped the process
    (SIGINT is a ``KeyboardInterrupt``; the command line's SIGTERM handler exits with ``SystemExit``)."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (SIGINT)"
    if isinstance(exc, SystemExit):
        return f"stopped (SIGTERM or exit {exc.code})"
    return str(exc) or type(exc).__name__


class JobReport:
    """The ``report.json`` of one job (or one simulation), written when it ends (:meth:`write`,
    :meth:`fail`) in its run directory: ``run_dir`` if given, else a new ``out/<UTC timestamp>/``. A failed
    job's reason is written in ``terms`` (the service's: a job file's keys, not the command line's flags)."""

    def __init__(
        self, out: Path, fields: dict[str, Any], *, run_dir: Path | None = None, terms: Callable[[str], str] = str
    ):
        self.out, self.fields = out, fields
        self._dir = run_dir
        self._terms = terms

    @property
    def failed(self) -> bool:
        return self.fields.get("status") == "failed"

    def update(self, **fields: Any) -> None:
        self.fields |= fields

    def run_dir(self) -> Path:
        """The run directory (made on first use): ``report.json`` and ``model.json`` go there."""
        if self._dir is None:
            self._dir = new_run_dir(self.out)
        self._dir.mkdir(parents=True, exist_ok=True)
        return self._dir

    def write(self, **fields: Any) -> Path:
        self.fields |= fields
        return write_json(self.run_dir() / "report.json", self.fields)

    def fail(self, reason: str, book: JobBook | None = None) -> Path:
        """A failed job's report: the reason, and what became of its owners if they had registered."""
        owners = book.to_report() if book is not None and book.owner_ids else {}
        return self.write(status="failed", error=self._terms(reason), **owners)

    @contextmanager
    def on_failure(
        self,
        *,
        book: Callable[[], JobBook | None] = lambda: None,
        stopped: Callable[[], str | None] = lambda: None,
        release: Callable[[], None] = lambda: None,
    ) -> Iterator[None]:
        """Every way out of the block writes the failed report (issue 23, item 3): the reason
        (``"stopped by SIGTERM: ..."`` when ``stopped()`` names what aborted the job), and what
        ``book()`` knows of the owners; then ``release()`` (tell the owners the job is over) and the
        error goes on, a :class:`PrivfedError` naming the report (a :class:`JobAborted` as it was).
        A report an inner block already failed is left as it is."""
        try:
            yield
        except BaseException as exc:
            if self.failed:
                raise
            why = stopped()
            reason = f"stopped by {why}: {exc}" if why and isinstance(exc, JobAborted) else failure_reason(exc)
            path = self.fail(reason, book())
            release()
            if isinstance(exc, PrivfedError) and not isinstance(exc, JobAborted) and "(report: " not in str(exc):
                raise type(exc)(f"{exc} (report: {path})") from exc  # an inner run's report is the one to read
            raise


def nonprivate_releases(clear_labels: bool, answered: int) -> list[dict[str, object]]:
    """What a run received WITHOUT a DP guarantee, for the report (issue 9, contract 6).

    Clear labels are the one such release (``clear_labels``: :attr:`JobConfig.clear_labels
    <privfed.server.config.JobConfig.clear_labels>`): NCC with ``labels="clear"``, or boosting with the ncc
    base learner and clear labels. Owners only answer them when started with
    ``--allow-clear-labels``, and each records a non-private ``clear-labels`` entry in its ledger;
    the report names the release and how many owners made it. Empty for a fully private run.
    """
    if not clear_labels or answered <= 0:
        return []
    return [
        {
            "what": "clear-labels",
            "owners": int(answered),
            "detail": "true class labels of every released row, without randomized response; owners opted in "
            "with --allow-clear-labels and each recorded a non-private ledger entry",
        }
    ]


#: A policy rule by what an owner released over time, for every data user (owner/policy.py RULES): its name told a
#: data user that other data users' jobs spent the owner's budget (walkthrough 8, W8-1); they read a spending limit.
_SPENDING_RULE = re.compile(r"\(rule (?:epsilon_per_day|epsilon_total)\)")
SPENDING_LIMIT = "(a limit on what the owner releases over time)"


def spending_limit(text: str) -> str:
    """``text`` with the spending rules' names read as :data:`SPENDING_LIMIT` (a data user's view, and every
    refusal summary: counted apart, two rules' texts told them apart again; audit 28, A28-5)."""
    return _SPENDING_RULE.sub(SPENDING_LIMIT, text)


def refusal_summary(refused: Mapping[str, str], n_owners: int) -> str:
    """One line saying how many owners refused and why, e.g. ``"5/5 owners refused: budget_exceeded
    (the owner's privacy budget does not cover this release; nothing was released)"``.

    ``refused`` maps owner id to ``"code: text"`` (:func:`privfed.server.strategies.refusals`).
    Codes are listed most frequent first, each with its count when owners refused for several
    reasons, and with its texts (the fixed text of the code plus a detail built only from the task and
    public configuration, ``common.tasks.REFUSAL_TEXTS``), so the line may be shown to anyone who sees
    the report: one text as it is, several (a policy's rules) most frequent first with their counts, at
    most :data:`TEXTS_SHOWN` of them; the spending rules counted as one (:func:`spending_limit`: the per-owner
    ``refused`` map keeps each rule for the operator). Empty when nobody refused.
    """
    if not refused:
        return ""
    by_code: dict[str, Counter[str]] = {}
    for message in refused.values():
        code, text = refusal_parts(message)
        by_code.setdefault(code, Counter())[spending_limit(text)] += 1
    ranked = sorted(by_code.items(), key=lambda item: (-item[1].total(), item[0]))
    parts = [f"{texts.total()} {code} ({_texts(texts)})" for code, texts in ranked]
    if len(ranked) == 1:  # one reason: the count is the one in front
        parts = [parts[0].split(" ", 1)[1]]
    return f"{len(refused)}/{n_owners} owners refused: " + "; ".join(parts)


#: A refusal code's texts a summary shows (:func:`refusal_summary`); the others are counted.
TEXTS_SHOWN = 3


def _texts(texts: Counter[str]) -> str:
    """One code's texts for :func:`refusal_summary`: the text alone, or each with its count."""
    if len(texts) == 1:
        return next(iter(texts))
    ranked = sorted(texts.items(), key=lambda item: (-item[1], item[0]))
    shown = "; ".join(f"{n}: {text}" for text, n in ranked[:TEXTS_SHOWN])
    rest = len(ranked) - TEXTS_SHOWN
    return shown + (f"; {rest} other text(s)" if rest > 0 else "")


def learner_label(config: JobConfig) -> str:
    """What a job trained, as a plot legend says it: the task and only the parameters it uses
    (FedDPDR-DPML uses no LDP mechanism: its noise is the analytic Gaussian and objective
    perturbation of seed 004)."""
    p = config.task_options()
    if config.task == "ncc":
        return f"ncc ({p['mechanism']}, labels {resolve_labels(p['labels'], config.epsilon)})"
    if config.task == "lr":
        return f"lr ({p['mechanism']})"
    if config.task == "bdt" and config.release == "marginals":
        return f"bdt (stumps from marginal reports, {p['n_bins']} bins, T={p['n_rounds']})"
    if config.task == "bdt":
        return f"bdt ({p['base']}, {p['mechanism']}, T={p['n_rounds']})"
    if config.task == "nb":
        return f"nb ({p['n_bins']} bins, one frequency-oracle report per owner)"
    return f"feddpdr (k={p['k']}, analytic Gaussian + objective perturbation)"


def baselines(y_test: np.ndarray, n_classes: int) -> dict[str, float]:
    """The accuracies a classifier must beat to have learned anything, on the public test split.

    ``chance``: 1/K, a uniform random guess over the K public classes. ``majority_class``: the
    accuracy of always answering the test split's most frequent class (the best constant
    predictor there; a boosted stump that collapsed to one class scores exactly this).
    """
    y = np.asarray(y_test)
    if y.size == 0:
        return {"chance": 1.0 / n_classes, "majority_class": math.nan}
    return {"chance": 1.0 / n_classes, "majority_class": float(np.bincount(y).max() / y.size)}


def mean_ci(values: Iterable[float], level: float = 0.95) -> dict[str, float]:
    """Mean and the half-width of its Student-t confidence interval (0 for a single value)."""
    v = np.asarray(list(values), dtype=np.float64)
    if v.size < 2:
        return {"mean": float(v.mean()) if v.size else math.nan, "ci": 0.0, "n": int(v.size)}
    from scipy.stats import t  # here: an idle coordinator does not load scipy

    half = float(t.ppf(0.5 + level / 2.0, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return {"mean": float(v.mean()), "ci": half, "n": int(v.size)}


def below_majority(what: str, accuracy: Iterable[float], majority: Iterable[float]) -> str | None:
    """A one-line warning when ``accuracy`` is below the majority baseline beyond its noise, else None.

    ``accuracy`` and ``majority`` are paired values (the same splits or seeds); the warning is given when
    the 95 % Student-t interval of their differences lies below 0 (issue 22: no silent failure). A single
    pair has no interval: use :func:`accuracy_warning`.
    """
    diff = np.asarray(list(accuracy), dtype=np.float64) - np.asarray(list(majority), dtype=np.float64)
    stats = mean_ci(diff)
    if not stats["mean"] + stats["ci"] < 0.0:
        return None
    acc = float(np.mean(list(accuracy)))
    return (
        f"warning: {what}: accuracy {acc:.3f} is below always answering the most common class by "
        f"{-stats['mean']:.3f} (± {stats['ci']:.3f}): this model learned nothing usable; more owners or a larger "
        "epsilon would help"
    )


def accuracy_warning(
    epsilon: float, accuracy: float, majority: float, n_test: int, spread: float = 0.0, *, rows_help: bool = True
) -> str | None:
    """A one-line warning when a federation's test ``accuracy`` shows no sign of learning, else None.

    Noise: ``2 sqrt(m (1 - m) / n_test + spread^2)``, from the binomial standard error of an accuracy on
    ``n_test`` rows at the majority share ``m`` and ``spread`` (the standard error of a mean over repeats,
    if any). Below ``majority - noise`` the model is worse than always answering the most common class;
    below ``majority + noise`` it is no better, within its noise (issue 22: no silent failure). ``rows_help``:
    whether more rows per owner would help (not where each owner sends one report:
    :attr:`~privfed.server.config.JobConfig.one_report_per_owner`), which the advice says. At ε = ∞ there is no
    noise to blame: the advice is about the data and the task (walkthrough 14, W14-8: it said a larger ε would help).
    """
    if not (math.isfinite(accuracy) and math.isfinite(majority)) or n_test < 1:
        return None
    noise = 2.0 * math.sqrt(majority * (1.0 - majority) / n_test + spread**2)
    if accuracy >= majority + noise:
        return None
    head = f"warning: at eps={epsilon:g} the model's accuracy {accuracy:.3f} is"
    if accuracy < majority - noise:
        what = f"{head} below always answering the most common class ({majority:.3f}) by more than its noise"
    else:
        what = f"{head} within the noise of always answering the most common class ({majority:.3f})"
    if math.isinf(epsilon):
        return (
            f"{what} (±{noise:.3f}) without any privacy noise: these rows tell this task little beyond the most "
            "common class; other features, or another task, may"
        )
    owners = (
        "more owners (or rows per owner)" if rows_help else "more owners (each sends one report, whatever its rows)"
    )
    return f"{what} (±{noise:.3f}): it learned nothing usable at this privacy level; {owners}, fewer features or a larger epsilon would help"


#: Fewer one-report owners than this and one run's accuracy is one draw of a wide spread (:func:`few_reports_warning`).
FEW_REPORTS = 100


def few_reports_warning(task: str, epsilon: float, answered: int, one_report: bool) -> str | None:
    """A one-line warning when a job whose owners each send one report (nb, bdt by marginals, lr by gradient
    descent or by averaged local models) had fewer than :data:`FEW_REPORTS` of them, else None: its accuracy is one draw of a wide spread
    (walkthrough 8, W8-9: nb over 10 owners at eps 0.5 reported 0.840 with no word, where 10 runs of the same
    setting gave 0.567 ± 0.184). The README's table says from how many owners each task learns."""
    if not one_report or not 0 < answered < FEW_REPORTS or not math.isfinite(epsilon):
        return None
    return (
        f"warning: {answered} owner(s) sent one report each: at this size one run's accuracy varies widely from run "
        f"to run (it is one draw, not what the task gets here); `privfed simulate --owners {answered} --task {task} "
        f"--epsilon {epsilon:g} --repeats 10` on a data set like the owners' shows the spread (the owners, or an operator "
        "with their consent, can run it on their own rows)"
    )


#: What :func:`fewer_owners_warning` says of the owners that released nothing for a job, by :meth:`JobBook.absent
#: <privfed.server.rounds.JobBook.absent>`'s reasons: the words for one owner, for several, and the report's list
#: that names them (None: none does).
ABSENT_REASONS: dict[str, tuple[str, str, str | None]] = {
    "declined": ("declined it", "declined it", "declined_owners"),
    "refused": ("refused it", "refused it", "refused"),
    "rejected": ("was rejected", "were rejected", "rejected_owners"),
    "lost": ("was on a lost node", "were on lost nodes", "lost_nodes"),
    "not_released": (
        "released nothing it used (asked for none, or its answer came too late)",
        "released nothing it used (asked for none, or their answers came too late)",
        None,
    ),
}


def fewer_owners_warning(asked: int | None, took_part: int, absent: Mapping[str, int] | None = None) -> str | None:
    """A one-line warning when fewer owners released for a job than it asked for, else None (walkthrough 6, W6-9:
    a job asking ``owners = 20`` ran over the 10 whose policy took it, and the listing still said 20). ``owners``
    is how many must be registered when the job starts; who takes part is each owner's answer. ``took_part``: the
    owners that released anything the job used, its evaluations too (the report's ``took_part``: walkthrough 9,
    W9-4, a bdt job whose 4 evaluators-only owners paid was said to have 32 of 36); ``absent``: why the others did
    not, as :meth:`JobBook.absent <privfed.server.rounds.JobBook.absent>` counts them: only those reasons are named,
    and only their lists pointed to."""
    if asked is None or took_part >= asked:
        return None
    parts, lists = [], []
    for reason, (one, several, listed) in ABSENT_REASONS.items():
        n = (absent or {}).get(reason, 0)
        if n > 0:
            parts.append(f"{n} {one if n == 1 else several}")
            lists += [listed] if listed else []
    said = ", ".join(parts)
    which = "" if not lists else f"; the report's {_and(lists)} {'says' if len(lists) == 1 else 'say'} which"
    return (
        f"warning: {took_part} owner(s) released for this job, fewer than the {asked} it asked for"
        + (f": of the others, {said}{which}" if said else "")
        + "; min_owners sets how many must take part"
    )


def _and(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


@functools.cache
def version_info() -> dict[str, str | None]:
    """privfed's version (``privfed.__version__``, the packaging's too), and the git commit of the source
    tree when it is a checkout (``git describe --always --dirty``: a ``-dirty`` suffix marks uncommitted
    changes), else None."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
        commit = out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"privfed": __version__, "commit": commit}


def host_info() -> dict[str, str | None]:
    """Where and with what a result was produced: host, Python, machine, privfed version and commit."""
    return {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "machine": platform.machine(),
    } | {"privfed_version": version_info()["privfed"], "git_commit": version_info()["commit"]}


def write_json(path: str | Path, obj: object) -> Path:
    """Write ``obj`` as indented JSON, whole or not at all (:func:`~privfed.common.files.replace_file`); numpy values
    and infinities are converted."""
    return replace_file(path, json.dumps(_jsonable(obj), indent=2) + "\n")


def log_axis(x: Iterable[float]) -> tuple[list[float], dict[float, str]]:
    """Positions on a log x axis and their tick labels. ``inf`` (ε = ∞, the run without noise)
    cannot sit on a log axis: it is drawn at 4 × the largest finite x (or 1 if there is none), a
    clear step right of the rest, and labelled ∞."""
    xs = [float(v) for v in x]
    finite = [v for v in xs if math.isfinite(v)]
    inf_at = max(finite) * 4.0 if finite else 1.0
    positions = [inf_at if v == math.inf else v for v in xs]
    labels = {v: f"{v:g}" for v in sorted(set(finite))}
    if len(finite) < len(xs):
        labels[inf_at] = "∞"
    return positions, labels


def plot_lines(
    path: str | Path,
    x: Iterable[float],
    series: Mapping[str, ArrayLike],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool = False,
    errors: Mapping[str, ArrayLike] | None = None,
    hlines: Mapping[str, float] | None = None,
) -> Path:
    """Save a line plot of ``series`` (name -> y values over ``x``) as a PNG.

    ``errors`` (name -> error bar half-widths) draws error bars; ``hlines`` (name -> y) draws
    dashed horizontal reference lines such as the chance and majority-class baselines. With
    ``logx``, an x of ``inf`` is drawn and labelled ∞ (:func:`log_axis`).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs, ticks = log_axis(x) if logx else (list(x), None)
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, ys in series.items():
        err = (errors or {}).get(name)
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3 if err is not None else 0, label=name)
    for (name, y), style in zip((hlines or {}).items(), ("--", ":", "-.")):
        ax.axhline(y, linestyle=style, color="grey", linewidth=1, label=name)
    if ticks is not None:
        ax.set_xscale("log")
        ax.set_xticks(list(ticks), list(ticks.values()))
        ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
