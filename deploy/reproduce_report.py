"""The files ``privfed reproduce`` writes: ``index.html`` (the report, plots embedded), ``summary.md``
(its summary table in Markdown, for a closing note) and ``reproduce.json`` (machine-readable).

Both tables come from one list of rows (:func:`summary_rows`), so the HTML and the Markdown
summary always agree."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privfed.deploy.reproduce_rules import SIMILAR
from privfed.deploy.reproduce_stats import LEVEL
from privfed.deploy.reproduce_table import NOT_AVAILABLE, OK
from privfed.server.report import write_json

if TYPE_CHECKING:
    from privfed.deploy.reproduce import Outcome

SUMMARY_HEADER = (
    "Section",
    "Paper",
    "Pipeline",
    "Claim tested",
    f"Ours: mean [{LEVEL:.0%} CI], unit",
    "Beside: chance, non-private",
    "Verdict",
    "Differs from the paper",
)
VERDICT_RULES = (
    f"Verdicts come from {LEVEL:.0%} confidence intervals over seeds (each seed a fresh split or fresh data and "
    "fresh noise): 'met' means the interval clears the paper's claim, 'not met' that it clears the other side, "
    "'inconclusive' anything else. A mean over seeds has Student's t interval; a hit rate Wilson's interval over "
    "the runs; a comparison ('lower than', 'above', 'similar to') is the interval of the per-seed paired "
    f"differences; 'similar' means within ±{SIMILAR:g} (the papers give no number). A claim over several values is met "
    "when every interval clears and not met when one clears the other side. Every section runs the paper's own "
    "pipeline and, where privfed's default differs, ours beside it; each number carries its unit and, next to "
    "it, every way its pipeline differs from the paper. 'not available' means this build has no experiment or "
    "no data for it (the reason is given); 'failed' that an experiment exited non-zero or timed out (its last "
    "error line is given); 'no number' that a report lacks a value read."
)

QUICK_NOTE = (
    "quick run: smaller grids and data sets than the full run (see the commands; the FedDPDR experiments' --quick "
    "uses scikit-learn digits, 1437 training rows)"
)

_CSS = """
body { font-family: sans-serif; max-width: 1200px; margin: 2em auto; line-height: 1.4; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { border: 1px solid #bbb; padding: 4px 8px; vertical-align: top; text-align: left; }
th { background: #eee; }
.met { background: #d4f7d4; } .inconclusive { background: #fff3c4; } .not-met { background: #f9d0d0; }
.failed, .no-number { background: #f0a0a0; } .not-available { background: #e4e4e4; }
code { background: #f4f4f4; padding: 1px 3px; word-break: break-all; }
.quick { border: 2px solid #c80; padding: 0.5em; background: #fff6e0; }
img { max-width: 640px; border: 1px solid #ccc; margin: 4px; }
"""


def verdicts_of(o: Outcome) -> list[str]:
    """One verdict per claim: the judgement's, or the section's status when there is none."""
    if o.status == OK or o.judgements:
        return [j.verdict for j in o.judgements]
    return [o.status] * len(o.section.claims)


def wall_time(o: Outcome) -> str:
    return "-" if not o.runs else f"{o.seconds:.1f} s (CPU {o.cpu_seconds:.1f} s)"


def beside(o: Outcome) -> str:
    """The section's reference lines (chance, non-private), with their units and intervals."""
    return "; ".join(o.values[n].text() for n in o.section.lines if n in o.values) or "-"


def summary_rows(outcomes: list[Outcome], *, short: bool = False) -> list[tuple[str, ...]]:
    """One row per claim: the summary table of both index.html and summary.md (``short``: the
    deviations by their kind only, e.g. ``data, eps, basis``)."""
    rows: list[tuple[str, ...]] = []
    for o in outcomes:
        s = o.section
        paper = f"{s.paper.split(' (')[0]}, {s.where}"
        for claim, verdict, i in zip(s.claims, verdicts_of(o), range(len(s.claims))):
            if i < len(o.judgements):
                ours = "; ".join(o.judgements[i].evidence)
                if o.status != OK:
                    ours += f" (from the report of a failed run: {o.reason})"
            else:
                ours = o.reason or "-"
            devs = [d.split(":")[0] for d in claim.deviations] if short else list(claim.deviations)
            rows.append((s.title, paper, claim.pipeline, claim.text, ours, beside(o), verdict, "; ".join(devs) or "-"))
    return rows


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _commit(host: dict[str, Any]) -> str:
    """The commit the run started from, and the one the checkout had moved to at its end, if another."""
    moved = host.get("git_commit_at_end")
    return f"{host.get('git_commit')}" + (f" (the checkout was at {moved} when the run ended)" if moved else "")


def markdown_summary(outcomes: list[Outcome], meta: dict[str, Any]) -> str:
    """summary.md: a header line (quick or full, commit, host, wall time) and the summary table."""
    host = meta["host"]
    lines = [
        f"privfed reproduce{' --quick' if meta['quick'] else ''}: {meta['generated']}, privfed "
        f"{host.get('privfed_version')} commit {_commit(host)}, host {host.get('host')} "
        f"({host.get('cpus')} CPUs), seed {meta['seed']}, wall time {meta['wall_time_s']:.0f} s (CPU {meta['cpu_s']:.0f} s)",
        "",
        "| " + " | ".join(SUMMARY_HEADER) + " |",
        "|" + "---|" * len(SUMMARY_HEADER),
    ]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in summary_rows(outcomes, short=True)]
    return "\n".join(lines) + "\n"


def _css_class(verdict: str) -> str:
    return verdict.replace(" ", "-")


def _cell_lines(text: str) -> str:
    return "<br>".join(escape(part) for part in text.split("; "))


def _section_html(o: Outcome, out: Path, quick: bool) -> str:
    s = o.section
    parts = [
        f'<h2 id="{escape(s.key)}">{escape(s.title)}</h2>',
        "<table>",
        f"<tr><th>paper</th><td>{escape(s.paper)}, {escape(s.where)}</td></tr>",
        f"<tr><th>paper's words</th><td>{escape(s.quote)}</td></tr>",
        f"<tr><th>beside every claim</th><td>{_cell_lines(beside(o))}</td></tr>",
        "</table>",
        "<table><tr><th>pipeline</th><th>claim tested</th><th>ours</th><th>verdict</th><th>rule</th>"
        "<th>differs from the paper</th></tr>",
    ]
    for i, (claim, verdict) in enumerate(zip(s.claims, verdicts_of(o))):
        ours = "; ".join(o.judgements[i].evidence) if i < len(o.judgements) else o.reason or "-"
        devs = "".join(f"<li>{escape(d)}</li>" for d in claim.deviations)
        parts.append(
            f"<tr><td>{escape(claim.pipeline)}</td><td>{escape(claim.text)}</td><td>{_cell_lines(ours)}</td>"
            f'<td class="{_css_class(verdict)}">{escape(verdict)}</td><td>{escape(claim.rule.text())}</td>'
            f"<td><ul>{devs}</ul></td></tr>"
        )
    parts.append("</table><table>")
    if o.reason:
        label = "why" if o.status == NOT_AVAILABLE else "last error line"
        parts.append(f"<tr><th>{label}</th><td><code>{escape(o.reason)}</code></td></tr>")
    for c in s.commands:
        run = o.runs.get(c.key)
        argv = " ".join(run.argv) if run is not None else " ".join(c.args(quick))
        extra = ""
        if run is not None:
            extra = f"<br>{run.seconds:.1f} s, CPU {run.cpu_seconds:.1f} s"
            if run.report_path is not None:
                rel = escape(str(run.report_path.relative_to(out)))
                extra += f'; report <a href="{rel}">{rel}</a>'
        parts.append(f"<tr><th>command ({escape(c.key)})</th><td><code>privfed {escape(argv)}</code>{extra}</td></tr>")
    numbers = "<br>".join(
        escape(o.values[q.label].text() if q.label in o.values else q.label) + f" <code>{escape(q.where())}</code>"
        for q in s.quantities
    )
    parts.append(f"<tr><th>every number read</th><td>{numbers}</td></tr>")
    notes = list(s.notes) + ([QUICK_NOTE] if quick else [])
    parts.append("<tr><th>notes</th><td><ul>" + "".join(f"<li>{escape(d)}</li>" for d in notes) + "</ul></td></tr>")
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
        for v in verdicts_of(o):
            counts[v] = counts.get(v, 0) + 1
    head = [
        "<!doctype html>",
        f'<html><head><meta charset="utf-8"><title>{escape(title)}</title><style>{_CSS}</style></head><body>',
        f"<h1>{escape(title)}</h1>",
    ]
    if quick:
        head.append(
            '<p class="quick">QUICK run (<code>--quick</code>): smaller n and grids than the full reproduction, '
            "on fewer rows where said; the intervals are honest for what ran, not for the papers' settings.</p>"
        )
    facts = {
        "generated": meta["generated"],
        "command": meta["command"],
        "privfed version": str(host.get("privfed_version")),
        "git commit": _commit(host),
        "host": f"{host.get('host')} ({host.get('machine')}, {host.get('cpus')} CPUs, Python {host.get('python')})",
        "seeds": f"{meta['seed']}, {meta['seed']} + 1, ... (passed as --seed to every experiment, whose runs use "
        "seed + run for their split and noise; the runs of the paper's pipeline and of ours share the seeds, so "
        "they share the splits)",
        "wall time": f"{meta['wall_time_s']:.1f} s, CPU {meta['cpu_s']:.1f} s ({meta.get('jobs', 1)} experiments at "
        f"once, each limited to {meta['timeout_s']:g} s); load average at the end "
        f"{', '.join(f'{x:.1f}' for x in meta['load_average_1_5_15'])}",
        "verdicts (claims)": ", ".join(f"{v}: {n}" for v, n in sorted(counts.items())),
    }
    head.append("<table>" + "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts.items()))
    head.append("</table>")
    head.append(f"<h2>Summary</h2><p>{escape(VERDICT_RULES)}</p>")
    table = ["<table>", "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in SUMMARY_HEADER) + "</tr>"]
    keys = [o.section.key for o in outcomes for _ in o.section.claims]
    for key, row in zip(keys, summary_rows(outcomes)):
        cells = [f'<a href="#{escape(key)}">{escape(row[0])}</a>', *(escape(c) for c in row[1:4])]
        cells += [_cell_lines(row[4]), _cell_lines(row[5])]
        cells.append(f'<span class="{_css_class(row[6])}">{escape(row[6])}</span>')
        cells.append(_cell_lines(row[7]))
        table.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    table.append("</table>")
    body = [_section_html(o, out, quick) for o in outcomes]
    return "\n".join([*head, *table, *body, "</body></html>"]) + "\n"


def write_report(out: Path, outcomes: list[Outcome], meta: dict[str, Any]) -> None:
    """Write index.html, summary.md and reproduce.json into ``out``."""
    (out / "index.html").write_text(html_report(outcomes, meta, out))
    (out / "summary.md").write_text(markdown_summary(outcomes, meta))
    write_json_report(out, outcomes, meta)


def _finite(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def outcome_json(o: Outcome, out: Path) -> dict[str, Any]:
    """One section of ``reproduce.json``: every quantity's per-seed values and interval, and each
    claim's pipeline, verdict, intervals and deviations."""
    s = o.section
    claims = []
    for i, (c, verdict) in enumerate(zip(s.claims, verdicts_of(o))):
        j = o.judgements[i] if i < len(o.judgements) else None
        claims.append({
            "pipeline": c.pipeline,
            "claim": c.text,
            "verdict": verdict,
            "rule": c.rule.text(),
            "evidence": [] if j is None else j.evidence,
            "intervals": {} if j is None else {k: {n: _finite(v) for n, v in iv.items()} for k, iv in j.intervals.items()},
            "deviations": list(c.deviations),
        })  # fmt: skip
    values = {}
    for label, v in o.values.items():
        iv = v.interval()
        values[label] = {"unit": v.quantity.unit, "kind": v.kind, "values": v.values} | {
            k: _finite(x) for k, x in iv.as_dict().items()
        }
    return {
        "key": s.key,
        "title": s.title,
        "paper": s.paper,
        "where": s.where,
        "paper_number": s.quote,
        "status": o.status,
        "reason": o.reason,
        "claims": claims,
        "lines": list(s.lines),
        "values": values,
        "read_from": {q.label: q.where() for q in s.quantities},
        "commands": {k: "privfed " + " ".join(r.argv) for k, r in o.runs.items()},
        "wall_time_s": o.seconds if o.runs else None,
        "cpu_s": o.cpu_seconds if o.runs else None,
        "reports": {k: str(r.report_path.relative_to(out)) for k, r in o.runs.items() if r.report_path is not None},
        "plots": [str(p.relative_to(out)) for p in o.plots],
        "notes": list(s.notes),
    }


def write_json_report(out: Path, outcomes: list[Outcome], meta: dict[str, Any]) -> Path:
    """``out/reproduce.json``: the run's metadata and every section."""
    return write_json(out / "reproduce.json", meta | {"sections": [outcome_json(o, out) for o in outcomes]})


def escape(text: str) -> str:
    return html.escape(text, quote=True)
