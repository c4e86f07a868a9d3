"""The ledger's row accounts (issue 20, finding 4): what a batch debit costs when every debit is also
added to one account per row the owner holds, against the same debits on owner ids only.

One node's batch of releases, as the owner core debits it (one SQLite transaction, fsynced):
``--owners`` one-row owners (the LDP-boosting setting, 10^4 per node), and a few owners of many
rows (``--wide``: owners x rows each). The baseline binds no rows (one account per owner id, the
accounting before issue 20); the candidate binds each owner's row digests. Each line is the median
of ``--repeats`` batches on a fresh file, measured in the same run.

Lines: ``name  baseline  candidate  ratio``.

    python bench/ledger.py [--owners 10000] [--wide 10x1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--owners", type=int, default=10_000)
    parser.add_argument("--wide", default="10x1000", help="OWNERSxROWS: owners of many rows")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
