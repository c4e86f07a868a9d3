"""What the ledger's operations cost: row accounts (issue 20, finding 4) and an owner's history.

Row accounts: what a batch debit costs when every debit is also added to one account per row the
owner holds, against the same debits on owner ids only.

One node's batch of releases, as the owner core debits it (one SQLite transaction, fsynced):
``--owners`` one-row owners (the LDP-boosting setting, 10^4 per node), and a few owners of many
rows (``--wide``: owners x rows each). The baseline binds no rows (one account per owner id, the
accounting before issue 20); the candidate binds each owner's row digests. Each line is the median
of ``--repeats`` batches on a fresh file, measured in the same run.

History: what one ``debit_many`` of one owner and one ``standings([owner])`` cost when that owner
already has 10^3, 10^4 and 10^5 releases on record, against the same operation at 10 prior releases
(the baseline), and a node's batch (250 owners of 10^3 releases each, one debit or one read of all of
them) against 250 owners of 10 releases. The history is written into the file with plain SQL before
the ledger opens it, and each owner is read once before timing (the ledger's start-up read): what is
timed is the steady state of a long-lived node. Each line is the median of ``--repeats`` x 20 calls;
``cpu`` lines are the process's CPU seconds of the same calls (a debit's wall time includes its
fsync, which does not depend on the history).

Lines: ``name  baseline  candidate  ratio``.

    python bench/ledger.py [--owners 10000] [--wide 10x1000] [--repeats 5] [--series all|rows|history]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from privfed.common.ledger import Debit, Ledger
from privfed.server.report import host_info


def batch_seconds(n_owners: int, rows_each: int, *, bind: bool, batches: int = 3) -> float:
    """Median seconds of one batch debit of ``n_owners`` owners (``batches`` batches in a row)."""
    with tempfile.TemporaryDirectory() as tmp, Ledger(Path(tmp) / "l.sqlite", epsilon_budget=10.0) as ledger:
        owners = [f"owner-0.o{i:05d}" for i in range(n_owners)]
        if bind:
            for i, o in enumerate(owners):
                ledger.bind_rows(o, [i.to_bytes(4, "little") + j.to_bytes(4, "little") for j in range(rows_each)])
        times = []
        for b in range(batches):
            entries = [Debit(o, 0.1, 0.0, f"p:{b}", f"t{b}-{i}#0") for i, o in enumerate(owners)]
            start = time.perf_counter()
            errors = ledger.debit_many(entries)
            times.append(time.perf_counter() - start)
            assert not any(errors)
        return statistics.median(times)


def _with_history(path: Path, owners: list[str], history: int) -> None:
    """Write ``history`` releases of each of ``owners`` into the ledger file ``path`` (plain SQL: the
    ledger would take as long to debit them one by one as the series measures)."""
    Ledger(path, epsilon_budget=1e9).close()  # the tables
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO owners (owner_id, epsilon_budget, delta_budget) VALUES (?, 1e9, 0)", [(o,) for o in owners]
    )
    conn.executemany(
        "INSERT INTO releases (owner_id, release_id, purpose, epsilon, delta) VALUES (?, ?, 'p', 0.001, 0)",
        ((o, f"h{i}") for o in owners for i in range(history)),
    )
    conn.execute("COMMIT")
    conn.close()


def history_seconds(n_owners: int, history: int, *, op: str, calls: int = 20) -> tuple[float, float]:
    """Median (wall, CPU) seconds of one ``op`` (``debit``: one ``debit_many`` of one release of each
    owner; ``read``: one ``standings`` of all of them) at ``history`` prior releases per owner."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "l.sqlite"
        owners = [f"owner-0.o{i:05d}" for i in range(n_owners)]
        _with_history(path, owners, history)
        with Ledger(path, epsilon_budget=1e9) as ledger:
            ledger.standings(owners)  # the start-up read of each owner's record, once
            wall, cpu = [], []
            for c in range(calls):
                call: Callable[[], object]
                if op == "debit":
                    entries = [Debit(o, 0.001, 0.0, "p", f"t{c}") for o in owners]
                    call = lambda: ledger.debit_many(entries)  # noqa: E731
                else:
                    call = lambda: ledger.standings(owners)  # noqa: E731
                start, start_cpu = time.perf_counter(), time.process_time()
                call()
                wall.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
        return statistics.median(wall), statistics.median(cpu)


def history_series(repeats: int) -> None:
    """The history lines (module docstring): baseline at 10 prior releases per owner. A debit's wall
    time includes its fsync (the same at every history, 0.1 to 4 ms on the development machine's
    disk), so debits also get a line of the process's CPU seconds."""
    for op, what in (("debit", "debit_many"), ("read", "standings")):
        for owners, histories in ((1, (1_000, 10_000, 100_000)), (250, (1_000,))):
            base = _medians([history_seconds(owners, 10, op=op) for _ in range(repeats)])
            for history in histories:
                cand = _medians([history_seconds(owners, history, op=op) for _ in range(repeats)])
                who = "1 owner" if owners == 1 else f"{owners} owners"
                each = "" if owners == 1 else " each"
                for k, clock in enumerate(("", " cpu") if op == "debit" else ("",)):
                    name = f"{what}{clock}, {who}, {history} prior{each}"
                    print(f"{name:40s} {base[k]:10.6f} {cand[k]:10.6f} {cand[k] / base[k]:7.2f}")


def _medians(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def rows_series(args: argparse.Namespace) -> None:
    """The row-account lines (module docstring)."""
    wide_owners, wide_rows = (int(x) for x in args.wide.split("x"))
    print(f"# ledger row accounts, {host_info()}")
    print(f"{'name':40s} {'baseline':>10s} {'candidate':>10s} {'ratio':>7s}")
    for name, n, rows in (
        (f"batch debit, {args.owners} one-row owners", args.owners, 1),
        (f"batch debit, {wide_owners} owners x {wide_rows} rows", wide_owners, wide_rows),
    ):
        base = statistics.median(batch_seconds(n, rows, bind=False) for _ in range(args.repeats))
        cand = statistics.median(batch_seconds(n, rows, bind=True) for _ in range(args.repeats))
        print(f"{name:40s} {base:10.4f} {cand:10.4f} {cand / base:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--owners", type=int, default=10_000)
    parser.add_argument("--wide", default="10x1000", help="OWNERSxROWS: owners of many rows")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--series", choices=("all", "rows", "history"), default="all")
    args = parser.parse_args()
    if args.series in ("all", "rows"):
        rows_series(args)
    if args.series in ("all", "history"):
        print(f"# ledger cost against an owner's history (baseline: 10 prior releases), {host_info()}")
        print(f"{'name':40s} {'baseline':>10s} {'candidate':>10s} {'ratio':>7s}")
        history_series(args.repeats)


if __name__ == "__main__":
    main()
