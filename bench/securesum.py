"""Secure sums: the ring vs pairwise-mask secure aggregation in process, and the ring over gRPC.

Part 1, the pure cores (no sockets), for N in ``--core-sizes`` (10 ... 10^4): one ring secure sum
(``run_ring_in_process``, the baseline) vs one round of pairwise-mask secure aggregation after its
key agreement (``InProcessSecAgg.round``), and the key agreement itself (once per run, amortised
over ``--rounds`` rounds in the last line of each N). The ring needs N sequential relay hops on a
network, secagg 2 round trips per round (plus 2 once per run), so the networked gap is larger than
the in-process one: the per-hop network cost is part 2's per-owner slope.

Part 2, one secure sum over real gRPC (mTLS, loopback) for N in ``--sizes`` owners hosted by two
owner node processes, driven by the coordinator's transport exactly as a boosting round does: the
ring vs the pairwise-mask sum with its key agreement (what a disjoint evaluation group costs), the
per-owner slope of both (least squares over N) and where the fitted lines cross: ``--secure-sum
auto``'s :data:`~privfed.common.secagg.SECAGG_FROM`.

Lines: ``name  baseline  candidate  ratio``, medians of ``--repeats`` measured in the same run.

    python bench/securesum.py [--core-sizes 10,100,1000,10000] [--sizes 10,100,1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from privfed.common.boosting.wire import config_to_dict, empty_history
from privfed.common.learners.stump import Stump, thresholds
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.inprocess import InProcessSecAgg, run_ring_in_process
from privfed.common.tasks import BoostEvaluateTask
from privfed.deploy.certs import make_certs
from privfed.owner.data import federation_split
from privfed.proto.transport import TlsFiles
from privfed.server.app import CoordinatorServer
from privfed.server.job import run_job
from privfed.server.report import host_info
from privfed.server.strategies import make_strategy
from privfed.server.strategies.result import PrivacySplit, StrategyResult


class SumTimer:
    """A strategy that only runs secure sums of one evaluation release per owner: what one boosting
    round's secure sum costs, by ``protocol``. Every pairwise-mask sum is keyed anew, as a disjoint
    evaluation group's is (its key agreement, once per run and group, included)."""

    def __init__(self, boosting: Any, learner: Any, repeats: int, protocol: str) -> None:
        self.boosting, self.learner, self.repeats, self.protocol = boosting, learner, repeats, protocol
        self.times: list[float] = []

    def privacy(self) -> PrivacySplit:
        return self.boosting.privacy()

    def check_feasible(self, n_owners: int) -> None:
        """Any number of owners (at least 2) can sum."""

    def run(self, owner_ids: list[str], transport: Any) -> StrategyResult[Any]:
        config, history = config_to_dict(self.boosting.params, "bench"), empty_history()
        for _ in range(self.repeats):
            transport.secure_sums.runs = ()  # a fresh key agreement per sum
            t0 = time.perf_counter()
            transport.secure_sum(
                list(owner_ids),
                lambda spec: BoostEvaluateTask(config, history, self.learner, spec),
                max_abs=self.boosting.coordinator.plan.contribution_bound,
                round_id="ring1",
                protocol=self.protocol,
            )
            self.times.append(time.perf_counter() - t0)
        return StrategyResult(self.learner, self.privacy())  # the learner the sums evaluated stands in for a model


def network_sum(n: int, repeats: int, tmp: Path, protocol: str) -> float:
    _, test = federation_split("synthetic", seed=0, test_fraction=0.2, n_samples=max(2 * n, 200))
    certs = make_certs(tmp / f"certs{n}-{protocol}", owners=2)
    server = CoordinatorServer(tls=TlsFiles.in_dir(certs, "coordinator"))
    port = server.start("127.0.0.1:0")
    half = n // 2
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "privfed.deploy.cli",
                "owner",
                "--coordinator",
                f"127.0.0.1:{port}",
                "--name",
                f"owner-{i}",
                "--certs",
                str(certs),
                "--dataset",
                "synthetic",
                "--n-samples",
                str(max(2 * n, 200)),
                "--seed",
                "0",
                "--n-owners",
                str(n),
                "--shards",
                shards,
                "--ledger",
                str(tmp / f"l{n}-{i}-{protocol}.sqlite"),
                "--epsilon-budget",
                "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i, shards in enumerate((f"0:{half}", f"{half}:{n}"))
    ]
    try:
        boosting: Any = make_strategy(
            "bdt", mechanism="pm", epsilon=1.0, n_classes=2, bounds=test.bounds, n_rounds=1, weight_bound=2.0, seed=0
        )
        cut = float(thresholds(test.bounds, boosting.params.n_bins)[0, 0])  # a public threshold (SPEC §6)
        stump = Stump(attribute=0, threshold_index=1, threshold=cut, leaves=(0, 1), error=0.0)
        timer = SumTimer(boosting, stump, repeats, protocol)
        run_job(server, timer, expected_owners=n, show_progress=False)
        return statistics.median(timer.times)
    finally:
        server.dispatcher.shutdown()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        server.stop(0)


