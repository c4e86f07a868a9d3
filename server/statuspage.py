"""The coordinator service's status page (issue 26, item 3): one read-only HTML page, served on
localhost by default (``privfed serve --status-listen``), that reloads itself every few seconds.

It shows what the coordinator already knows and nothing else: the jobs (state, task, ε requested,
rounds and progress, accuracy against the majority-class baseline, owners that refused it and why), the owner
nodes registered and whether they are online, and an accuracy plot (inline SVG). No owner data and
no ledger contents: the coordinator has neither. ``/jobs.json`` gives the same as JSON. GET only.
"""

from __future__ import annotations

import html
import json
import logging
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from privfed.common.errors import ConfigError, reason
from privfed.common.identity import node_of
from privfed.common.tasks import refusal_parts

log = logging.getLogger("privfed.coordinator")

#: Seconds between the page's reloads.
REFRESH = 2
#: Task -> colour of its points in the accuracy plot.
COLOURS = {"ncc": "#1f77b4", "lr": "#2ca02c", "feddpdr": "#9467bd", "bdt": "#d62728"}

Snapshot = Callable[[], dict[str, Any]]


def refusals_by_node(refused: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """Node -> refusal code -> how many of its owners refused the job so (from a report's ``refused``: owner ->
    ``"code: text"``): what a job's listing carries, a few numbers per node whatever its owners' count."""
    out: dict[str, dict[str, int]] = {}
    for owner, line in sorted(refused.items()):
        codes = out.setdefault(node_of(owner), {})
        code = refusal_parts(line)[0]
        codes[code] = codes.get(code, 0) + 1
    return out


def refused_line(by_node: Mapping[str, Mapping[str, int]]) -> str:
    """``owner-2 (10 policy), owner-5 (3 budget_exceeded)``: the nodes whose owners refused a job, with how many
    by refusal code (:func:`refusals_by_node`). Not only the policy's declines (walkthrough 5b: owners out of
    budget refused a job and the table showed nobody)."""
    return ", ".join(
        f"{node} ({n} {code})" for node, codes in sorted(by_node.items()) for code, n in sorted(codes.items())
    )


def accuracy_svg(jobs: list[dict[str, Any]], width: int = 640, height: int = 220) -> str:
    """Accuracy of every finished job (a bar each, in submission order, coloured by task) with its
    majority-class baseline as a tick: inline SVG."""
    done = [j for j in jobs if j.get("accuracy") is not None]
    pad, bottom = 36, 24
    parts = [
        f'<svg id="accuracy-plot" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">'
    ]
    parts.append(f"<title>accuracy of {len(done)} finished job(s)</title>")
    plot_h = height - bottom - 10
    for frac in (0.0, 0.5, 1.0):
        y = 10 + plot_h * (1 - frac)
        parts.append(f'<line x1="{pad}" x2="{width - 4}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="2" y="{y + 4:.1f}" font-size="11">{frac:.1f}</text>')
    step = (width - pad - 4) / max(1, len(done))
    for i, j in enumerate(done):
        x = pad + i * step + step * 0.15
        w = step * 0.7
        acc = float(j["accuracy"])
        y = 10 + plot_h * (1 - acc)
        colour = COLOURS.get(str(j.get("task")), "#555")
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{10 + plot_h - y:.1f}" fill="{colour}">'
            f"<title>{html.escape(str(j['job_id']))}: {j.get('task')} eps={j.get('epsilon')} accuracy {acc:.3f}</title>"
            "</rect>"
        )
        if j.get("majority") is not None:
            my = 10 + plot_h * (1 - float(j["majority"]))
            parts.append(
                f'<line x1="{x:.1f}" x2="{x + w:.1f}" y1="{my:.1f}" y2="{my:.1f}" stroke="#000" stroke-dasharray="3,2"/>'
            )
        parts.append(
            f'<text x="{x + w / 2:.1f}" y="{height - 8}" font-size="10" text-anchor="middle">'
            f"{html.escape(str(j.get('task')))} {html.escape(str(j.get('epsilon')))}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def steps_done(job: dict[str, Any]) -> str:
    """A job's steps done, of those planned when its strategy has said (``29 of 40``: boosting rounds, gradient
    steps, a one-round job's round)."""
    done, planned = int(job.get("done") or 0), job.get("planned")
    return f"{done}" if planned is None else f"{done} of {planned}"


def budget_cell(job: dict[str, Any]) -> str:
    """A job's ε per owner, and its δ when it has one (walkthrough 7, W7-7: a FedDPDR job's δ was nowhere)."""
    delta = job.get("delta")
    return f"{job.get('epsilon')}" + (f", δ {delta:g}" if isinstance(delta, float | int) and delta > 0 else "")


def render(snapshot: dict[str, Any]) -> str:
    """The page for a snapshot ``{"jobs": [...], "nodes": {...}, "store_error": why the store cannot be written}``."""
    jobs, nodes = snapshot["jobs"], snapshot["nodes"]
    rows = []
    for j in jobs:
        pct = f"{100 * float(j.get('progress') or 0):.0f}%"
        acc = "" if j.get("accuracy") is None else f"{j['accuracy']:.3f}"
        rounds = j.get("rounds") or ""  # a boosting job's; others count their steps in "done" (W7-7: it said 1)
        rows.append(
            f'<tr class="job" data-job="{html.escape(j["job_id"])}" data-state="{html.escape(j["state"])}">'
            f"<td>{html.escape(j['job_id'])}</td><td class='state'>{html.escape(j['state'])}</td>"
            f"<td>{html.escape(str(j.get('task')))}</td><td class='epsilon'>{html.escape(budget_cell(j))}</td>"
            f"<td>{html.escape(str(j.get('data_user')))}</td><td>{rounds}</td>"
            f"<td class='done'>{steps_done(j)}</td>"
            f"<td><progress max='100' value='{pct[:-1]}'></progress> <span class='progress'>{pct}</span></td>"
            f"<td class='accuracy'>{acc}</td>"
            f"<td class='refused'>{html.escape(refused_line(j.get('refused_by_node') or {}))}</td>"
            f"<td class='note'>{html.escape(j.get('note') or j.get('error') or '')}</td></tr>"
        )
    node_rows = [
        f'<tr class="node" data-online="{str(n["online"]).lower()}"><td>{html.escape(name)}</td>'
        f"<td>{n['owners']}</td><td>{html.escape(n.get('state') or ('online' if n['online'] else 'silent'))}</td></tr>"
        for name, n in nodes.items()
    ]
    online = sum(1 for n in nodes.values() if n["online"])
    left_out = int(snapshot.get("earlier") or 0)
    earlier = (
        f'<p id="earlier">{left_out} earlier jobs not shown; <code>privfed jobs --all</code> lists every job.</p>'
        if left_out
        else ""
    )
    trouble = snapshot.get("store_error")  # the queue cannot start jobs (walkthrough 9, W9-1)
    banner = f'<p id="store-error"><b>{html.escape(trouble)}</b>; jobs stay queued until it can.</p>' if trouble else ""
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{REFRESH}">
<title>privfed coordinator service</title>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;font-size:13px}} th{{background:#f4f4f4}}</style></head>
<body><h1>privfed coordinator service</h1>{banner}
<p>Read-only. What the coordinator knows: jobs, the privacy they request, what they trained. No owner data, no ledger.</p>
<h2>Owner nodes (<span id="online">{online}</span> online)</h2>
<table id="nodes"><tr><th>node</th><th>owners</th><th>status</th></tr>{"".join(node_rows)}</table>
<h2>Jobs</h2>
<table id="jobs"><tr><th>id</th><th>state</th><th>task</th><th>&epsilon; (&delta;) per owner</th><th>data user</th>
<th>rounds</th><th>done</th><th>progress</th><th>accuracy</th><th>refused by</th><th>note</th></tr>
{"".join(rows)}</table>
{earlier}<h2>Accuracy</h2>
<p>Finished jobs, one bar each (dashed: the majority-class baseline on the public test set).</p>
{accuracy_svg(jobs)}
</body></html>"""


class StatusPage:
    """Serves :func:`render` of ``snapshot()`` at ``/`` and the snapshot at ``/jobs.json``."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._httpd: ThreadingHTTPServer | None = None
        self.port: int | None = None

    def start(self, address: str) -> int:
        host, _, port = address.rpartition(":")
        snapshot = self._snapshot

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self._answer(with_body=True)

            def do_HEAD(self) -> None:  # noqa: N802 - uptime checkers ask HEAD (walkthrough 7, W7-7: 501)
                self._answer(with_body=False)

            def _answer(self, *, with_body: bool) -> None:
                path = self.path.split("?", 1)[0]
                if path in ("/", "/index.html"):
                    body, kind = render(snapshot()).encode(), "text/html; charset=utf-8"
                elif path == "/jobs.json":
                    body, kind = json.dumps(snapshot()).encode(), "application/json"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if with_body:
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
                log.debug("status page: " + format, *args)

        try:
            self._httpd = ThreadingHTTPServer((host.strip("[]") or "127.0.0.1", int(port)), Handler)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--status-listen {address}: cannot listen there ({reason(exc)})") from exc
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, name="privfed-status", daemon=True).start()
        log.info("status page on http://%s:%d/", host or "127.0.0.1", self.port)
        return self.port

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
