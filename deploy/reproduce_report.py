"""The files ``privfed reproduce`` writes: ``index.html`` (the report, plots embedded), ``summary.md``
(its summary table in Markdown, for a closing note) and ``reproduce.json`` (machine-readable).

Both tables come from one list of rows (:func:`summary_rows`), so the HTML and the Markdown
summary always agree."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privfed.deploy.reproduce_table import NOT_AVAILABLE, OK, fmt_value
from privfed.server.report import write_json

if TYPE_CHECKING:
    from privfed.deploy.reproduce import Outcome

SUMMARY_HEADER = ("Section", "Paper", "Table/Fig.", "Paper's number", "Ours", "Verdict", "Wall time")
VERDICT_RULES = (
    "Each section states its rule: met / close / not met compare our number with the paper's claim, "
    "with the thresholds written in the section. 'not available' means this build has no experiment "
    "or no data for it (the reason is given); 'failed' means the experiment exited non-zero or timed "
    "out (its last error line is given); 'no number' means its report.json lacks the value read."
)

QUICK_NOTE = (
    "quick run: fewer repeats, smaller grids and data sets than the full run (see the command; the FedDPDR "
    "experiments' --quick uses scikit-learn digits, 1437 training rows)"
)

_CSS = """
body { font-family: sans-serif; max-width: 1200px; margin: 2em auto; line-height: 1.4; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { border: 1px solid #bbb; padding: 4px 8px; vertical-align: top; text-align: left; }
th { background: #eee; }
.met { background: #d4f7d4; } .close { background: #fff3c4; } .not-met { background: #f9d0d0; }
.failed, .no-number { background: #f0a0a0; } .not-available { background: #e4e4e4; }
code { background: #f4f4f4; padding: 1px 3px; word-break: break-all; }
.quick { border: 2px solid #c80; padding: 0.5em; background: #fff6e0; }
img { max-width: 640px; border: 1px solid #ccc; margin: 4px; }
"""


def verdict_of(o: Outcome) -> str:
    """The verdict column: the rule's verdict, or the status when there is none to give."""
    if o.status == OK:
        return o.verdict
    return o.status


def wall_time(o: Outcome) -> str:
    return "-" if o.run is None else f"{o.run.seconds:.1f} s (CPU {o.run.cpu_seconds:.1f} s)"


def summary_rows(outcomes: list[Outcome]) -> list[tuple[str, ...]]:
    """One row per section: the summary table of both index.html and summary.md."""
    rows: list[tuple[str, ...]] = []
    for o in outcomes:
        s = o.section
        ours = ours_text(o, s.rule.names()) if o.values else o.reason or "-"
        if o.values and o.status != OK:
            ours += f" (from the report of a failed run: {o.reason})"
        rows.append((s.title, s.paper.split(" (")[0], s.where, s.quote, ours, verdict_of(o), wall_time(o)))
    return rows


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_summary(outcomes: list[Outcome], meta: dict[str, Any]) -> str:
    """summary.md: a header line (quick or full, commit, host, wall time) and the summary table."""
    host = meta["host"]
    lines = [
        f"privfed reproduce{' --quick' if meta['quick'] else ''}: {meta['generated']}, privfed "
        f"{host.get('privfed_version')} commit {host.get('git_commit')}, host {host.get('host')} "
        f"({host.get('cpus')} CPUs), seed {meta['seed']}, wall time {meta['wall_time_s']:.0f} s (CPU {meta['cpu_s']:.0f} s)",
        "",
        "| " + " | ".join(SUMMARY_HEADER) + " |",
        "|" + "---|" * len(SUMMARY_HEADER),
    ]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in summary_rows(outcomes)]
    return "\n".join(lines) + "\n"


def _css_class(verdict: str) -> str:
    return verdict.replace(" ", "-")


def _section_html(o: Outcome, out: Path, quick: bool) -> str:
    s = o.section
    verdict = verdict_of(o)
    parts = [
        f'<h2 id="{escape(s.key)}">{escape(s.title)}</h2>',
        "<table>",
        f"<tr><th>paper</th><td>{escape(s.paper)}, {escape(s.where)}</td></tr>",
        f"<tr><th>paper's number</th><td>{escape(s.quote)}</td></tr>",
        f"<tr><th>ours</th><td>{escape(ours_text(o))}</td></tr>",
        f'<tr><th>verdict</th><td class="{_css_class(verdict)}">{escape(verdict)}</td></tr>',
        f"<tr><th>rule</th><td>{escape(s.rule.text())}</td></tr>",
    ]
    if o.reason:
        label = "why" if o.status == NOT_AVAILABLE else "last error line"
        parts.append(f"<tr><th>{label}</th><td><code>{escape(o.reason)}</code></td></tr>")
    if o.run is not None:
        parts.append(f"<tr><th>command</th><td><code>privfed {escape(' '.join(o.run.argv))}</code></td></tr>")
        parts.append(f"<tr><th>wall time</th><td>{wall_time(o)}</td></tr>")
        if o.run.report_path is not None:
            rel = o.run.report_path.relative_to(out)
            parts.append(f'<tr><th>report</th><td><a href="{escape(str(rel))}">{escape(str(rel))}</a></td></tr>')
    else:
        parts.append(f"<tr><th>command</th><td><code>privfed {escape(' '.join(s.args(quick)))}</code></td></tr>")
    read = "<br>".join(f"{escape(q.label)}: <code>{escape(q.where())}</code>" for q in s.quantities)
    parts.append(f"<tr><th>read from report.json</th><td>{read}</td></tr>")
    diffs = list(s.differences) + ([QUICK_NOTE] if quick else [])
    parts.append(
        "<tr><th>differs from the paper</th><td><ul>"
        + "".join(f"<li>{escape(d)}</li>" for d in diffs)
        + "</ul></td></tr>"
    )
    parts.append("</table>")
    parts += [f'<img src="{escape(str(p.relative_to(out)))}" alt="{escape(p.name)}">' for p in o.plots]
    return "\n".join(parts)


def html_report(outcomes: list[Outcome], meta: dict[str, Any], out: Path) -> str:
    """index.html: header (version, commit, host, seeds, wall time), summary table, one part per section."""
    host = meta["host"]
    quick = bool(meta["quick"])
    title = "privfed: reproducing the seed papers" + (" (quick)" if quick else "")
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[verdict_of(o)] = counts.get(verdict_of(o), 0) + 1
    head = [
        "<!doctype html>",
        f'<html><head><meta charset="utf-8"><title>{escape(title)}</title><style>{_CSS}</style></head><body>',
        f"<h1>{escape(title)}</h1>",
    ]
    if quick:
        head.append(
            '<p class="quick">QUICK run (<code>--quick</code>): smaller n, grids and repeats than the full '
            "reproduction; the numbers check that everything runs, not the papers' claims.</p>"
        )
    facts = {
        "generated": meta["generated"],
        "command": meta["command"],
        "privfed version": str(host.get("privfed_version")),
        "git commit": str(host.get("git_commit")),
        "host": f"{host.get('host')} ({host.get('machine')}, {host.get('cpus')} CPUs, Python {host.get('python')})",
        "seed": f"{meta['seed']} (passed as --seed to every experiment; runs use seed, seed+1, ...)",
        "wall time": f"{meta['wall_time_s']:.1f} s, CPU {meta['cpu_s']:.1f} s (each experiment limited to "
        f"{meta['timeout_s']:g} s); load average at the end {', '.join(f'{x:.1f}' for x in meta['load_average_1_5_15'])}",
        "verdicts": ", ".join(f"{v}: {n}" for v, n in sorted(counts.items())),
    }
    head.append("<table>" + "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts.items()))
    head.append("</table>")
    head.append(f"<h2>Summary</h2><p>{escape(VERDICT_RULES)}</p>")
    rows = summary_rows(outcomes)
    table = ["<table>", "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in SUMMARY_HEADER) + "</tr>"]
    for o, row in zip(outcomes, rows):
        cells = [f'<a href="#{escape(o.section.key)}">{escape(row[0])}</a>'] + [escape(c) for c in row[1:]]
        cells[5] = f'<span class="{_css_class(row[5])}">{cells[5]}</span>'
        table.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    table.append("</table>")
    body = [_section_html(o, out, quick) for o in outcomes]
    return "\n".join([*head, *table, *body, "</body></html>"]) + "\n"


def write_report(out: Path, outcomes: list[Outcome], meta: dict[str, Any]) -> None:
    """Write index.html, summary.md and reproduce.json into ``out``."""
    (out / "index.html").write_text(html_report(outcomes, meta, out))
    (out / "summary.md").write_text(markdown_summary(outcomes, meta))
    write_json_report(out, outcomes, meta)


def outcome_json(o: Outcome, out: Path) -> dict[str, Any]:
    """One section of ``reproduce.json``."""
    s = o.section
    return {
        "key": s.key,
        "title": s.title,
        "paper": s.paper,
        "where": s.where,
        "paper_number": s.quote,
        "status": o.status,
        "reason": o.reason,
        "verdict": o.verdict,
        "rule": s.rule.text(),
        "values": {k: (v if isinstance(v, list) else v if math.isfinite(v) else str(v)) for k, v in o.values.items()},
        "read_from": {q.label: q.where() for q in s.quantities},
        "command": None if o.run is None else "privfed " + " ".join(o.run.argv),
        "wall_time_s": None if o.run is None else o.run.seconds,
        "cpu_s": None if o.run is None else o.run.cpu_seconds,
        "report": None if o.run is None or o.run.report_path is None else str(o.run.report_path.relative_to(out)),
        "plots": [str(p.relative_to(out)) for p in o.plots],
        "differences": list(s.differences),
    }


def write_json_report(out: Path, outcomes: list[Outcome], meta: dict[str, Any]) -> Path:
    """``out/reproduce.json``: the run's metadata and every section."""
    return write_json(out / "reproduce.json", meta | {"sections": [outcome_json(o, out) for o in outcomes]})


def escape(text: str) -> str:
    return html.escape(text, quote=True)


def ours_text(o: Outcome, names: tuple[str, ...] | None = None) -> str:
    """Our numbers as ``label = value; ...`` (only ``names`` when given), or the reason there are none."""
    if not o.values:
        return "-"
    fmts = {q.label: q.fmt for q in o.section.quantities}
    return "; ".join(f"{k} = {fmt_value(v, fmts[k])}" for k, v in o.values.items() if names is None or k in names)