def core_pair(n: int, repeats: int, rounds: int) -> tuple[float, float, float]:
    """(ring s, secagg round s, secagg key agreement s): medians over ``repeats`` on the same values."""
    rng = np.random.Generator(np.random.PCG64(n))
    values = {f"o{i:05d}": rng.random(2) for i in range(n)}
    fp = FixedPoint.choose(n_parties=n, max_abs=1.0)
    ring, rounds_s, keys = [], [], []
    for r in range(repeats):
        t0 = time.perf_counter()
        run_ring_in_process(values, fp)
        t1 = time.perf_counter()
        run = InProcessSecAgg(list(values), fp, f"bench-{n}-{r}", rounds=rounds)
        run.key_agreement()
        t2 = time.perf_counter()
        for _ in range(rounds):
            run.round(values)
        t3 = time.perf_counter()
        ring.append(t1 - t0)
        keys.append(t2 - t1)
        rounds_s.append((t3 - t2) / rounds)
    return statistics.median(ring), statistics.median(rounds_s), statistics.median(keys)


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    return float(np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--core-sizes", default="10,100,1000")
    parser.add_argument("--sizes", default="10,100,1000", help="gRPC ring sizes ('' to skip part 2)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=10, help="secagg rounds per key agreement")
    args = parser.parse_args(argv)
    print(f"# part 1: pure cores, 2 values per owner; host {host_info()}; median of {args.repeats}; seed N")
    print(f"{'name':<30}{'ring s':>12}{'secagg s':>12}{'ratio':>9}")
    for n in [int(s) for s in args.core_sizes.split(",") if s]:
        ring, per_round, keys = core_pair(n, args.repeats, args.rounds)
        print(f"{f'N={n} one sum (after keys)':<30}{ring:>12.4f}{per_round:>12.4f}{per_round / ring:>9.2f}")
        print(f"{f'N={n} key agreement':<30}{ring:>12.4f}{keys:>12.4f}{keys / ring:>9.2f}")
        amortised = per_round + keys / args.rounds
        print(f"{f'N={n} per sum, {args.rounds} rounds':<30}{ring:>12.4f}{amortised:>12.4f}{amortised / ring:>9.2f}")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if not sizes:
        return 0
    print(f"# part 2: one secure sum over gRPC + mTLS, 2 owner node processes; median of {args.repeats}")
    print(f"{'name':<22}{'ring s':>14}{'secagg s':>14}{'ratio':>9}  (secagg: key agreement + sum)")
    rings: list[float] = []
    secaggs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            rings.append(network_sum(n, args.repeats, Path(tmp), "ring"))
            secaggs.append(network_sum(n, args.repeats, Path(tmp), "secagg"))
            print(f"{f'N={n}':<22}{rings[-1]:>14.4f}{secaggs[-1]:>14.4f}{secaggs[-1] / rings[-1]:>9.2f}")
    if len(sizes) > 1:
        r, c = slope(sizes, rings), slope(sizes, secaggs)
        print(f"{'per-owner slope':<22}{r * 1e3:>12.3f}ms{c * 1e3:>12.3f}ms{c / r if r > 0 else math.inf:>9.2f}")
        fit_ring, fit_secagg = np.polyfit(sizes, rings, 1), np.polyfit(sizes, secaggs, 1)
        if fit_ring[0] > fit_secagg[0]:
            crossover = (fit_secagg[1] - fit_ring[1]) / (fit_ring[0] - fit_secagg[0])
            print(f"{'crossover N (fit)':<22}{crossover:>14.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
